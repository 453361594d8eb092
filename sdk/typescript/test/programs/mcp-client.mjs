// The official MCP TypeScript client on a gateway URL: what mcp.ready() returns (the
// URL and the Authorization header) is all it needs.
//
//   node mcp-client.mjs TICKETS_SERVER.py
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Runtime } from 'withruntime';

const runtime = new Runtime();
const sbx = await runtime.sandboxes.create({ memoryMiB: 512, labels: { role: 'mcp-client' } });
try {
  await sbx.files.write('/workspace/tickets_server.py', readFileSync(process.argv[2]));
  await sbx.mcp.start([{ name: 'tickets', command: ['python3', '/workspace/tickets_server.py'] }]);
  const gateway = await sbx.mcp.ready({ timeoutMs: 120_000 });
  const { url } = gateway.servers.find((s) => s.name === 'tickets');

  const client = new Client({ name: 'tickets-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: gateway.headers } });
  await client.connect(transport);
  try {
    console.log(`server ${client.getServerVersion()?.name} protocol ${transport.protocolVersion ?? '?'}`);
    const { tools } = await client.listTools();
    console.log(`tools ${tools.map((t) => t.name).sort().join(',')}`);
    const created = await client.callTool({ name: 'create_ticket', arguments: { title: 'Printer on fire', priority: 'high' } });
    console.log(`create_ticket ${textOf(created)}`);
    const listed = await client.callTool({ name: 'list_tickets', arguments: {} });
    console.log(`list_tickets ${textOf(listed)}`);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
} finally {
  await sbx.delete();
}

function textOf(result) {
  if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`);
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}
