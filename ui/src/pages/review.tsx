/* #/review/<sandbox>/<server> and #/catalog/<entry>/review: the approved tool list (left)
 * against the current one (right), matched by name; word diffs of the texts, each
 * parameter's change, the findings on the text they concern; then approve the current
 * fingerprint. */
import { useState } from 'preact/hooks';
import { api, ApiError, seg } from '../api';
import { live } from '../live';
import { href } from '../lib/route';
import { shortFingerprint, str } from '../lib/text';
import { isFingerprint, reviewTools, type Finding, type Part, type ParamChange, type Tool, type ToolChange } from '../lib/tooldiff';
import type { ReviewAnswer, Sandbox } from '../types';
import { ErrorBox, Status, Txt, useLoad, When } from '../ui';

export function ReviewPage({ kind, id, name }: { kind: 'sandbox' | 'catalog'; id: string; name: string }) {
  const path = kind === 'sandbox' ? `/v1/sandboxes/${seg(id)}/mcp/${seg(name)}/review` : `/v1/mcp/catalog/${seg(id)}/review`;
  const r = useLoad((signal) => api<ReviewAnswer>('GET', path, undefined, { signal }), [path]);
  const [showSame, setShowSame] = useState(false);
  const crumbs =
    kind === 'sandbox' ? (
      <p class="crumbs"><a href={href.sandboxes()}>Sandboxes</a> / <a href={href.sandbox(id)}><Txt v={id} max={64} /></a> / <a href={href.mcp(id, name)}><Txt v={name} max={64} /></a> /</p>
    ) : (
      <p class="crumbs"><a href={href.catalog()}>Catalog</a> /</p>
    );
  if (r.error instanceof ApiError && r.error.status === 404)
    return (
      <main>
        {crumbs}
        <h1>Review <Txt v={name} max={64} /></h1>
        <p class="muted" data-testid="review-unavailable">No review for this server: the daemon does not serve reviews yet, or there is no such {kind === 'sandbox' ? 'server' : 'catalog entry'}. ({r.error.message})</p>
      </main>
    );
  if (!r.data) return <main>{crumbs}{r.error ? <ErrorBox error={r.error} /> : <p>Loading…</p>}</main>;
  const d = r.data;
  const approved = d.approved && Array.isArray(d.approved.tools) ? (d.approved.tools as Tool[]) : null;
  const current = d.current && Array.isArray(d.current.tools) ? (d.current.tools as Tool[]) : [];
  const findings = Array.isArray(d.findings) ? (d.findings as Finding[]) : [];
  const rv = reviewTools(approved, current, findings);
  const shown = rv.tools.filter((t) => showSame || t.change !== 'unchanged');
  const same = rv.tools.length - shown.length;
  const curFp = d.current && isFingerprint(d.current.fingerprint) ? d.current.fingerprint : null;
  const unchangedApproved = d.approved && curFp && d.approved.fingerprint === curFp;
  return (
    <main class="review">
      {crumbs}
      <div class="row">
        <h1>Review <Txt v={d.name || name} max={64} /></h1>
        {d.status && <Status s={d.status} />}
      </div>
      <p class="summary" data-testid="review-summary">
        {approved === null ? (
          <>Never approved: {rv.tools.length} tools, shown as they are.</>
        ) : (
          <>
            <span class="badge b-new">{rv.counts.new} new</span> <span class="badge b-changed">{rv.counts.changed} changed</span>{' '}
            <span class="badge b-removed">{rv.counts.removed} removed</span> <span class="badge">{rv.counts.unchanged} unchanged</span>
          </>
        )}{' '}
        {findings.length > 0 && <span class="badge b-finding" data-testid="findings-count">{findings.length} finding{findings.length === 1 ? '' : 's'}</span>}
      </p>
      <p class="small mono muted">
        approved {d.approved ? str(d.approved.fingerprint, 64) : 'none'} → current {d.current ? str(d.current.fingerprint, 64) : 'none (it has not listed its tools)'}
      </p>
      {rv.unplaced.length > 0 && (
        <div class="panel">
          <h3>Findings on no current tool</h3>
          <Findings list={rv.unplaced} />
        </div>
      )}
      <div class={approved === null ? 'review-grid single' : 'review-grid'}>
        {approved !== null && <div class="review-head" data-testid="review-approved-head">Approved</div>}
        <div class="review-head" data-testid="review-current-head">Current</div>
        {shown.map((t) => <ToolRow t={t} single={approved === null} key={t.change + ':' + t.name} />)}
      </div>
      {same > 0 && (
        <button type="button" class="small" onClick={() => setShowSame(true)} data-testid="show-unchanged">Show {same} unchanged tool{same === 1 ? '' : 's'}</button>
      )}
      {showSame && rv.counts.unchanged > 0 && approved !== null && <button type="button" class="small" onClick={() => setShowSame(false)}>Hide unchanged tools</button>}
      {Array.isArray(d.approvals) && d.approvals.length > 0 && (
        <div class="panel">
          <h3>Earlier approvals</h3>
          <ul class="small">
            {d.approvals.slice(-20).map((a, i) => (
              <li key={i}><When t={a.at} /> by <Txt v={a.by} max={100} />: <span class="mono">{shortFingerprint(a.old) || 'none'} → {shortFingerprint(a.new)}</span></li>
            ))}
          </ul>
        </div>
      )}
      {kind === 'sandbox' && curFp && !unchangedApproved && <Approve id={id} name={name} fingerprint={curFp} findings={findings.length} />}
      {kind === 'sandbox' && unchangedApproved && <p class="ok-text" data-testid="already-approved">The current list is the approved one.</p>}
      {kind === 'catalog' && <p class="muted small">A catalog server is approved when it is first started with this list (or a fingerprint given at start).</p>}
    </main>
  );
}

function Approve({ id, name, fingerprint, findings }: { id: string; name: string; fingerprint: string; findings: number }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const approve = async () => {
    setBusy(true);
    setError(null);
    try {
      await api('POST', `/v1/sandboxes/${seg(id)}/mcp/${seg(name)}:approve`, { fingerprint });
      try {
        live.upsert(await api<Sandbox>('GET', '/v1/sandboxes/' + seg(id)));
      } catch {
        /* the server's page loads it anyway */
      }
      location.hash = href.mcp(id, name).replace(/^\/dashboard\//, '');
    } catch (e) {
      setError(e instanceof ApiError && e.status === 409 ? new ApiError(409, e.code, 'The server\'s tool list changed again since this page loaded: ' + e.message + ' Reload to review the new one.') : e);
      setAsking(false);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="approve-bar" data-testid="approve-bar">
      {!asking ? (
        <button type="button" class="primary" data-testid="approve-button" onClick={() => setAsking(true)}>
          Approve fingerprint {shortFingerprint(fingerprint)}
        </button>
      ) : (
        <span class="confirm">
          <span class="confirm-q">
            Approve {shortFingerprint(fingerprint)}{findings ? ` despite ${findings} finding${findings === 1 ? '' : 's'}` : ''}? Clients will see these tools.
          </span>
          <button type="button" class="primary" data-testid="approve-confirm" disabled={busy} onClick={approve}>Approve</button>
          <button type="button" data-testid="approve-cancel" onClick={() => setAsking(false)}>Cancel</button>
        </span>
      )}
      <ErrorBox error={error} />
    </div>
  );
}

function Diff({ parts }: { parts: Part[] }) {
  return (
    <>
      {parts.map((p, i) =>
        p.kind === 'same' ? <Txt v={p.text} key={i} /> : p.kind === 'added' ? <ins key={i}><Txt v={p.text} /></ins> : <del key={i}><Txt v={p.text} /></del>,
      )}
    </>
  );
}

/* One side of a diff: the old side shows same and removed parts, the new one same and added. */
function Side({ parts, side }: { parts: Part[]; side: 'old' | 'new' }) {
  return <Diff parts={parts.filter((p) => p.kind === 'same' || p.kind === (side === 'old' ? 'removed' : 'added'))} />;
}

function Findings({ list }: { list: Finding[] }) {
  if (!list.length) return null;
  return (
    <ul class="findings" data-testid="findings">
      {list.slice(0, 50).map((f, i) => (
        <li key={i} class="finding" data-testid="finding" data-rule={str(f.rule, 64)}>
          <span class="badge b-finding">{str(f.rule, 64)}</span> <Txt v={f.message} max={500} />
          {f.field && <span class="muted small"> in {str(f.field, 200)}</span>}
          {f.excerpt && <> : <q class="excerpt"><Txt v={f.excerpt} max={500} /></q></>}
        </li>
      ))}
    </ul>
  );
}

function Badge({ change }: { change: ToolChange['change'] | ParamChange['change'] }) {
  if (change === 'unchanged') return null;
  return <span class={'badge b-' + change} data-testid="tool-badge" data-change={change}>{change}</span>;
}

function ToolRow({ t, single }: { t: ToolChange; single: boolean }) {
  const descFindings = t.findings.filter((f) => f.field === 'description' || f.field === 'title');
  const otherFindings = t.findings.filter((f) => f.field !== 'description' && f.field !== 'title');
  const cell = (side: 'old' | 'new') => {
    const tool = side === 'old' ? t.old : t.now;
    if (!tool) return <div class="review-cell empty" data-testid={side === 'old' ? 'review-approved' : 'review-current'} data-name={t.name}>{side === 'old' ? '(not in the approved list)' : '(removed)'}</div>;
    const desc = typeof tool.description === 'string' ? tool.description : '';
    const title = typeof tool.title === 'string' ? tool.title : '';
    return (
      <div class={'review-cell change-' + t.change} data-testid={side === 'old' ? 'review-approved' : 'review-current'} data-name={t.name}>
        <div class="tool-name">
          <span class="mono strong"><Txt v={t.name} max={128} /></span> <Badge change={t.change} />
          {title && <> — {t.title ? <Side parts={t.title} side={side} /> : <Txt v={title} max={300} />}</>}
        </div>
        <p class={'desc' + (side === 'new' && descFindings.length ? ' flagged' : '')}>{t.description ? <Side parts={t.description} side={side} /> : <Txt v={desc} max={20000} />}</p>
        {side === 'new' && <Findings list={descFindings} />}
        <Params list={t.params} side={side} single={single} />
        {side === 'new' && <Findings list={otherFindings} />}
        {t.otherChanged.length > 0 && <p class="small warn-text">also changed: {t.otherChanged.join(', ')} (compare the JSON below)</p>}
        {t.otherChanged.length > 0 && (
          <details class="small"><summary>JSON</summary><pre class="json"><Txt v={JSON.stringify({ inputSchema: tool.inputSchema, outputSchema: tool.outputSchema, annotations: tool.annotations }, null, 2)} max={50000} /></pre></details>
        )}
      </div>
    );
  };
  return (
    <>
      {!single && cell('old')}
      {cell('new')}
    </>
  );
}

function Params({ list, side, single }: { list: ParamChange[]; side: 'old' | 'new'; single: boolean }) {
  const rows = list.filter((p) => (side === 'old' ? p.old : p.now) || (!single && p.change !== 'unchanged'));
  if (!rows.length) return null;
  return (
    <table class="params">
      <thead><tr><th>parameter</th><th>type</th><th>req.</th><th>description</th></tr></thead>
      <tbody>
        {rows.map((p) => {
          const v = side === 'old' ? p.old : p.now;
          if (!v)
            return (
              <tr key={p.name} class="absent"><td class="mono"><Txt v={p.name} max={128} /></td><td colSpan={3} class="muted small">{side === 'old' ? 'not in the approved list' : 'removed'}</td></tr>
            );
          return (
            <tr key={p.name} class={'p-' + p.change} data-testid="param" data-name={p.name} data-change={p.change}>
              <td class="mono"><Txt v={p.name} max={128} /> {side === 'new' && <Badge change={p.change === 'changed' ? 'changed' : p.change} />}{side === 'old' && p.change === 'removed' && <Badge change="removed" />}</td>
              <td class={'mono small' + (p.typeChanged ? ' changed' : '')}><Txt v={v.type} max={300} /></td>
              <td class={p.requiredChanged ? 'changed' : ''}>{v.required ? 'yes' : 'no'}</td>
              <td class={side === 'new' && p.findings.length ? 'flagged' : ''}>
                {p.description ? <Side parts={p.description} side={side} /> : <Txt v={v.description} max={5000} />}
                {side === 'new' && <Findings list={p.findings} />}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
