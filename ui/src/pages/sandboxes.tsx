/* #/sandboxes: every sandbox, live (the events stream, else polling), filtered by label and
 * state in the page. */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api } from '../api';
import { live } from '../live';
import { matchLabels, parseLabelFilter } from '../lib/labels';
import { href } from '../lib/route';
import { str } from '../lib/text';
import { duration } from '../lib/time';
import type { Sandbox, Usage } from '../types';
import { ErrorBox, Labels, Status, Txt, When } from '../ui';

const COST_EVERY_MS = 15000;

/* Each sandbox's cost so far (GET /v1/usage), refreshed while the page is open. */
function useCosts(): Map<string, number> {
  const [costs, setCosts] = useState(new Map<string, number>());
  useEffect(() => {
    let stop = false;
    const load = () =>
      api<Usage>('GET', '/v1/usage').then(
        (u) => {
          if (stop || !Array.isArray(u?.sandboxes)) return;
          setCosts(new Map(u.sandboxes.map((r) => [r.sandbox, r.cost?.total ?? 0])));
        },
        () => {},
      );
    load();
    const t = setInterval(load, COST_EVERY_MS);
    return () => {
      stop = true;
      clearInterval(t);
    };
  }, []);
  return costs;
}

export function useLive(): Map<string, Sandbox> {
  const [, setN] = useState(0);
  useEffect(() => live.subscribe(() => setN((n) => n + 1)), []);
  return live.sandboxes;
}

const STATES = ['', 'running', 'paused', 'hibernated', 'stopped', 'failed', 'creating'];

export function SandboxesPage({ admin }: { admin: boolean }) {
  const sandboxes = useLive();
  const costs = useCosts();
  const [filter, setFilter] = useState('');
  const [state, setState] = useState('');
  const [account, setAccount] = useState('');
  const terms = useMemo(() => parseLabelFilter(filter), [filter]);
  const accounts = [...new Set([...sandboxes.values()].map((s) => str(s.account, 64)))].sort();
  const list = [...sandboxes.values()]
    .filter((s) => matchLabels(s.labels, terms) && (!state || s.status === state) && (!account || s.account === account))
    .sort((a, b) => (str(a.createdAt) < str(b.createdAt) ? 1 : str(a.createdAt) > str(b.createdAt) ? -1 : 0));
  return (
    <main>
      <div class="row">
        <h1>Sandboxes</h1>
        <span class="muted" data-testid="sandbox-count">{list.length} of {sandboxes.size}</span>
      </div>
      <div class="filters">
        <label>
          Labels <input type="search" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} placeholder="team:acme env" data-testid="label-filter" />
        </label>
        <label>
          Status{' '}
          <select value={state} onChange={(e) => setState((e.target as HTMLSelectElement).value)} data-testid="state-filter">
            {STATES.map((s) => <option value={s} key={s}>{s || 'any'}</option>)}
          </select>
        </label>
        {admin && (
          <label>
            Account{' '}
            <select value={account} onChange={(e) => setAccount((e.target as HTMLSelectElement).value)} data-testid="account-filter">
              <option value="">every account</option>
              {accounts.map((a) => <option value={a} key={a}>{a}</option>)}
            </select>
          </label>
        )}
      </div>
      {live.error && <ErrorBox error={live.error} />}
      {!live.loaded && !live.error && <p>Loading…</p>}
      {live.loaded && list.length === 0 && <p class="muted" data-testid="sandboxes-empty">No sandbox{filter || state ? ' matches' : ' yet: runtime sandbox create makes one'}.</p>}
      {list.length > 0 && (
        <table class="grid" data-testid="sandbox-table">
          <thead>
            <tr><th>Name</th>{admin && <th>Account</th>}<th>Status</th><th>MCP servers</th><th>Size</th><th>Isolation</th><th>Idle</th><th>Labels</th><th>Created</th><th>Cost so far</th></tr>
          </thead>
          <tbody>
            {list.map((s) => <Row s={s} key={s.id} admin={admin} cost={costs.get(s.id)} />)}
          </tbody>
        </table>
      )}
    </main>
  );
}

function Row({ s, admin, cost }: { s: Sandbox; admin: boolean; cost: number | undefined }) {
  const servers = Array.isArray(s.mcp?.servers) ? s.mcp!.servers : [];
  return (
    <tr data-testid="sandbox-row" data-id={s.id} data-status={str(s.status, 40)}>
      <td>
        <a href={href.sandbox(s.id)} class="strong"><Txt v={s.name || s.id} max={120} /></a>
        {s.name && <div class="mono muted small">{s.id.slice(0, 64)}</div>}
      </td>
      {admin && <td class="mono small" data-testid="sandbox-account"><Txt v={s.account} max={64} /></td>}
      <td>
        <Status s={s.status} />
        {s.stopReason && <div class="muted small"><Txt v={s.stopReason} max={200} /></div>}
      </td>
      <td>
        {servers.slice(0, 16).map((m) => (
          <div key={m.name} class="srv">
            <a href={href.mcp(s.id, str(m.name, 200))}><Txt v={m.name} max={64} /></a> <Status s={m.phase || m.status} />
            {m.phase === 'refused' && <a class="review-link" href={href.review(s.id, str(m.name, 200))} data-testid="review-link">Review</a>}
          </div>
        ))}
      </td>
      <td class="num small">{str(s.cpus)} vCPU · {str(s.memoryMiB)} MiB</td>
      <td><Txt v={s.isolation} max={20} /></td>
      <td class="small muted">
        pause {duration(s.idlePauseSeconds, true)}
        {s.hibernateAfterSeconds !== undefined && <div>hibernate {duration(s.hibernateAfterSeconds, true)}</div>}
      </td>
      <td><Labels labels={s.labels} /></td>
      <td><When t={s.createdAt} /></td>
      <td class="num small" data-testid="sandbox-cost">{cost === undefined ? '' : '$' + cost.toFixed(4)}</td>
    </tr>
  );
}
