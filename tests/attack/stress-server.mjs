// A stdio MCP server for the attack suite, with no dependencies (it runs inside a
// sandbox): newline-delimited JSON-RPC on stdin and stdout.
//
//   tools/call never   read, and never answered: a request its server sits on (each one
//                      is counted in /workspace/never.log)
//   tools/call flood   {count, size}: count notifications/resources/updated for
//                      test://flood, each carrying size bytes of padding, then "done"
//   tools/call hello   answers at once
// It offers resources with subscribe, so that a 2026-07-28 listen stream may ask
// for test://flood's updates.
import fs from 'node:fs';
import readline from 'node:readline';

const TOOLS = ['never', 'flood', 'hello'].map((name) => ({
  name,
  description: `The ${name} tool of the stress fixture.`,
  inputSchema: { type: 'object' },
}));

const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n');

async function flood({ count = 1, size = 0 } = {}) {
  const pad = 'x'.repeat(size);
  for (let i = 0; i < count; i++) {
    const line = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/resources/updated',
      params: { uri: 'test://flood', n: i, pad } }) + '\n';
    // Wait for the pipe when it is full: the gateway reads as fast as it can.
    if (!process.stdout.write(line)) await new Promise((r) => process.stdout.once('drain', r));
  }
}

async function call(msg) {
  const { name, arguments: args } = msg.params ?? {};
  if (name === 'never') return fs.appendFileSync('/workspace/never.log', `${msg.id}\n`);
  if (name === 'flood') await flood(args);
  send({ id: msg.id, result: { content: [{ type: 'text', text: name === 'flood' ? 'done' : 'hello' }] } });
}

readline.createInterface({ input: process.stdin, crlfDelay: Infinity }).on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined || msg.id === null) return;
  switch (msg.method) {
  case 'initialize':
    return send({ id: msg.id, result: { protocolVersion: msg.params?.protocolVersion ?? '2025-06-18',
      capabilities: { tools: {}, resources: { subscribe: true } }, serverInfo: { name: 'stress', version: '1.0.0' } } });
  case 'tools/list':
    return send({ id: msg.id, result: { tools: TOOLS } });
  case 'tools/call':
    return void call(msg);
  case 'resources/list':
    return send({ id: msg.id, result: { resources: [] } });
  default:
    return send({ id: msg.id, result: {} });
  }
});
process.stdin.on('end', () => process.exit(0));
