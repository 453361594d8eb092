// A client's first request written out by hand: the customer's sandbox (the same
// one on every run), its tickets server started once, then MCP Streamable HTTP
// with plain fetch: initialize, notifications/initialized, tools/list.
//
//   node first-request.mjs TICKETS_SERVER.py
import { readFileSync } from 'node:fs';
import { Sandbox } from 'withruntime';

const sbx = await Sandbox.getOrCreate('mcp-gateway', { idlePauseSeconds: 900, labels: { role: 'mcp' } });
console.log(`sandbox ${sbx.id}`);

const { servers } = await sbx.mcp.get();
if (servers.some((s) => s.name === 'tickets')) {
  console.log('tickets already there');
} else {
  await sbx.files.write('/workspace/tickets_server.py', readFileSync(process.argv[2]));
  await sbx.mcp.start([{ name: 'tickets', command: ['python3', '/workspace/tickets_server.py'] }]);
  console.log('tickets started');
}
const gateway = await sbx.mcp.ready({ timeoutMs: 120_000 });
const { url } = gateway.servers.find((s) => s.name === 'tickets');

// What every request carries: a JSON body, both answer types accepted, the gateway token.
const headers = {
  'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream',
  ...gateway.headers,
};
const post = (h, message) => fetch(url, { method: 'POST', headers: h, body: JSON.stringify(message) });

const init = await post(headers, {
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'first-request', version: '1.0.0' } },
});
console.log(`initialize ${init.status} ${init.headers.get('content-type')}`);
const { result } = await answerTo(init, 1);
console.log(`result ${JSON.stringify(result)}`);

// Later requests name the version agreed on, and the session if the server made one.
const later = { ...headers, 'MCP-Protocol-Version': result.protocolVersion };
const session = init.headers.get('mcp-session-id');
if (session) later['Mcp-Session-Id'] = session;
const initialized = await post(later, { jsonrpc: '2.0', method: 'notifications/initialized' });
await initialized.arrayBuffer();
console.log(`initialized ${initialized.status}`);
const list = await post(later, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
const tools = (await answerTo(list, 2)).result.tools.map((t) => t.name);
console.log(`tools/list ${list.status} ${tools.join(',')}`);

/** The JSON-RPC response with this id, from a JSON body or a text/event-stream. */
async function answerTo(res, id) {
  const body = await res.text();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${body}`);
  const messages = (res.headers.get('content-type') ?? '').startsWith('text/event-stream')
    ? body.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5)))
    : [JSON.parse(body)].flat();
  const found = messages.find((m) => m.id === id && !m.method);
  if (!found?.result) throw new Error(`no result for request ${id} in ${body}`);
  return found;
}
