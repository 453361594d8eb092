// Wake client for bench/density.sh: what the first MCP call to a hibernated sandbox costs.
// For each line "ID URL TOKEN" of --list (sandboxes whose counter server answered one call
// before they hibernated), one official SDK client (the TypeScript SDK pinned in tests/mcp)
// connects through the gateway and calls "count": the whole of it, from the first request
// to the answer, is the wake (the daemon restores the sandbox when that request arrives).
// Then a second client does the same on the now running sandbox: the reference. Prints one
// line per sandbox on --raw: "wake_ms running_ms count" (count must be 2: the server's
// memory came back), and one JSON summary on stdout.
//
// --prime: before they hibernate, one call of "count" on each (it must answer 1), so that
// the wake's answer shows the memory kept.
//
//   node bench/density-wake.mjs --list FILE (--raw FILE | --prime) [--seconds S]
import { readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { eachOption, sdk, usageFor } from "./lib.mjs";

const usage = usageFor(
    "density-wake",
    "usage: node density-wake.mjs --list FILE (--raw FILE | --prime) [--seconds S]\n"
);

function parseArgs(argv) {
    const o = { seconds: 600 };
    eachOption(argv, usage, (a, { val, num }) => {
        switch (a) {
        case "--list": o.list = val(); break;
        case "--raw": o.raw = val(); break;
        case "--prime": o.prime = true; break;
        case "--seconds": o.seconds = num(1); break;
        default: usage(`unknown argument '${a}'`);
        }
    });
    if (!o.list || (!o.raw && !o.prime)) usage("--list and one of --raw or --prime are required");
    return o;
}

// A new client's connect and first call of "count": its answer and the milliseconds taken.
async function firstCall(mcp, url, token) {
    const client = new mcp.Client({ name: "runtime-bench-density", version: "1.0.0" });
    const transport = new mcp.StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    const t0 = performance.now();
    await client.connect(transport, { timeout: 30000 });
    const r = await client.callTool({ name: "count", arguments: {} }, undefined, { timeout: 30000 });
    const ms = performance.now() - t0;
    try {
        await transport.terminateSession();
    } catch {}
    await client.close();
    return { ms, count: Number(r.content?.[0]?.text) };
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const { Client } = await sdk("client/index.js");
    const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
    const mcp = { Client, StreamableHTTPClientTransport };
    const servers = readFileSync(o.list, "utf8").split("\n").filter(Boolean).map((l) => l.split(" "));
    const end = Date.now() + o.seconds * 1000;
    const lines = [];
    let error = null;
    try {
        for (const [id, url, token] of servers) {
            if (Date.now() > end) break;
            if (o.prime) {
                const first = await firstCall(mcp, url, token);
                if (first.count !== 1) throw new Error(`sandbox ${id}: count answered ${first.count}, not 1`);
                lines.push(`${first.ms.toFixed(1)}`);
                continue;
            }
            const wake = await firstCall(mcp, url, token);
            const running = await firstCall(mcp, url, token);
            if (wake.count !== 2) throw new Error(`sandbox ${id}: count answered ${wake.count} after the wake, not 2`);
            lines.push(`${wake.ms.toFixed(1)} ${running.ms.toFixed(1)} ${wake.count}`);
        }
    } catch (e) {
        error = e.message;
    }
    if (o.raw) writeFileSync(o.raw, lines.length ? lines.join("\n") + "\n" : "");
    process.stdout.write(JSON.stringify({ done: lines.length, wanted: servers.length, error }) + "\n");
    process.exit(error || lines.length < servers.length ? 1 : 0);
}

main().catch((e) => {
    process.stderr.write(`density-wake: ${e.stack || e.message}\n`);
    process.exit(1);
});
