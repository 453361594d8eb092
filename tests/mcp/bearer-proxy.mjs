#!/usr/bin/env node
// Loopback HTTP proxy that adds "Authorization: Bearer <token>" to every request, for clients
// that cannot send headers of their own (the MCP conformance suite). No dependencies.
//
// Usage: node bearer-proxy.mjs --target URL --token T [--port P]
//   --target  http:// base URL, e.g. http://127.0.0.1:8080/mcp/abc/conformance
//   --token   bearer token to add (replaces any Authorization header the client sent)
//   --port    port to listen on, on 127.0.0.1 (default 0: any free port)
// Prints "listening PORT" on stdout when ready.
//
// Path mapping: "/" on the proxy is the target URL itself; "/x?q" is target path + "/x?q".
// Everything else passes through: any method, bodies streamed both ways as they arrive (SSE
// included, nothing buffered), status and headers unchanged except hop-by-hop ones. When the
// client goes away the upstream request is aborted, so the target sees the disconnect too.
//
// Host and Origin stay what the client meant: a Host naming the proxy itself becomes the
// target's host, and an Origin of http://<proxy host> becomes the target's origin; any other
// Host/Origin (e.g. a DNS-rebinding probe's evil.example.com) reaches the target untouched.

import http from 'node:http';

const HOP_BY_HOP = new Set([
    'connection',
    'keep-alive',
    'proxy-authenticate',
    'proxy-authorization',
    'proxy-connection',
    'te',
    'trailer',
    'transfer-encoding',
    'upgrade',
]);

function parseArgs(argv) {
    const opts = { target: null, token: null, port: 0 };
    for (let i = 0; i < argv.length; i += 2) {
        const [key, val] = [argv[i], argv[i + 1]];
        if (val === undefined) throw new Error(`${key} needs a value`);
        if (key === '--target') opts.target = val;
        else if (key === '--token') opts.token = val;
        else if (key === '--port') opts.port = Number(val);
        else throw new Error(`unknown argument ${key}`);
    }
    if (!opts.target || !opts.token) throw new Error('--target URL and --token T are required');
    const target = new URL(opts.target);
    if (target.protocol !== 'http:') throw new Error('--target must be an http:// URL');
    if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535)
        throw new Error('--port needs a number 0..65535');
    return { ...opts, target };
}

function stripHopByHop(headers) {
    const out = {};
    const named = (headers.connection ?? '')
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
    for (const [k, v] of Object.entries(headers)) {
        if (!HOP_BY_HOP.has(k) && !named.includes(k)) out[k] = v;
    }
    return out;
}

function buildPath(target, reqUrl) {
    const incoming = new URL(reqUrl, 'http://proxy.invalid');
    const base = target.pathname.replace(/\/+$/, '');
    const rest = incoming.pathname === '/' ? '' : incoming.pathname;
    return (`${base}${rest}` || '/') + incoming.search;
}

function startProxy({ target, token, port }) {
    const agent = new http.Agent({ keepAlive: true });
    let selfHosts = [];

    const server = http.createServer((req, res) => {
        const headers = stripHopByHop(req.headers);
        const host = (req.headers.host ?? '').toLowerCase();
        if (!req.headers.host || selfHosts.includes(host)) headers.host = target.host;
        const origin = req.headers.origin;
        if (origin !== undefined && selfHosts.some((h) => origin.toLowerCase() === `http://${h}`))
            headers.origin = target.origin;
        headers.authorization = `Bearer ${token}`;

        const upstream = http.request({
            agent,
            hostname: target.hostname.replace(/^\[|\]$/g, ''),
            port: target.port || 80,
            method: req.method,
            path: buildPath(target, req.url),
            headers,
        });
        upstream.on('response', (up) => {
            res.writeHead(up.statusCode, up.statusMessage, stripHopByHop(up.headers));
            res.flushHeaders(); // SSE: the client must see the headers before the first event
            up.on('error', () => res.destroy());
            up.pipe(res); // writes each chunk as it arrives, with backpressure
        });
        upstream.on('error', (err) => {
            if (res.headersSent) return res.destroy();
            res.writeHead(502, { 'Content-Type': 'application/json' });
            res.end(JSON.stringify({ error: { code: 'bad_gateway', message: err.message } }));
        });
        // The client hanging up (e.g. cancelling an SSE reader) ends the upstream exchange too.
        res.on('close', () => {
            if (!res.writableFinished) upstream.destroy();
        });
        req.pipe(upstream);
    });
    server.requestTimeout = 0; // long-lived SSE requests are the point
    server.listen(port, '127.0.0.1', () => {
        const p = server.address().port;
        selfHosts = [`127.0.0.1:${p}`, `localhost:${p}`, `[::1]:${p}`];
        process.stdout.write(`listening ${p}\n`);
    });
    const shutdown = () => {
        server.close();
        server.closeAllConnections();
        agent.destroy();
        process.exit(0);
    };
    process.on('SIGTERM', shutdown);
    process.on('SIGINT', shutdown);
}

try {
    startProxy(parseArgs(process.argv.slice(2)));
} catch (err) {
    process.stderr.write(`bearer-proxy: ${err.message}\n`);
    process.exit(2);
}
