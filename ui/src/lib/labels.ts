/* The sandbox list's label filter, as GET /v1/sandboxes?label= reads it: `K:V` (or `K=V`)
 * keeps the sandboxes whose label K is V, a bare `K` those that have label K; several terms
 * (separated by spaces or commas) must all match. Applied in the page to the live list. */

export interface LabelTerm {
  key: string;
  value: string | null;
}

export function parseLabelFilter(s: string): LabelTerm[] {
  return s
    .split(/[\s,]+/)
    .filter((t) => t !== '')
    .map((t) => {
      const i = t.search(/[:=]/);
      return i < 0 ? { key: t, value: null } : { key: t.slice(0, i), value: t.slice(i + 1) };
    });
}

export function matchLabels(labels: unknown, terms: LabelTerm[]): boolean {
  const l = typeof labels === 'object' && labels !== null ? (labels as Record<string, unknown>) : {};
  return terms.every((t) => Object.prototype.hasOwnProperty.call(l, t.key) && (t.value === null || l[t.key] === t.value));
}
