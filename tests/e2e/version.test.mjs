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

// One table makes --help, the RUNTIME_<NAME> variables and the command line
// (src/daemon/options.c): a bad value is refused from either, naming where it came from
// and what it may be, before anything starts.
test('runtimed checks every option the same way from the command line and the environment', async () => {
  const help = (await run(RUNTIMED, ['--help'])).stdout;
  for (const line of help.split('\n')) assert.ok(line.length <= 80, `a --help line over 80 columns: ${line}`);
  const cases = [
    ['max-sandboxes', '0', /must be a whole number from 1 to 1024, not '0'/],
    ['held-total', '5', /must be a whole number from 16 to/],
    ['sandbox-connections', 'many', /must be a whole number from 1 to 1000000/],
    ['log-format', 'xml', /must be one of text\|json, not 'xml'/],
    ['tls-inspect', 'everything', /must be one of secret-hosts\|allowed-hosts/],
    ['price-gib-hour', '-1', /is not a number of dollars/],
    ['rate', 'dns-queries=0', /give NAME=N with NAME dns-queries, dns-names or connections/],
    ['resolve', 'nothing', /./],
  ];
  for (const [name, value, message] of cases) {
    assert.match(help, new RegExp(`--${name} `), `--help lists --${name}`);
    const env = `RUNTIME_${name.toUpperCase().replaceAll('-', '_')}`;
    const fromArgs = await run(RUNTIMED, [`--${name}`, value]);
    const fromEnv = await run(RUNTIMED, [], { env: { ...process.env, [env]: value } });
    for (const [r, where] of [[fromArgs, `--${name}`], [fromEnv, env]]) {
      assert.equal(r.code, 2, `${where}=${value}: exit ${r.code}, ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`^runtimed: ${where}`), `${where}=${value}: ${r.stderr}`);
      assert.match(r.stderr, message, `${where}=${value}`);
    }
  }
  const unknown = await run(RUNTIMED, ['--no-such-option']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /see runtimed --help/);
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
