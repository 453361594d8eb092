/* #/secrets: egress secrets by name, hosts and rules. A value is typed in a password field,
 * sent once in the PUT, then cleared: the page never shows or keeps one. */
import { useRef, useState } from 'preact/hooks';
import { api, seg } from '../api';
import { href } from '../lib/route';
import { str } from '../lib/text';
import type { Secret } from '../types';
import { ConfirmButton, ErrorBox, lines, Txt, useLoad, When } from '../ui';

async function listAll(signal: AbortSignal): Promise<Secret[]> {
  const out: Secret[] = [];
  let after: string | null = null;
  for (let i = 0; i < 100; i++) {
    const q: string = '/v1/egress-secrets?limit=100' + (after ? '&after=' + encodeURIComponent(after) : '');
    const page: { secrets?: unknown; next?: unknown } = await api('GET', q, undefined, { signal });
    if (Array.isArray(page?.secrets)) out.push(...(page.secrets as Secret[]).filter((s) => s && typeof s.name === 'string'));
    after = typeof page?.next === 'string' && page.next ? page.next : null;
    if (!after) break;
  }
  return out;
}

export function SecretsPage() {
  const list = useLoad(listAll, []);
  const [error, setError] = useState<unknown>(null);
  const [editing, setEditing] = useState<Secret | null | 'new'>(null);
  const remove = async (name: string) => {
    setError(null);
    try {
      await api('DELETE', '/v1/egress-secrets/' + seg(name));
      list.reload();
    } catch (e) {
      setError(e);
    }
  };
  const secrets = list.data ?? [];
  return (
    <main>
      <div class="row">
        <h1>Secrets</h1>
        <button type="button" class="primary" onClick={() => setEditing('new')} data-testid="secret-new">New secret</button>
      </div>
      <p class="muted small">A sandbox sees only a placeholder; the egress proxy puts the value into requests to the secret's hosts, as its rules allow. Values are never shown again.</p>
      <ErrorBox error={list.error} />
      <ErrorBox error={error} />
      {editing && <SecretForm initial={editing === 'new' ? null : editing} onDone={(changed) => { setEditing(null); if (changed) list.reload(); }} />}
      {list.data && secrets.length === 0 && <p class="muted">No secrets yet.</p>}
      {secrets.length > 0 && (
        <table class="grid" data-testid="secrets">
          <thead><tr><th>Name</th><th>Hosts</th><th>Header</th><th>Rules</th><th>Placeholder / env</th><th>Used by</th><th>Updated</th><th /></tr></thead>
          <tbody>
            {secrets.map((s) => (
              <tr key={s.name} data-testid="secret-row" data-name={str(s.name, 128)}>
                <td class="mono strong"><Txt v={s.name} max={128} /></td>
                <td>{Array.isArray(s.hosts) && s.hosts.slice(0, 16).map((h, i) => <code class="chip" key={i}><Txt v={h} max={200} /></code>)}</td>
                <td class="small"><Txt v={s.header} max={200} />{s.format && <div class="muted mono"><Txt v={s.format} max={256} /></div>}</td>
                <td class="small">
                  {Array.isArray(s.rules) && s.rules.length ? s.rules.slice(0, 16).map((r, i) => (
                    <div key={i} class="mono">{Array.isArray(r.methods) ? r.methods.join(',') : 'any'} {Array.isArray(r.paths) ? r.paths.map((p) => str(p, 300)).join(' ') : ''}</div>
                  )) : <span class="muted">every request</span>}
                  {s.only && <div class="muted">only: <Txt v={s.only} max={500} /></div>}
                </td>
                <td class="small mono"><Txt v={s.placeholder} max={200} /><div class="muted">${str(s.env, 128)}</div></td>
                <td class="small" data-testid="secret-used-by">
                  {Array.isArray(s.usedBy) && s.usedBy.length ? s.usedBy.slice(0, 8).map((u) => (
                    <div key={str(u.sandbox, 64)}><a class="mono" href={href.sandbox(str(u.sandbox, 64))}>{str(u.sandbox, 64)}</a> <span class="muted"><When t={u.at} /></span></div>
                  )) : <span class="muted">not used yet</span>}
                </td>
                <td class="small"><When t={s.updatedAt} /></td>
                <td class="actions">
                  <button type="button" class="small" onClick={() => setEditing(s)} data-testid="secret-edit">Replace</button>
                  <ConfirmButton label="Delete" confirm="Delete it? Its placeholders stop working." onConfirm={() => remove(s.name)} testid="secret-delete" danger />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}

/* Rules as lines: "GET,POST /repos/acme/* /issues" (methods optional). */
function rulesText(s: Secret | null): string {
  if (!s || !Array.isArray(s.rules)) return '';
  return s.rules.map((r) => (Array.isArray(r.methods) && r.methods.length ? r.methods.join(',') + ' ' : '') + (Array.isArray(r.paths) ? r.paths.join(' ') : '')).join('\n');
}

export function parseRules(text: string): { methods?: string[]; paths: string[] }[] {
  return lines(text).map((l) => {
    const words = l.split(/\s+/);
    if (words[0] && !words[0].startsWith('/')) return { methods: words[0].split(',').map((m) => m.trim().toUpperCase()).filter(Boolean), paths: words.slice(1) };
    return { paths: words };
  });
}

function SecretForm({ initial, onDone }: { initial: Secret | null; onDone: (changed: boolean) => void }) {
  const [name, setName] = useState(initial?.name ?? '');
  const [hosts, setHosts] = useState(Array.isArray(initial?.hosts) ? initial!.hosts.join('\n') : '');
  const [header, setHeader] = useState(str(initial?.header, 200));
  const [format, setFormat] = useState(str(initial?.format, 256));
  const [env, setEnv] = useState(initial && initial.env !== initial.name ? str(initial.env, 128) : '');
  const [rules, setRules] = useState(rulesText(initial));
  const value = useRef<HTMLInputElement>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const v = value.current?.value ?? '';
    const body: Record<string, unknown> = { value: v, hosts: lines(hosts) };
    if (header.trim()) body.header = header.trim();
    if (format.trim()) body.format = format.trim();
    if (env.trim()) body.env = env.trim();
    const r = parseRules(rules);
    if (r.length) body.rules = r;
    setBusy(true);
    setError(null);
    try {
      await api('PUT', '/v1/egress-secrets/' + seg(name.trim()), body);
      if (value.current) value.current.value = '';
      onDone(true);
    } catch (err) {
      setError(err);
    } finally {
      /* the value is not kept either way: the person types it again after an error */
      if (value.current) value.current.value = '';
      body.value = '';
      setBusy(false);
    }
  };
  return (
    <form class="subform panel" onSubmit={submit} data-testid="secret-form" autocomplete="off">
      <h2>{initial ? 'Replace ' + initial.name : 'New secret'}</h2>
      <label>Name (an environment variable's) <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} disabled={!!initial} required pattern="[A-Za-z_][A-Za-z0-9_]{0,127}" data-testid="secret-name" /></label>
      <label>Value (never shown again) <input ref={value} type="password" autocomplete="new-password" required data-testid="secret-value" /></label>
      <label>Hosts it may be sent to, one a line (names, *.domain, addresses)<textarea rows={2} value={hosts} onInput={(e) => setHosts((e.target as HTMLTextAreaElement).value)} required data-testid="secret-hosts" /></label>
      <label>Header the proxy sets (optional) <input value={header} onInput={(e) => setHeader((e.target as HTMLInputElement).value)} placeholder="Authorization" data-testid="secret-header" /></label>
      <label>Its format (optional; {'{value}'} where the value goes) <input value={format} onInput={(e) => setFormat((e.target as HTMLInputElement).value)} placeholder="Bearer {value}" /></label>
      <label>Variable the sandboxes see (optional; default the name) <input value={env} onInput={(e) => setEnv((e.target as HTMLInputElement).value)} /></label>
      <label>Rules, one a line: optional methods then paths (exact, or a prefix ending in /*); none: every request
        <textarea rows={3} value={rules} onInput={(e) => setRules((e.target as HTMLTextAreaElement).value)} placeholder="GET,POST /repos/acme/*" data-testid="secret-rules" />
      </label>
      <div class="actions">
        <button type="submit" class="primary" disabled={busy} data-testid="secret-save">Save</button>
        <button type="button" onClick={() => onDone(false)}>Cancel</button>
      </div>
      <ErrorBox error={error} />
    </form>
  );
}
