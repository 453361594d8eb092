/* #/sandboxes/<id>: one sandbox, live; its actions, network rules, MCP servers and events. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, seg } from '../api';
import { live, type LiveEvent } from '../live';
import { href } from '../lib/route';
import { str } from '../lib/text';
import { duration } from '../lib/time';
import type { CatalogEntry, McpServer, NetworkPolicy, Sandbox, SandboxEvent } from '../types';
import { ConfirmButton, ErrorBox, Labels, lines, Status, Txt, useLoad, When } from '../ui';
import { useLive } from './sandboxes';

export function SandboxPage({ id }: { id: string }) {
  const sandboxes = useLive();
  const fetched = useLoad((signal) => api<Sandbox>('GET', '/v1/sandboxes/' + seg(id), undefined, { signal }), [id]);
  useEffect(() => {
    if (fetched.data) live.upsert(fetched.data);
  }, [fetched.data]);
  const s = sandboxes.get(id) ?? fetched.data;
  const [actionError, setActionError] = useState<unknown>(null);
  const [busy, setBusy] = useState('');
  const [deleted, setDeleted] = useState(false);

  if (deleted)
    return (
      <main>
        <p data-testid="sandbox-deleted">Sandbox deleted. <a href={href.sandboxes()}>Back to the list</a></p>
      </main>
    );
  if (!s) return <main>{fetched.error ? <ErrorBox error={fetched.error} /> : <p>Loading…</p>}</main>;

  const act = async (verb: string) => {
    setBusy(verb);
    setActionError(null);
    try {
      const r = await api<Sandbox>('POST', `/v1/sandboxes/${seg(id)}:${verb}`);
      live.upsert(r);
    } catch (e) {
      setActionError(e);
    } finally {
      setBusy('');
    }
  };
  const remove = async () => {
    setActionError(null);
    try {
      await api('DELETE', '/v1/sandboxes/' + seg(id));
      live.remove(id);
      setDeleted(true);
    } catch (e) {
      setActionError(e);
    }
  };
  const st = str(s.status);
  return (
    <main>
      <p class="crumbs"><a href={href.sandboxes()}>Sandboxes</a> /</p>
      <div class="row">
        <h1 data-testid="sandbox-title"><Txt v={s.name || s.id} max={120} /></h1>
        <Status s={s.status} testid="sandbox-status" />
      </div>
      <div class="actions" data-testid="sandbox-actions">
        <button type="button" data-testid="action-pause" disabled={!!busy || st !== 'running'} onClick={() => act('pause')}>Pause</button>
        <button type="button" data-testid="action-wake" disabled={!!busy || !(st === 'paused' || st === 'hibernated')} onClick={() => act('wake')}>Wake</button>
        <button type="button" data-testid="action-hibernate" disabled={!!busy || !(st === 'running' || st === 'paused')} onClick={() => act('hibernate')}>Hibernate</button>
        <button type="button" data-testid="action-stop" disabled={!!busy || st === 'stopped'} onClick={() => act('stop')}>Stop</button>
        <button type="button" data-testid="action-restart" disabled={!!busy || !(st === 'stopped' || st === 'failed')} onClick={() => act('restart')}>Start again</button>
        <ConfirmButton label="Delete" confirm="Delete this sandbox and its files?" onConfirm={remove} testid="action-delete" danger />
        {busy && <span class="muted">{busy}…</span>}
      </div>
      <ErrorBox error={actionError} />
      <dl class="facts" data-testid="sandbox-facts">
        <dt>id</dt><dd class="mono">{s.id.slice(0, 64)}</dd>
        <dt>state</dt><dd><Txt v={s.state} max={40} />{s.stopReason && <> · stopped: <Txt v={s.stopReason} max={200} /></>}</dd>
        <dt>isolation</dt><dd><Txt v={s.isolation} max={20} /></dd>
        <dt>size</dt><dd>{str(s.cpus)} vCPU · {str(s.memoryMiB)} MiB memory · {str(s.diskMiB)} MiB disk</dd>
        <dt>idle</dt><dd>pauses after {duration(s.idlePauseSeconds, true)} idle · hibernates after {duration(s.hibernateAfterSeconds, true)} paused</dd>
        {s.timeoutSeconds != null && <><dt>lease</dt><dd>{duration(s.timeoutSeconds)} then {str(s.onLeaseEnd, 20)}{s.endsAt && <> (<When t={s.endsAt} />)</>}</dd></>}
        <dt>created</dt><dd><When t={s.createdAt} /></dd>
        <dt>labels</dt><dd><Labels labels={s.labels} /></dd>
      </dl>
      <div class="cols">
        <section>
          <McpSection sandbox={s} />
          <NetworkSection id={id} />
        </section>
        <section>
          <EventsSection id={id} />
        </section>
      </div>
    </main>
  );
}

/* ---- MCP servers ---- */

export function ServerCard({ sandboxId, m }: { sandboxId: string; m: McpServer }) {
  const name = str(m.name, 200);
  const phase = str(m.phase || m.status, 40);
  return (
    <div class={'card mcp-card phase-' + phase} data-testid="mcp-card" data-name={name} data-phase={phase}>
      <div class="row">
        <a href={href.mcp(sandboxId, name)} class="strong"><Txt v={name} max={64} /></a>
        <Status s={phase} testid="mcp-status" />
        {m.package && <span class="muted small"><Txt v={m.package.manager} max={10} /> <Txt v={m.package.name} max={200} /> <Txt v={m.package.version} max={64} /></span>}
        {phase === 'refused' && <a class="review-link" href={href.review(sandboxId, name)} data-testid="review-link">Review the change</a>}
      </div>
      {(m.error || m.message) && <p class={phase === 'refused' ? 'warn-text' : 'muted'}><Txt v={m.error || m.message} max={4000} /></p>}
      {Array.isArray(m.tools) && m.tools.length > 0 && (
        <p class="small">tools: {m.tools.slice(0, 256).map((t, i) => <span key={i}>{i > 0 && ', '}<Txt v={t} max={128} /></span>)}</p>
      )}
      {Array.isArray(m.warnings) && m.warnings.slice(0, 20).map((w, i) => <p class="warn-text small" key={i}>warning: <Txt v={w} max={1000} /></p>)}
      <p class="small mono muted">fingerprint {str(m.fingerprint, 64) || '—'}{m.approved && m.approved !== m.fingerprint && <> · approved {str(m.approved, 64)}</>}</p>
    </div>
  );
}

function McpSection({ sandbox }: { sandbox: Sandbox }) {
  const servers = Array.isArray(sandbox.mcp?.servers) ? sandbox.mcp!.servers : [];
  return (
    <div class="panel">
      <h2>MCP servers</h2>
      {servers.length === 0 && <p class="muted">None started.</p>}
      {servers.slice(0, 16).map((m) => <ServerCard sandboxId={sandbox.id} m={m} key={str(m.name)} />)}
      <StartServer id={sandbox.id} />
    </div>
  );
}

function StartServer({ id }: { id: string }) {
  const [open, setOpen] = useState(false);
  const catalog = useLoad((signal) => (open ? api<{ data: CatalogEntry[] }>('GET', '/v1/mcp/catalog', undefined, { signal }) : Promise.resolve(undefined)), [open]);
  const [entry, setEntry] = useState('');
  const [name, setName] = useState('');
  const [vals, setVals] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  if (!open) return <button type="button" onClick={() => setOpen(true)} data-testid="mcp-start-open">Start a server…</button>;
  const entries = Array.isArray(catalog.data?.data) ? catalog.data!.data : [];
  const e = entries.find((x) => x.id === entry);
  const settings = e && Array.isArray(e.settings) ? e.settings : [];
  const submit = async (ev: Event) => {
    ev.preventDefault();
    if (!e) return;
    const server: Record<string, unknown> = { id: e.id };
    if (name.trim()) server.name = name.trim();
    const secrets: Record<string, string> = {}, env: Record<string, string> = {};
    for (const st of settings) {
      const v = (vals[st.env] ?? '').trim();
      if (!v) continue;
      if (st.secret) secrets[st.env] = v;
      else env[st.env] = v;
    }
    if (Object.keys(secrets).length) server.secrets = secrets;
    if (Object.keys(env).length) server.env = env;
    setBusy(true);
    setError(null);
    try {
      await api('POST', `/v1/sandboxes/${seg(id)}/mcp`, { servers: [server] });
      const s = await api<Sandbox>('GET', '/v1/sandboxes/' + seg(id));
      live.upsert(s);
      setOpen(false);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="subform" onSubmit={submit} data-testid="mcp-start-form">
      <h3>Start a server from the catalog</h3>
      <ErrorBox error={catalog.error} />
      <label>
        Server{' '}
        <select value={entry} onChange={(ev) => setEntry((ev.target as HTMLSelectElement).value)} data-testid="mcp-start-entry" required>
          <option value="">choose…</option>
          {entries.map((x) => <option value={str(x.id, 100)} key={str(x.id)}>{str(x.id, 100)} — {str(x.package, 100)} {str(x.version, 40)}</option>)}
        </select>
      </label>
      {e && (
        <>
          <p class="small muted"><Txt v={e.description} max={1000} /> · <a href={href.catalogReview(e.id)}>review its tools</a></p>
          <label>Name <input value={name} placeholder={str(e.id, 64)} onInput={(ev) => setName((ev.target as HTMLInputElement).value)} pattern="[a-z0-9][a-z0-9_\-]{0,62}" /></label>
          {settings.map((st) => (
            <label key={st.env}>
              <span class="mono">{str(st.env, 128)}</span>{st.required ? ' (required)' : ''} {st.secret ? '— name of a secret' : '— value'}
              <input value={vals[st.env] ?? ''} onInput={(ev) => setVals({ ...vals, [st.env]: (ev.target as HTMLInputElement).value })} data-testid={'mcp-setting-' + str(st.env, 128)} />
              {st.description && <span class="small muted"><Txt v={st.description} max={500} /></span>}
            </label>
          ))}
        </>
      )}
      <div class="actions">
        <button type="submit" class="primary" disabled={busy || !e} data-testid="mcp-start-submit">Start</button>
        <button type="button" onClick={() => setOpen(false)}>Cancel</button>
      </div>
      <ErrorBox error={error} />
    </form>
  );
}

/* ---- network ---- */

function NetworkSection({ id }: { id: string }) {
  const net = useLoad((signal) => api<NetworkPolicy>('GET', `/v1/sandboxes/${seg(id)}/network`, undefined, { signal }), [id]);
  const [edit, setEdit] = useState<{ internet: boolean; anyHost: boolean; allow: string; deny: string; connect: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const n = net.data;
  const startEdit = () => {
    if (!n) return;
    setSaved(false);
    setEdit({
      internet: n.internet !== false,
      anyHost: !Array.isArray(n.allow),
      allow: (Array.isArray(n.allow) ? n.allow : []).join('\n'),
      deny: (Array.isArray(n.deny) ? n.deny : []).join('\n'),
      connect: (Array.isArray(n.connect) ? n.connect : []).join('\n'),
    });
  };
  const save = async (ev: Event) => {
    ev.preventDefault();
    if (!edit) return;
    setError(null);
    const body = {
      internet: edit.internet,
      allow: edit.anyHost ? null : lines(edit.allow),
      deny: lines(edit.deny),
      connect: lines(edit.connect),
    };
    try {
      const r = await api<NetworkPolicy>('PUT', `/v1/sandboxes/${seg(id)}/network`, body);
      net.set(r);
      setEdit(null);
      setSaved(true);
    } catch (e) {
      setError(e);
    }
  };
  const list = (l: unknown) => (Array.isArray(l) && l.length ? l.slice(0, 200).map((h, i) => <code key={i} class="chip"><Txt v={h} max={300} /></code>) : null);
  return (
    <div class="panel" data-testid="network">
      <div class="row">
        <h2>Network</h2>
        {n && !edit && <button type="button" class="small" onClick={startEdit} data-testid="network-edit">Edit</button>}
        {saved && <span class="ok-text small" data-testid="network-saved">Saved; in force now.</span>}
      </div>
      <ErrorBox error={net.error} />
      {n && !edit && (
        <dl class="facts">
          <dt>internet</dt><dd data-testid="network-internet">{n.internet ? 'on' : 'off'}</dd>
          <dt>allow</dt><dd>{Array.isArray(n.allow) ? list(n.allow) ?? <span class="muted">no host (but its catalog servers')</span> : <span class="muted">any public host</span>}</dd>
          <dt>deny</dt><dd>{list(n.deny) ?? <span class="muted">none</span>}</dd>
          <dt>connect</dt><dd>{list(n.connect) ?? <span class="muted">none</span>}</dd>
        </dl>
      )}
      {edit && (
        <form onSubmit={save} class="subform" data-testid="network-form">
          <label class="check"><input type="checkbox" checked={edit.internet} onChange={(e) => setEdit({ ...edit, internet: (e.target as HTMLInputElement).checked })} data-testid="network-internet-input" /> Internet access</label>
          <fieldset>
            <legend>Allowed hosts</legend>
            <label class="check"><input type="radio" name="allowmode" checked={edit.anyHost} onChange={() => setEdit({ ...edit, anyHost: true })} /> any public host</label>
            <label class="check"><input type="radio" name="allowmode" checked={!edit.anyHost} onChange={() => setEdit({ ...edit, anyHost: false })} data-testid="network-allow-list" /> only these (one a line; none: only its catalog servers' hosts)</label>
            {!edit.anyHost && <textarea rows={4} value={edit.allow} onInput={(e) => setEdit({ ...edit, allow: (e.target as HTMLTextAreaElement).value })} data-testid="network-allow" aria-label="allowed hosts" placeholder="api.github.com&#10;*.example.com&#10;203.0.113.0/24" />}
          </fieldset>
          <label>Denied hosts (names, *.suffix, addresses, CIDR ranges, optional :port), one a line
            <textarea rows={3} value={edit.deny} onInput={(e) => setEdit({ ...edit, deny: (e.target as HTMLTextAreaElement).value })} data-testid="network-deny" />
          </label>
          <label>host:port pairs reached beyond the allow list, one a line
            <textarea rows={2} value={edit.connect} onInput={(e) => setEdit({ ...edit, connect: (e.target as HTMLTextAreaElement).value })} data-testid="network-connect" />
          </label>
          <div class="actions">
            <button type="submit" class="primary" data-testid="network-save">Apply now</button>
            <button type="button" onClick={() => setEdit(null)}>Cancel</button>
          </div>
          <ErrorBox error={error} />
        </form>
      )}
    </div>
  );
}

/* ---- events ---- */

const KEEP = 500;
const PAGE = 1000;
const REFUSALS = new Set(['egress.refused', 'secret.misdirected', 'mcp.refused', 'limit.reached', 'secret.reflected']);
const BAD = new Set(['mcp.exited', 'mcp.failed', 'sandbox.stopped', 'sandbox.exited', 'egress.truncated', 'mcp.template_failed', 'events.dropped']);

/** The fields of an event but seq, time and kind, as "k=v" pieces. */
function fieldsOf(e: SandboxEvent): [string, string][] {
  const src = e.fields && typeof e.fields === 'object' && !Array.isArray(e.fields) ? { ...(e.fields as object), ...e } : e;
  return Object.entries(src)
    .filter(([k]) => k !== 'seq' && k !== 'time' && k !== 'kind' && k !== 'fields' && k !== 'sandboxId')
    .slice(0, 24)
    .map(([k, v]) => [k, str(v, 1000)]);
}

export function EventsSection({ id, server }: { id: string; server?: string }) {
  const [events, setEvents] = useState<SandboxEvent[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [onlyRefusals, setOnlyRefusals] = useState(false);
  const last = useRef(0);
  useEffect(() => {
    let stop = false;
    let timer: ReturnType<typeof setTimeout> | null = null;
    last.current = 0;
    setEvents([]);
    const add = (list: SandboxEvent[]) => {
      const fresh = list.filter((e) => typeof e?.seq === 'number' && typeof e.kind === 'string' && e.seq > last.current);
      if (!fresh.length) return;
      last.current = fresh[fresh.length - 1].seq;
      setEvents((prev) => [...prev, ...fresh].slice(-KEEP));
    };
    const poll = async () => {
      try {
        for (let i = 0; i < 20 && !stop; i++) {
          const page = await api<SandboxEvent[]>('GET', `/v1/sandboxes/${seg(id)}/events?after=${last.current}`);
          if (stop) return;
          if (!Array.isArray(page)) break;
          add(page);
          if (page.length < PAGE) break;
        }
        setError(null);
      } catch (e) {
        if (!stop) setError(e);
      }
    };
    const tick = async () => {
      if (stop) return;
      if (live.mode !== 'stream' && !document.hidden) await poll();
      if (!stop) timer = setTimeout(tick, 1500);
    };
    poll().then(() => !stop && (timer = setTimeout(tick, 1500)));
    /* The stream says an event came; the events themselves, numbered, come from the API
     * (one read at a time: a burst of notices while one runs asks once more after it). */
    let reading: Promise<void> | null = null, again = false;
    const read = () => {
      if (reading) {
        again = true;
        return;
      }
      reading = poll().finally(() => {
        reading = null;
        if (again && !stop) {
          again = false;
          read();
        }
      });
    };
    const off = live.onEvent((e: LiveEvent) => {
      if (e.sandboxId === id) read();
    });
    return () => {
      stop = true;
      off();
      if (timer) clearTimeout(timer);
    };
  }, [id]);
  let shown = events;
  if (server) shown = shown.filter((e) => e.server === server || (e.fields as { server?: unknown } | undefined)?.server === server);
  if (onlyRefusals) shown = shown.filter((e) => REFUSALS.has(e.kind));
  return (
    <div class="panel">
      <div class="row">
        <h2>Events</h2>
        <label class="check small"><input type="checkbox" checked={onlyRefusals} onChange={(e) => setOnlyRefusals((e.target as HTMLInputElement).checked)} data-testid="events-refusals" /> refusals only</label>
        <span class="muted small">{live.mode === 'stream' ? 'live' : 'every 1.5 s'}</span>
      </div>
      <ErrorBox error={error} />
      {shown.length === 0 && <p class="muted">No events{onlyRefusals ? ' of that kind' : ''}.</p>}
      <ol class="events" data-testid="events">
        {shown
          .slice()
          .reverse()
          .map((e) => {
            const cls = REFUSALS.has(e.kind) ? 'ev refusal' : BAD.has(e.kind) ? 'ev bad' : 'ev';
            const srv = str(e.server, 200);
            return (
              <li class={cls} key={e.seq} data-testid="event" data-kind={str(e.kind, 64)} data-seq={e.seq}>
                <span class="ev-time"><When t={e.time} /></span>
                <span class="ev-kind">{str(e.kind, 64)}</span>
                <span class="ev-fields">
                  {fieldsOf(e).map(([k, v]) => (
                    <span class="field" key={k}><span class="fk">{k.slice(0, 64)}</span>=<Txt v={v} /></span>
                  ))}
                  {e.kind === 'mcp.refused' && srv && (e.fingerprint || e.error) && (
                    <a class="review-link" href={href.review(id, srv)} data-testid="event-review-link">Review</a>
                  )}
                </span>
              </li>
            );
          })}
      </ol>
    </div>
  );
}

