// Unauthenticated load for the attack suite, run where the daemon listens (its
// network namespace): `node flood.mjs MODE JSON`. Prints one JSON line per report.
//
//   idle  {port, count, sources}  opens count TCP connections, round robin from the
//         source addresses, sends nothing; reports {"opened","closed"} once every
//         attempt has settled, then again on each line read from stdin; exits when
//         stdin ends
//   call  {port, path, method, headers, body, source}  one HTTP request; prints
//         {"status","body"} or {"error"}
import http from 'node:http';
import net from 'node:net';
import readline from 'node:readline';

const [mode, argText] = process.argv.slice(2);
const arg = JSON.parse(argText);
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');

function idle({ port, count, sources }) {
  let settled = 0, opened = 0, closed = 0, failed = 0;
  const socks = [];
  const report = () => out({ opened, closed, failed, open: opened - closed });
  const settle = () => {
    if (++settled === count) report();
  };
  for (let i = 0; i < count; i++) {
    const s = net.connect({ port, host: '127.0.0.1', localAddress: sources[i % sources.length] });
    socks.push(s);
    let done = false;
    s.on('connect', () => {
      opened++;
      if (!done) { done = true; settle(); }
    });
    s.on('close', () => {
      if (s.connecting || !done) failed++;
      else closed++;
      if (!done) { done = true; settle(); }
    });
    s.on('error', () => {});
  }
  readline.createInterface({ input: process.stdin }).on('line', report).on('close', () => {
    for (const s of socks) s.destroy();
    process.exit(0);
  });
}

function call({ port, path, method = 'GET', headers = {}, body, source = '127.0.0.1' }) {
  const req = http.request({ host: '127.0.0.1', port, path, method, headers, localAddress: source, agent: false,
    timeout: 10000 }, (res) => {
    const chunks = [];
    res.on('data', (d) => chunks.push(d));
    res.on('end', () => out({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
  });
  req.on('timeout', () => req.destroy(new Error('no answer in 10 s')));
  req.on('error', (e) => out({ error: e.message }));
  req.end(body);
}

if (mode === 'idle') idle(arg);
else if (mode === 'call') call(arg);
else throw new Error(`unknown mode ${mode}`);
