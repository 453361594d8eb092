// Load and probe programs for bench/neighbour.sh (noisy neighbour, issue 11). One file, one
// MODE per run; each prints one JSON object on stdout and stops by itself: at --seconds, at
// --max attempts, or as soon as the --stop file exists (polled every 50 ms).
//
// In the NOISY sandbox (copied to /workspace with lib.mjs; node builtins only):
//   dns-udp  [--sockets 4]         UDP queries to the DNS stub as fast as each socket takes
//            them (the next from the send callback, yielding to the loop every 64): every
//            other one for a name new to the sandbox (qN.flood.test, under an allowed
//            wildcard), the others for --host.
//   dns-tcp  [--conns 3000]        DNS-over-TCP connections to the stub, opened at once and
//            held; each sends one query when it connects; whatever the far end closes is
//            opened again (churn), --rate a second at most.
//   proxy    [--conns 3000] [--churn 32]   connections to --host's synthetic address on 443,
//            held silent (the proxy waits for a ClientHello), reopened when closed; plus
//            --churn loops of connect, one byte to --port, its echo, close.
//   refused  [--concurrency 64]    loops of refused attempts, in turn: a connection to an IP
//            literal (198.51.100.N, not allowed), an HTTP request on --host's address whose
//            Host is another name (host_mismatch), and a UDP query for a name not allowed.
//   events   [--churn 16]          UDP queries for names not allowed, as fast as the socket
//            takes them (each is an egress.refused), plus --churn loops of allowed
//            connect/echo/close to --host:--port (each an egress.allowed).
//   common: --host NAME (up.bench.test) --port P (7000) --seconds S (60) --max N (attempts,
//           2000000) --rate R (new connections a second, all loops together; 3000)
//           --stop FILE (/workspace/stop)
// In the VICTIM sandbox:
//   probe --n 200 --rate 40 [--host --port]   egress setup time, one probe after another,
//            --rate a second at most: dns.lookup(host) (getaddrinfo through the stub), then
//            connect to that address and port, send one byte, read its echo from the
//            upstream; "lookup", "connect" and "total" in microseconds, from before the lookup.
// On the host:
//   exec-storm --api URL --key K --sandbox ID [--concurrency 100] [--argv JSON (["true"])]
//            --concurrency loops of POST /v1/sandboxes/ID/exec, each the next when its answer
//            is in (429s included); counts by HTTP status, latency of the 200s.
//   upstream --listen ADDR --port P   (run in the test network namespace) echo server: every
//            byte back, then closes after the first chunk; counts connections.
import dgram from "node:dgram";
import dns from "node:dns";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { eachOption, usageFor } from "./lib.mjs";

const usage = usageFor(
    "neighbour",
    "usage: node neighbour.mjs dns-udp|dns-tcp|proxy|refused|events|probe|exec-storm|upstream\n" +
        "         [--host NAME] [--port P] [--seconds S] [--max N] [--rate R] [--stop FILE]\n" +
        "         [--sockets K] [--conns N] [--churn K] [--concurrency K] [--n N]\n" +
        "         [--api URL --key K --sandbox ID --argv JSON] [--listen ADDR]\n"
);

const mode = process.argv[2];
const o = { host: "up.bench.test", port: 7000, seconds: 60, max: 2_000_000, rate: 3000,
            stop: "/workspace/stop", sockets: 4, conns: 3000, churn: null, concurrency: null,
            n: 200, api: null, key: null, sandbox: null, argv: ["true"], listen: "127.0.0.1" };
eachOption(process.argv.slice(3), usage, (a, { val, num, json }) => {
    switch (a) {
    case "--host": o.host = val(); break;
    case "--port": o.port = Math.floor(num(1)); break;
    case "--seconds": o.seconds = num(0.1); break;
    case "--max": o.max = Math.floor(num(1)); break;
    case "--rate": o.rate = num(0.1); break;
    case "--stop": o.stop = val(); break;
    case "--sockets": o.sockets = Math.floor(num(1)); break;
    case "--conns": o.conns = Math.floor(num(0)); break;
    case "--churn": o.churn = Math.floor(num(0)); break;
    case "--concurrency": o.concurrency = Math.floor(num(1)); break;
    case "--n": o.n = Math.floor(num(1)); break;
    case "--api": o.api = val(); break;
    case "--key": o.key = val(); break;
    case "--sandbox": o.sandbox = val(); break;
    case "--argv": o.argv = json(); break;
    case "--listen": o.listen = val(); break;
    default: usage(`unknown option '${a}'`);
    }
});

// ---- shared: the stop condition, a pacer, DNS wire format --------------------------------

const t0 = performance.now();
const deadline = t0 + o.seconds * 1000;
let stopping = false;
let attempts = 0; // every attempt of any kind, against --max
const stopWaiters = [];
function stop() {
    if (stopping) return;
    stopping = true;
    for (const f of stopWaiters.splice(0)) f();
}
const stopped = new Promise((res) => stopWaiters.push(res));
const poll = setInterval(() => {
    if (performance.now() >= deadline || attempts >= o.max || (o.stop && fs.existsSync(o.stop))) stop();
}, 50);
stopped.then(() => clearInterval(poll));
const more = () => !stopping && attempts < o.max;

// A token bucket shared by all loops (one timer, a queue of waiters): resolves true when the
// next attempt may start, false once the run is over.
const waiters = [];
let tokens = o.rate / 10;
const tick = setInterval(() => {
    tokens = Math.min(o.rate / 10, tokens + o.rate / 100);
    while (waiters.length && (!more() || tokens >= 1)) {
        if (more()) {
            tokens -= 1;
            attempts++;
            waiters.shift()(true);
        } else waiters.shift()(false);
    }
}, 10);
stopped.then(() => {
    clearInterval(tick);
    for (const w of waiters.splice(0)) w(false);
});
function pace() {
    if (!more()) return Promise.resolve(false);
    if (!waiters.length && tokens >= 1) {
        tokens -= 1;
        attempts++;
        return Promise.resolve(true);
    }
    return new Promise((res) => waiters.push(res));
}

const stubAddr = () => {
    try {
        return fs.readFileSync("/etc/resolv.conf", "utf8").match(/^nameserver\s+(\S+)/m)[1];
    } catch {
        return "127.0.0.1";
    }
};

// An A query for name with id.
function query(name, id) {
    const parts = [Buffer.from([(id >> 8) & 255, id & 255, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0])];
    for (const l of name.split(".")) parts.push(Buffer.from([l.length]), Buffer.from(l));
    parts.push(Buffer.from([0, 0, 1, 0, 1]));
    return Buffer.concat(parts);
}
const rcodeName = (m) => (m.length < 4 ? "short" : ["noerror", "formerr", "servfail", "nxdomain"][m[3] & 15] ?? `rcode${m[3] & 15}`);

const counts = {};
const count = (k, n = 1) => { counts[k] = (counts[k] || 0) + n; };
const elapsed = () => Math.round(performance.now() - t0) / 1000;
function done(extra = {}) {
    process.stdout.write(JSON.stringify({ mode, seconds: elapsed(), attempts, ...counts, ...extra }) + "\n");
    process.exit(0);
}

// UDP queries from one socket, the next one from the send callback: names(i) picks the name.
function udpFlood(names) {
    const stub = stubAddr();
    return new Promise((resolve) => {
        const s = dgram.createSocket("udp4");
        s.on("message", (m) => count(`dns_${rcodeName(m)}`));
        s.on("error", () => count("dns_socket_errors"));
        let i = 0;
        const next = (err) => {
            if (err) count("dns_send_errors");
            if (!more()) return s.close(() => resolve());
            attempts++;
            count("dns_sent");
            const n = i++;
            const send = () => s.send(query(names(n), n & 0xffff), 53, stub, next);
            // A send that completes at once calls back on the same tick: yield now and then,
            // or timers (the stop check) and answers never get their turn.
            if (n % 64 === 63) setImmediate(send);
            else send();
        };
        next();
    });
}

// The ends of the connections held open, called when the run stops.
const holding = new Set();
stopped.then(() => { for (const end of [...holding]) end(true, "held"); });

// One connection: resolves { ok, closedByPeer, ms } when it ends (or when stopping, for held ones).
function connectOnce(host, port, { send = null, expectEcho = false, hold = false } = {}) {
    return new Promise((resolve) => {
        const a = performance.now();
        let connected = false;
        let got = "";
        let settled = false;
        const s = net.connect({ host, port });
        const end = (ok, why) => {
            if (settled) return;
            settled = true;
            holding.delete(end);
            s.destroy();
            resolve({ ok, why, connected, ms: performance.now() - a });
        };
        s.setNoDelay(true);
        s.on("connect", () => {
            connected = true;
            if (send) s.write(send);
            if (hold) {
                holding.add(end);
                if (stopping) end(true, "held");
            }
        });
        s.on("data", (d) => {
            got += d.toString("latin1");
            if (expectEcho && got.length >= send.length) end(got === send, got === send ? "echo" : "bad_echo");
        });
        s.on("error", (e) => end(false, e.code || "error"));
        s.on("close", () => end(false, connected ? "closed" : "refused"));
        if (!hold) s.setTimeout(15000, () => end(false, "timeout"));
    });
}

const SYNTH = new Map();
async function synth(name) {
    if (!SYNTH.has(name)) {
        const { address } = await dns.promises.lookup(name, { family: 4 });
        SYNTH.set(name, address);
    }
    return SYNTH.get(name);
}

// loops(k, body): k loops of `while (await pace()) await body(i)`.
const loops = (k, body) => Promise.all(Array.from({ length: k }, async (_, j) => {
    let i = j;
    while (await pace()) {
        await body(i);
        i += k;
    }
}));

// held(n, open): n slots, each opening a connection and, when it ends, opening it again.
const held = (n, open) => Promise.all(Array.from({ length: n }, async (_, i) => {
    while (await pace()) {
        const r = await open(i);
        count(r.connected ? "held_connected" : "held_not_connected");
        count(`held_end_${r.why}`);
        if (!r.connected) await new Promise((res) => setTimeout(res, 20)); // a refused slot backs off a little
    }
}));

// ---- the modes ----------------------------------------------------------------------------

async function churnLoops(k, addr) {
    await loops(k, async (i) => {
        const b = String.fromCharCode(97 + (i % 26)); // a lowercase byte: neither TLS nor HTTP
        const r = await connectOnce(addr, o.port, { send: b, expectEcho: true });
        count(`churn_${r.why}`);
    });
}

const modes = {
    async "dns-udp"() {
        await Promise.all(Array.from({ length: o.sockets }, (_, k) =>
            udpFlood((i) => (i % 2 ? o.host : `q${k}x${i}.flood.test`))));
        done();
    },

    async "dns-tcp"() {
        const stub = stubAddr();
        await held(o.conns, (i) => connectOnce(stub, 53, {
            send: (() => { const q = query(o.host, i & 0xffff); return Buffer.concat([Buffer.from([q.length >> 8, q.length & 255]), q]).toString("latin1"); })(),
            hold: true,
        }));
        done({ stub });
    },

    async proxy() {
        const addr = await synth(o.host);
        await Promise.all([
            held(o.conns, () => connectOnce(addr, 443, { hold: true })),
            churnLoops(o.churn ?? 32, addr),
        ]);
        done({ address: addr });
    },

    async refused() {
        const addr = await synth(o.host);
        const stub = stubAddr();
        const u = dgram.createSocket("udp4");
        u.on("message", (m) => count(`dns_${rcodeName(m)}`));
        u.on("error", () => {});
        await loops(o.concurrency ?? 64, async (i) => {
            switch (i % 3) {
            case 0: { // an IP literal the policy does not allow
                const lit = `198.51.100.${20 + (i % 200)}`;
                const r = await connectOnce(lit, 7000 + (i % 5), { send: "x" });
                count(`literal_${r.why}`);
                break;
            }
            case 1: { // an allowed address, but the request names another host
                const r = await connectOnce(addr, 80, { send: `GET / HTTP/1.1\r\nHost: h${i}.nope.test\r\n\r\n` });
                count(`mismatch_${r.why}`);
                break;
            }
            default: // a name not allowed: NXDOMAIN and an event
                count("dns_sent");
                await new Promise((res) => u.send(query(`r${i}.nope.test`, i & 0xffff), 53, stub, res));
            }
        });
        u.close();
        done({ address: addr });
    },

    async events() {
        const addr = await synth(o.host);
        await Promise.all([
            udpFlood((i) => `e${i}.nope.test`),
            churnLoops(o.churn ?? 16, addr),
        ]);
        done({ address: addr });
    },

    async probe() {
        const lookup = [], connect = [], total = [];
        let failed = 0, firstError = null;
        const gap = 1000 / o.rate;
        for (let k = 0; k < o.n && !stopping; k++) {
            const a = performance.now();
            const b = String.fromCharCode(97 + (k % 26));
            try {
                const { address } = await dns.promises.lookup(o.host, { family: 4 });
                const l = performance.now();
                const r = await new Promise((resolve, reject) => {
                    const s = net.connect({ host: address, port: o.port });
                    let c = 0, got = "";
                    s.setNoDelay(true);
                    s.setTimeout(10000, () => { s.destroy(); reject(new Error("no echo in 10 s")); });
                    s.on("connect", () => { c = performance.now(); s.write(b); });
                    s.on("data", (d) => {
                        got += d.toString("latin1");
                        s.destroy();
                        if (got === b) resolve({ c, e: performance.now() });
                        else reject(new Error(`bad echo ${JSON.stringify(got)}`));
                    });
                    s.on("error", reject);
                    s.on("close", () => reject(new Error("closed before the echo")));
                });
                lookup.push(Math.round((l - a) * 1000));
                connect.push(Math.round((r.c - a) * 1000));
                total.push(Math.round((r.e - a) * 1000));
            } catch (e) {
                failed++;
                firstError ??= e.message;
            }
            const wait = a + gap - performance.now();
            if (wait > 0) await new Promise((res) => setTimeout(res, wait));
        }
        done({ n: o.n, ok: total.length, failed, firstError, lookup, connect, total });
    },

    async "exec-storm"() {
        if (!o.api || !o.key || !o.sandbox) usage("exec-storm needs --api, --key and --sandbox");
        const k = o.concurrency ?? 100;
        const agent = new http.Agent({ keepAlive: true, maxSockets: k });
        const url = new URL(`/v1/sandboxes/${encodeURIComponent(o.sandbox)}/exec`, o.api);
        const body = JSON.stringify({ argv: o.argv });
        const okMs = [];
        let firstOther = null;
        const one = () => new Promise((resolve) => {
            const a = performance.now();
            const req = http.request(url, { method: "POST", agent, headers: {
                authorization: `Bearer ${o.key}`, "content-type": "application/json",
                "content-length": Buffer.byteLength(body) } }, (res) => {
                let text = "";
                res.setEncoding("utf8");
                res.on("data", (d) => { text += d; });
                res.on("end", () => {
                    count(`http_${res.statusCode}`);
                    if (res.statusCode === 200) {
                        okMs.push(performance.now() - a);
                        try { if (JSON.parse(text).exitCode !== 0) count("exit_nonzero"); } catch { count("bad_json"); }
                    } else firstOther ??= `${res.statusCode} ${text.slice(0, 200)}`;
                    resolve();
                });
                res.on("error", () => { count("http_error"); resolve(); });
            });
            req.setTimeout(30000, () => req.destroy(new Error("timeout")));
            req.on("error", (e) => { count(`err_${e.code || e.message}`); resolve(); });
            req.end(body);
        });
        await Promise.all(Array.from({ length: k }, async () => {
            while (await pace()) await one();
        }));
        agent.destroy();
        okMs.sort((x, y) => x - y);
        const p = (q) => (okMs.length ? Math.round(okMs[Math.min(okMs.length - 1, Math.ceil(q * okMs.length) - 1)] * 10) / 10 : null);
        done({ concurrency: k, ok_p50_ms: p(0.5), ok_p99_ms: p(0.99), ok_max_ms: p(1), first_other: firstOther });
    },

    async upstream() {
        let conns = 0;
        const srv = net.createServer((s) => {
            conns++;
            s.setNoDelay(true);
            s.on("error", () => {});
            s.once("data", (d) => s.end(d)); // echo, then close first: no TIME_WAIT on the proxy's side
            s.setTimeout(20000, () => s.destroy());
        });
        srv.listen(o.port, o.listen, () => process.stderr.write(`upstream listening on ${o.listen}:${o.port}\n`));
        await stopped;
        srv.close();
        done({ conns });
    },
};

if (!modes[mode]) usage(mode ? `unknown mode '${mode}'` : "give a mode");
modes[mode]().catch((e) => {
    process.stdout.write(JSON.stringify({ mode, error: e.message, seconds: elapsed(), attempts, ...counts }) + "\n");
    process.exit(1);
});
