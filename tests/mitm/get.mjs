// One HTTPS GET the way a program in a sandbox makes it, for tests/mitm/verify.sh.
//   node get.mjs https|fetch HOST PORT [CAFILE]
// HOST is a name (resolved to 127.0.0.1 here, never through DNS) or an IP
// literal. Without CAFILE, trust comes from NODE_EXTRA_CA_CERTS, as in a
// sandbox. Exits 0 on a 2xx answer, 1 with the error code otherwise.
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';

const [mode, host, port, cafile] = process.argv.slice(2);
const ca = cafile ? fs.readFileSync(cafile) : undefined;

// Loopback only: a name always resolves to 127.0.0.1.
function lookup(name, opts, cb) {
    if (opts && opts.all) cb(null, [{ address: '127.0.0.1', family: 4 }]);
    else cb(null, '127.0.0.1', 4);
}

function viaHttps() {
    return new Promise((resolve, reject) => {
        const opts = { host, port: Number(port), path: '/', ca, timeout: 10000 };
        if (!net.isIP(host)) opts.lookup = lookup;
        const req = https.get(opts, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode));
        });
        req.on('timeout', () => req.destroy(new Error('timed out')));
        req.on('error', reject);
    });
}

async function viaFetch() {
    const url = `https://${net.isIPv6(host) ? `[${host}]` : host}:${port}/`;
    const res = await fetch(url, { signal: AbortSignal.timeout(10000) });
    await res.arrayBuffer();
    return res.status;
}

try {
    const status = await (mode === 'fetch' ? viaFetch() : viaHttps());
    console.log(`status ${status}`);
    process.exit(status >= 200 && status < 300 ? 0 : 1);
} catch (e) {
    const cause = e.cause || e;
    console.log(`error ${cause.code || ''} ${cause.message}`);
    process.exit(1);
}
