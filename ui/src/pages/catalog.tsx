/* #/catalog: the MCP servers known by id, each with a link to review its tools before the
 * first start. */
import { api } from '../api';
import { href } from '../lib/route';
import { safeHttpUrl, str } from '../lib/text';
import type { CatalogEntry } from '../types';
import { ErrorBox, Txt, useLoad } from '../ui';

export function CatalogPage() {
  const c = useLoad((signal) => api<{ data: CatalogEntry[] }>('GET', '/v1/mcp/catalog', undefined, { signal }), []);
  const entries = Array.isArray(c.data?.data) ? c.data!.data : [];
  return (
    <main>
      <h1>Catalog</h1>
      <ErrorBox error={c.error} />
      <table class="grid" data-testid="catalog">
        <thead><tr><th>Id</th><th>Package</th><th>Description</th><th>Needs</th><th>Reviewed</th></tr></thead>
        <tbody>
          {entries.map((e) => {
            const src = safeHttpUrl(e.source);
            return (
              <tr key={str(e.id)} data-testid="catalog-entry" data-id={str(e.id, 100)}>
                <td class="mono strong"><Txt v={e.id} max={100} /></td>
                <td class="small">
                  <Txt v={e.runtime} max={20} />: {src ? <a href={src} rel="noopener noreferrer" target="_blank"><Txt v={e.package} max={200} /></a> : <Txt v={e.package} max={200} />} <Txt v={e.version} max={64} />
                  <div class="muted"><Txt v={e.license} max={64} /></div>
                </td>
                <td class="small"><Txt v={e.description} max={1000} /></td>
                <td class="small">
                  {Array.isArray(e.egress) && e.egress.length > 0 && <div>hosts: {e.egress.slice(0, 20).map((h, i) => <code class="chip" key={i}><Txt v={h} max={200} /></code>)}</div>}
                  {Array.isArray(e.settings) && e.settings.length > 0 && <div>settings: {e.settings.slice(0, 20).map((s, i) => <code class="chip" key={i}><Txt v={s.env} max={128} />{s.secret ? ' (secret)' : ''}</code>)}</div>}
                </td>
                <td class="small">
                  <a href={href.catalogReview(str(e.id, 100))} data-testid="catalog-review-link">Review tools</a>
                  <div class="mono muted">{str(e.fingerprint, 64) || 'no pinned list'}</div>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </main>
  );
}
