/* The page's routes: /connect?code=... (the login-approval link the CLI prints), else the
 * hash under /dashboard/. Pure: parse a location, and make the hrefs of the links. */

export type Route =
  | { page: 'connect'; code: string | null }
  | { page: 'sandboxes' }
  | { page: 'sandbox'; id: string }
  | { page: 'mcp'; id: string; name: string }
  | { page: 'review'; id: string; name: string }
  | { page: 'catalog' }
  | { page: 'catalogReview'; entry: string }
  | { page: 'usage' }
  | { page: 'secrets' }
  | { page: 'accounts' }
  | { page: 'connections' }
  | { page: 'notFound'; path: string };

/** The user code of a login approval: three groups of four letters or digits. */
export const CODE_RE = /^[A-Za-z0-9]{4}-[A-Za-z0-9]{4}-[A-Za-z0-9]{4}$/;

function decode(s: string): string | null {
  try {
    const d = decodeURIComponent(s);
    return d === '' || d.length > 256 ? null : d;
  } catch {
    return null;
  }
}

export function parseRoute(pathname: string, search: string, hash: string): Route {
  if (pathname === '/connect' || pathname === '/connect/') {
    const code = new URLSearchParams(search).get('code');
    return { page: 'connect', code: code && CODE_RE.test(code) ? code.toUpperCase() : null };
  }
  const path = hash.replace(/^#/, '').replace(/^\/+/, '').replace(/\/+$/, '');
  const seg = path === '' ? [] : path.split('/');
  const parts = seg.map(decode);
  if (parts.some((p) => p === null)) return { page: 'notFound', path };
  const p = parts as string[];
  if (p.length === 0 || (p.length === 1 && p[0] === 'sandboxes')) return { page: 'sandboxes' };
  if (p[0] === 'sandboxes' && p.length === 2) return { page: 'sandbox', id: p[1] };
  if (p[0] === 'sandboxes' && p.length === 4 && p[2] === 'mcp') return { page: 'mcp', id: p[1], name: p[3] };
  if (p[0] === 'review' && p.length === 3) return { page: 'review', id: p[1], name: p[2] };
  if (p[0] === 'catalog' && p.length === 1) return { page: 'catalog' };
  if (p[0] === 'catalog' && p.length === 3 && p[2] === 'review') return { page: 'catalogReview', entry: p[1] };
  if (p.length === 1 && (p[0] === 'usage' || p[0] === 'secrets' || p[0] === 'accounts' || p[0] === 'connections')) return { page: p[0] };
  return { page: 'notFound', path };
}

const e = encodeURIComponent;
/* Absolute, so that they work from /connect too. */
export const href = {
  sandboxes: () => '/dashboard/#/sandboxes',
  sandbox: (id: string) => `/dashboard/#/sandboxes/${e(id)}`,
  mcp: (id: string, name: string) => `/dashboard/#/sandboxes/${e(id)}/mcp/${e(name)}`,
  review: (id: string, name: string) => `/dashboard/#/review/${e(id)}/${e(name)}`,
  catalog: () => '/dashboard/#/catalog',
  catalogReview: (entry: string) => `/dashboard/#/catalog/${e(entry)}/review`,
  usage: () => '/dashboard/#/usage',
  secrets: () => '/dashboard/#/secrets',
  accounts: () => '/dashboard/#/accounts',
  connections: () => '/dashboard/#/connections',
};
