// The gateway program a user already has (issue 12), run against runtime with only
// RUNTIME_API_URL and RUNTIME_API_KEY: a secret for GitHub, one named sandbox with
// its own MCP servers (GitHub and Fetch from the catalog, and a stdio server of
// one's own), then each server's URL and the header an agent sends.
//
//   node gateway.mjs TICKETS_SERVER.py < token     (the GitHub token on stdin)
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Runtime, Sandbox } from 'withruntime';

const runtime = new Runtime();
const token = readFileSync(0, 'utf8').trim();
await runtime.secrets.set('GITHUB_TOKEN', { value: token, hosts: ['api.github.com'] });

// One sandbox per customer; the name is new on every run.
const name = `gateway-${randomBytes(6).toString('hex')}`;
const sbx = await runtime.sandboxes.create({
  name, memoryMiB: 2048, idlePauseSeconds: 900, labels: { role: 'mcp', customer: name },
});
console.log(`sandbox ${sbx.info.name} ${sbx.id}`);

await sbx.files.write('/workspace/tickets_server.py', readFileSync(process.argv[2]));
await sbx.mcp.start([
  { id: 'github', secrets: { GITHUB_PERSONAL_ACCESS_TOKEN: 'GITHUB_TOKEN' } },
  { id: 'fetch' },
  { name: 'tickets', command: ['python3', '/workspace/tickets_server.py'] },
]);

// The catalog servers install from the registries first: give them time.
const gateway = await sbx.mcp.ready({ timeoutMs: 10 * 60_000 });
for (const s of gateway.servers) console.log(`${s.name} ${s.status} ${s.url}`);
for (const [header, value] of Object.entries(gateway.headers)) console.log(`${header}: ${value}`);

// The catalog the servers came from, and the same sandbox again by its name.
const catalog = await runtime.mcp.catalog();
console.log(`catalog ${catalog.map((e) => e.id).filter((id) => id === 'github' || id === 'fetch').join(',')}`);
const again = await Sandbox.getOrCreate(name);
console.log(`again ${again.id} reused=${again.info.reused === true}`);
