// The dashboard in a real browser (Debian's Chromium, driven by playwright-core) against
// the real daemon: what a person does there, end to end. Every page load is watched: a
// Content-Security-Policy report, a script error or an alert (an XSS that got through)
// fails the test it happens in.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';

import { chromium } from 'playwright-core';

import { RUNTIME, run, stopDaemon, waitFor } from '../e2e/lib.mjs';
import {
  FIXTURES, closeClient, connectClient, fingerprint, npmRegistry, registryEnv, skipReason, startMcpDaemon, vectors,
} from '../mcp/lib.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/lib/chromium/chromium';
const PY = '/opt/runtime-test/venv-cloud/bin/python';
const skip = skipReason({ online: true }) ||
  (!fs.existsSync(CHROMIUM) && !process.env.RUNTIME_REQUIRE_ALL && `no Chromium at ${CHROMIUM}`);

let d, browser, acmeKey;
const temps = [];

before(async () => {
  if (skip) return;
  d = await startMcpDaemon({ online: true, prefix: 'runtime-dash-browser-' });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  const made = await d.api('POST', '/v1/accounts', { name: 'acme' });
  assert.equal(made.status, 201, made.text);
  acmeKey = made.body.apiKey;
});
after(async () => {
  await browser?.close();
  await stopDaemon(d);
  for (const t of temps) fs.rmSync(t, { recursive: true, force: true });
});

/** A page in a context of its own, every CSP report, script error and dialog kept. */
async function openPage({ permissions = [] } = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  if (permissions.length) await context.grantPermissions(permissions, { origin: d.url });
  const page = await context.newPage();
  page.problems = [];
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to (load|execute|apply)/i.test(m.text())) page.problems.push(`CSP: ${m.text()}`);
  });
  page.on('pageerror', (e) => page.problems.push(`script error: ${e.message}`));
  page.on('dialog', async (dlg) => {
    page.problems.push(`dialog: ${dlg.message()}`);
    await dlg.dismiss();
  });
  return page;
}

function assertClean(page) {
  assert.deepEqual(page.problems, [], 'no CSP report, script error or dialog on the page');
}

async function signIn(page, key) {
  await page.goto(`${d.url}/dashboard/`);
  await page.getByTestId('login-input').fill(key);
  await page.getByTestId('login-button').click();
  await page.getByTestId('logout').waitFor();
}

const row = (page, id) => page.locator(`[data-testid="sandbox-row"][data-id="${id}"]`);
const card = (page, name) => page.locator(`[data-testid="mcp-card"][data-name="${name}"]`);

test('sign in: a wrong key is refused, the right one signs in, and the key is nowhere the page keeps', { skip }, async () => {
  const page = await openPage();
  await page.goto(`${d.url}/dashboard/`);
  await page.getByTestId('login-input').fill('rtk_' + '0'.repeat(64));
  await page.getByTestId('login-button').click();
  await page.getByTestId('login-error').waitFor();
  await signIn(page, d.key);
  assert.match(await page.getByTestId('account').textContent(), /^default/);
  const kept = await page.evaluate(() => ({
    url: location.href, cookie: document.cookie,
    storage: JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }),
  }));
  for (const [where, v] of Object.entries(kept)) assert.ok(!v.includes(d.key), `the key is in ${where}`);
  assert.equal(kept.cookie, '', 'the session cookie is HttpOnly: no script reads it');
  // A reload keeps the session; sign-out ends it.
  await page.reload();
  await page.getByTestId('logout').waitFor();
  await page.getByTestId('logout').click();
  await page.getByTestId('login-form').waitFor();
  await page.reload();
  await page.getByTestId('login-form').waitFor();
  assertClean(page);
  await page.context().close();
});

test('a sandbox created through the API appears without a reload; its hostile label is shown as text', { skip }, async () => {
  const page = await openPage();
  await signIn(page, d.key);
  await page.getByTestId('live-mode').filter({ hasText: 'live' }).waitFor();
  const hostile = '<img src=x onerror=alert(document.domain)>';
  const box = await d.create({ name: 'appears-live', labels: { team: hostile } });
  await row(page, box.id).waitFor({ timeout: 10000 });
  assert.match(await row(page, box.id).textContent(), /<img src=x onerror=alert\(document\.domain\)>/);
  assert.equal(await page.locator('[data-testid="sandbox-row"] img').count(), 0, 'no element was made from the label');
  // It stops through the API: the row follows, still with no reload.
  assert.equal((await d.api('POST', `/v1/sandboxes/${box.id}:stop`)).status, 200);
  await page.locator(`[data-testid="sandbox-row"][data-id="${box.id}"][data-status="stopped"]`).waitFor();
  assertClean(page);
  await page.context().close();
});

test('a refusal event arrives live on the sandbox\'s page', { skip }, async () => {
  const box = await d.create({ name: 'refusals', network: { internet: false } });
  const page = await openPage();
  await signIn(page, d.key);
  await page.goto(`${d.url}/dashboard/#/sandboxes/${box.id}`);
  await page.getByTestId('events').waitFor({ state: 'attached' });
  // A request to an address while its internet is off (203.0.113.0/24: documentation
  // space; refused by the proxy, nothing leaves the host).
  await d.exec(box.id, ['python3', '-c',
    'import urllib.request\ntry:\n  urllib.request.urlopen("http://203.0.113.9/", timeout=5)\nexcept Exception as e:\n  print(e)']);
  const ev = page.locator('[data-testid="event"][data-kind="egress.refused"]');
  await ev.first().waitFor({ timeout: 15000 });
  assert.match(await ev.first().textContent(), /203\.0\.113\.9/);
  assertClean(page);
  await page.context().close();
});

test('network rules edited on the page are in force at once: a host left out is refused', { skip }, async () => {
  const box = await d.create({ name: 'narrowed' }); // internet on, any public host
  const page = await openPage();
  await signIn(page, d.key);
  await page.goto(`${d.url}/dashboard/#/sandboxes/${box.id}`);
  await page.getByTestId('network-edit').click();
  await page.getByTestId('network-allow-list').check();
  await page.getByTestId('network-allow').fill('api.example.test\n');
  await page.getByTestId('network-save').click();
  await page.getByTestId('network-saved').waitFor();
  const net = await d.api('GET', `/v1/sandboxes/${box.id}/network`);
  assert.deepEqual([net.body.internet, net.body.allow], [true, ['api.example.test']], net.text);
  // An address the list leaves out (documentation space): refused by the proxy, nothing
  // leaves the host, and the page shows it.
  await d.exec(box.id, ['python3', '-c',
    'import urllib.request\ntry:\n  urllib.request.urlopen("http://203.0.113.9/", timeout=5)\nexcept Exception as e:\n  print(e)']);
  await page.locator('[data-testid="event"][data-kind="egress.refused"]').first().waitFor({ timeout: 15000 });
  assertClean(page);
  await page.context().close();
});

test('start a catalog server from the page, copy its claude line, and that line connects', { skip, timeout: 420000 }, async () => {
  const { host } = npmRegistry();
  const box = await d.create({ name: 'catalog', network: { internet: true, allow: [host] }, env: registryEnv() });
  const page = await openPage({ permissions: ['clipboard-read', 'clipboard-write'] });
  await signIn(page, d.key);
  await page.goto(`${d.url}/dashboard/#/sandboxes/${box.id}`);
  await page.getByTestId('mcp-start-open').click();
  await page.getByTestId('mcp-start-entry').selectOption('memory');
  await page.getByTestId('mcp-start-submit').click();
  await card(page, 'memory').and(page.locator('[data-phase="ready"]')).waitFor({ timeout: 360000 });
  await page.goto(`${d.url}/dashboard/#/sandboxes/${box.id}/mcp/memory`);
  await page.getByTestId('tool').first().waitFor();
  await page.getByTestId('connect-line').getByTestId('copy-button').click();
  const line = await page.evaluate(() => navigator.clipboard.readText());
  const m = /^claude mcp add --transport http memory (\S+) --header "Authorization: Bearer ([^"]+)"$/.exec(line);
  assert.ok(m, `the copied line: ${line}`);
  const c = await connectClient(m[1], `Bearer ${m[2]}`);
  try {
    const names = (await c.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes('create_entities'), names.join(','));
  } finally {
    await closeClient(c);
  }
  assertClean(page);
  await page.context().close();
});

test('a server whose tools changed is refused, reviewed side by side with its findings, approved in the page, then serves', { skip, timeout: 120000 }, async () => {
  const box = await d.create({ name: 'rugpull' });
  await d.putFile(box.id, '/workspace/rugpull-server.mjs', fs.readFileSync(path.join(FIXTURES, 'rugpull-server.mjs')));
  const weather = JSON.parse(vectors()['weather-reviewed'].tools_json);
  const poisoned = JSON.parse(vectors()['weather-today'].tools_json);
  const approved = [weather[0], { name: 'get_time', description: 'Current time.', inputSchema: { type: 'object' } }];
  // The change: the poisoned description and parameter, and a new tool whose text is HTML.
  const changed = [poisoned[0], { name: 'html_tool', description: '<img src=x onerror="alert(1)"><script>alert(2)</script>',
    inputSchema: { type: 'object' } }];
  const server = { name: 'weather', command: ['node', '/workspace/rugpull-server.mjs', '/workspace/tools.json'] };
  await d.replaceFile(box.id, '/workspace/tools.json', JSON.stringify(approved));
  await d.mcpStart(box.id, [server]);
  assert.equal((await d.mcpSettle(box.id, ['weather'], { timeoutMs: 30000 })).servers.weather.status, 'ready');
  await d.mcpStop(box.id, 'weather');
  await d.replaceFile(box.id, '/workspace/tools.json', JSON.stringify(changed));
  await d.mcpStart(box.id, [server]);
  assert.equal((await d.mcpSettle(box.id, ['weather'], { timeoutMs: 30000 })).servers.weather.phase, 'refused');

  const page = await openPage();
  await signIn(page, d.key);
  await page.goto(`${d.url}/dashboard/#/sandboxes/${box.id}`);
  await card(page, 'weather').and(page.locator('[data-phase="refused"]')).waitFor();
  await card(page, 'weather').getByTestId('review-link').click();
  await page.getByTestId('review-approved-head').waitFor();
  await page.getByTestId('review-current-head').waitFor();
  const badges = await page.getByTestId('tool-badge').evaluateAll((els) => els.map((e) => e.dataset.change));
  for (const want of ['new', 'removed', 'changed']) assert.ok(badges.includes(want), `badges: ${badges}`);
  const rules = await page.getByTestId('finding').evaluateAll((els) => els.map((e) => e.dataset.rule));
  assert.ok(rules.includes('speaks-to-model') && rules.includes('names-secret-file'), `findings: ${rules}`);
  assert.match(await page.locator('[data-testid="review-current"][data-name="html_tool"]').textContent(), /<script>alert\(2\)<\/script>/);
  assert.equal(await page.locator('main img, main script').count(), 0, 'no element was made from a tool\'s text');
  await page.getByTestId('approve-button').click();
  await page.getByTestId('approve-confirm').click();
  await waitFor(async () => {
    const s = (await d.mcpStatus(box.id)).servers.find((x) => x.name === 'weather');
    return s.status === 'ready' && s.fingerprint === fingerprint(changed).short;
  }, { timeoutMs: 30000, what: 'the approved server to serve' });
  const rv = await d.api('GET', `/v1/sandboxes/${box.id}/mcp/weather/review`);
  const audit = rv.body.approvals.at(-1);
  assert.deepEqual([audit.by, audit.old, audit.new], ['admin (dashboard)', fingerprint(approved).sha256, fingerprint(changed).sha256]);
  // It serves: a call through the gateway shows on the server's page.
  const st = await d.mcpStatus(box.id);
  const c = await connectClient(st.servers.find((x) => x.name === 'weather').url, st.headers.Authorization);
  try {
    assert.ok(!(await c.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })).isError);
  } finally {
    await closeClient(c);
  }
  await page.goto(`${d.url}/dashboard/#/sandboxes/${box.id}/mcp/weather`);
  await page.locator('[data-testid="call"][data-outcome="ok"]').filter({ hasText: 'get_forecast' }).waitFor();
  assertClean(page);
  await page.context().close();
});

test('the usage charts draw from real metering', { skip }, async () => {
  const box = await d.create({ name: 'metered' });
  await d.exec(box.id, ['sh', '-c', 'end=$(($(date +%s)+1)); while [ $(date +%s) -lt $end ]; do :; done']);
  const page = await openPage();
  await signIn(page, d.key);
  await page.goto(`${d.url}/dashboard/#/usage`); // its GET /v1/usage counts every sandbox up to now
  await page.getByTestId('usage-totals').waitFor();
  const series = await d.api('GET', `/v1/usage/series?account=default`);
  assert.ok(series.body.points.some((p) => p.vcpu > 0 && p.memoryMiB > 0), JSON.stringify(series.body.points.slice(-3)));
  await page.reload();
  const cpu = page.locator('[data-testid="usage-chart"][data-chart="chart-cpu"] canvas');
  await cpu.first().waitFor();
  // uPlot draws on its canvas: something other than blank pixels.
  const inked = await cpu.first().evaluate((c) => {
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < px.length; i += 4) n += px[i] > 0;
    return n;
  });
  assert.ok(inked > 100, `pixels drawn on the CPU chart: ${inked}`);
  assert.match(await page.getByTestId('usage-cost').textContent(), /\$\d/);
  await page.getByTestId('estimate-total').waitFor();
  assertClean(page);
  await page.context().close();
});

test('an account signed in sees only its own sandboxes; the admin\'s is "not found"', { skip }, async () => {
  const admins = await d.create({ name: 'admins-only' });
  const r = await d.api('POST', '/v1/sandboxes', { name: 'acmes' }, { key: acmeKey });
  assert.equal(r.status, 201, r.text);
  const page = await openPage();
  await signIn(page, acmeKey);
  assert.match(await page.getByTestId('account').textContent(), /^acme/);
  await row(page, r.body.id).waitFor();
  assert.equal(await row(page, admins.id).count(), 0);
  assert.equal(await page.getByTestId('account-filter').count(), 0, 'no account filter for an account');
  await page.goto(`${d.url}/dashboard/#/sandboxes/${admins.id}`);
  await page.getByText(/not found|no sandbox/i).first().waitFor();
  assert.equal(await page.getByTestId('sandbox-actions').count(), 0);
  assertClean(page);
  await page.context().close();
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${r.body.id}`, undefined, { key: acmeKey })).status, 200);
});

test('a device login approved in the browser gives a key the CLI and the official Python SDK then use', { skip, timeout: 180000 }, async () => {
  const config = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-dash-login-'));
  temps.push(config);
  const env = { ...process.env, RUNTIME_API_URL: d.url, XDG_CONFIG_HOME: config };
  delete env.RUNTIME_API_KEY;
  delete env.RUNTIME_AUTH_URL;
  const child = spawn(RUNTIME, ['login', '--no-browser', '--agent-name', 'laptop'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stderr: '', exit: null };
  child.stderr.on('data', (b) => { out.stderr += b; });
  child.on('exit', (code) => { out.exit = { code }; });
  const link = await waitFor(() => /Connect your agent: (\S+)/.exec(out.stderr)?.[1], { what: `the link (stderr: ${out.stderr})` });
  const code = /code=([A-F0-9-]{14})$/.exec(link)[1];

  const page = await openPage();
  await page.goto(link); // signed out: the page asks for a key, then comes back to the code
  await page.getByTestId('login-input').fill(acmeKey);
  await page.getByTestId('login-button').click();
  await page.getByTestId('connect-request').waitFor();
  assert.equal(await page.getByTestId('connect-code').textContent(), code);
  assert.match(await page.getByTestId('connect-request').textContent(), /laptop/);
  await page.getByTestId('connect-approve').click();
  await page.locator('[data-testid="connect-result"][data-ok="true"]').waitFor();
  await waitFor(() => out.exit, { timeoutMs: 30000, what: 'runtime login to exit' });
  assert.equal(out.exit.code, 0, out.stderr);
  assert.match(out.stderr, /Connected as laptop to acme\./);

  const made = await run(RUNTIME, ['sandbox', 'create', '--name', 'from-login'], { env });
  assert.equal(made.code, 0, made.stderr);
  const id = made.stdout.trim();
  d.track(id);
  assert.equal((await d.api('GET', `/v1/sandboxes/${id}`, undefined, { key: acmeKey })).status, 200, 'acme\'s');
  const py = await run(PY, ['-c', 'import withruntime\nprint(",".join(s.id for s in withruntime.Runtime().sandboxes.list()))'],
    { env, timeoutMs: 120000 });
  assert.equal(py.code, 0, py.stderr);
  assert.ok(py.stdout.trim().split(',').includes(id), py.stdout);
  // The connection is listed on the page, and revoking it there ends the key.
  await page.goto(`${d.url}/dashboard/#/connections`);
  await page.getByTestId('connection-row').first().waitFor();
  assertClean(page);
  await page.context().close();
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${id}`, undefined, { key: acmeKey })).status, 200);
});
