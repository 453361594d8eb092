// The noisy tenant's MCP server in bench/neighbour.sh's unread phase (issue 23). Node builtins
// only: it runs in the sandbox. Newline-delimited JSON-RPC on stdin/stdout; offers one resource,
// with subscribe. While the resource is subscribed, it sends notifications/resources/updated for
// it, --rate a second, each padded to about --pad bytes, until --mib MiB went out since the last
// resources/subscribe or it is unsubscribed (so one phase costs at most --mib MiB, however long
// it is); the next subscribe starts again. Writes wait for stdout to drain: what the gateway does not
// take stays here, not in the daemon. The unread-bare phase runs it with no daemon in between:
// --subscribed 1 sends from the start, and it exits when the --stop file appears.
//
//   node notify-server.mjs [--rate 2000] [--pad 16384] [--mib 128] [--subscribed 0|1] [--stop FILE]
import { existsSync } from "node:fs";
import readline from "node:readline";

const o = { rate: 2000, pad: 16384, mib: 128, subscribed: 0 };
let stopFile = null;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "");
    if (k === "stop") {
        stopFile = argv[i + 1];
        continue;
    }
    const v = Number(argv[i + 1]);
    if (!(k in o) || !Number.isFinite(v) || v < 0) {
        process.stderr.write(`notify-server: bad option ${argv[i]} ${argv[i + 1]}\n`);
        process.exit(2);
    }
    o[k] = v;
}

const URI = "bench://unread";
const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");

let subscribed = o.subscribed > 0;
let sent = 0; // bytes of notifications in this subscription
let draining = false;
const pad = "x".repeat(o.pad);
const budget = o.mib * 1048576;

// rate/100 notifications every 10 ms, while subscribed, within the budget, and stdout drains.
setInterval(() => {
    if (stopFile && existsSync(stopFile)) process.exit(0);
    for (let i = 0; i < o.rate / 100 && subscribed && !draining && sent < budget; i++) {
        const line = JSON.stringify({ jsonrpc: "2.0", method: "notifications/resources/updated",
                                      params: { uri: URI, title: pad } }) + "\n";
        sent += line.length;
        if (!process.stdout.write(line)) {
            draining = true;
            process.stdout.once("drain", () => { draining = false; });
        }
    }
}, 10);

function result(method, params) {
    switch (method) {
    case "initialize":
        return {
            protocolVersion: params?.protocolVersion ?? "2025-06-18",
            capabilities: { tools: {}, resources: { subscribe: true } },
            serverInfo: { name: "notify", version: "1.0.0" },
        };
    case "ping":
        return {};
    case "tools/list":
        return { tools: [] };
    case "resources/list":
        return { resources: [{ uri: URI, name: "unread", mimeType: "text/plain" }] };
    case "resources/read":
        return { contents: [{ uri: URI, mimeType: "text/plain", text: "unread" }] };
    case "resources/subscribe": // each one starts a new budget, even without an unsubscribe
        if (params?.uri === URI) {
            subscribed = true;
            sent = 0;
        }
        return {};
    case "resources/unsubscribe":
        if (params?.uri === URI) subscribed = false;
        return {};
    default:
        return undefined;
    }
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
    let msg;
    try {
        msg = JSON.parse(line);
    } catch {
        return;
    }
    if (msg.id === undefined || typeof msg.method !== "string") return; // notifications, answers
    const r = result(msg.method, msg.params);
    if (r === undefined) send({ id: msg.id, error: { code: -32601, message: `no method ${msg.method}` } });
    else send({ id: msg.id, result: r });
});
process.stdin.on("end", () => { if (!stopFile) process.exit(0); }); // --stop: the file ends it
