/* The review of a changed MCP server: its approved tool list against the current one,
 * matched by name, with word diffs of the texts and a diff of each parameter. Pure: the
 * page renders what this returns, as text. */
import { diffWordsWithSpace } from 'diff';

export interface Tool {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
}

export interface Finding {
  tool: string;
  field: string;
  rule: string;
  message: string;
  excerpt?: string;
}

/** A run of text: in both (same), only in the old (removed), only in the new (added). */
export interface Part {
  text: string;
  kind: 'same' | 'added' | 'removed';
}

export interface Param {
  name: string;
  type: string;
  description: string;
  required: boolean;
}

export interface ParamChange {
  name: string;
  change: 'new' | 'removed' | 'changed' | 'unchanged';
  old: Param | null;
  now: Param | null;
  typeChanged: boolean;
  requiredChanged: boolean;
  description: Part[] | null; /* the word diff when the description changed */
  findings: Finding[];
}

export interface ToolChange {
  name: string;
  change: 'new' | 'removed' | 'changed' | 'unchanged';
  old: Tool | null;
  now: Tool | null;
  title: Part[] | null;
  description: Part[] | null;
  params: ParamChange[];
  /* other fields whose JSON differs: outputSchema, annotations, the input schema beyond its
   * properties' name, type, description and required */
  otherChanged: string[];
  findings: Finding[]; /* those on the tool itself or on a field not shown otherwise */
}

export interface Review {
  tools: ToolChange[];
  counts: { new: number; removed: number; changed: number; unchanged: number };
  unplaced: Finding[]; /* findings naming no tool of the current list */
}

const MAX_DIFF_CHARS = 200_000;

/** Word diff of two texts (jsdiff's diffWordsWithSpace: whitespace is kept as tokens, so each
 * side rebuilds its text exactly and a change of whitespace alone shows); when too long or too slow, the whole old text removed and the
 * new one added. */
export function wordDiff(a: string, b: string): Part[] {
  if (a === b) return [{ text: a, kind: 'same' }];
  if (a.length + b.length <= MAX_DIFF_CHARS) {
    const changes = diffWordsWithSpace(a, b, { timeout: 1500 });
    if (changes) return changes.map((c) => ({ text: c.value, kind: c.added ? 'added' : c.removed ? 'removed' : 'same' }));
  }
  const out: Part[] = [];
  if (a) out.push({ text: a, kind: 'removed' });
  if (b) out.push({ text: b, kind: 'added' });
  return out;
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function text(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** A JSON schema's type as a person reads it: "string", "integer | null", "array of string". */
export function typeName(s: unknown): string {
  if (!isObj(s)) return '';
  const t = s.type;
  let name = Array.isArray(t) ? t.map(String).join(' | ') : typeof t === 'string' ? t : '';
  if (name === 'array' && isObj(s.items) && s.items.type) name = 'array of ' + typeName(s.items);
  if (!name && Array.isArray(s.enum)) name = 'enum';
  if (!name && (s.anyOf || s.oneOf)) name = 'union';
  if (Array.isArray(s.enum)) name += ' (' + s.enum.map((x) => JSON.stringify(x)).join(', ') + ')';
  return name;
}

/** The parameters of a tool's inputSchema, in the schema's order. */
export function params(t: Tool | null): Param[] {
  const s = t && isObj(t.inputSchema) ? t.inputSchema : null;
  if (!s || !isObj(s.properties)) return [];
  const req = new Set(Array.isArray(s.required) ? s.required.filter((x) => typeof x === 'string') : []);
  return Object.keys(s.properties).map((name) => {
    const p = (s.properties as Record<string, unknown>)[name];
    return { name, type: typeName(p), description: isObj(p) ? text(p.description) : '', required: req.has(name) };
  });
}

/* JSON with sorted keys, to compare what the diff does not show field by field. */
function canon(v: unknown): string {
  if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
  if (isObj(v)) return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
  return JSON.stringify(v) ?? 'null';
}

/* The input schema with its properties' descriptions and types, the required list, and the
 * properties only one side has left out: what is left differs in ways the parameter rows do
 * not show (a default, an enum, a pattern, a nested schema...). */
function schemaRest(s: unknown, keep: Set<string>): string {
  if (!isObj(s)) return canon(s);
  const copy: Record<string, unknown> = { ...s };
  delete copy.required;
  if (isObj(s.properties)) {
    const props: Record<string, unknown> = {};
    for (const [k, p] of Object.entries(s.properties)) {
      if (!keep.has(k)) continue;
      if (isObj(p)) {
        const q = { ...p };
        delete q.description;
        delete q.type;
        props[k] = q;
      } else props[k] = p;
    }
    copy.properties = props;
  }
  return canon(copy);
}

function propNames(s: unknown): string[] {
  return isObj(s) && isObj(s.properties) ? Object.keys(s.properties) : [];
}

/** Which parameter a finding's field names ("inputSchema.properties.x.description" → x). */
export function findingParam(field: string): string | null {
  const m = /^inputSchema\.properties\.(.+?)(\.[A-Za-z]+)?$/.exec(field);
  return m ? m[1] : null;
}

function diffParams(a: Tool | null, b: Tool | null, findings: Finding[]): ParamChange[] {
  const old = new Map(params(a).map((p) => [p.name, p]));
  const now = params(b);
  const out: ParamChange[] = [];
  const seen = new Set<string>();
  const pf = (name: string) => findings.filter((f) => findingParam(f.field) === name);
  for (const p of now) {
    seen.add(p.name);
    const o = old.get(p.name) ?? null;
    if (!o) {
      out.push({ name: p.name, change: a ? 'new' : 'unchanged', old: null, now: p, typeChanged: false, requiredChanged: false, description: null, findings: pf(p.name) });
      continue;
    }
    const typeChanged = o.type !== p.type, requiredChanged = o.required !== p.required;
    const descChanged = o.description !== p.description;
    out.push({
      name: p.name,
      change: typeChanged || requiredChanged || descChanged ? 'changed' : 'unchanged',
      old: o,
      now: p,
      typeChanged,
      requiredChanged,
      description: descChanged ? wordDiff(o.description, p.description) : null,
      findings: pf(p.name),
    });
  }
  for (const o of old.values())
    if (!seen.has(o.name)) out.push({ name: o.name, change: 'removed', old: o, now: null, typeChanged: false, requiredChanged: false, description: null, findings: [] });
  return out;
}

/** The review of the current list against the approved one (null: never approved, every
 * current tool is shown as it is, none marked new). */
export function reviewTools(approved: Tool[] | null, current: Tool[], findings: Finding[]): Review {
  const valid = (l: unknown): Tool[] => (Array.isArray(l) ? l.filter((t): t is Tool => isObj(t) && typeof t.name === 'string') : []);
  const cur = valid(current);
  const old = approved === null ? null : valid(approved);
  const oldBy = new Map((old ?? []).map((t) => [t.name, t]));
  const fs = Array.isArray(findings) ? findings.filter((f) => isObj(f) && typeof f.tool === 'string') : [];
  const counts = { new: 0, removed: 0, changed: 0, unchanged: 0 };
  const tools: ToolChange[] = [];
  const names = new Set<string>();
  for (const t of cur) {
    names.add(t.name);
    const tf = fs.filter((f) => f.tool === t.name);
    const o = old ? oldBy.get(t.name) ?? null : null;
    const ps = diffParams(o, t, tf);
    const toolFindings = tf.filter((f) => {
      const p = findingParam(f.field);
      return p === null || !ps.some((x) => x.name === p);
    });
    if (old && !o) {
      counts.new++;
      tools.push({ name: t.name, change: 'new', old: null, now: t, title: null, description: null, params: ps, otherChanged: [], findings: toolFindings });
      continue;
    }
    if (!o) {
      counts.unchanged++;
      tools.push({ name: t.name, change: 'unchanged', old: null, now: t, title: null, description: null, params: ps, otherChanged: [], findings: toolFindings });
      continue;
    }
    const title = text(o.title) !== text(t.title) ? wordDiff(text(o.title), text(t.title)) : null;
    const description = text(o.description) !== text(t.description) ? wordDiff(text(o.description), text(t.description)) : null;
    const otherChanged: string[] = [];
    const oldProps = new Set(propNames(o.inputSchema));
    const shared = new Set(propNames(t.inputSchema).filter((k) => oldProps.has(k)));
    if (schemaRest(o.inputSchema, shared) !== schemaRest(t.inputSchema, shared)) otherChanged.push('inputSchema');
    if (canon(o.outputSchema) !== canon(t.outputSchema)) otherChanged.push('outputSchema');
    if (canon(o.annotations) !== canon(t.annotations)) otherChanged.push('annotations');
    const changed = title !== null || description !== null || otherChanged.length > 0 || ps.some((p) => p.change !== 'unchanged');
    counts[changed ? 'changed' : 'unchanged']++;
    tools.push({ name: t.name, change: changed ? 'changed' : 'unchanged', old: o, now: t, title, description, params: ps, otherChanged, findings: toolFindings });
  }
  for (const o of old ?? []) {
    if (names.has(o.name)) continue;
    counts.removed++;
    tools.push({ name: o.name, change: 'removed', old: o, now: null, title: null, description: null, params: diffParams(o, null, []).map((p) => ({ ...p, change: 'unchanged' as const })), otherChanged: [], findings: [] });
  }
  const rank = { new: 0, changed: 1, removed: 2, unchanged: 3 };
  tools.sort((x, y) => rank[x.change] - rank[y.change] || (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  const unplaced = fs.filter((f) => !names.has(f.tool));
  return { tools, counts, unplaced };
}

/** Whether a fingerprint is one the approve call takes (64 hex; 16 accepted too). */
export function isFingerprint(f: unknown): f is string {
  return typeof f === 'string' && /^[0-9a-fA-F]{16,64}$/.test(f);
}
