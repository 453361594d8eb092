// The keeper's creates and removals yield the CPU (issue 13): the keeper runs in
// a cpu cgroup of its own, runtime/keeper-INSTANCE, with cpu.shares 102 (v1) or
// cpu.weight 10 (v2) against the default 1024 / 100 of every sandbox and every
// other process group, so a create competes with the programs in sandboxes at a
// tenth of their weight. The server and the programs in sandboxes are not in
// it, and it is gone when the daemon stops. (bench/neighbour.sh's churn phase
// measures what it buys: docs/benchmarks.md.)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { instanceName, isRoot, processesMatching, startDaemon, stopDaemon, waitFor } from './lib.mjs';

const skip = isRoot() ? false : 'needs root';
let d;
before(async () => {
  if (!skip) d = await startDaemon({ prefix: 'runtime-priority-' });
});
after(async () => {
  if (d) await stopDaemon(d);
});

/** The cgroup path of pid in the hierarchy (v1) or tree (v2) that has the cpu controller. */
function cpuCgroupOf(pid) {
  const lines = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n');
  const v1 = lines.find((l) => l.split(':')[1].split(',').includes('cpu'));
  if (v1) return { version: 1, dir: path.join('/sys/fs/cgroup/cpu', v1.split(':')[2]) };
  return { version: 2, dir: path.join('/sys/fs/cgroup', lines.find((l) => l.startsWith('0::')).slice(3)) };
}

test('the keeper, and only the keeper, runs at a tenth of the CPU weight; its cgroup goes with it', { skip }, async () => {
  const [keeper, server] = d.daemonPids();
  assert.ok(server, 'found the server process');
  const k = cpuCgroupOf(keeper);
  assert.equal(path.basename(k.dir), `keeper-${instanceName(d.stateDir)}`);
  assert.equal(path.basename(path.dirname(k.dir)), 'runtime');
  const weight = fs.readFileSync(path.join(k.dir, k.version === 1 ? 'cpu.shares' : 'cpu.weight'), 'utf8').trim();
  assert.equal(weight, k.version === 1 ? '102' : '10');
  assert.notEqual(cpuCgroupOf(server).dir, k.dir, 'the server keeps the weight of its group');

  const sb = await d.create({});
  const marker = `sleep 600${process.pid}`; // a duration no other process has
  await d.sh(sb.id, `${marker} </dev/null >/dev/null 2>&1 &`);
  const [prog] = await waitFor(() => {
    const found = processesMatching(marker);
    return found.length ? found : null;
  }, { what: 'the program in the sandbox' });
  const p = cpuCgroupOf(prog.pid);
  assert.ok(p.dir.endsWith(`-${sb.id}`), `a sandbox's program is in the sandbox's cpu cgroup, not the keeper's: ${p.dir}`);
  await d.remove(sb.id);

  await d.stop();
  assert.equal(fs.existsSync(k.dir), false, `${k.dir} is removed when the keeper stops`);
});
