// A tiny HTTP host for the local catalog tests (local-servers.test.mjs): it serves
// fixed pages and logs every request as a JSON line, so a test can tell what a
// server in a sandbox really fetched. Run inside the test's network namespace:
//
//   node local-web.mjs CONFIG.json     CONFIG: {bind, port, pages: {PATH: {type, body}}}
//
// stdout: {"ev":"listening"} once bound, then {"ev":"req", method, path, host, ua}
// per request (the tests/secrets Upstream class reads these lines).

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Upstream } from '../secrets/lib.mjs';

export const WEB_JS = fileURLToPath(import.meta.url);

/** Starts this file as a web host in namespace ns; resolves once it listens. */
export async function startWeb(ns, dir, { bind, port = 80, pages }) {
  const cfg = path.join(dir, 'web.json');
  fs.writeFileSync(cfg, JSON.stringify({ bind, port, pages }));
  const web = new Upstream(['netns', 'exec', ns, process.execPath, WEB_JS, cfg]);
  await web.ready();
  return web;
}

function serve(cfgFile) {
  const { bind, port, pages } = JSON.parse(fs.readFileSync(cfgFile, 'utf8'));
  const log = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const srv = http.createServer((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    log({ ev: 'req', method: req.method, path: p, host: req.headers.host, ua: req.headers['user-agent'] ?? '' });
    const page = pages[p];
    if (!page) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      return res.end('not found\n');
    }
    res.writeHead(200, { 'Content-Type': page.type, 'Cache-Control': 'no-store' });
    res.end(page.body);
  });
  srv.on('error', (e) => {
    log({ ev: 'failed', error: e.message });
    process.exit(1);
  });
  srv.listen(port, bind, () => log({ ev: 'listening', bind, port }));
}

if (process.argv[1] === WEB_JS) serve(process.argv[2]);
