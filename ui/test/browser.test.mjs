// The page in a real browser (Debian's Chromium through playwright-core) against the mock
// daemon of mock-server.mjs, under the strict CSP the daemon sends: sign-in, the live list
// (stream and polling), hostile text, the review and approval, the connect page, secrets and
// keys that are not kept. Skipped where there is no Chromium. The tests against the real
// daemon live with it (tests/e2e).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { startMock } from './mock-server.mjs';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/lib/chromium/chromium';
const skip = existsSync(CHROMIUM) ? false : 'no Chromium at ' + CHROMIUM;

let browser;
before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
});
after(async () => browser?.close());

async function open(mock, path = '/dashboard/') {
  const ctx = await browser.newContext({ viewport: { width: 1300, height: 900 } });
  const page = await ctx.newPage();
  const problems = [];
  page.on('console', (m) => {
    const t = m.text();
    if (/Content Security Policy|Refused to/i.test(t) || (m.type() === 'error' && !/status of 40[14]/.test(t))) problems.push(t);
  });
  page.on('pageerror', (e) => problems.push('pageerror: ' + e.message));
  page.on('dialog', (d) => {
    problems.push('dialog: ' + d.message());
    d.dismiss();
  });
  await page.goto(mock.url + path);
  return { ctx, page, problems };
}

async function signIn(page) {
  await page.getByTestId('login-input').fill('rtk_good');
  await page.getByTestId('login-button').click();
  await page.getByTestId('logout').waitFor();
}

async function noXss(page) {
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(await page.locator('#app img').count(), 0);
}

test('sign in, live list over the stream, hostile text stays text', { skip }, async () => {
  const mock = await startMock({ sse: true });
  const { ctx, page, problems } = await open(mock);
  try {
    await page.getByTestId('login-input').fill('wrong');
    await page.getByTestId('login-button').click();
    await page.getByTestId('login-error').waitFor();
    assert.match(await page.getByTestId('login-error').textContent(), /not valid/);
    assert.equal(await page.getByTestId('login-input').inputValue(), '');
    await signIn(page);
    assert.doesNotMatch(page.url(), /rtk_/);
    assert.equal(await page.evaluate(() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage)), '{}{}');
    await page.locator('[data-testid=sandbox-row]').first().waitFor();
    assert.equal(await page.locator('[data-testid=sandbox-row]').count(), 3);
    await page.waitForFunction(() => document.querySelector('[data-testid=live-mode]')?.textContent === 'live');
    // a change arrives by the stream, without a reload
    const s = mock.state.sandboxes.get('c1b2c3d4e5f60718');
    s.status = 'running';
    mock.broadcast('sandbox', s);
    await page.locator('[data-testid=sandbox-row][data-id=c1b2c3d4e5f60718][data-status=running]').waitFor({ timeout: 3000 });
    mock.broadcast('sandbox.deleted', { id: 'c1b2c3d4e5f60718' });
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=sandbox-row]').length === 2);
    // the label filter
    await page.getByTestId('label-filter').fill('team:globex');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=sandbox-row]').length === 1);
    await noXss(page);
    // events of a sandbox, refusals marked
    await page.goto(mock.url + '/dashboard/#/sandboxes/a1b2c3d4e5f60718');
    await page.locator('[data-testid=event][data-kind="egress.refused"]').waitFor();
    assert.match(await page.locator('[data-testid=event][data-kind="egress.refused"]').getAttribute('class'), /refusal/);
    const e = mock.state.addEvent('a1b2c3d4e5f60718', 'mcp.exited', { server: 'fetch', exitCode: 1, error: 'boom' });
    mock.broadcast('event', { sandboxId: 'a1b2c3d4e5f60718', ...e });
    await page.locator('[data-testid=event][data-kind="mcp.exited"]').waitFor({ timeout: 3000 });
    await noXss(page);
    // sign out
    await page.getByTestId('logout').click();
    await page.getByTestId('login-form').waitFor();
    assert.deepEqual(problems, []);
  } finally {
    await ctx.close();
    await mock.close();
  }
});

test('without the stream the page polls, and a lost session brings the login back', { skip }, async () => {
  const mock = await startMock({ sse: false });
  const { ctx, page, problems } = await open(mock);
  try {
    await signIn(page);
    await page.waitForFunction(() => document.querySelector('[data-testid=live-mode]')?.textContent === 'polling');
    mock.state.sandboxes.get('b1b2c3d4e5f60718').status = 'running';
    await page.locator('[data-testid=sandbox-row][data-id=b1b2c3d4e5f60718][data-status=running]').waitFor({ timeout: 5000 });
    mock.state.sessions.clear();
    await page.getByTestId('login-notice').waitFor({ timeout: 5000 });
    assert.match(await page.getByTestId('login-notice').textContent(), /expired/);
    assert.deepEqual(problems, []);
  } finally {
    await ctx.close();
    await mock.close();
  }
});

test('review side by side, approve the current fingerprint, back on the server serving', { skip }, async () => {
  const mock = await startMock();
  const { ctx, page, problems } = await open(mock, '/dashboard/#/sandboxes/a1b2c3d4e5f60718');
  try {
    await signIn(page);
    await page.getByTestId('review-link').first().click();
    await page.getByTestId('review-current-head').waitFor();
    assert.equal(await page.getByTestId('review-approved-head').count(), 1);
    const badges = await page.getByTestId('tool-badge').evaluateAll((l) => l.map((b) => b.dataset.change));
    for (const c of ['new', 'removed', 'changed']) assert.ok(badges.includes(c), c);
    assert.equal(await page.locator('[data-testid=review-current][data-name=fetch] ins').count() > 0, true);
    assert.ok((await page.getByTestId('finding').count()) >= 2);
    assert.equal(await page.locator('[data-testid=review-current] [data-name=stable]').count(), 0); // unchanged: collapsed
    assert.match(await page.locator('mark.hidden-char').first().textContent(), /U\+202E/);
    await noXss(page);
    await page.getByTestId('approve-button').click();
    await page.getByTestId('approve-confirm').click();
    await page.locator('[data-testid=mcp-card][data-name=fetch][data-phase=ready]').waitFor({ timeout: 5000 });
    assert.match(page.url(), /#\/sandboxes\/a1b2c3d4e5f60718\/mcp\/fetch$/);
    assert.deepEqual(mock.state.approveBodies, [{ fingerprint: 'b'.repeat(64) }]);
    // the connection line, with the token in the copy
    assert.match(await page.getByTestId('claude-line').textContent(), /^claude mcp add --transport http fetch http:\/\/127\.0\.0\.1:7070\/mcp\//);
    assert.deepEqual(problems, []);
  } finally {
    await ctx.close();
    await mock.close();
  }
});

test('connect page: sign in first, then the same code; approve for an account', { skip }, async () => {
  const mock = await startMock();
  const { ctx, page, problems } = await open(mock, '/connect?code=ABCD-EF01-2345');
  try {
    await page.getByTestId('login-form').waitFor();
    await signIn(page);
    assert.equal(await page.getByTestId('connect-code').textContent(), 'ABCD-EF01-2345');
    await page.getByTestId('connect-request').waitFor();
    await page.getByTestId('connect-account').selectOption('acme');
    await noXss(page);
    await page.getByTestId('connect-approve').click();
    await page.getByTestId('connect-result').waitFor();
    assert.equal(await page.getByTestId('connect-result').getAttribute('data-ok'), 'true');
    assert.deepEqual(mock.state.approveBodies, [{ connect: 'approve', body: { account: 'acme' } }]);
    assert.deepEqual(problems, []);
  } finally {
    await ctx.close();
    await mock.close();
  }
});

test('a secret value and a new API key are not kept in the page', { skip }, async () => {
  const mock = await startMock();
  const { ctx, page, problems } = await open(mock, '/dashboard/#/secrets');
  try {
    await signIn(page);
    await page.getByTestId('secret-new').click();
    await page.getByTestId('secret-name').fill('OPENAI_KEY');
    await page.getByTestId('secret-value').fill('sk-very-secret-value');
    await page.getByTestId('secret-hosts').fill('api.openai.com');
    await page.getByTestId('secret-save').click();
    await page.locator('[data-testid=secret-row][data-name=OPENAI_KEY]').waitFor();
    assert.equal(mock.state.secretValues.get('OPENAI_KEY'), 'sk-very-secret-value');
    assert.doesNotMatch(await page.content(), /sk-very-secret-value/);
    await page.goto(mock.url + '/dashboard/#/accounts');
    await page.getByTestId('account-name').fill('newco');
    await page.getByTestId('account-create').click();
    await page.getByTestId('key-dialog').waitFor();
    assert.equal(await page.getByTestId('key-value').textContent(), 'rtk_' + 'c'.repeat(64));
    await page.getByTestId('key-dialog-close').click();
    assert.doesNotMatch(await page.content(), /rtk_c{64}/);
    await page.goto(mock.url + '/dashboard/#/usage');
    await page.locator('[data-testid=usage-chart] canvas').first().waitFor();
    assert.equal(await page.getByTestId('estimate-total').textContent(), '$6.30');
    assert.deepEqual(problems, []);
  } finally {
    await ctx.close();
    await mock.close();
  }
});
