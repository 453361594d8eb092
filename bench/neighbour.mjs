// Load and probe programs for bench/neighbour.sh (noisy neighbour, issues 11 and 13). One file, one
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
//   conns    [--concurrency 32] [--addr IP]    --rate connections a second (paced by the shared token
//            bucket, not as fast as possible), each to --host's address on --port: one byte,
//            its echo, close; counts echoes and failures (by why), the echoes' latency.
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
//   churn --api URL --key K [--concurrency 1] [--memory 256]   --concurrency loops of
//            POST /v1/sandboxes {memoryMiB, idlePauseSeconds: 0} then DELETE of what it
//            made, each loop the next create when its delete is answered; counts creates,
//            removes and errors, the latency of each.
//   spawn-churn --argv JSON [--concurrency 4]   --rate processes a second, each argv run to
//            its exit (issue 13's reference for churn: bubblewrap sandboxes, the kernel's
//            share of a create without runtime); counts runs and failures, their latency.
//   conns --addr IP   (on the host: issue 13's reference for conns) the same connections
//            straight to the upstream, no proxy.
//   unread --url GW --token T [--streams listen,get] [--uri URI]   (issue 23) a tenant that
//            opens a gateway stream and never reads it: listen = a 2026-07-28
//            subscriptions/listen for --uri, get = a 2025 session subscribed to --uri with its
//            GET stream open; each is read up to the end of its answer's head, then paused.
//            The tenant's server (bench/notify-server.mjs) sends updates of --uri meanwhile.
//   upstream --listen ADDR --port P   (run in the test network namespace) echo server: every
//            byte back, then closes after the first chunk; counts connections.
import dgram from "node:dgram";
import { spawn } from "node:child_process";
import dns from "node:dns";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { eachOption, usageFor } from "./lib.mjs";

const usage = usageFor(
    "neighbour",
    "usage: node neighbour.mjs dns-udp|dns-tcp|proxy|refused|events|conns|probe|exec-storm|churn|\n" +
        "         spawn-churn|upstream|unread\n" +
        "         [--host NAME] [--port P] [--seconds S] [--max N] [--rate R] [--stop FILE]\n" +
        "         [--sockets K] [--conns N] [--churn K] [--concurrency K] [--n N]\n" +
        "         [--api URL --key K --sandbox ID --argv JSON --memory MIB] [--listen ADDR] [--addr IP]\n" +
        "         [--url GW --token T --streams listen,get --uri URI]\n"
);

const mode = process.argv[2];
const o = { host: "up.bench.test", port: 7000, seconds: 60, max: 2_000_000, rate: 3000,
            stop: "/workspace/stop", sockets: 4, conns: 3000, churn: null, concurrency: null,
            n: 200, api: null, key: null, sandbox: null, argv: ["true"], memory: 256,
            listen: "127.0.0.1", addr: null, url: null, token: null, streams: ["listen", "get"], uri: "bench://unread" };
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
    case "--memory": o.memory = Math.floor(num(1)); break;
    case "--listen": o.listen = val(); break;
    case "--addr": o.addr = val(); break;
    case "--url": o.url = val(); break;
    case "--token": o.token = val(); break;
    case "--streams": o.streams = val().split(","); break;
    case "--uri": o.uri = val(); break;
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
const burst = Math.max(1, o.rate / 10); // at least one, or a rate under 10 a second never starts
let tokens = burst;
const tick = setInterval(() => {
    tokens = Math.min(burst, tokens + o.rate / 100);
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

// Nearest-rank percentile q (0..1] of ascending numbers xs, rounded to 0.1; null for none.
const pct = (xs, q) => (xs.length ? Math.round(xs[Math.min(xs.length - 1, Math.ceil(q * xs.length) - 1)] * 10) / 10 : null);
const sortNum = (xs) => xs.sort((x, y) => x - y);
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

// One request to the daemon's API: resolves { status, text, ms } (status 0 when it failed:
// text says why), never rejects; 30 s at most.
function apiCall(agent, method, path, body = null) {
    return new Promise((resolve) => {
        const a = performance.now();
        const headers = { authorization: `Bearer ${o.key}` };
        if (body !== null) {
            headers["content-type"] = "application/json";
            headers["content-length"] = Buffer.byteLength(body);
        }
        const req = http.request(new URL(path, o.api), { method, agent, headers }, (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (d) => { text += d; });
            res.on("end", () => resolve({ status: res.statusCode, text, ms: performance.now() - a }));
            res.on("error", (e) => resolve({ status: 0, text: `response: ${e.message}`, ms: performance.now() - a }));
        });
        req.setTimeout(30000, () => req.destroy(new Error("timeout")));
        req.on("error", (e) => resolve({ status: 0, text: e.code || e.message, ms: performance.now() - a }));
        req.end(body ?? undefined);
    });
}

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

// The ends of the connections held open, called when the run stops; and of those in flight,
// ended then too (a connection the proxy left in its backlog would hold the stop for seconds).
const holding = new Set();
const inflight = new Set();
stopped.then(() => {
    for (const end of [...holding]) end(true, "held");
    for (const end of [...inflight]) end(false, "stopped");
});

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
            inflight.delete(end);
            s.destroy();
            resolve({ ok, why, connected, ms: performance.now() - a });
        };
        if (!hold) inflight.add(end);
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

// Sends a raw HTTP/1.1 request (unread) and resolves at the end of the answer's head with
// { status, head, sock }, the socket paused: nothing more of the answer is ever read.
function rawHead(u, method, headers, body = "") {
    return new Promise((resolve, reject) => {
        const sock = net.connect({ host: u.hostname, port: Number(u.port || 80) });
        let got = Buffer.alloc(0);
        const timer = setTimeout(() => {
            sock.destroy();
            reject(new Error(`${method} ${u.pathname}: no answer head in 10 s`));
        }, 10000);
        sock.on("error", (e) => {
            clearTimeout(timer);
            reject(e);
        });
        sock.on("connect", () => {
            const lines = [`${method} ${u.pathname}${u.search} HTTP/1.1`, `Host: ${u.host}`,
                           ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
            if (body) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
            sock.write(lines.join("\r\n") + "\r\n\r\n" + body);
        });
        const onData = (d) => {
            got = Buffer.concat([got, d]);
            const end = got.indexOf("\r\n\r\n");
            if (end < 0) return;
            sock.pause();
            sock.off("data", onData);
            clearTimeout(timer);
            const head = got.subarray(0, end).toString("latin1");
            resolve({ status: Number(head.split(" ")[1]), head, sock });
        };
        sock.on("data", onData);
    });
}

const MODERN = "2026-07-28";
const LEGACY = "2025-11-25";
const CLIENT = { name: "bench-unread", version: "1.0.0" };

// A 2026-07-28 subscriptions/listen stream for --uri, left unread.
async function openListen(u, auth, streams) {
    const body = JSON.stringify({ jsonrpc: "2.0", id: "unread-listen", method: "subscriptions/listen",
        params: { notifications: { resourceSubscriptions: [o.uri] }, _meta: {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": CLIENT } } });
    const r = await rawHead(u, "POST", { Authorization: auth, "Content-Type": "application/json",
        Accept: "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen" }, body);
    streams.push({ sock: r.sock });
    if (r.status !== 200 || !/content-type: *text\/event-stream/i.test(r.head))
        throw new Error(`listen: ${r.head.split("\r\n")[0]}`);
    return { status: r.status };
}

// A 2025 session subscribed to --uri, its GET stream open and left unread.
async function openGet(u, auth, streams) {
    const h = { Authorization: auth, "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
    const post = async (msg, sid) => {
        const res = await fetch(u, { method: "POST", body: JSON.stringify(msg), signal: AbortSignal.timeout(10000),
            headers: sid ? { ...h, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY } : h });
        const text = await res.text();
        if (res.status >= 300) throw new Error(`${msg.method}: HTTP ${res.status} ${text.slice(0, 200)}`);
        return res;
    };
    const init = await post({ jsonrpc: "2.0", id: 1, method: "initialize",
                              params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: CLIENT } });
    const sid = init.headers.get("mcp-session-id");
    if (!sid) throw new Error("initialize: no Mcp-Session-Id");
    await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sid);
    const r = await rawHead(u, "GET", { Authorization: auth, Accept: "text/event-stream", "Mcp-Session-Id": sid,
                                        "MCP-Protocol-Version": LEGACY });
    const out = { status: r.status };
    const end = () => fetch(u, { method: "DELETE", signal: AbortSignal.timeout(5000),
        headers: { Authorization: auth, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY } })
        .then((res) => { out.deleted = res.status; }, (e) => { out.deleted = e.message; });
    streams.push({ sock: r.sock, end });
    if (r.status !== 200) throw new Error(`GET: ${r.head.split("\r\n")[0]}`);
    await post({ jsonrpc: "2.0", id: 2, method: "resources/subscribe", params: { uri: o.uri } }, sid);
    return out; // its DELETE's status is added at the end
}

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

    // Allowed connections at a steady rate: each one a proxy accept, sniff, judge, dial,
    // splice and close, and an egress.allowed event (up to the sandbox's event rate).
    async conns() {
        const addr = o.addr ?? await synth(o.host);
        const echoMs = [];
        await loops(o.concurrency ?? 32, async (i) => {
            const b = String.fromCharCode(97 + (i % 26)); // a lowercase byte: neither TLS nor HTTP
            const r = await connectOnce(addr, o.port, { send: b, expectEcho: true });
            if (r.why === "echo") {
                count("echoes");
                echoMs.push(r.ms);
            } else {
                count("failures");
                count(`failed_${r.why}`);
            }
        });
        sortNum(echoMs);
        done({ address: addr, rate: o.rate, per_second: Math.round(attempts / elapsed()),
               echoes: counts.echoes ?? 0, failures: counts.failures ?? 0,
               echo_p50_ms: pct(echoMs, 0.5), echo_p99_ms: pct(echoMs, 0.99), echo_max_ms: pct(echoMs, 1) });
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
        const path = `/v1/sandboxes/${encodeURIComponent(o.sandbox)}/exec`;
        const body = JSON.stringify({ argv: o.argv });
        const okMs = [];
        let firstOther = null;
        const one = async () => {
            const r = await apiCall(agent, "POST", path, body);
            if (!r.status) return count(`err_${r.text}`);
            count(`http_${r.status}`);
            if (r.status === 200) {
                okMs.push(r.ms);
                try { if (JSON.parse(r.text).exitCode !== 0) count("exit_nonzero"); } catch { count("bad_json"); }
            } else firstOther ??= `${r.status} ${r.text.slice(0, 200)}`;
        };
        await Promise.all(Array.from({ length: k }, async () => {
            while (await pace()) await one();
        }));
        agent.destroy();
        sortNum(okMs);
        done({ concurrency: k, ok_p50_ms: pct(okMs, 0.5), ok_p99_ms: pct(okMs, 0.99), ok_max_ms: pct(okMs, 1), first_other: firstOther });
    },

    // Sandboxes made and removed one after another (per loop): what every create and rm
    // costs the daemon's other users. A loop whose call failed waits 100 ms (no spin on
    // a 503 or 429); a create that succeeded is always removed, even when stopping.
    async churn() {
        if (!o.api || !o.key) usage("churn needs --api and --key");
        const k = o.concurrency ?? 1;
        const agent = new http.Agent({ keepAlive: true, maxSockets: k });
        const body = JSON.stringify({ memoryMiB: o.memory, idlePauseSeconds: 0 });
        const createMs = [], removeMs = [];
        let firstError = null;
        const failed = async (what, r) => {
            count(`${what}_errors`);
            firstError ??= `${what}: ${r.status || "no answer"} ${r.text.slice(0, 200)}`;
            await sleep(100);
        };
        await Promise.all(Array.from({ length: k }, async () => {
            while (await pace()) {
                const c = await apiCall(agent, "POST", "/v1/sandboxes", body);
                let id = null;
                try { id = c.status === 201 ? JSON.parse(c.text).id : null; } catch { /* below */ }
                if (!id) { await failed("create", c); continue; }
                count("creates");
                createMs.push(c.ms);
                const d = await apiCall(agent, "DELETE", `/v1/sandboxes/${encodeURIComponent(id)}`);
                if (d.status !== 200) { await failed("remove", d); continue; }
                count("removes");
                removeMs.push(d.ms);
            }
        }));
        agent.destroy();
        sortNum(createMs);
        sortNum(removeMs);
        done({ concurrency: k, memoryMiB: o.memory, creates: counts.creates ?? 0, removes: counts.removes ?? 0,
               create_errors: counts.create_errors ?? 0, remove_errors: counts.remove_errors ?? 0,
               create_p50_ms: pct(createMs, 0.5), create_p99_ms: pct(createMs, 0.99), create_max_ms: pct(createMs, 1),
               remove_p50_ms: pct(removeMs, 0.5), remove_p99_ms: pct(removeMs, 0.99), remove_max_ms: pct(removeMs, 1),
               first_error: firstError });
    },

    // Processes started at a steady rate, each waited for: with bubblewrap, the namespaces
    // and mounts of a sandbox made and torn down by the kernel, with no daemon involved.
    async "spawn-churn"() {
        const runMs = [];
        let firstError = null;
        await loops(o.concurrency ?? 4, async () => {
            const a = performance.now();
            const r = await new Promise((resolve) => {
                const c = spawn(o.argv[0], o.argv.slice(1), { stdio: ["ignore", "ignore", "pipe"] });
                let err = "";
                c.stderr.on("data", (d) => { err += d; });
                c.on("error", (e) => resolve(e.message));
                c.on("close", (code) => resolve(code === 0 ? null : `exit ${code}: ${err.slice(0, 200)}`));
            });
            if (r === null) {
                count("runs");
                runMs.push(performance.now() - a);
            } else {
                count("failures");
                firstError ??= r;
            }
        });
        sortNum(runMs);
        done({ argv0: o.argv[0], rate: o.rate, per_second: Math.round(attempts / elapsed()),
               runs: counts.runs ?? 0, failures: counts.failures ?? 0, run_p50_ms: pct(runMs, 0.5),
               run_p99_ms: pct(runMs, 0.99), run_max_ms: pct(runMs, 1), first_error: firstError });
    },

    // A tenant's gateway streams, opened and never read (issue 23).
    async unread() {
        if (!o.url || !o.token) usage("unread needs --url and --token");
        const u = new URL(o.url);
        const auth = `Bearer ${o.token}`;
        const streams = [], opened = {};
        for (const kind of o.streams) {
            try {
                if (kind === "listen") opened[kind] = await openListen(u, auth, streams);
                else if (kind === "get") opened[kind] = await openGet(u, auth, streams);
                else usage(`--streams: listen or get, not '${kind}'`);
            } catch (e) {
                opened[kind] = { error: e.message };
                count("stream_errors");
            }
        }
        await stopped;
        for (const x of streams) x.sock.destroy();
        await Promise.all(streams.map((x) => x.end?.()));
        done({ uri: o.uri, streams: opened });
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
