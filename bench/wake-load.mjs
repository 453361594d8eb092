// Wake client for bench/idle.sh: how much a pause costs the next MCP call. One official SDK
// client (the TypeScript SDK pinned in tests/mcp), connected through the gateway; then N times:
// a warm tools/call (timed), POST /v1/sandboxes/{id}/pause, and the first tools/call after the
// pause (timed: it wakes the sandbox). Prints one JSON object on stdout.
//
//   node bench/wake-load.mjs --url URL --token T --api URL --key K --sandbox ID
//        [--n 200] [--warmup 20] [--tool hello] [--args '{"name":"bench"}'] [--raw FILE]
//        [--seconds S]   (stop early after S seconds; default 120)
//        [--reclaim FILE VALUE]   after each pause, write VALUE to FILE before the call: with a
//                                 cgroup's memory.force_empty (v1) or memory.reclaim (v2), the
//                                 host takes back what it can of the paused sandbox's memory
// --n 0 makes only the --warmup calls (to exercise a server). --raw FILE gets one line per
// round: "warm_us first_after_pause_us" (microseconds).
// Exit status: 0 when every round succeeded, 1 otherwise (the first error is in "error").
import { writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { eachOption, sdk, usageFor } from "./lib.mjs";

const usage = usageFor(
    "wake-load",
    "usage: node wake-load.mjs --url URL --token T --api URL --key K --sandbox ID\n" +
        "         [--n N] [--warmup K] [--tool NAME] [--args JSON] [--raw FILE] [--seconds S]\n" +
        "         [--reclaim FILE VALUE]\n"
);

function parseArgs(argv) {
    const o = { n: 200, warmup: 20, tool: "hello", args: { name: "bench" }, raw: null, seconds: 120 };
    eachOption(argv, usage, (a, { val, num, json }) => {
        switch (a) {
        case "--url": o.url = val(); break;
        case "--token": o.token = val(); break;
        case "--api": o.api = val(); break;
        case "--key": o.key = val(); break;
        case "--sandbox": o.sandbox = val(); break;
        case "--n": o.n = Math.floor(num(0)); break;
        case "--warmup": o.warmup = Math.floor(num(0)); break;
        case "--tool": o.tool = val(); break;
        case "--args": o.args = json(); break;
        case "--raw": o.raw = val(); break;
        case "--seconds": o.seconds = num(1); break;
        case "--reclaim": o.reclaim = [val(), val()]; break;
        default: usage(`unknown argument '${a}'`);
        }
    });
    for (const k of ["url", "token", "api", "key", "sandbox"]) if (!o[k]) usage(`--${k} is required`);
    return o;
}

async function pause(o) {
    const res = await fetch(`${o.api}/v1/sandboxes/${encodeURIComponent(o.sandbox)}/pause`, {
        method: "POST", headers: { Authorization: `Bearer ${o.key}` }, signal: AbortSignal.timeout(30000),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`pause: HTTP ${res.status} ${text}`);
    const status = JSON.parse(text).status;
    if (status !== "paused") throw new Error(`pause answered status ${status}`);
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const { Client } = await sdk("client/index.js");
    const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
    const client = new Client({ name: "runtime-bench-wake", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(o.url), {
        requestInit: { headers: { Authorization: `Bearer ${o.token}` } },
    });
    await client.connect(transport);
    const call = async () => {
        const t0 = performance.now();
        const r = await client.callTool({ name: o.tool, arguments: o.args }, undefined, { timeout: 30000 });
        const us = (performance.now() - t0) * 1000;
        if (r.isError) throw new Error(`${o.tool}: ${JSON.stringify(r.content)}`);
        return us;
    };
    for (let i = 0; i < o.warmup; i++) await call();

    const lines = [];
    const end = Date.now() + o.seconds * 1000;
    let error = null;
    try {
        for (let i = 0; i < o.n && Date.now() < end; i++) {
            const warm = await call();
            await pause(o);
            if (o.reclaim) writeFileSync(o.reclaim[0], o.reclaim[1]);
            const first = await call();
            lines.push(`${warm.toFixed(1)} ${first.toFixed(1)}`);
        }
    } catch (e) {
        error = e.message;
    }
    if (o.raw) writeFileSync(o.raw, lines.length ? lines.join("\n") + "\n" : "");
    try {
        await transport.terminateSession();
    } catch {}
    await client.close();
    process.stdout.write(JSON.stringify({ rounds: lines.length, wanted: o.n, error }) + "\n");
    process.exit(error || lines.length < o.n ? 1 : 0);
}

main().catch((e) => {
    process.stderr.write(`wake-load: ${e.stack || e.message}\n`);
    process.exit(1);
});
