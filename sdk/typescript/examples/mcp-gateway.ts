// usage: node mcp-gateway.js SERVER.mjs   (a stdio MCP server to run in the sandbox)
import { readFileSync } from 'node:fs';
import { Sandbox } from 'withruntime';

const sbx = await Sandbox.getOrCreate('mcp-gateway-example', { idlePauseSeconds: 900 });
await sbx.files.write('/workspace/server.mjs', readFileSync(process.argv[2]!));
await sbx.mcp.start([{ name: 'hello', command: ['node', '/workspace/server.mjs'] }]);

const gateway = await sbx.mcp.ready(); // every server ready, or failed: check each status
const auth = gateway.headers.Authorization!;
for (const s of gateway.servers) {
  console.log(`${s.name} ${s.status} tools=${s.tools.join(',')}`);
  console.log(`claude mcp add --transport http ${s.name} ${s.url} --header "Authorization: ${auth}"`);
}

// Any MCP client can use the URL, in either protocol era; here, by hand.
const headers = { Authorization: auth, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
const res = await fetch(gateway.servers[0]!.url, {
  method: 'POST',
  headers,
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'example', version: '1' } } }),
});
console.log('initialize:', res.status);
// 2026-07-28 has no session: each request carries its version and capabilities.
const discover = await fetch(gateway.servers[0]!.url, {
  method: 'POST',
  headers: { ...headers, 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'server/discover' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'server/discover',
    params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } }),
});
const { result } = (await discover.json()) as { result: { supportedVersions: string[] } };
console.log('server/discover:', discover.status, result.supportedVersions.join(' '));
await sbx.delete();
