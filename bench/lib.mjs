// Helpers shared by the bench/*.mjs clients: the pinned SDK, usage messages, option parsing.
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const sdkDir =
    process.env.MCP_SDK_DIR ||
    path.join(here, "..", "tests", "mcp", "node_modules", "@modelcontextprotocol", "sdk");

// Imports module P (e.g. "client/index.js") of the SDK pinned in tests/mcp (or of $MCP_SDK_DIR).
export const sdk = (p) => import(path.join(sdkDir, "dist", "esm", p));

// A usage(msg) for tool NAME: writes "NAME: msg" (when given) and TEXT to stderr, exits 2.
export const usageFor = (name, text) => (msg) => {
    if (msg) process.stderr.write(`${name}: ${msg}\n`);
    process.stderr.write(text);
    process.exit(2);
};

// Calls on(a, take) for each option a of argv; take: val(), num(min), json(), rest() read its value(s).
export function eachOption(argv, usage, on) {
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const val = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
        const num = (min) => {
            const v = val();
            const n = Number(v);
            if (!Number.isFinite(n) || n < min) usage(`${a} wants a number >= ${min}, not '${v}'`);
            return n;
        };
        const json = () => {
            try { return JSON.parse(val()); } catch (e) { usage(`${a}: ${e.message}`); }
        };
        const rest = () => {
            const r = argv.slice(i + 1);
            i = argv.length;
            return r;
        };
        on(a, { val, num, json, rest });
    }
}
