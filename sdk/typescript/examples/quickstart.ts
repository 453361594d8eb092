import { CommandError, Runtime } from 'withruntime';

const runtime = new Runtime(); // RUNTIME_API_URL and RUNTIME_API_KEY (or STATE/admin.key)

// Deleted when the scope ends, also when something below throws.
await using sbx = await runtime.sandboxes.create({ memoryMiB: 512, labels: { role: 'demo' } });

await sbx.files.write('/workspace/hello.sh', '#!/bin/sh\necho "hello from $(uname -s)"\n', { mode: 0o755 });
const { stdout } = await sbx.exec(['/workspace/hello.sh'], { check: true });
console.log(stdout.trim());

await sbx.network.set({ internet: true, allow: ['api.example.com'] });
console.log('allowed:', (await sbx.network.get()).allow?.join(','));

try {
  await sbx.exec(['sh', '-c', 'echo nope >&2; exit 3'], { check: true });
} catch (e) {
  if (!(e instanceof CommandError)) throw e;
  console.log(`exit ${e.exitCode}: ${e.stderr.trim()}`);
}
