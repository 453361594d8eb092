/* /connect?code=XXXX-XXXX-XXXX: a person approves (or refuses) the login of an agent's CLI,
 * after checking that the code is the one its terminal shows. And #/connections: the machines
 * connected to this account, each revocable. */
import { useState } from 'preact/hooks';
import { api, ApiError, seg } from '../api';
import { href } from '../lib/route';
import { str } from '../lib/text';
import { parseTime } from '../lib/time';
import type { Account, ConnectRequest, Connection, Session } from '../types';
import { ConfirmButton, ErrorBox, Status, Txt, useLoad, When } from '../ui';

export function ConnectPage({ code, session }: { code: string | null; session: Session }) {
  const req = useLoad((signal) => (code ? api<ConnectRequest>('GET', '/v1/connect/requests/' + seg(code), undefined, { signal }) : Promise.resolve(undefined)), [code]);
  const accounts = useLoad((signal) => (session.admin ? api<Account[]>('GET', '/v1/accounts', undefined, { signal }) : Promise.resolve([])), [session.admin]);
  const [account, setAccount] = useState(session.account);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  if (!code)
    return (
      <main class="narrow">
        <h1>Connect an agent</h1>
        <p class="error" data-testid="connect-bad-code">This link has no valid code. Open the link your terminal printed (it ends in ?code= and three groups of four characters).</p>
        <p><a href={href.connections()}>Connected machines</a></p>
      </main>
    );
  const act = async (verb: 'approve' | 'deny') => {
    setBusy(true);
    setError(null);
    try {
      const body = verb === 'approve' && session.admin ? { account } : undefined;
      await api('POST', `/v1/connect/requests/${seg(code)}:${verb}`, body);
      setResult(verb === 'approve' ? { ok: true, text: 'Connected. You can go back to your terminal.' } : { ok: false, text: 'Refused. The agent was not connected.' });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const r = req.data;
  const names = [session.account, ...(Array.isArray(accounts.data) ? accounts.data.map((a) => str(a.name, 64)) : [])].filter((v, i, l) => l.indexOf(v) === i);
  const notFound = req.error instanceof ApiError && req.error.status === 404;
  const expired = !!r && parseTime(r.expiresAt) < Date.now();
  return (
    <main class="narrow">
      <h1>Connect an agent</h1>
      <p class="code-line">Code <strong class="mono usercode" data-testid="connect-code">{code}</strong></p>
      {notFound && <p class="error" data-testid="connect-not-found">No login is waiting with this code: it expired, was already answered, or was mistyped. Start the login again in your terminal.</p>}
      {!notFound && <ErrorBox error={req.error} />}
      {r && (
        <div class="panel" data-testid="connect-request">
          <p class="ask">
            <strong><Txt v={r.agentName} max={200} /></strong> on <strong><Txt v={r.machine} max={200} /></strong> (from <Txt v={r.address} max={200} />) asks to connect to account{' '}
            <strong><Txt v={session.admin ? account : session.account} max={64} /></strong>.
          </p>
          <p>Check that your terminal shows the code <strong class="mono">{str(r.userCode, 32) || code}</strong>. If you did not start this login yourself, refuse it.</p>
          <p class="small muted">Asked <When t={r.createdAt} />; expires <When t={r.expiresAt} />. <Status s={r.status} testid="connect-status" /></p>
          {expired && !result && <p class="warn-text" data-testid="connect-expired">This request has expired. Start the login again in your terminal.</p>}
          {!result && !expired && (r.status === 'pending' || !r.status) && (
            <>
              {session.admin && (
                <label>
                  Account{' '}
                  <select value={account} onChange={(e) => setAccount((e.target as HTMLSelectElement).value)} data-testid="connect-account">
                    {names.map((n) => <option value={n} key={n}>{n}</option>)}
                  </select>
                </label>
              )}
              <div class="actions">
                <button type="button" class="primary" disabled={busy} onClick={() => act('approve')} data-testid="connect-approve">Connect agent</button>
                <button type="button" class="danger" disabled={busy} onClick={() => act('deny')} data-testid="connect-deny">Refuse</button>
              </div>
            </>
          )}
        </div>
      )}
      <ErrorBox error={error} />
      {result && <p class={result.ok ? 'ok-text result' : 'warn-text result'} role="status" data-testid="connect-result" data-ok={String(result.ok)}>{result.text}</p>}
      <p><a href={href.connections()}>Connected machines</a></p>
    </main>
  );
}

export function ConnectionsPage() {
  const list = useLoad((signal) => api<unknown>('GET', '/v1/connect/connections', undefined, { signal }), []);
  const [error, setError] = useState<unknown>(null);
  const raw = list.data as { data?: unknown; connections?: unknown } | unknown[] | undefined;
  const conns: Connection[] = (Array.isArray(raw) ? raw : Array.isArray((raw as { data?: unknown })?.data) ? (raw as { data: unknown[] }).data : Array.isArray((raw as { connections?: unknown })?.connections) ? (raw as { connections: unknown[] }).connections : []).filter(
    (c): c is Connection => typeof c === 'object' && c !== null && typeof (c as Connection).id === 'string',
  );
  const revoke = async (id: string) => {
    setError(null);
    try {
      await api('DELETE', '/v1/connect/connections/' + seg(id));
    } catch (e) {
      setError(e);
    }
    list.reload();
  };
  const notYet = list.error instanceof ApiError && list.error.status === 404;
  return (
    <main>
      <h1>Connected machines</h1>
      <p class="muted small">Agents' CLIs that signed in to this account through a /connect link.</p>
      {notYet ? <p class="muted" data-testid="connections-unavailable">This daemon does not list connections yet.</p> : <ErrorBox error={list.error} />}
      <ErrorBox error={error} />
      {list.data !== undefined && conns.length === 0 && !notYet && <p class="muted">None.</p>}
      {conns.length > 0 && (
        <table class="grid" data-testid="connections">
          <thead><tr><th>Agent</th><th>Machine</th><th>Connected</th><th /></tr></thead>
          <tbody>
            {conns.map((c) => (
              <tr key={c.id} data-testid="connection-row" data-id={str(c.id, 128)}>
                <td><Txt v={c.agentName} max={200} /></td>
                <td><Txt v={c.machine} max={200} /></td>
                <td><When t={c.createdAt} /></td>
                <td><ConfirmButton label="Revoke" confirm="Revoke it? That machine's CLI must log in again." onConfirm={() => revoke(c.id)} testid="connection-revoke" danger /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}
