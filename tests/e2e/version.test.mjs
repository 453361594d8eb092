// What a newcomer checks first: which version runs, and whether it answers.
//
//   runtimed --version and runtime --version print one version, the VERSION file's
//   number and the commit it was built from (git describe), e.g. 0.1.0+eff1617-dirty;
//   GET /healthz answers 200 {"ok":true} with no key, and nothing more.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, RUNTIME, RUNTIMED, isRoot, run, startDaemon, stopDaemon } from './lib.mjs';

const NUMBER = fs.readFileSync(path.join(ROOT, 'VERSION'), 'utf8').trim();
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

test('runtimed --version and runtime --version: one version, from VERSION and the commit', async () => {
  const daemon = await run(RUNTIMED, ['--version']);
  const cli = await run(RUNTIME, ['--version']);
  const word = await run(RUNTIME, ['version']);
  assert.equal(daemon.code, 0, daemon.stderr);
  assert.equal(cli.code, 0, cli.stderr);
  const m = /^runtimed (\S+)\n$/.exec(daemon.stdout);
  assert.ok(m, `runtimed --version printed ${JSON.stringify(daemon.stdout)}`);
  assert.match(m[1], new RegExp(`^${esc(NUMBER)}(\\+[0-9a-f]{7,}(-dirty)?)?$`));
  assert.equal(cli.stdout, `runtime ${m[1]}\n`);
  assert.equal(word.stdout, cli.stdout);
  const help = await run(RUNTIMED, ['--help']);
  assert.match(help.stdout, /--version/);
});

describe('GET /healthz', { skip: !isRoot() && 'must run as root (runtimed needs it)' }, () => {
  let d;
  before(async () => {
    d = await startDaemon({ prefix: 'runtime-healthz-' });
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('200 {"ok":true} without a key (and with a wrong one), nothing else', async () => {
    for (const key of [null, 'wrong']) {
      const r = await d.api('GET', '/healthz', undefined, { key });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.text, '{"ok":true}\n');
      assert.match(r.headers.get('content-type'), /^application\/json/);
    }
    const post = await d.api('POST', '/healthz', {}, { key: null });
    assert.equal(post.status, 405, post.text);
    // The API itself still wants its key.
    assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key: null })).status, 401);
  });
});
