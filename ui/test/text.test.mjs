import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load } from './load.mjs';

const t = await load('src/lib/text.ts');
const time = await load('src/lib/time.ts');
const route = await load('src/lib/route.ts');
const labels = await load('src/lib/labels.ts');

test('hidden characters are revealed', () => {
  const p = t.revealHidden('ok\u202Egnp.exe\u200Bx\u{E0041}');
  assert.deepEqual(p, [
    { text: 'ok', hidden: false },
    { text: '<U+202E>', hidden: true },
    { text: 'gnp.exe', hidden: false },
    { text: '<U+200B>', hidden: true },
    { text: 'x', hidden: false },
    { text: '<U+E0041>', hidden: true },
  ]);
  assert.deepEqual(t.revealHidden('plain\ttext\n'), [{ text: 'plain\ttext\n', hidden: false }]);
  assert.equal(t.hasHidden('a\u0000b'), true);
  assert.equal(t.hasHidden('héllo ✓'), false);
});

test('str makes any value one bounded text', () => {
  assert.equal(t.str('<img src=x onerror=alert(1)>'), '<img src=x onerror=alert(1)>');
  assert.equal(t.str(null), '');
  assert.equal(t.str(3), '3');
  assert.equal(t.str({ a: 1 }), '{"a":1}');
  assert.equal(t.str('x'.repeat(10), 4), 'xxxx…');
});

test('the claude mcp add line is the CLI\'s', () => {
  assert.equal(
    t.claudeLine('memory', 'http://127.0.0.1:7070/mcp/abc/memory', 'Bearer 0123abcd'),
    'claude mcp add --transport http memory http://127.0.0.1:7070/mcp/abc/memory --header "Authorization: Bearer 0123abcd"',
  );
  assert.equal(t.claudeLine("it's", 'http://h/x y', null), "claude mcp add --transport http 'it'\\''s' 'http://h/x y'");
  assert.equal(t.claudeLine('a', 'u', 'Bearer $(rm -rf ~)'), "claude mcp add --transport http a u --header 'Authorization: Bearer $(rm -rf ~)'");
  assert.equal(t.shellWord(''), "''");
  assert.equal(t.shellWord('a\nb'), "'a?b'");
});

test('only http(s) URLs become links', () => {
  assert.equal(t.safeHttpUrl('javascript:alert(1)'), null);
  assert.equal(t.safeHttpUrl('data:text/html,x'), null);
  assert.equal(t.safeHttpUrl('https://www.npmjs.com/package/x'), 'https://www.npmjs.com/package/x');
  assert.equal(t.safeHttpUrl(5), null);
});

test('tail keeps the last lines', () => {
  assert.deepEqual(t.tail('a\nb\nc\n', 2), { dropped: 1, text: 'b\nc' });
  assert.deepEqual(t.tail('', 2), { dropped: 0, text: '' });
});

test('relative times', () => {
  const now = Date.parse('2026-11-06T12:00:00Z');
  assert.equal(time.relativeTime('2026-11-06T12:00:00Z', now), 'just now');
  assert.equal(time.relativeTime('2026-11-06T11:59:18Z', now), '42 s ago');
  assert.equal(time.relativeTime('2026-11-06T11:57:00Z', now), '3 min ago');
  assert.equal(time.relativeTime('2026-11-06T09:00:00Z', now), '3 h ago');
  assert.equal(time.relativeTime('2026-11-04T12:00:00Z', now), '2 d ago');
  assert.equal(time.relativeTime('2026-11-06T14:00:00Z', now), 'in 2 h');
  assert.equal(time.relativeTime('nonsense', now), '-');
  assert.equal(time.relativeTime(undefined, now), '-');
  assert.equal(time.absoluteTime('2026-11-06T12:00:00.123Z'), '2026-11-06 12:00:00 UTC');
  assert.equal(time.duration(300), '5 min');
  assert.equal(time.duration(5400), '1 h 30 min');
  assert.equal(time.duration(0, true), 'never');
  assert.equal(time.duration(90061), '1 d 1 h');
});

test('routes', () => {
  const p = route.parseRoute;
  assert.deepEqual(p('/connect', '?code=abcd-EF01-2345', ''), { page: 'connect', code: 'ABCD-EF01-2345' });
  assert.deepEqual(p('/connect', '?code=<script>', ''), { page: 'connect', code: null });
  assert.deepEqual(p('/dashboard/', '', ''), { page: 'sandboxes' });
  assert.deepEqual(p('/dashboard/', '', '#/sandboxes'), { page: 'sandboxes' });
  assert.deepEqual(p('/dashboard/', '', '#/sandboxes/ab12'), { page: 'sandbox', id: 'ab12' });
  assert.deepEqual(p('/dashboard/', '', '#/sandboxes/ab12/mcp/my%2Fsrv'), { page: 'mcp', id: 'ab12', name: 'my/srv' });
  assert.deepEqual(p('/dashboard/', '', '#/review/ab12/fetch'), { page: 'review', id: 'ab12', name: 'fetch' });
  assert.deepEqual(p('/dashboard/', '', '#/catalog/memory/review'), { page: 'catalogReview', entry: 'memory' });
  assert.deepEqual(p('/dashboard/', '', '#/usage'), { page: 'usage' });
  assert.deepEqual(p('/dashboard/', '', '#/accounts'), { page: 'accounts' });
  assert.equal(p('/dashboard/', '', '#/sandboxes/%E0%A4%A').page, 'notFound');
  assert.equal(p('/dashboard/', '', '#/nope').page, 'notFound');
  assert.equal(route.href.mcp('a b', 'x/y'), '/dashboard/#/sandboxes/a%20b/mcp/x%2Fy');
  assert.deepEqual(p('/dashboard/', '', route.href.review('id', 'n?#').replace('/dashboard/', '')), { page: 'review', id: 'id', name: 'n?#' });
});

test('label filter', () => {
  const f = labels.parseLabelFilter('team:acme, env  tier=gold');
  assert.deepEqual(f, [{ key: 'team', value: 'acme' }, { key: 'env', value: null }, { key: 'tier', value: 'gold' }]);
  assert.equal(labels.matchLabels({ team: 'acme', env: 'x', tier: 'gold' }, f), true);
  assert.equal(labels.matchLabels({ team: 'acme', tier: 'gold' }, f), false);
  assert.equal(labels.matchLabels(null, []), true);
  assert.equal(labels.matchLabels({}, labels.parseLabelFilter('constructor')), false);
});
