/* #/sandboxes/<id>/mcp/<name>: one MCP server: how to connect Claude Code to it, its tools
 * with every description and parameter, its logs, its events. */
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, seg } from '../api';
import { live } from '../live';
import { href } from '../lib/route';
import { claudeLine, str, tail } from '../lib/text';
import { params, type Tool } from '../lib/tooldiff';
import type { McpStatus, ReviewAnswer, Sandbox } from '../types';
import { ConfirmButton, CopyBox, ErrorBox, Txt, useLoad, When } from '../ui';
import { EventsSection, ServerCard } from './sandbox';
import { useLive } from './sandboxes';

const LOG_LINES = 300;

export function McpPage({ id, name }: { id: string; name: string }) {
  const sandboxes = useLive();
  const sb = sandboxes.get(id);
  const status = useLoad((signal) => api<McpStatus>('GET', `/v1/sandboxes/${seg(id)}/mcp`, undefined, { signal }), [id, name, sb?.mcp?.servers?.find((m) => m.name === name)?.phase]);
  const [error, setError] = useState<unknown>(null);
  const servers = Array.isArray(status.data?.servers) ? status.data!.servers : Array.isArray(sb?.mcp?.servers) ? sb!.mcp!.servers : [];
  const m = servers.find((x) => x.name === name);
  const stop = async () => {
    setError(null);
    try {
      await api('DELETE', `/v1/sandboxes/${seg(id)}/mcp/${seg(name)}`);
      live.upsert(await api<Sandbox>('GET', '/v1/sandboxes/' + seg(id)));
      status.reload();
    } catch (e) {
      setError(e);
    }
  };
  return (
    <main>
      <p class="crumbs"><a href={href.sandboxes()}>Sandboxes</a> / <a href={href.sandbox(id)}><Txt v={sb?.name || id} max={120} /></a> /</p>
      <div class="row">
        <h1><Txt v={name} max={64} /></h1>
        {m && m.phase !== 'stopped' && <ConfirmButton label="Stop server" confirm="Stop this server? Its approval is kept." onConfirm={stop} testid="mcp-stop" />}
      </div>
      <ErrorBox error={status.error} />
      <ErrorBox error={error} />
      {m && <ServerCard sandboxId={id} m={m} />}
      {m && <Connect name={name} url={str(m.url, 2000)} auth={typeof status.data?.headers?.Authorization === 'string' ? status.data.headers.Authorization : null} ready={m.phase === 'ready'} />}
      {!m && !status.loading && <p class="muted">No server of that name in this sandbox.</p>}
      <div class="cols">
        <section>
          <ToolsSection id={id} name={name} names={m && Array.isArray(m.tools) ? m.tools : []} />
        </section>
        <section>
          <Calls id={id} name={name} />
          <Logs id={id} name={name} />
          <EventsSection id={id} server={name} />
        </section>
      </div>
    </main>
  );
}

function Connect({ name, url, auth, ready }: { name: string; url: string; auth: string | null; ready: boolean }) {
  const [reveal, setReveal] = useState(false);
  const line = claudeLine(name, url, auth ?? 'Bearer <token>');
  const masked = auth ? claudeLine(name, url, auth.replace(/^(Bearer [0-9a-f]{4})[0-9a-f]+$/, '$1…')) : line;
  return (
    <div class="panel" data-testid="connect-line">
      <h2>Add it to Claude Code</h2>
      {!ready && <p class="warn-text small">It is not ready: a client added now gets no answer until it is.</p>}
      <CopyBox text={line} testid="claude-line" shown={reveal ? undefined : masked} />
      {auth ? (
        <label class="check small"><input type="checkbox" checked={reveal} onChange={(e) => setReveal((e.target as HTMLInputElement).checked)} data-testid="reveal-token" /> show the token (the copy holds it either way)</label>
      ) : (
        <p class="small muted">The gateway token was not in the answer; put the sandbox's token in place of &lt;token&gt; (<code>runtime sandbox mcp ID</code> prints it).</p>
      )}
    </div>
  );
}

function ToolsSection({ id, name, names }: { id: string; name: string; names: string[] }) {
  const review = useLoad((signal) => api<ReviewAnswer>('GET', `/v1/sandboxes/${seg(id)}/mcp/${seg(name)}/review`, undefined, { signal }), [id, name, names.join('\n')]);
  const notYet = review.error instanceof ApiError && review.error.status === 404;
  const tools: Tool[] = Array.isArray(review.data?.current?.tools) ? (review.data!.current!.tools as Tool[]).filter((t) => t && typeof t.name === 'string') : [];
  return (
    <div class="panel" data-testid="tools">
      <div class="row">
        <h2>Tools</h2>
        {review.data && <a href={href.review(id, name)} class="small" data-testid="review-page-link">Review page</a>}
      </div>
      {notYet && (
        <>
          <p class="muted small">This daemon does not serve the tools' descriptions yet (no review route); their names:</p>
          <ul>{names.map((t, i) => <li key={i}><Txt v={t} max={128} /></li>)}</ul>
        </>
      )}
      {!notYet && <ErrorBox error={review.error} />}
      {tools.slice(0, 512).map((t) => <ToolView t={t} key={t.name} />)}
    </div>
  );
}

export function ToolView({ t }: { t: Tool }) {
  const ps = params(t);
  return (
    <details class="tool" data-testid="tool" data-name={str(t.name, 128)}>
      <summary><span class="mono strong"><Txt v={t.name} max={128} /></span>{t.title && <> — <Txt v={t.title} max={300} /></>}</summary>
      {t.description && <p class="desc"><Txt v={t.description} max={20000} /></p>}
      {ps.length > 0 && (
        <table class="params">
          <thead><tr><th>parameter</th><th>type</th><th>required</th><th>description</th></tr></thead>
          <tbody>
            {ps.map((p) => (
              <tr key={p.name}><td class="mono"><Txt v={p.name} max={128} /></td><td class="mono small"><Txt v={p.type} max={300} /></td><td>{p.required ? 'yes' : ''}</td><td><Txt v={p.description} max={5000} /></td></tr>
            ))}
          </tbody>
        </table>
      )}
    </details>
  );
}

function Logs({ id, name }: { id: string; name: string }) {
  const [text, setText] = useState<{ dropped: number; text: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [follow, setFollow] = useState(true);
  const load = async () => {
    try {
      const t = await api<string>('GET', `/v1/sandboxes/${seg(id)}/mcp/${seg(name)}/logs`, undefined, { text: true });
      setText(tail(typeof t === 'string' ? t : '', LOG_LINES));
      setError(null);
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    load();
    if (!follow) return;
    const t = setInterval(() => !document.hidden && load(), 3000);
    return () => clearInterval(t);
  }, [id, name, follow]);
  return (
    <div class="panel">
      <div class="row">
        <h2>Logs</h2>
        <label class="check small"><input type="checkbox" checked={follow} onChange={(e) => setFollow((e.target as HTMLInputElement).checked)} /> refresh every 3 s</label>
        <button type="button" class="small" onClick={load}>Refresh</button>
      </div>
      <ErrorBox error={error} />
      {text && text.dropped > 0 && <p class="muted small">{text.dropped} earlier lines not shown.</p>}
      <pre class="logs" data-testid="logs" tabIndex={0}><Txt v={text?.text ?? ''} max={200000} /></pre>
    </div>
  );
}

interface CallsAnswer {
  total: number;
  failed: number;
  recent: { tool: string; at: string; ms: number; outcome: string; error?: string }[];
}

const CALLS_EVERY_MS = 3000;

/* The latest tools/calls through the gateway: which tool, when, how long, how it ended. */
function Calls({ id, name }: { id: string; name: string }) {
  const [calls, setCalls] = useState<CallsAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let stop = false;
    const load = () =>
      api<CallsAnswer>('GET', `/v1/sandboxes/${seg(id)}/mcp/${seg(name)}/calls`).then(
        (c) => {
          if (stop) return;
          setCalls(c && Array.isArray(c.recent) ? c : null);
          setError(null);
        },
        (e) => !stop && setError(e instanceof ApiError && e.status === 404 ? null : e),
      );
    load();
    const t = setInterval(() => !document.hidden && load(), CALLS_EVERY_MS);
    return () => {
      stop = true;
      clearInterval(t);
    };
  }, [id, name]);
  return (
    <div class="panel" data-testid="calls">
      <div class="row">
        <h2>Recent calls</h2>
        {calls && <span class="muted small" data-testid="calls-total">{str(calls.total)} calls, {str(calls.failed)} failed</span>}
      </div>
      <ErrorBox error={error} />
      {calls && calls.recent.length === 0 && <p class="muted">No call yet.</p>}
      {calls && calls.recent.length > 0 && (
        <table class="grid small">
          <thead><tr><th>Tool</th><th>When</th><th>ms</th><th>Outcome</th></tr></thead>
          <tbody>
            {calls.recent.map((c, i) => (
              <tr key={i} data-testid="call" data-outcome={str(c.outcome, 16)} class={c.outcome === 'ok' ? '' : 'bad-row'}>
                <td class="mono"><Txt v={c.tool} max={64} /></td>
                <td><When t={c.at} /></td>
                <td class="num">{str(c.ms)}</td>
                <td>{str(c.outcome, 16)}{c.error && <div class="muted"><Txt v={c.error} max={200} /></div>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
