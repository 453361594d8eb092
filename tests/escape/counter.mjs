// The counter MCP server (tests/mcp/fixtures/counter-server.mjs: each call of "count"
// answers one more than the last) in a sandbox, for the hibernation suites: its memory
// kept or lost shows in the next count.
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { waitFor } from '../e2e/lib.mjs';
import { Client, StreamableHTTPClientTransport } from '../mcp/lib.mjs';

const COUNTER_SERVER = fs.readFileSync(new URL('../mcp/fixtures/counter-server.mjs', import.meta.url), 'utf8');

/** A client of the counter at url, connected through the gateway. */
async function connect(url, headers) {
  const client = new Client({ name: 'hibernate-test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

/** A sandbox of daemon d (spec) running the counter, with a client connected:
 * {id, client, url, headers}. */
export async function sandboxWithCounter(d, spec) {
  const c = await d.create(spec);
  const put = await d.exec(c.id, ['sh', '-c', 'cat > /workspace/counter.mjs'], { stdin: COUNTER_SERVER });
  assert.equal(put.exitCode, 0, put.stderr);
  const st = await d.api('POST', `/v1/sandboxes/${c.id}/mcp`, { servers: [{ name: 'counter', command: ['node', '/workspace/counter.mjs'] }] });
  assert.ok([200, 201, 202].includes(st.status), st.text);
  const r = await d.api('GET', `/v1/sandboxes/${c.id}/mcp?wait=60`, undefined, { timeoutMs: 90000 });
  const s = r.body.servers.find((x) => x.name === 'counter');
  assert.equal(s?.status, 'ready', JSON.stringify(r.body.servers));
  return { id: c.id, client: await connect(s.url, r.body.headers), url: s.url, headers: r.body.headers };
}

/** The counter's next number. */
export const count = async (client) => Number((await client.callTool({ name: 'count', arguments: {} })).content[0].text);

/** Once the counter of sandbox sb started again (a restart, a cold start): a new client's count. */
export async function countAfterRestart(d, sb) {
  await waitFor(async () => {
    const r = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp`);
    return r.body.servers.find((x) => x.name === 'counter')?.status === 'ready';
  }, { timeoutMs: 60000, what: 'the counter server to start again' });
  const client = await connect(sb.url, sb.headers);
  try {
    return await count(client);
  } finally {
    await client.close();
  }
}
