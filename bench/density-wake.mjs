// Wake client for bench/density.sh: what the first MCP call to a hibernated sandbox costs.
// For each line "ID URL TOKEN" of --list (sandboxes whose server answered one call before
// they hibernated), one official SDK client (the TypeScript SDK pinned in tests/mcp)
// connects through the gateway and calls a tool: the whole of it, from the first request
// to the answer, is the wake (the daemon restores the sandbox when that request arrives).
// Then a second client does the same on the now running sandbox: the reference. Prints one
// line per sandbox on --raw: "wake_ms running_ms state", and one JSON summary on stdout.
//
// --server counter (the default; tests/mcp/fixtures/counter-server.mjs): the tool is
// "count", and state must be one more than the server answered before (its memory came
// back). --server memory (the catalog's memory server): the tool is open_nodes of the
// entity "density", and state (the entities found) must be 1.
// --prime: before they hibernate, one call on each: "count" (it must answer 1), or
// create_entities of "density".
// --rehibernate: each sandbox hibernates again (POST $RUNTIME_API_URL/v1/sandboxes/ID/hibernate
// with $RUNTIME_API_KEY) before the next wakes, so that every wake is measured with all the
// others hibernated. One process for the whole list, and a first wake of the first sandbox
// that is not counted (it hibernates again and is measured with the others): the client's
// own start-up (module loading, the JIT) is in no figure.
//
//   node bench/density-wake.mjs --list FILE (--raw FILE [--rehibernate] | --prime) [--seconds S]
//        [--server counter|memory]
import { readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { eachOption, sdk, usageFor } from "./lib.mjs";

const usage = usageFor(
    "density-wake",
    "usage: node density-wake.mjs --list FILE (--raw FILE [--rehibernate] | --prime) [--seconds S]\n" +
        "       [--server counter|memory]\n"
);

function parseArgs(argv) {
    const o = { seconds: 600, server: "counter" };
    eachOption(argv, usage, (a, { val, num }) => {
        switch (a) {
        case "--list": o.list = val(); break;
        case "--raw": o.raw = val(); break;
        case "--prime": o.prime = true; break;
        case "--rehibernate": o.rehibernate = true; break;
        case "--seconds": o.seconds = num(1); break;
        case "--server": o.server = val(); break;
        default: usage(`unknown argument '${a}'`);
        }
    });
    if (!o.list || (!o.raw && !o.prime)) usage("--list and one of --raw or --prime are required");
    if (!SERVERS[o.server]) usage(`--server is counter or memory, not '${o.server}'`);
    return o;
}

// Each server's calls: the priming one and the one measured, and the state its answer shows.
const DENSITY = { name: "density", entityType: "bench", observations: ["primed"] };
const SERVERS = {
    counter: {
        prime: ["count", {}],
        call: ["count", {}],
        state: (r) => Number(r.content?.[0]?.text),
    },
    memory: {
        prime: ["create_entities", { entities: [DENSITY] }],
        call: ["open_nodes", { names: ["density"] }],
        state: (r) => JSON.parse(r.content?.[0]?.text ?? "{}").entities?.length ?? 0,
    },
};

// A new client's connect and first call of [tool, args]: its state and the milliseconds taken.
async function firstCall(mcp, url, token, [tool, args], state) {
    const client = new mcp.Client({ name: "runtime-bench-density", version: "1.0.0" });
    const transport = new mcp.StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    const t0 = performance.now();
    await client.connect(transport, { timeout: 30000 });
    const r = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: 30000 });
    const ms = performance.now() - t0;
    try {
        await transport.terminateSession();
    } catch {}
    await client.close();
    if (r.isError) throw new Error(`${tool} failed: ${JSON.stringify(r.content)}`);
    return { ms, count: state(r) };
}

// Hibernates sandbox id again through the daemon's API.
async function hibernate(id) {
    const r = await fetch(`${process.env.RUNTIME_API_URL}/v1/sandboxes/${id}/hibernate`, {
        method: "POST",
        headers: { Authorization: `Bearer ${process.env.RUNTIME_API_KEY}` },
        signal: AbortSignal.timeout(120000),
    });
    const body = await r.json();
    if (r.status !== 200 || body.status !== "hibernated")
        throw new Error(`sandbox ${id}: hibernate answered ${r.status} ${JSON.stringify(body)}`);
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
    const kind = SERVERS[o.server];
    const call = (url, token, what = kind.call) => firstCall(mcp, url, token, what, kind.state);
    const counter = o.server === "counter";
    const calls = new Map(); // the counter's calls each answered before: its next count is one more
    const want = (id) => (counter ? (calls.get(id) ?? 1) + 1 : 1);
    try {
        if (o.rehibernate && servers.length) { // a wake to warm the client up, not counted
            const [id, url, token] = servers[0];
            if ((await call(url, token)).count !== want(id)) throw new Error(`sandbox ${id}: the warm-up's state is wrong`);
            await hibernate(id);
            calls.set(id, 2);
        }
        for (const [id, url, token] of servers) {
            if (Date.now() > end) break;
            if (o.prime) {
                const first = await call(url, token, kind.prime);
                if (counter && first.count !== 1) throw new Error(`sandbox ${id}: count answered ${first.count}, not 1`);
                lines.push(`${first.ms.toFixed(1)}`);
                continue;
            }
            const wake = await call(url, token);
            const running = await call(url, token);
            if (wake.count !== want(id)) throw new Error(`sandbox ${id}: the wake's answer showed ${wake.count}, not ${want(id)}`);
            lines.push(`${wake.ms.toFixed(1)} ${running.ms.toFixed(1)} ${wake.count}`);
            if (o.rehibernate) await hibernate(id);
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
