/* #/sandboxes: every sandbox, live (the events stream, else polling), filtered by label and
 * state in the page. */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { live } from '../live';
import { matchLabels, parseLabelFilter } from '../lib/labels';
import { href } from '../lib/route';
import { str } from '../lib/text';
import type { Sandbox } from '../types';
import { ErrorBox, Labels, Status, Txt, When } from '../ui';

export function useLive(): Map<string, Sandbox> {
  const [, setN] = useState(0);
  useEffect(() => live.subscribe(() => setN((n) => n + 1)), []);
  return live.sandboxes;
}

const STATES = ['', 'running', 'paused', 'hibernated', 'stopped', 'failed', 'creating'];

export function SandboxesPage() {
  const sandboxes = useLive();
  const [filter, setFilter] = useState('');
  const [state, setState] = useState('');
  const terms = useMemo(() => parseLabelFilter(filter), [filter]);
  const list = [...sandboxes.values()]
    .filter((s) => matchLabels(s.labels, terms) && (!state || s.status === state))
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
        <span class="muted">Only this account's sandboxes: the API has no account filter.</span>
      </div>
      {live.error && <ErrorBox error={live.error} />}
      {!live.loaded && !live.error && <p>Loading…</p>}
      {live.loaded && list.length === 0 && <p class="muted" data-testid="sandboxes-empty">No sandbox{filter || state ? ' matches' : ' yet: runtime sandbox create makes one'}.</p>}
      {list.length > 0 && (
        <table class="grid" data-testid="sandbox-table">
          <thead>
            <tr><th>Name</th><th>Status</th><th>MCP servers</th><th>Size</th><th>Isolation</th><th>Labels</th><th>Created</th></tr>
          </thead>
          <tbody>
            {list.map((s) => <Row s={s} key={s.id} />)}
          </tbody>
        </table>
      )}
    </main>
  );
}

function Row({ s }: { s: Sandbox }) {
  const servers = Array.isArray(s.mcp?.servers) ? s.mcp!.servers : [];
  return (
    <tr data-testid="sandbox-row" data-id={s.id} data-status={str(s.status, 40)}>
      <td>
        <a href={href.sandbox(s.id)} class="strong"><Txt v={s.name || s.id} max={120} /></a>
        {s.name && <div class="mono muted small">{s.id.slice(0, 64)}</div>}
      </td>
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
      <td><Labels labels={s.labels} /></td>
      <td><When t={s.createdAt} /></td>
    </tr>
  );
}
