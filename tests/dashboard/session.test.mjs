// The dashboard's files and sign-in, over HTTP without a browser: what a person's
// browser is given, and what another site, a stolen cookie without its CSRF token, an
// account's session, a rotated key and time can and cannot do with it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startDaemon, stopDaemon, isRoot, waitFor, Daemon } from '../e2e/lib.mjs';

const skip = !isRoot() && 'needs root';
let d;

before(async () => {
  if (skip) return;
  d = await startDaemon({
    prefix: 'runtime-dash-',
    make: (dir) => Object.assign(new Daemon(dir), { extraArgs: ['--session-idle', '3'] }),
  });
});
after(() => stopDaemon(d));

/** A call with no key: the cookie (and whatever headers) a browser would send. */
const call = (method, p, { body, headers = {} } = {}) =>
  d.api(method, p, body, { key: null, headers });

/** Signs in with key: {cookie (the Cookie field to send), csrf, setCookie, body}. */
async function signIn(key) {
  const r = await call('POST', '/dashboard/session', { body: { apiKey: key } });
  assert.equal(r.status, 200, r.text);
  const setCookie = r.headers.get('set-cookie');
  return { cookie: setCookie.split(';')[0], csrf: r.body.csrfToken, setCookie, body: r.body };
}

const as = (s, extra = {}) => ({ Cookie: s.cookie, 'X-CSRF-Token': s.csrf, ...extra });

test('the page and its files are served with a policy that runs nothing but their own', { skip }, async () => {
  for (const p of ['/dashboard/', '/connect']) {
    const r = await call('GET', p);
    assert.equal(r.status, 200, p);
    assert.match(r.headers.get('content-type'), /^text\/html/);
    assert.match(r.text, /<script[^>]+src="\/dashboard\/app\.js"/);
    const csp = r.headers.get('content-security-policy');
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(r.headers.get('x-frame-options'), 'DENY');
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(r.headers.get('referrer-policy'), 'no-referrer');
  }
  const js = await call('GET', '/dashboard/app.js');
  assert.equal(js.status, 200);
  assert.match(js.headers.get('content-type'), /^text\/javascript/);
  const again = await call('GET', '/dashboard/app.js', { headers: { 'If-None-Match': js.headers.get('etag') } });
  assert.equal(again.status, 304);
  assert.equal((await call('GET', '/dashboard/app.css')).status, 200);
  for (const p of ['/dashboard/%2e%2e/state/admin.key', '/dashboard/..%2fstate%2fadmin.key']) {
    const r = await call('GET', p);
    assert.ok(r.status >= 400 && !r.text.includes(d.key), `${p}: ${r.status} ${r.text}`);
  }
  assert.equal((await call('GET', '/dashboard/nothing.js')).status, 404);
  assert.equal((await call('POST', '/dashboard/')).status, 405);
  const bare = await call('GET', '/dashboard');
  assert.equal(bare.status, 200, 'fetch follows the redirect to /dashboard/');
});

test('a key is exchanged once for an HttpOnly, SameSite=Strict cookie; the API then needs its CSRF token', { skip }, async () => {
  const s = await signIn(d.key);
  assert.match(s.setCookie, /^rt_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict$/);
  assert.deepEqual(Object.keys(s.body).sort(), ['account', 'admin', 'csrfToken', 'expiresAt']);
  assert.equal(s.body.admin, true);
  assert.ok(!s.setCookie.includes(d.key) && !JSON.stringify(s.body).includes(d.key), 'the key is never sent back');

  assert.equal((await call('GET', '/v1/sandboxes', { headers: as(s) })).status, 200);
  const who = await call('GET', '/dashboard/session', { headers: { Cookie: s.cookie } });
  assert.equal(who.status, 200);
  assert.equal(who.body.csrfToken, s.csrf);

  // The cookie alone (a form another site submits, an <img>): refused, whatever the method.
  const bare = await call('GET', '/v1/sandboxes', { headers: { Cookie: s.cookie } });
  assert.equal(bare.status, 403, bare.text);
  assert.match(bare.body.error.message, /X-CSRF-Token/);
  const wrong = await call('POST', '/v1/sandboxes', { body: {}, headers: as(s, { 'X-CSRF-Token': 'x'.repeat(43) }) });
  assert.equal(wrong.status, 403);
  assert.equal((await call('GET', '/v1/sandboxes', { headers: { Cookie: 'rt_session=' + 'A'.repeat(43), 'X-CSRF-Token': s.csrf } })).status, 401);
});

test('another site is refused, with the cookie and the token both', { skip }, async () => {
  const s = await signIn(d.key);
  const evil = await call('POST', '/v1/sandboxes', { body: {}, headers: as(s, { Origin: 'http://evil.example' }) });
  assert.equal(evil.status, 403, evil.text);
  const crossSite = await call('GET', '/v1/sandboxes', { headers: as(s, { 'Sec-Fetch-Site': 'cross-site' }) });
  assert.equal(crossSite.status, 403);
  const sameSite = await call('GET', '/v1/sandboxes', { headers: as(s, { 'Sec-Fetch-Site': 'same-site' }) });
  assert.equal(sameSite.status, 403, 'a sibling subdomain is another site for this');
  const own = await call('GET', '/v1/sandboxes', { headers: as(s, { Origin: d.url, 'Sec-Fetch-Site': 'same-origin' }) });
  assert.equal(own.status, 200, own.text);
  // Signing a victim in to the attacker's account from another page (login CSRF).
  const login = await call('POST', '/dashboard/session', { body: { apiKey: d.key }, headers: { Origin: 'http://evil.example' } });
  assert.equal(login.status, 403);
  assert.equal(login.headers.get('set-cookie'), null);
});

test('sign-in refuses what is not a key, and reads no more than a key needs', { skip }, async () => {
  const bad = await call('POST', '/dashboard/session', { body: { apiKey: 'rtk_' + '0'.repeat(64) } });
  assert.equal(bad.status, 401);
  assert.equal(bad.headers.get('set-cookie'), null);
  const extra = await call('POST', '/dashboard/session', { body: { apiKey: d.key, remember: true } });
  assert.equal(extra.status, 400);
  const big = await call('POST', '/dashboard/session', { body: { apiKey: 'k'.repeat(10000) } });
  assert.equal(big.status, 413);
});

test('an account signed in sees only its own sandboxes; another account\'s is "not found"', { skip }, async () => {
  const made = await d.api('POST', '/v1/accounts', { name: 'dash-acme' });
  assert.equal(made.status, 201, made.text);
  const mine = await d.create({ name: 'admins-own' });
  const s = await signIn(made.body.apiKey);
  assert.equal(s.body.account, 'dash-acme');
  assert.equal(s.body.admin, false);
  const list = await call('GET', '/v1/sandboxes', { headers: as(s) });
  assert.equal(list.status, 200);
  assert.deepEqual(list.body.data, []);
  assert.equal((await call('GET', `/v1/sandboxes/${mine.id}`, { headers: as(s) })).status, 404);
  assert.equal((await call('GET', '/v1/accounts', { headers: as(s) })).status, 403);

  // Its key rotated away twice (the one before the newest stays valid): its session ends.
  await d.api('POST', '/v1/accounts/dash-acme/keys');
  assert.equal((await call('GET', '/v1/sandboxes', { headers: as(s) })).status, 200);
  await d.api('POST', '/v1/accounts/dash-acme/keys');
  assert.equal((await call('GET', '/v1/sandboxes', { headers: as(s) })).status, 401);
});

test('sign-out ends the session and clears the cookie', { skip }, async () => {
  const s = await signIn(d.key);
  const noToken = await call('DELETE', '/dashboard/session', { headers: { Cookie: s.cookie } });
  assert.equal(noToken.status, 403, 'a sign-out needs the CSRF token too');
  const out = await call('DELETE', '/dashboard/session', { headers: as(s) });
  assert.equal(out.status, 204);
  assert.match(out.headers.get('set-cookie'), /^rt_session=; Path=\/; Max-Age=0;/);
  assert.equal((await call('GET', '/v1/sandboxes', { headers: as(s) })).status, 401);
  assert.equal((await call('GET', '/dashboard/session', { headers: { Cookie: s.cookie } })).status, 401);
});

test('a session unused for --session-idle ends', { skip }, async () => {
  const s = await signIn(d.key);
  const signedAt = Date.now();
  assert.equal((await call('GET', '/dashboard/session', { headers: { Cookie: s.cookie } })).status, 200);
  // The daemon runs with --session-idle 3: no call for 3 s and it is gone.
  await waitFor(async () => Date.now() - signedAt > 3500, { timeoutMs: 6000, intervalMs: 250, what: '3.5 s to pass' });
  assert.equal((await call('GET', '/dashboard/session', { headers: { Cookie: s.cookie } })).status, 401);
});
