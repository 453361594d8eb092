/* #/accounts (admin): accounts with what they hold; create one, rotate its key (shown once in a
 * dialog, then forgotten), remove one. */
import { useState } from 'preact/hooks';
import { api, seg } from '../api';
import { str } from '../lib/text';
import type { Account, Session } from '../types';
import { ConfirmButton, CopyBox, Dialog, ErrorBox, Txt, useLoad, When } from '../ui';

export function KeyDialog({ name, apiKey, onClose }: { name: string; apiKey: string; onClose: () => void }) {
  return (
    <Dialog title={'API key of ' + name} onClose={onClose} testid="key-dialog">
      <p>Shown this once: copy it now. The daemon keeps only its hash.</p>
      <CopyBox text={apiKey} testid="key-value" />
      <div class="actions">
        <button type="button" class="primary" onClick={onClose} data-testid="key-dialog-close">I have copied it</button>
      </div>
    </Dialog>
  );
}

export function AccountsPage({ session }: { session: Session }) {
  const list = useLoad((signal) => api<Account[]>('GET', '/v1/accounts', undefined, { signal }), []);
  const [key, setKey] = useState<{ name: string; apiKey: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [name, setName] = useState('');
  const [maxSb, setMaxSb] = useState('');
  const [maxMem, setMaxMem] = useState('');
  if (!session.admin) return <main><h1>Accounts</h1><p>Only the admin key manages accounts.</p></main>;
  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const body: Record<string, unknown> = { name: name.trim() };
    if (maxSb.trim()) body.maxSandboxes = Number(maxSb);
    if (maxMem.trim()) body.maxMemoryMiB = Number(maxMem);
    try {
      const r = await api<{ name: string; apiKey: string }>('POST', '/v1/accounts', body);
      setName('');
      setMaxSb('');
      setMaxMem('');
      setKey({ name: str(r.name, 64), apiKey: str(r.apiKey, 200) });
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const rotate = async (n: string) => {
    setError(null);
    try {
      const r = await api<{ name: string; apiKey: string }>('POST', `/v1/accounts/${seg(n)}/keys`);
      setKey({ name: n, apiKey: str(r.apiKey, 200) });
    } catch (err) {
      setError(err);
    }
  };
  const remove = async (n: string) => {
    setError(null);
    try {
      await api('DELETE', '/v1/accounts/' + seg(n));
    } catch (err) {
      setError(err);
    }
    list.reload();
  };
  const accounts = Array.isArray(list.data) ? list.data : [];
  return (
    <main>
      <h1>Accounts</h1>
      <p class="muted small">The admin key acts as the account default, which is not listed. Each account sees only its own sandboxes and secrets.</p>
      <ErrorBox error={list.error} />
      <ErrorBox error={error} />
      <form class="inline-form" onSubmit={create} data-testid="account-form">
        <label>Name <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} required pattern="[a-z0-9][a-z0-9_.\-]{0,62}" data-testid="account-name" /></label>
        <label>Max sandboxes <input type="number" min={1} value={maxSb} onInput={(e) => setMaxSb((e.target as HTMLInputElement).value)} /></label>
        <label>Max memory MiB <input type="number" min={1} value={maxMem} onInput={(e) => setMaxMem((e.target as HTMLInputElement).value)} /></label>
        <button type="submit" class="primary" data-testid="account-create">Create account</button>
      </form>
      {accounts.length > 0 && (
        <table class="grid" data-testid="accounts">
          <thead><tr><th>Name</th><th>Sandboxes</th><th>Memory MiB</th><th>Created</th><th /></tr></thead>
          <tbody>
            {accounts.map((a) => (
              <tr key={str(a.name)} data-testid="account-row" data-name={str(a.name, 64)}>
                <td class="mono strong"><Txt v={a.name} max={64} />{a.removing && <span class="badge b-removed">removing</span>}</td>
                <td class="num">{str(a.sandboxes)} / {a.maxSandboxes == null ? '∞' : str(a.maxSandboxes)}</td>
                <td class="num">{str(a.memoryMiB)} / {a.maxMemoryMiB == null ? '∞' : str(a.maxMemoryMiB)}</td>
                <td><When t={a.createdAt} /></td>
                <td class="actions">
                  <ConfirmButton label="New key" confirm="Make a new key? The one before stays valid until the next rotation; older ones stop now." onConfirm={() => rotate(str(a.name, 64))} testid="account-rotate" />
                  <ConfirmButton label="Remove" confirm="Remove it with all its sandboxes, secrets and usage?" onConfirm={() => remove(str(a.name, 64))} testid="account-remove" danger />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {list.data && accounts.length === 0 && <p class="muted">No accounts but default.</p>}
      {key && <KeyDialog name={key.name} apiKey={key.apiKey} onClose={() => setKey(null)} />}
    </main>
  );
}
