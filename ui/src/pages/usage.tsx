/* #/usage: totals and cost (GET /v1/usage), a day of per-minute series of one sandbox or
 * account drawn with uPlot (GET /v1/usage/series), and the --estimate calculator. */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api, ApiError } from '../api';
import { DEFAULT_FLEET, DEFAULT_RATES, dollars, estimate, parseFigure, type Rates } from '../lib/estimate';
import { str } from '../lib/text';
import type { Session, Usage, UsageSeries } from '../types';
import { ErrorBox, num, Status, Txt, useLoad } from '../ui';

export function UsagePage({ session }: { session: Session }) {
  const usage = useLoad((signal) => api<Usage>('GET', '/v1/usage', undefined, { signal }), []);
  const u = usage.data;
  const rows = Array.isArray(u?.sandboxes) ? u!.sandboxes : [];
  const [pick, setPick] = useState('');
  const rates: Rates = u?.rates && typeof u.rates.vcpuHour === 'number' ? u.rates : DEFAULT_RATES;
  return (
    <main>
      <h1>Usage</h1>
      <ErrorBox error={usage.error} />
      {u && (
        <div class="totals" data-testid="usage-totals">
          <div class="kpi"><span class="kpi-v" data-testid="usage-cost">{dollars(u.total?.cost?.total, typeof u.total?.cost?.total === 'number' && u.total.cost.total < 1 ? 4 : 2)}</span><span class="kpi-l">cost so far</span></div>
          <div class="kpi"><span class="kpi-v">{num(u.total?.vcpuHours, 3)}</span><span class="kpi-l">vCPU-hours</span></div>
          <div class="kpi"><span class="kpi-v">{num(u.total?.memoryGiBHours, 3)}</span><span class="kpi-l">GiB-hours</span></div>
          <div class="kpi"><span class="kpi-v">{num(u.total?.pausedGBHours, 3)}</span><span class="kpi-l">paused GB-hours</span></div>
          <div class="kpi small muted">rates: ${str(rates.vcpuHour)} / vCPU-h, ${str(rates.gibHour)} / GiB-h, ${str(rates.gbMonth)} / GB-month paused</div>
        </div>
      )}
      <Series rows={rows} session={session} pick={pick} setPick={setPick} accounts={Array.isArray(u?.accounts) ? u!.accounts.map((a) => str(a.account, 64)) : []} />
      {session.admin && Array.isArray(u?.accounts) && u!.accounts.length > 0 && (
        <>
          <h2>Accounts</h2>
          <table class="grid small">
            <thead><tr><th>Account</th><th>vCPU-h</th><th>GiB-h</th><th>paused GB-h</th><th>cost</th></tr></thead>
            <tbody>
              {u!.accounts.map((a) => (
                <tr key={str(a.account)}><td class="mono"><Txt v={a.account} max={64} /></td><td class="num">{num(a.total?.vcpuHours, 4)}</td><td class="num">{num(a.total?.memoryGiBHours, 4)}</td><td class="num">{num(a.total?.pausedGBHours, 4)}</td><td class="num">{dollars(a.total?.cost?.total, 5)}</td></tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {rows.length > 0 && (
        <>
          <h2>Sandboxes</h2>
          <table class="grid small" data-testid="usage-rows">
            <thead><tr><th>Sandbox</th>{session.admin && <th>Account</th>}<th>Status</th><th>CPU s</th><th>vCPU-h</th><th>GiB-h</th><th>paused GB-h</th><th>cost</th><th /></tr></thead>
            <tbody>
              {rows.map((r) => (
                <tr key={str(r.sandbox)} data-testid="usage-row" data-id={str(r.sandbox, 64)}>
                  <td><Txt v={r.name || r.sandbox} max={120} /></td>
                  {session.admin && <td class="mono"><Txt v={r.account} max={64} /></td>}
                  <td><Status s={r.status} /></td>
                  <td class="num">{num(r.cpuSeconds, 3)}</td>
                  <td class="num">{num(r.vcpuHours, 6)}</td>
                  <td class="num">{num(r.memoryGiBHours, 6)}</td>
                  <td class="num">{num(r.pausedGBHours, 6)}</td>
                  <td class="num">{dollars(r.cost?.total, 5)}</td>
                  <td><button type="button" class="small" onClick={() => setPick('sandbox:' + r.sandbox)}>Chart</button></td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <Estimate rates={rates} />
    </main>
  );
}

function Series({ rows, session, pick, setPick, accounts }: { rows: Usage['sandboxes']; session: Session; pick: string; setPick: (s: string) => void; accounts: string[] }) {
  const choice = pick || (session.admin ? 'account:' + session.account : rows[0] ? 'sandbox:' + rows[0].sandbox : '');
  const query = choice.startsWith('sandbox:') ? 'sandbox=' + encodeURIComponent(choice.slice(8)) : choice.startsWith('account:') ? 'account=' + encodeURIComponent(choice.slice(8)) : '';
  const series = useLoad((signal) => (query ? api<UsageSeries>('GET', '/v1/usage/series?' + query, undefined, { signal }) : Promise.resolve(undefined)), [query]);
  const notYet = series.error instanceof ApiError && series.error.status === 404;
  return (
    <section class="panel">
      <div class="row">
        <h2>The last 24 hours</h2>
        <select value={choice} onChange={(e) => setPick((e.target as HTMLSelectElement).value)} data-testid="usage-series-pick" aria-label="what to chart">
          {session.admin && accounts.map((a) => <option value={'account:' + a} key={'a' + a}>account {a}</option>)}
          {rows.filter((r) => r.status !== 'removed').map((r) => <option value={'sandbox:' + str(r.sandbox, 64)} key={str(r.sandbox)}>sandbox {str(r.name || r.sandbox, 80)}</option>)}
        </select>
      </div>
      {notYet && <p class="muted" data-testid="usage-series-unavailable">This daemon does not serve usage series yet.</p>}
      {!notYet && <ErrorBox error={series.error} />}
      {series.data && Array.isArray(series.data.points) && <Charts s={series.data} />}
    </section>
  );
}

function cssVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

function Charts({ s }: { s: UsageSeries }) {
  const data = useMemo(() => {
    const pts = s.points.filter((p) => p && typeof p.t === 'string').slice(-2000);
    const xs: number[] = [], cpu: (number | null)[] = [], mem: (number | null)[] = [], paused: (number | null)[] = [], cost: (number | null)[] = [];
    const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
    for (const p of pts) {
      const t = Date.parse(p.t);
      if (!Number.isFinite(t)) continue;
      xs.push(t / 1000);
      cpu.push(n(p.vcpu));
      mem.push(n(p.memoryMiB));
      paused.push(n(p.pausedStorageMiB));
      cost.push(n(p.costUsd));
    }
    /* costUsd is what they cost so far: these minutes cost the last less the first */
    const known = cost.filter((c): c is number => c !== null);
    const sum = known.length ? known[known.length - 1] - known[0] : 0;
    return { xs, cpu, mem, paused, cost, sum };
  }, [s]);
  return (
    <>
      <p class="small">Cost over these {data.xs.length} minutes: <strong data-testid="series-cost">{dollars(data.sum, 4)}</strong></p>
      <div class="charts">
        <Chart title="vCPU in use" xs={data.xs} ys={data.cpu} color="--c-cpu" testid="chart-cpu" />
        <Chart title="Memory MiB" xs={data.xs} ys={data.mem} color="--c-mem" testid="chart-memory" />
        <Chart title="Paused storage MiB" xs={data.xs} ys={data.paused} color="--c-paused" testid="chart-paused" />
        <Chart title="Cost so far, $" xs={data.xs} ys={data.cost} color="--c-cost" testid="chart-cost" />
      </div>
    </>
  );
}

function Chart({ title, xs, ys, color, testid }: { title: string; xs: number[]; ys: (number | null)[]; color: string; testid: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const axis = { stroke: cssVar('--fg-muted', '#666'), grid: { stroke: cssVar('--grid', '#eee'), width: 1 }, ticks: { stroke: cssVar('--grid', '#eee') } };
    const opts: uPlot.Options = {
      width: Math.max(280, el.clientWidth || 400),
      height: 180,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [axis, { ...axis, size: 60 }],
      series: [{}, { label: title, stroke: cssVar(color, '#2a7'), width: 1.5, fill: cssVar(color, '#2a7') + '22' }],
    };
    const plot = new uPlot(opts, [xs, ys], el);
    const ro = typeof ResizeObserver !== 'undefined' ? new ResizeObserver(() => plot.setSize({ width: Math.max(280, el.clientWidth), height: 180 })) : null;
    ro?.observe(el);
    return () => {
      ro?.disconnect();
      plot.destroy();
    };
  }, [xs, ys]);
  return (
    <figure class="chart" data-testid="usage-chart" data-chart={testid}>
      <figcaption>{title}</figcaption>
      <div ref={box} class="chart-box" data-testid={testid} />
    </figure>
  );
}

const FIELDS: [keyof typeof DEFAULT_FLEET, string, string][] = [
  ['count', 'Sandboxes', 'how many'],
  ['vcpu', 'vCPUs each', 'its CPU limit'],
  ['gib', 'Memory GiB each', 'its memory limit'],
  ['busyHoursPerDay', 'Hours running a day', 'at most 24; paused the rest'],
  ['avgCpu', 'Average vCPU used running', 'billed at least 0.05'],
  ['storedGB', 'GB stored while paused', 'its /workspace'],
];

function Estimate({ rates }: { rates: Rates }) {
  const [f, setF] = useState<Record<string, string>>(() => Object.fromEntries(FIELDS.map(([k]) => [k, String(DEFAULT_FLEET[k])])));
  const [p, setP] = useState<Record<string, string> | null>(null);
  const prices = p ?? { vcpuHour: String(rates.vcpuHour), gibHour: String(rates.gibHour), gbMonth: String(rates.gbMonth) };
  const fleet = Object.fromEntries(FIELDS.map(([k]) => [k, parseFigure(f[k])])) as unknown as typeof DEFAULT_FLEET;
  const r = { vcpuHour: parseFigure(prices.vcpuHour), gibHour: parseFigure(prices.gibHour), gbMonth: parseFigure(prices.gbMonth) };
  const badPrice = Object.values(r).some((x) => !Number.isFinite(x) || x < 0 || x > 1e6);
  const res = badPrice ? ({ ok: false, error: 'a price must be a number of dollars >= 0' } as const) : estimate(fleet, r);
  return (
    <section class="panel" data-testid="estimate">
      <h2>Estimate a month</h2>
      <p class="small muted">As <code>runtime usage --estimate</code>: a month of 30 days; while running, the CPU used (at least 0.05 vCPU) and the memory limit; while paused, the GB stored.</p>
      <div class="estimate-grid">
        {FIELDS.map(([k, label, hint]) => (
          <label key={k}>{label}<input inputMode="decimal" value={f[k]} onInput={(e) => setF({ ...f, [k]: (e.target as HTMLInputElement).value })} data-testid={'estimate-' + k} /><span class="small muted">{hint}</span></label>
        ))}
        {(['vcpuHour', 'gibHour', 'gbMonth'] as const).map((k) => (
          <label key={k}>{k === 'vcpuHour' ? '$ per vCPU-hour' : k === 'gibHour' ? '$ per GiB-hour' : '$ per GB-month paused'}<input inputMode="decimal" value={prices[k]} onInput={(e) => setP({ ...prices, [k]: (e.target as HTMLInputElement).value })} data-testid={'estimate-' + k} /></label>
        ))}
      </div>
      {res.ok ? (
        <table class="estimate-out" data-testid="estimate-result">
          <tbody>
            <tr><th>CPU</th><td class="num" data-testid="estimate-cpu">{dollars(res.month.cpu, 2)}</td><td class="muted small">{Number(res.month.vcpuHours.toPrecision(6))} vCPU-hours billed</td></tr>
            <tr><th>memory</th><td class="num" data-testid="estimate-memory">{dollars(res.month.memory, 2)}</td><td /></tr>
            <tr><th>paused storage</th><td class="num" data-testid="estimate-paused">{dollars(res.month.paused, 2)}</td><td /></tr>
            <tr class="total"><th>total</th><td class="num" data-testid="estimate-total">{dollars(res.month.total, 2)}</td><td class="muted small">a month</td></tr>
            <tr><th>one running</th><td class="num" data-testid="estimate-hourly">{dollars(res.hourly, 5)}</td><td class="muted small">an hour</td></tr>
          </tbody>
        </table>
      ) : (
        <p class="error" data-testid="estimate-error">{res.error}</p>
      )}
    </section>
  );
}
