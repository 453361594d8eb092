// The catalog lookup and network narrowing: find the GitHub server's entry, and in a
// throwaway sandbox (`await using`: deleted when the scope ends, also when it throws)
// allow only the hosts that entry needs; another host is then refused.
//
//   node catalog-narrow.js [--throw]     (--throw: fail inside the scope on purpose)
import { Runtime, Sandbox } from 'withruntime';

const runtime = new Runtime();
const entry = (await runtime.mcp.catalog()).find((e) => e.id === 'github');
if (!entry) throw new Error('the catalog has no github entry');
console.log(`catalog ${entry.id} ${entry.title} ${entry.version} egress=${entry.egress.join(',')}`);

{
  await using tmp = await Sandbox.create({ memoryMiB: 512 });
  console.log(`sandbox ${tmp.id}`);

  await tmp.network.set({ internet: true, allow: entry.egress });
  const policy = await tmp.network.get();
  const allow = policy.allow ?? []; // no list would be any public host
  console.log(`network internet=${policy.internet} allow=${allow.join(',')}`);
  if (policy.allow === undefined || allow.join() !== entry.egress.join())
    throw new Error(`policy not in force: ${JSON.stringify(policy)}`);

  // A host the entry does not name: the sandbox's resolver does not even give it an address.
  const other = await tmp.exec(['curl', '-sS', '-m', '5', 'https://example.com/']);
  console.log(`curl example.com exit=${other.exitCode} ${other.stderr.trim()}`);
  if (other.exitCode === 0) throw new Error('example.com was reachable');

  if (process.argv.includes('--throw')) throw new Error('thrown on purpose inside the scope');
}
console.log('scope left');
