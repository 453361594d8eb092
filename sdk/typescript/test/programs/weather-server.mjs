// The weather-server start, as a user writes it with the withruntime package and
// plain fetch: install an MCP server from the team's npm registry into a sandbox
// that reaches only that registry, narrow the sandbox to the weather API, start the
// server behind the gateway, check its tool list against the fingerprint that was
// reviewed, and only then use it.
//
//   RUNTIME_API_URL=... RUNTIME_API_KEY=... WEATHER_FINGERPRINT=HASH node weather-server.mjs
//
// HASH is the reviewed fingerprint (the 16 hex digits users see, or all 64). On a
// mismatch the sandbox is deleted and the program exits 1 naming both fingerprints.
// Otherwise it prints the sandbox, the fingerprint, the forecast and the server's URL,
// and leaves the sandbox running for the agent.
import { createHash } from 'node:crypto';
import { Runtime } from 'withruntime';

const REGISTRY = 'http://registry.acme.test/';
const PACKAGE = '@acme/weather-mcp@1.4.2';
const API_HOST = 'api.weather.test';
const SERVER = { name: 'weather', command: ['node', '/workspace/srv/node_modules/.bin/weather-mcp'] };
const CITY = 'Lisbon';
const PROTOCOL = '2025-06-18';

class FingerprintMismatch extends Error {}

// ---------------------------------------------------------------- the fingerprint (docs/gateway.md)

const byCodePoint = (a, b) => {
  const x = Array.from(a), y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d) return d;
  }
  return x.length - y.length;
};

/** Python's json.dumps(v, sort_keys=True, separators=(",", ":")): keys by code point,
 * everything outside printable ASCII escaped as \uXXXX. */
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort(byCodePoint).map((k) => `${canonical(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  if (typeof v === 'string') {
    return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  }
  return JSON.stringify(v);
}

function fingerprint(tools) {
  const sorted = [...tools].sort((a, b) => byCodePoint(a.name, b.name));
  return createHash('sha256').update(canonical(sorted)).digest('hex');
}

// ---------------------------------------------------------------- MCP by hand, over fetch

/** A Streamable HTTP client of one server: JSON-RPC over POST, the answer as JSON or SSE. */
class McpHttp {
  constructor(url, headers) {
    this.url = url;
    this.headers = headers;
    this.session = null;
    this.version = null;
    this.nextId = 1;
  }

  async post(message) {
    const headers = {
      ...this.headers, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    };
    if (this.session) headers['Mcp-Session-Id'] = this.session;
    if (this.version) headers['MCP-Protocol-Version'] = this.version;
    const res = await fetch(this.url, {
      method: 'POST', headers, body: JSON.stringify(message), signal: AbortSignal.timeout(60_000),
    });
    this.session = res.headers.get('mcp-session-id') ?? this.session;
    const text = await res.text();
    if (!res.ok) throw new Error(`${message.method}: HTTP ${res.status}: ${text}`);
    return { type: res.headers.get('content-type') ?? '', text };
  }

  async request(method, params = {}) {
    const id = this.nextId++;
    const { type, text } = await this.post({ jsonrpc: '2.0', id, method, params });
    const answer = type.startsWith('text/event-stream') ? fromEvents(text, id) : JSON.parse(text);
    if (answer?.error) throw new Error(`${method}: ${answer.error.message}`);
    return answer.result;
  }

  async notify(method, params = {}) {
    await this.post({ jsonrpc: '2.0', method, params });
  }

  async initialize() {
    const result = await this.request('initialize', {
      protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'weather-server', version: '1.0.0' },
    });
    this.version = result.protocolVersion;
    await this.notify('notifications/initialized');
    return result;
  }

  /** Every tool, following nextCursor page by page. */
  async listTools() {
    const tools = [];
    let cursor;
    for (let page = 0; page < 100; page++) {
      const result = await this.request('tools/list', cursor === undefined ? {} : { cursor });
      tools.push(...result.tools);
      cursor = result.nextCursor;
      if (cursor === undefined || cursor === null) return tools;
    }
    throw new Error('tools/list has more than 100 pages');
  }
}

/** The answer with this id among the messages of an SSE body. */
function fromEvents(text, id) {
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
    if (!data) continue;
    const msg = JSON.parse(data);
    if (msg.id === id) return msg;
  }
  throw new Error(`no answer to request ${id} in the event stream`);
}

// ---------------------------------------------------------------- the program

async function install(sbx) {
  await sbx.exec(['npm', 'config', 'set', 'registry', REGISTRY], { check: true });
  await sbx.exec(['npm', 'install', '--ignore-scripts', '--prefix', '/workspace/srv', PACKAGE],
    { check: true, timeoutMs: 180_000 });
}

async function checkedClient(server, headers, expected) {
  const client = new McpHttp(server.url, headers);
  await client.initialize();
  const seen = fingerprint(await client.listTools());
  console.log(`fingerprint ${seen}`);
  if (!/^[0-9a-f]{16}([0-9a-f]{48})?$/.test(expected) || !seen.startsWith(expected)) {
    throw new FingerprintMismatch(`the weather server's tools changed: expected fingerprint ${expected}, ` +
      `its tools have ${seen.slice(0, 16)} (sha256 ${seen})`);
  }
  return client;
}

async function main() {
  const expected = (process.env.WEATHER_FINGERPRINT ?? '').trim().toLowerCase();
  if (!expected) throw new Error('set WEATHER_FINGERPRINT to the reviewed fingerprint of the weather server');
  const runtime = new Runtime();
  const sbx = await runtime.sandboxes.create({
    labels: { app: 'weather-server' }, network: { internet: true, allow: [new URL(REGISTRY).hostname] },
  });
  console.log(`sandbox ${sbx.id}`);
  try {
    await install(sbx);
    await sbx.network.set({ internet: true, allow: [API_HOST] });
    await sbx.mcp.start([SERVER]);
    const gateway = await sbx.mcp.ready();
    const server = gateway.servers.find((s) => s.name === SERVER.name);
    const client = await checkedClient(server, gateway.headers, expected);
    const result = await client.request('tools/call', { name: 'get_forecast', arguments: { city: CITY } });
    const text = result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n').trim();
    if (result.isError) throw new Error(`get_forecast failed: ${text}`);
    console.log(`forecast ${text}`);
    console.log(`url ${server.url}`);
  } catch (e) {
    await sbx.delete(); // nothing half set up is left behind, least of all an unreviewed server
    throw e;
  }
}

main().catch((e) => {
  console.error(`weather-server: ${e.message}`);
  process.exit(1);
});
