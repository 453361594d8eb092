// One account per customer: its own API key, its own limits, and a client that sees only
// its own sandboxes. Run with the admin key (STATE/admin.key) in RUNTIME_API_KEY.
import { RateLimitError, Runtime } from 'withruntime';

const admin = new Runtime();
const acme = await admin.accounts.create({ name: 'acme-example', maxSandboxes: 1 });
// acme.apiKey is shown only in this answer: hand it to the customer's programs now.

const customer = new Runtime({ apiKey: acme.apiKey });
const sbx = await customer.sandboxes.getOrCreate('customer-42', { memoryMiB: 256 });
console.log('acme sees:', (await customer.sandboxes.list()).data.map((s) => s.info.name).join(','));
try {
  await customer.sandboxes.create({ memoryMiB: 256 });
} catch (e) {
  if (!(e instanceof RateLimitError)) throw e;
  console.log(`refused: ${e.code} (${e.status})`); // the message names maxSandboxes=1
}

const row = (await admin.accounts.list()).find((a) => a.name === acme.name)!;
console.log(`${row.name}: ${row.sandboxes} sandbox, ${row.memoryMiB} MiB, limit ${row.maxSandboxes}`);

// Rotation: the previous key keeps working until the next rotation.
const { apiKey } = await admin.accounts.rotateKey(acme.name);
const rotated = new Runtime({ apiKey });
console.log('same sandbox:', (await rotated.sandboxes.get('customer-42')).id === sbx.id);

await admin.accounts.delete(acme.name); // its sandboxes, secrets and usage go with it
