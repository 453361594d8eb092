// Reviewing before a first start: every catalog entry with a pinned fingerprint carries
// the tool list that fingerprint was made from (catalog/tools.json), and the daemon
// answers it with the tripwire's findings, as a changed server's review is answered.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startDaemon, stopDaemon, isRoot } from '../e2e/lib.mjs';

const skip = !isRoot() && 'needs root';
let d;

before(async () => {
  if (!skip) d = await startDaemon({ prefix: 'runtime-dash-review-' });
});
after(() => stopDaemon(d));

test('every pinned catalog entry can be read before its first start, and is the list its pin names', { skip }, async () => {
  const catalog = await d.api('GET', '/v1/mcp/catalog');
  const pinned = catalog.body.data.filter((e) => e.fingerprint);
  assert.ok(pinned.length >= 10, `pinned entries: ${pinned.map((e) => e.id)}`);
  for (const e of pinned) {
    const r = await d.api('GET', `/v1/mcp/catalog/${e.id}/review`);
    assert.equal(r.status, 200, `${e.id}: ${r.text.slice(0, 300)}`);
    assert.ok(r.body.current.fingerprint.startsWith(e.fingerprint), `${e.id}: ${r.body.current.fingerprint} vs pin ${e.fingerprint}`);
    assert.ok(r.body.current.tools.length > 0 && r.body.current.tools.every((t) => t.name && t.inputSchema), e.id);
    assert.equal(r.body.pending, false);
    assert.ok(Array.isArray(r.body.findings));
  }
  // context7's two-tool order and its do-not-send-secrets warning were read and accepted
  // at review: the tripwire still shows them to the person.
  const c7 = await d.api('GET', '/v1/mcp/catalog/context7/review');
  assert.ok(c7.body.findings.some((f) => f.rule === 'speaks-to-model' || f.rule === 'orders-calls'), JSON.stringify(c7.body.findings));
});
