// The SDK as a user's program uses it against a daemon whose certificate comes
// from a private CA: run with NODE_EXTRA_CA_CERTS naming that CA (the global
// fetch trusts it then) and RUNTIME_API_URL=https://... and RUNTIME_API_KEY.
// Creates a sandbox, runs a command in it, removes it; prints JSON.
import { Runtime } from 'withruntime';

const rt = new Runtime({ maxRetries: 0 });
try {
  const sbx = await rt.sandboxes.create({ memoryMiB: 256 });
  const r = await sbx.exec(['echo', 'over tls'], { check: true });
  const listed = (await rt.sandboxes.list()).data.map((s) => s.id);
  await sbx.delete();
  process.stdout.write(JSON.stringify({ id: sbx.id, stdout: r.stdout, listed }) + '\n');
} catch (e) {
  process.stderr.write(`${e.name}: ${e.message}\n`);
  process.exit(1);
}
