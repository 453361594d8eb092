// MCP load client for bench/gateway.sh: tools/call round trips per second and their latency,
// over stdio (it spawns the server itself) or over Streamable HTTP (a URL). Prints one JSON
// object on stdout.
//
//   node bench/mcp-load.mjs [OPTIONS] --url URL [--token T]   (Authorization: Bearer T)
//   node bench/mcp-load.mjs [OPTIONS] --stdio CMD [ARGS...]   (everything after CMD is its argv)
// Options (before --stdio):
//   --client sdk|lean  sdk (default): the official TypeScript SDK pinned in tests/mcp (Client
//       with StdioClientTransport or StreamableHTTPClientTransport), what agents use. lean: the
//       same messages from a minimal client (JSON lines on a pipe; node:http with a keep-alive
//       socket, JSON or SSE answers), which costs the client far less CPU per call, so the
//       figures say more about what is measured and less about the client.
//   --clients N (1): N sessions, each its own client and transport (and, over stdio, its own
//       server process: stdio cannot be shared), each making its calls one after another.
//   --calls M (per client) and/or --seconds S: the run ends at whichever comes first
//       (defaults: 1000 calls, at most 120 s). --warmup K (50): calls per client first, not
//       counted; all clients start measuring together after it.
//   --era legacy|modern (legacy): legacy = the 2025 Streamable HTTP session (initialize, then
//       every call with Mcp-Session-Id). modern = MCP 2026-07-28, stateless: no initialize and
//       no session; every call is a POST of its own carrying the per-request _meta envelope
//       (protocolVersion, clientCapabilities {}, clientInfo) and the MCP-Protocol-Version,
//       Mcp-Method and Mcp-Name headers. Each client first asks server/discover once (not
//       measured) to check that the server lists 2026-07-28. Only with --client lean and
//       --url: SDK 1.32.2 speaks the 2025 revisions only.
//   --tool NAME (echo) --args JSON ({"message":"ping"}) --timeout-ms T (10000) per call;
//   --raw FILE writes every latency (microseconds, one a line), to pool runs.
// Exit status: 0 when at least one call succeeded, 1 otherwise; failed calls are counted in
// "errors" and left out of the latencies.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import http from "node:http";
import { performance } from "node:perf_hooks";
import { eachOption, sdk, usageFor } from "./lib.mjs";

const PROTOCOL = "2025-11-25"; // what SDK 1.32.2 asks for; the lean client asks the same
const MODERN = "2026-07-28"; // --era modern
const CLIENT_INFO = { name: "runtime-bench-mcp-load", version: "1.0.0" };

// The SDK gives every POST the transport's one AbortSignal, and undici keeps a listener on it
// per request until the request is garbage; past 1500 (undici resets any higher limit) Node
// prints a MaxListenersExceededWarning per call. Printing them would be measured: count them.
let warnings = 0;
process.removeAllListeners("warning");
process.on("warning", () => warnings++);

const usage = usageFor(
    "mcp-load",
    "usage: node mcp-load.mjs [--client sdk|lean] [--era legacy|modern] [--clients N] [--calls M]\n" +
        "         [--seconds S] [--warmup K] [--tool NAME] [--args JSON] [--timeout-ms T] [--raw FILE]\n" +
        "         (--url URL [--token T] | --stdio CMD [ARGS...])\n"
);

function parseArgs(argv) {
    const o = { client: "sdk", era: "legacy", clients: 1, calls: null, seconds: null, warmup: 50, tool: "echo",
                args: { message: "ping" }, timeoutMs: 10000, raw: null, url: null, token: null,
                stdio: null };
    eachOption(argv, usage, (a, { val, num, json, rest }) => {
        switch (a) {
        case "--client": o.client = val(); break;
        case "--era": o.era = val(); break;
        case "--clients": o.clients = Math.floor(num(1)); break;
        case "--calls": o.calls = Math.floor(num(1)); break;
        case "--seconds": o.seconds = num(0.001); break;
        case "--warmup": o.warmup = Math.floor(num(0)); break;
        case "--tool": o.tool = val(); break;
        case "--args": o.args = json(); break;
        case "--timeout-ms": o.timeoutMs = num(1); break;
        case "--raw": o.raw = val(); break;
        case "--url": o.url = val(); break;
        case "--token": o.token = val(); break;
        case "--stdio":
            o.stdio = rest();
            if (!o.stdio.length) usage("--stdio needs a command");
            break;
        case "-h": case "--help": usage();
        default: usage(`unknown option '${a}'`);
        }
    });
    if (!o.url === !o.stdio) usage("give exactly one of --url and --stdio");
    if (o.token && !o.url) usage("--token goes with --url");
    if (o.client !== "sdk" && o.client !== "lean") usage(`--client is sdk or lean, not '${o.client}'`);
    if (o.era !== "legacy" && o.era !== "modern") usage(`--era is legacy or modern, not '${o.era}'`);
    if (o.era === "modern" && (o.client !== "lean" || !o.url))
        usage("--era modern needs --client lean and --url (SDK 1.32.2 speaks 2025 only; stdio has no era)");
    // Bounded both ways: a call count always, a time limit always.
    if (o.calls === null && o.seconds === null) o.calls = 1000;
    if (o.seconds === null) o.seconds = 120;
    if (o.calls === null) o.calls = 10_000_000;
    return o;
}

function withTimeout(p, ms, what) {
    let timer;
    const to = new Promise((_, rej) => {
        timer = setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms);
    });
    return Promise.race([p, to]).finally(() => clearTimeout(timer));
}

// ---- sessions: open(), call() -> CallToolResult, close(), tail() (what the server said) ----

async function sdkSession(o, idx) {
    const { Client } = await sdk("client/index.js");
    let t;
    let err = "";
    if (o.url) {
        const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
        const headers = o.token ? { Authorization: `Bearer ${o.token}` } : {};
        t = new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers } });
    } else {
        const { StdioClientTransport } = await sdk("client/stdio.js");
        const [command, ...args] = o.stdio;
        t = new StdioClientTransport({ command, args, stderr: "pipe" });
        t.stderr?.on("data", (d) => { err = (err + d).slice(-2000); });
    }
    const client = new Client(CLIENT_INFO);
    const params = { name: o.tool, arguments: o.args };
    return {
        open: () => client.connect(t),
        call: () => client.callTool(params, undefined, { timeout: o.timeoutMs }),
        async close() {
            // DELETE over HTTP, so that a process per session goes; the SDK stops a stdio server.
            if (o.url) await withTimeout(t.terminateSession(), 5000, "DELETE").catch(() => {});
            await withTimeout(client.close(), 5000, "close").catch(() => {});
        },
        tail: () => (err ? ` (server ${idx} stderr: ${err.trim()})` : ""),
    };
}

// JSON-RPC bookkeeping shared by the lean transports.
function rpc(o) {
    let next = 0;
    const pending = new Map();
    return {
        request(method, params, send) {
            const id = ++next;
            const p = new Promise((resolve, reject) => {
                const timer = setTimeout(() => {
                    pending.delete(id);
                    reject(new Error(`${method}: no answer in ${o.timeoutMs} ms`));
                }, o.timeoutMs);
                pending.set(id, { resolve, reject, timer });
            });
            send({ jsonrpc: "2.0", id, method, params });
            return p;
        },
        // An answer to one of ours; true when it was one.
        settle(msg) {
            const w = msg && msg.id !== undefined && !msg.method ? pending.get(msg.id) : null;
            if (!w) return false;
            pending.delete(msg.id);
            clearTimeout(w.timer);
            if (msg.error) w.reject(new Error(`MCP error ${msg.error.code}: ${msg.error.message}`));
            else w.resolve(msg.result);
            return true;
        },
        failAll(e) {
            for (const [id, w] of pending) {
                pending.delete(id);
                clearTimeout(w.timer);
                w.reject(e);
            }
        },
    };
}

const initParams = { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: CLIENT_INFO };

function leanStdioSession(o, idx) {
    const [command, ...args] = o.stdio;
    const r = rpc(o);
    let child;
    let err = "";
    let buf = "";
    const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
    const onMessage = (m) => {
        if (r.settle(m)) return;
        if (m.method && m.id !== undefined) // a request from the server: we offer no capabilities
            send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "not supported" } });
    };
    const params = { name: o.tool, arguments: o.args };
    return {
        async open() {
            child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
            child.stderr.on("data", (d) => { err = (err + d).slice(-2000); });
            child.stdout.setEncoding("utf8");
            child.stdout.on("data", (d) => {
                buf += d;
                let nl;
                while ((nl = buf.indexOf("\n")) >= 0) {
                    const line = buf.slice(0, nl).trim();
                    buf = buf.slice(nl + 1);
                    if (line) onMessage(JSON.parse(line));
                }
            });
            child.stdin.on("error", () => {});
            child.on("error", (e) => r.failAll(e));
            child.on("exit", (code, sig) => r.failAll(new Error(`server exited (${sig || code})`)));
            await r.request("initialize", initParams, send);
            send({ jsonrpc: "2.0", method: "notifications/initialized" });
        },
        call: () => r.request("tools/call", params, send),
        async close() {
            if (!child || child.exitCode !== null || child.signalCode) return;
            const gone = new Promise((res) => child.once("exit", res));
            child.stdin.end();
            await withTimeout(gone, 2000, "exit").catch(() => {
                child.kill("SIGKILL");
                return gone;
            });
        },
        tail: () => (err ? ` (server ${idx} stderr: ${err.trim()})` : ""),
    };
}

// Messages in an SSE body: the data lines of each event, joined, as JSON.
function sseMessages(text) {
    const out = [];
    for (const ev of text.split(/\r?\n\r?\n/)) {
        const data = ev.split(/\r?\n/).filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(l[5] === " " ? 6 : 5)).join("\n");
        if (data) out.push(JSON.parse(data));
    }
    return out;
}

// The per-request envelope of 2026-07-28 (--era modern): params._meta on every request.
const modernMeta = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
};
// Mcp-Name as 2026-07-28 wants it: the name as it is when it is printable ASCII, else the
// base64 sentinel.
const mcpName = (v) => (/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(v) ? v
    : `=?base64?${Buffer.from(v, "utf8").toString("base64")}?=`);

// Over node:http with one keep-alive socket. legacy: initialize, then the session's id and
// negotiated version on every POST. modern: no session; each request carries the envelope
// and the standard headers, and the answer must be resultType "complete".
function leanHttpSession(o) {
    const url = new URL(o.url);
    if (url.protocol !== "http:") throw new Error("the lean client speaks http:// only");
    const modern = o.era === "modern";
    const agent = new http.Agent({ keepAlive: true });
    const r = rpc(o);
    let sid = null;
    let version = null;
    const headers = (m) => {
        const h = { "content-type": "application/json", accept: "application/json, text/event-stream" };
        if (o.token) h.authorization = `Bearer ${o.token}`;
        if (modern) {
            h["mcp-protocol-version"] = MODERN;
            if (m && m.method) h["mcp-method"] = m.method;
            if (m && m.method === "tools/call") h["mcp-name"] = mcpName(m.params.name);
            return h;
        }
        if (sid) h["mcp-session-id"] = sid;
        if (version) h["mcp-protocol-version"] = version;
        return h;
    };
    // One HTTP exchange; the messages of its answer go to r.settle().
    const exchange = (method, m) => new Promise((resolve, reject) => {
        const body = m === undefined ? undefined : JSON.stringify(m);
        const req = http.request(url, { method, agent, headers: headers(m) }, (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (d) => { text += d; });
            res.on("error", reject);
            res.on("end", () => {
                if (res.statusCode >= 400) {
                    reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
                    return;
                }
                if (modern && res.headers["mcp-session-id"]) {
                    reject(new Error(`a 2026-07-28 answer with Mcp-Session-Id ${res.headers["mcp-session-id"]}`));
                    return;
                }
                sid ??= res.headers["mcp-session-id"] ?? null;
                try {
                    const ct = res.headers["content-type"] || "";
                    const msgs = !text ? [] : ct.startsWith("text/event-stream") ? sseMessages(text)
                        : [JSON.parse(text)].flat();
                    resolve(msgs);
                } catch (e) {
                    reject(new Error(`unreadable answer (${e.message}): ${text.slice(0, 300)}`));
                }
            });
        });
        req.on("error", reject);
        req.end(body);
    });
    const send = (m) => {
        exchange("POST", m).then(
            (msgs) => { for (const x of msgs) r.settle(x); },
            (e) => r.failAll(e)); // sequential calls: the only one pending is this one
    };
    const params = modern ? { name: o.tool, arguments: o.args, _meta: modernMeta } : { name: o.tool, arguments: o.args };
    return {
        async open() {
            if (modern) {
                const d = await r.request("server/discover", { _meta: modernMeta }, send);
                if (!Array.isArray(d.supportedVersions) || !d.supportedVersions.includes(MODERN))
                    throw new Error(`server/discover does not list ${MODERN}: ${JSON.stringify(d).slice(0, 300)}`);
                return;
            }
            const res = await r.request("initialize", initParams, send);
            version = res.protocolVersion;
            await exchange("POST", { jsonrpc: "2.0", method: "notifications/initialized" });
        },
        call: modern
            ? async () => {
                const res = await r.request("tools/call", params, send);
                if (res.resultType !== "complete")
                    throw new Error(`resultType ${JSON.stringify(res.resultType)}, not "complete"`);
                return res;
            }
            : () => r.request("tools/call", params, send),
        async close() {
            if (sid) await withTimeout(exchange("DELETE"), 5000, "DELETE").catch(() => {});
            agent.destroy();
        },
        tail: () => "",
    };
}

function makeSession(o, idx) {
    if (o.client === "sdk") return sdkSession(o, idx);
    return o.url ? leanHttpSession(o) : leanStdioSession(o, idx);
}

// ---- the run ----

const opt = parseArgs(process.argv.slice(2));
const sessions = [];
let exitCode = 0;
try {
    // Over HTTP sessions open one by one: a gateway that starts a process per session
    // (supergateway stateful) is measured calling, not starting 16 at once. Over stdio each
    // session is its own process with nothing shared: they start together.
    const open = async (i) => {
        const s = await makeSession(opt, i);
        Object.assign(s, { lat: [], errors: 0, firstError: null });
        sessions.push(s);
        try {
            await withTimeout(s.open(), 30000, `session ${i}: ${opt.era === "modern" ? "server/discover" : "initialize"}`);
        } catch (e) {
            throw new Error(`session ${i} did not open: ${e.message}${s.tail()}`);
        }
    };
    const ids = Array.from({ length: opt.clients }, (_, i) => i);
    if (opt.url) for (const i of ids) await open(i);
    else await Promise.all(ids.map(open));

    await Promise.all(sessions.map(async (s, i) => {
        for (let k = 0; k < opt.warmup; k++) {
            const r = await s.call().catch((e) => {
                throw new Error(`session ${i}, warmup call ${k}: ${e.message}${s.tail()}`);
            });
            if (r.isError) throw new Error(`session ${i}: tool ${opt.tool} failed: ${JSON.stringify(r.content)}`);
        }
    }));

    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const deadline = t0 + opt.seconds * 1000;
    let cut = false;
    await Promise.all(sessions.map(async (s) => {
        for (let n = 0; n < opt.calls; n++) {
            const a = performance.now();
            if (a >= deadline) { cut = true; break; }
            try {
                const r = await s.call();
                if (r.isError) throw new Error(`tool error: ${JSON.stringify(r.content).slice(0, 200)}`);
                s.lat.push(performance.now() - a);
            } catch (e) {
                s.errors++;
                s.firstError ??= e.message + s.tail();
            }
        }
    }));
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);

    const lat = Float64Array.from(sessions.flatMap((s) => s.lat)).sort();
    const pct = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.ceil((p / 100) * lat.length) - 1)] : null);
    const r3 = (v) => (v === null ? null : Math.round(v * 1000) / 1000);
    const errors = sessions.reduce((a, s) => a + s.errors, 0);
    const out = {
        mode: opt.url ? "http" : "stdio",
        client: opt.client,
        era: opt.url ? opt.era : null,
        clients: opt.clients,
        servers: opt.url ? 0 : opt.clients,
        calls: lat.length,
        errors,
        seconds: r3(wall),
        rps: r3(lat.length / wall),
        p50_ms: r3(pct(50)),
        p90_ms: r3(pct(90)),
        p99_ms: r3(pct(99)),
        mean_ms: r3(lat.length ? lat.reduce((a, b) => a + b, 0) / lat.length : null),
        client_cpu: r3((cpu.user + cpu.system) / 1e6 / wall), // CPUs this process kept busy
        warmup: opt.warmup,
        cut_by_time: cut,
        tool: opt.tool,
        node_warnings: warnings,
    };
    if (!opt.url && opt.clients > 1)
        out.note = `${opt.clients} server processes, one per client: stdio cannot be shared`;
    if (errors) out.first_error = sessions.find((s) => s.firstError).firstError;
    if (opt.raw) writeFileSync(opt.raw, Array.from(lat, (v) => Math.round(v * 1000)).join("\n") + "\n");
    process.stdout.write(JSON.stringify(out) + "\n");
    if (!lat.length) exitCode = 1;
} catch (e) {
    process.stderr.write(`mcp-load: ${e.message}\n`);
    exitCode = 1;
} finally {
    await Promise.all(sessions.map((s) => s.close().catch(() => {})));
}
process.exit(exitCode);
