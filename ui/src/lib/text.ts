/* Text from the API is hostile: it is only ever rendered as text (Preact makes text nodes),
 * and what a person could not see in it is made visible. */

/* Characters that hide or reorder text: C0/C1 controls (but tab and newline), bidi
 * overrides and isolates, zero-width and other invisible format characters, the BOM, and
 * Unicode tag characters (which can smuggle text to a model unseen). */
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb]|\udb40[\udc00-\udc7f]/g;

export interface Piece {
  text: string;
  hidden: boolean; /* a marker standing for a character a person would not see */
}

function marker(ch: string): string {
  const cp = ch.codePointAt(0) as number;
  return '<U+' + cp.toString(16).toUpperCase().padStart(4, '0') + '>';
}

/** The text cut into plain pieces and markers ("<U+202E>") for hidden characters. */
export function revealHidden(s: string): Piece[] {
  const out: Piece[] = [];
  let last = 0;
  HIDDEN.lastIndex = 0;
  for (let m = HIDDEN.exec(s); m; m = HIDDEN.exec(s)) {
    if (m.index > last) out.push({ text: s.slice(last, m.index), hidden: false });
    out.push({ text: marker(m[0]), hidden: true });
    last = m.index + m[0].length;
  }
  if (last < s.length) out.push({ text: s.slice(last), hidden: false });
  return out;
}

/** Whether the text has a character revealHidden would mark. */
export function hasHidden(s: string): boolean {
  HIDDEN.lastIndex = 0;
  const r = HIDDEN.test(s);
  HIDDEN.lastIndex = 0;
  return r;
}

/** A value of unknown type as one line of text, at most max characters. */
export function str(v: unknown, max = 2000): string {
  let s: string;
  if (typeof v === 'string') s = v;
  else if (typeof v === 'number' || typeof v === 'boolean') s = String(v);
  else if (v === null || v === undefined) s = '';
  else {
    try {
      s = JSON.stringify(v);
    } catch {
      s = '?';
    }
  }
  return s.length > max ? s.slice(0, max) + '…' : s;
}

/** The last `lines` lines of a log, and how many were left out before them. */
export function tail(text: string, lines: number): { dropped: number; text: string } {
  const all = text.split('\n');
  if (all.length && all[all.length - 1] === '') all.pop();
  const dropped = Math.max(0, all.length - lines);
  return { dropped, text: all.slice(dropped).join('\n') };
}

/** A 64 (or 16) hex fingerprint shortened for a button: its first 12 digits. */
export function shortFingerprint(f: unknown): string {
  return typeof f === 'string' ? f.slice(0, 12) : '';
}

/** `claude mcp add` as the CLI prints it (src/cli/sandbox_mcp.c print_claude_line): words
 * quoted for a POSIX shell when they need it, the header in double quotes when it holds
 * nothing a shell would expand there. */
export function claudeLine(name: string, url: string, authorization: string | null): string {
  let line = 'claude mcp add --transport http ' + shellWord(name) + ' ' + shellWord(url);
  if (authorization !== null) {
    const h = 'Authorization: ' + authorization;
    line += /["$`\\!]/.test(authorization) ? ' --header ' + shellWord(h) : ' --header "' + clean(h) + '"';
  }
  return line;
}

function clean(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f]/g, '?');
}

/** A word for a POSIX shell: bare when it has only safe characters, else in single quotes. */
export function shellWord(s: string): string {
  if (s !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(s)) return s;
  return "'" + clean(s).replace(/'/g, "'\\''") + "'";
}

/** A URL for an <a href>: only http(s) ones, else null (never javascript: or data:). */
export function safeHttpUrl(u: unknown): string | null {
  if (typeof u !== 'string') return null;
  try {
    const x = new URL(u);
    return x.protocol === 'https:' || x.protocol === 'http:' ? x.href : null;
  } catch {
    return null;
  }
}
