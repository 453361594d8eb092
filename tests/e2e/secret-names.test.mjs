// Secret names (issue 23): a name is the environment variable a sandbox's
// programs find the placeholder in, so
//   - a name is exactly what the path says: "PUT /v1/egress-secrets/a%00b" made the
//     secret "a" (the path was decoded into a C string); a NUL, or any byte
//     outside [A-Za-z0-9_], is a 400 that says so;
//   - a name may not be a variable the sandbox's programs depend on (PATH,
//     HOME, any LD_*, ...): its placeholder replaced it in every program.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { isRoot, startDaemon, stopDaemon } from './lib.mjs';

const SPEC = { value: 'a-value-0123456789', hosts: ['api.example.com'] };
let d;

describe('secret names', { skip: !isRoot() && 'must run as root' }, () => {
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('a NUL in the name is refused, and no shorter secret is made', async () => {
    for (const p of ['/v1/egress-secrets/a%00b', '/v1/egress-secrets/%00', '/v1/egress-secrets/GH%00_TOKEN']) {
      const r = await d.api('PUT', p, SPEC);
      assert.equal(r.status, 400, `${p}: ${r.text}`);
      assert.equal(r.body.error.code, 'invalid_request');
      // The daemon's HTTP server refuses a control character in a path before any route.
      assert.match(r.body.error.message, /NUL|control character in path/, r.text);
    }
    const del = await d.api('DELETE', '/v1/egress-secrets/a%00b');
    assert.equal(del.status, 400, del.text);
    const list = await d.api('GET', '/v1/egress-secrets');
    assert.deepEqual(list.body.secrets.map((s) => s.name), []);
  });

  test('bytes outside the name alphabet are refused', async () => {
    for (const name of ['a-b', 'a%20b', 'a.b', '%C3%A9t%C3%A9', '1ABC', 'a%0Ab']) {
      const r = await d.api('PUT', `/v1/egress-secrets/${name}`, SPEC);
      assert.equal(r.status, 400, `${name}: ${r.text}`);
      assert.match(r.body.error.message, /letters, digits and '_'|control character in path/, r.text);
    }
  });

  test('the variables a sandbox\'s programs depend on are refused by name', async () => {
    const reserved = ['PATH', 'HOME', 'USER', 'SHELL', 'LD_PRELOAD', 'LD_LIBRARY_PATH', 'LD_AUDIT', 'LD_ANYTHING',
      'ld_preload', 'LC_ALL', 'LANG', 'TZ', 'TMPDIR', 'IFS', 'BASH_ENV', 'NODE_OPTIONS', 'PYTHONPATH',
      'SSL_CERT_FILE', 'NODE_EXTRA_CA_CERTS', 'REQUESTS_CA_BUNDLE', 'GIT_SSL_CAINFO', 'GLIBC_TUNABLES', 'HTTPS_PROXY',
      'http_proxy'];
    for (const name of reserved) {
      const r = await d.api('PUT', `/v1/egress-secrets/${name}`, SPEC);
      assert.equal(r.status, 400, `${name}: ${r.text}`);
      assert.ok(r.body.error.message.includes(name), `${name}: the message names it: ${r.text}`);
      assert.match(r.body.error.message, /reserved/, r.text);
    }
    assert.deepEqual((await d.api('GET', '/v1/egress-secrets')).body.secrets, []);
  });

  test('other names are fine, and the sandbox keeps its own PATH and HOME beside them', async () => {
    for (const name of ['GITHUB_TOKEN', 'PATH_TOKEN', 'MY_HOME', 'OPENAI_API_KEY', 'LDAP_PASSWORD', '_X']) {
      const r = await d.api('PUT', `/v1/egress-secrets/${name}`, SPEC);
      assert.equal(r.status, 201, `${name}: ${r.text}`);
    }
    const sb = await d.create({});
    const r = await d.exec(sb.id, ['sh', '-c', 'echo "$PATH|$HOME|$GITHUB_TOKEN|$LDAP_PASSWORD"']);
    const [p, home, gh, ldap] = r.stdout.trim().split('|');
    assert.equal(p, '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
    assert.equal(home, '/workspace');
    assert.match(gh, /^RUNTIME_PH_[0-9a-f]{32}$/);
    assert.match(ldap, /^RUNTIME_PH_[0-9a-f]{32}$/);
  });
});
