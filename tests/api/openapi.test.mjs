// api/openapi.yaml against the real daemon, both ways:
//
//  - static: the document is OpenAPI 3.1, every $ref resolves, every schema compiles
//    (Ajv, JSON Schema 2020-12, strict) and states its type; and what the routing code
//    names (path words of src/api/api.c, its methods, query parameters, error codes and
//    statuses, and every event kind that src/ records) is in the document;
//  - routes: a probe of every path the code's words can form, with every method, finds
//    exactly the documented operations served (a new route without a document entry
//    fails, and so does a documented operation that the daemon does not serve);
//  - answers: real calls cover every operation; each answer's status must be one that
//    the document lists for the operation, its Content-Type one of that response's,
//    its required headers present and its body valid against the schema, with objects
//    closed (unevaluatedProperties: false added by this test, not in the document), so
//    an undocumented field fails too. Request bodies are checked against the document
//    as well: the valid ones must pass its schema, the deliberately bad ones fail it.
//
// OPENAPI_DOC=FILE checks another copy of the document (to see this test fail on a
// broken one). Run as root: RUNTIME_BUILD=/tmp/build-g node --test tests/api/openapi.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import crypto from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

import { startDaemon, stopDaemon, isRoot, ROOT, token, waitFor } from '../e2e/lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DOC_FILE = process.env.OPENAPI_DOC ? path.resolve(process.env.OPENAPI_DOC)
  : path.join(ROOT, 'api', 'openapi.yaml');
const SRC = path.join(ROOT, 'src');
const HELLO = path.join(ROOT, 'tests', 'mcp', 'fixtures', 'hello-server.mjs');
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const doc = YAML.parse(fs.readFileSync(DOC_FILE, 'utf8'));
const skip = isRoot() ? false : 'must run as root (runtimed needs it)';

// ---------------------------------------------------------------- the document

/** The value at a local JSON pointer ("#/a/b") of the document, or undefined. */
function pointer(ref) {
  if (!ref.startsWith('#/')) return undefined;
  let v = doc;
  for (const raw of ref.slice(2).split('/')) {
    const k = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (v === null || typeof v !== 'object' || !(k in v)) return undefined;
    v = v[k];
  }
  return v;
}

/** A response, parameter or request body object, its $ref followed. */
const deref = (o) => (o && o.$ref ? deref(pointer(o.$ref)) : o);

function walk(v, fn, where = '#') {
  if (Array.isArray(v)) v.forEach((x, i) => walk(x, fn, `${where}/${i}`));
  else if (v && typeof v === 'object') {
    fn(v, where);
    for (const [k, x] of Object.entries(v)) walk(x, fn, `${where}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
  }
}

/** Schemas as Ajv takes them: refs to components/schemas point into one bundle; closed
 * adds unevaluatedProperties: false to every object schema that lists properties and
 * says nothing of others. */
function forAjv(schema, bundle, closed) {
  const out = structuredClone(schema);
  walk(out, (o) => {
    if (typeof o.$ref === 'string' && o.$ref.startsWith('#/components/schemas/')) {
      o.$ref = `${bundle}#/$defs/${o.$ref.slice('#/components/schemas/'.length)}`;
    }
    if (closed && o.properties && typeof o.properties === 'object' && !('additionalProperties' in o) &&
        !('unevaluatedProperties' in o) && (o.type === 'object' || o.type === undefined)) {
      o.unevaluatedProperties = false;
    }
  });
  return out;
}

const ajv = new Ajv2020({ strict: true, strictTypes: false, strictRequired: false, allowUnionTypes: true, allErrors: true });
addFormats(ajv);
ajv.addKeyword({ keyword: 'discriminator' }); // for SDK generators; oneOf does the validating
const schemas = doc.components?.schemas ?? {};
ajv.addSchema({ $id: 'https://runtime.invalid/open', $defs: forAjv(schemas, 'https://runtime.invalid/open', false) });
ajv.addSchema({ $id: 'https://runtime.invalid/closed', $defs: forAjv(schemas, 'https://runtime.invalid/closed', true) });
const compiled = new Map();
/** A validator of a schema of the document (where: its pointer, for the cache). */
function validator(schema, where, closed) {
  const key = `${closed ? 'closed' : 'open'} ${where}`;
  if (!compiled.has(key)) compiled.set(key, ajv.compile(forAjv(schema, closed ? 'https://runtime.invalid/closed' : 'https://runtime.invalid/open', closed)));
  return compiled.get(key);
}
const errorsText = (v) => ajv.errorsText(v.errors, { separator: '\n  ' });

/** The documented operations: [{method, template, op, re}]. */
function operations() {
  const ops = [];
  for (const [template, item] of Object.entries(doc.paths ?? {})) {
    for (const m of METHODS) {
      if (!item[m]) continue;
      const re = new RegExp('^' + template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$');
      ops.push({ method: m.toUpperCase(), template, op: item[m], item, re });
    }
  }
  return ops;
}
const OPS = operations();
const isGateway = (o) => (o.op.tags ?? []).includes('gateway');

/** Every parameter of an operation (path-level and its own), refs followed. */
const paramsOf = (o) => [...(o.item.parameters ?? []), ...(o.op.parameters ?? [])].map(deref);

// ---------------------------------------------------------------- the code

// Every file of src/api: the routing, and what each route answers.
const apiC = fs.readdirSync(path.join(SRC, 'api')).filter((f) => f.endsWith('.c')).sort()
  .map((f) => fs.readFileSync(path.join(SRC, 'api', f), 'utf8')).join('\n');
const routingC = fs.readFileSync(path.join(SRC, 'api', 'api.c'), 'utf8'); // where methods are routed
const transportC = fs.readFileSync(path.join(SRC, 'gateway', 'transport.c'), 'utf8');

function srcFiles(dir) {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...srcFiles(p));
    else if (e.name.endsWith('.c')) out.push(p);
  }
  return out;
}

/** What the API's routing code names: path words, methods, query parameters,
 * error codes with their statuses. */
function routingFacts() {
  const words = new Set([
    ...[...apiC.matchAll(/strn?cmp\(\s*(?:seg\[\d+\]|action|sub|name|verb)\s*,\s*"([^"]+)"/g)].map((m) => m[1]),
    // the rows of api.c's table of a sandbox's routes: {"files", GET_ | PUT_, ...}
    ...[...apiC.matchAll(/\{"([a-z-]+):?",\s*(?:GET_|POST_|PUT_|DELETE_)/g)].map((m) => m[1]),
  ]);
  // The methods api.c routes on; served at all are those and the gateway's
  // (transport.c: its OPTIONS preflight). Any other is a 405.
  const routed = (text) => new Set([...text.matchAll(/HTTPD_(GET|POST|PUT|DELETE|OPTIONS|HEAD)\b/g)].map((m) => m[1]));
  const methods = routed(routingC);
  const accepted = new Set([...methods, ...routed(transportC)]);
  const query = new Set([
    ...[...apiC.matchAll(/evhttp_find_header\(\s*&q\s*,\s*"([^"]+)"/g)].map((m) => m[1]),
    ...[...apiC.matchAll(/strcmp\(\s*kv->key\s*,\s*"([^"]+)"/g)].map((m) => m[1]),
  ]);
  const codes = new Map(); // code -> Set of statuses
  const add = (status, code) => {
    if (!codes.has(code)) codes.set(code, new Set());
    codes.get(code).add(Number(status));
  };
  for (const m of apiC.matchAll(/api_error(?:_details)?\(\s*[\w>-]+\s*,\s*(\d{3})\s*,\s*"([a-z_]+)"/g)) add(m[1], m[2]);
  for (const m of apiC.matchAll(/\{\s*-E[A-Z0-9]+\s*,\s*(\d{3})\s*,\s*"([a-z_]+)"/g)) add(m[1], m[2]);
  const fallback = /api_error\(req,\s*(\d{3}),\s*"([a-z_]+)",\s*"%s",\s*err->msg\[0\]/.exec(apiC);
  if (fallback) add(fallback[1], fallback[2]);
  return { words, methods, accepted, query, codes };
}

/** Every event kind that src/ records: the literal kinds given to server_event,
 * mcp_event, secret_event, record and the egress on_event callback, and those of
 * the moves in src/lifecycle's table ({FROM, EVENT, TO, "kind"}). */
function eventKinds() {
  const kinds = new Set();
  const re = /\b(?:server_event|mcp_event|secret_event|record|on_event)\s*\((?:[^;"]*?),\s*"([a-z]+\.[a-z_.]+)"/g;
  const move = /\{SBX_[A-Z_]+, SBX_[A-Z_]+, SBX_[A-Z_]+, "([a-z]+\.[a-z_.]+)"\}/g;
  for (const f of srcFiles(SRC)) {
    if (f.includes(`${path.sep}cli${path.sep}`)) continue;
    const text = fs.readFileSync(f, 'utf8');
    for (const m of text.matchAll(re)) kinds.add(m[1]);
    for (const m of text.matchAll(move)) kinds.add(m[1]);
  }
  return kinds;
}

// ---------------------------------------------------------------- calls

let d;
const covered = new Set(); // "METHOD template status"

/** The document's operation for METHOD template; fails when there is none. */
function opOf(method, template) {
  const o = OPS.find((x) => x.method === method && x.template === template);
  assert.ok(o, `the document has no ${method} ${template}`);
  return o;
}

/** Checks one answer against the document's response for its status. */
function checkAnswer(o, r, label) {
  const where = `${label}: ${o.method} ${o.template} answered ${r.status}`;
  const resp = deref(o.op.responses?.[String(r.status)] ?? o.op.responses?.default);
  assert.ok(resp, `${where}, a status the document does not list for it (it lists ` +
    `${Object.keys(o.op.responses ?? {}).join(', ')}); body: ${r.text.slice(0, 300)}`);
  const ctype = (r.headers.get('content-type') ?? '').split(';')[0].trim().toLowerCase();
  const content = resp.content ?? {};
  if (Object.keys(content).length === 0) {
    assert.equal(r.buf.length, 0, `${where} with a body the document does not describe: ${r.text.slice(0, 200)}`);
  } else {
    assert.ok(ctype in content, `${where} with Content-Type "${ctype}"; the document says ${Object.keys(content).join(', ')}`);
    const schema = content[ctype].schema;
    if (ctype === 'application/json') {
      assert.ok(r.body !== null || r.text.trim() === 'null', `${where}: the body is not JSON: ${r.text.slice(0, 200)}`);
      const v = validator(schema, `${o.method} ${o.template} ${r.status} ${ctype}`, true);
      assert.ok(v(r.body), `${where}: the body does not match the document:\n  ${errorsText(v)}\nbody: ${r.text.slice(0, 1500)}`);
    } else if (schema) {
      const v = validator(schema, `${o.method} ${o.template} ${r.status} ${ctype}`, true);
      assert.ok(v(r.text), `${where}: ${errorsText(v)}`);
    }
  }
  for (const [name, h] of Object.entries(resp.headers ?? {})) {
    const value = r.headers.get(name);
    if (deref(h).required) assert.ok(value !== null, `${where} without the ${name} header the document requires`);
    if (value !== null && deref(h).schema) {
      const v = validator(deref(h).schema, `${o.method} ${o.template} ${r.status} header ${name}`, true);
      assert.ok(v(value), `${where}: header ${name}: ${JSON.stringify(value)}: ${errorsText(v)}`);
    }
  }
  covered.add(`${o.method} ${o.template} ${r.status}`);
}

/**
 * One API call of a documented operation, its answer checked against the document.
 * params fill the template; body (JSON) is checked against the request schema:
 * reqValid true/false says whether the document must accept it (default: true when
 * the call is expected to succeed).
 */
async function call(method, template, { params = {}, query = '', body, raw, key, headers, expect, reqValid, label = '' } = {}) {
  const o = opOf(method, template);
  let p = template.replace(/\{([^}]+)\}/g, (_, k) => {
    assert.ok(k in params, `no value for {${k}} of ${template}`);
    return encodeURIComponent(params[k]);
  });
  if (query) p += `?${query}`;
  if (reqValid === undefined && expect !== undefined && expect < 300 && body !== undefined) reqValid = true;
  if (reqValid !== undefined) {
    const rb = deref(o.op.requestBody);
    const schema = rb?.content?.['application/json']?.schema;
    assert.ok(schema, `${method} ${template} has no JSON request body in the document`);
    const v = validator(schema, `${method} ${template} request`, false);
    const ok = v(typeof body === 'string' ? JSON.parse(body) : body);
    assert.equal(ok, reqValid, `${label} ${method} ${template}: the document's request schema ` +
      `${ok ? 'accepts' : 'rejects'} ${JSON.stringify(body).slice(0, 300)}${ok ? '' : `:\n  ${errorsText(v)}`}`);
  }
  const r = await d.api(method, p, body, { raw, key, headers });
  if (expect !== undefined) assert.equal(r.status, expect, `${label} ${method} ${p}: ${r.text.slice(0, 500)}`);
  checkAnswer(o, r, label || `${method} ${p}`);
  return r;
}

/** Like call(), also checking the error code. */
async function callError(method, template, status, code, opts = {}) {
  const r = await call(method, template, { ...opts, expect: status });
  assert.equal(r.body?.error?.code, code, `${method} ${template}: ${r.text}`);
  // Runtime Cloud's error shape: the status again, and the request id the header carries.
  assert.equal(r.body.error.status, status);
  assert.match(r.headers.get('x-request-id') ?? '', /^req_[0-9a-f]{16}$/);
  assert.equal(r.body.error.requestId, r.headers.get('x-request-id'));
  return r;
}

// ---------------------------------------------------------------- static tests

test('the document is OpenAPI 3.1: refs resolve, schemas compile and say their type', () => {
  assert.match(String(doc.openapi), /^3\.1\.\d+$/);
  assert.ok(doc.components?.securitySchemes?.bearer?.scheme === 'bearer', 'a bearer security scheme');
  assert.deepEqual(doc.security, [{ bearer: [] }]);
  const bad = [];
  walk(doc, (o, where) => {
    if (typeof o.$ref === 'string' && pointer(o.$ref) === undefined) bad.push(`${where}: $ref ${o.$ref}`);
  });
  assert.deepEqual(bad, [], 'unresolved $refs');
  // Every schema compiles, open and closed.
  for (const [name, s] of Object.entries(schemas)) {
    validator(s, `#/components/schemas/${name}`, false);
    validator(s, `#/components/schemas/${name}`, true);
  }
  for (const o of OPS) {
    for (const [status, resp] of Object.entries(o.op.responses ?? {})) {
      for (const [ct, c] of Object.entries(deref(resp).content ?? {})) {
        if (c.schema) validator(c.schema, `${o.method} ${o.template} ${status} ${ct}`, true);
      }
    }
    const rb = deref(o.op.requestBody);
    if (rb?.content?.['application/json']) validator(rb.content['application/json'].schema, `${o.method} ${o.template} request`, false);
    assert.ok(o.op.operationId, `${o.method} ${o.template} has an operationId`);
  }
  // What an SDK generator needs: every property and item says what it is.
  const typeless = [];
  const typed = (s) => s && (s.type || s.$ref || 'const' in s || s.enum || s.oneOf || s.anyOf || s.allOf);
  walk(doc, (o, where) => {
    if (!where.includes('/schemas/') && !where.includes('/schema')) return;
    for (const [k, s] of Object.entries(o.properties && typeof o.properties === 'object' && !o.properties.type ? o.properties : {})) {
      if (!typed(s) && !['result', 'data'].includes(k)) typeless.push(`${where}/properties/${k}`);
    }
    if (o.items && !typed(o.items)) typeless.push(`${where}/items`);
    if (o.additionalProperties && typeof o.additionalProperties === 'object' && !typed(o.additionalProperties)) {
      typeless.push(`${where}/additionalProperties`);
    }
  });
  assert.deepEqual(typeless, [], 'schemas without a type');
});

test('the validator is not vacuous: wrong shapes and undocumented fields fail', () => {
  const sandbox = {
    id: 'abc123', name: null, status: 'running', state: 'running', createdAt: '2026-01-01T00:00:00Z', memoryMiB: 1024,
    cpus: 1, diskMiB: 2048, idlePauseSeconds: 300, timeoutSeconds: null, onLeaseEnd: 'pause', labels: {}, env: {},
    network: { internet: true }, isolation: 'ns',
  };
  const v = validator(schemas.Sandbox, '#/components/schemas/Sandbox', true);
  assert.ok(v(sandbox), errorsText(v));
  for (const [what, bad] of [
    ['memoryMiB as a string', { ...sandbox, memoryMiB: '1024' }],
    ['an unknown status', { ...sandbox, status: 'sleeping' }],
    ['an unknown isolation', { ...sandbox, isolation: 'vm' }],
    ['no network', (({ network, ...rest }) => rest)(sandbox)],
    ['an undocumented field', { ...sandbox, secretSauce: 1 }],
    ['an undocumented nested field', { ...sandbox, network: { internet: true, allow: [], extra: 1 } }],
    ['a bad date', { ...sandbox, createdAt: 'yesterday' }],
  ]) assert.equal(v(bad), false, `the Sandbox schema accepts ${what}`);
  const ev = validator(schemas.Event, '#/components/schemas/Event', true);
  assert.ok(ev({ seq: 1, time: '2026-01-01T00:00:00Z', kind: 'mcp.ready', server: 'x', seconds: 0.5 }), errorsText(ev));
  assert.equal(ev({ seq: 1, time: '2026-01-01T00:00:00Z', kind: 'mcp.ready' }), false, 'an event without its fields');
  assert.equal(ev({ seq: 1, time: '2026-01-01T00:00:00Z', kind: 'no.such', server: 'x' }), false, 'an unknown kind');
});

test('what src/api/api.c routes is in the document: path words, methods, query parameters, error codes', () => {
  const facts = routingFacts();
  assert.ok(facts.words.size >= 10 && facts.words.has('sandboxes'), `path words found: ${[...facts.words]}`);
  // ".../{uploadId}:commit" has the word commit; ".../files:mkdir" files and mkdir.
  const docWords = new Set(Object.keys(doc.paths).flatMap((p) => p.split(/[/:]/).filter((s) => s && !s.startsWith('{'))));
  const missing = [...facts.words].filter((w) => !docWords.has(w));
  assert.deepEqual(missing, [], 'path words the routing code compares against but no documented path has');
  const docMethods = new Set(OPS.filter((o) => !isGateway(o)).map((o) => o.method));
  assert.deepEqual([...facts.methods].filter((m) => !docMethods.has(m)), [], 'methods the code routes, not documented');
  assert.ok(facts.accepted.has('GET') && facts.accepted.has('OPTIONS'), `accepted methods found: ${[...facts.accepted]}`);
  const allDocMethods = new Set(OPS.map((o) => o.method));
  assert.deepEqual([...facts.accepted].filter((m) => !allDocMethods.has(m)), [], 'methods served, documented nowhere');
  const docQuery = new Set(OPS.flatMap((o) => paramsOf(o).filter((p) => p.in === 'query').map((p) => p.name)));
  assert.deepEqual([...facts.query].filter((q) => !docQuery.has(q)), [], 'query parameters the code reads, not documented');
  const codeEnum = new Set(schemas.ErrorCode?.enum ?? []);
  assert.deepEqual([...facts.codes.keys()].filter((c) => !codeEnum.has(c)).sort(), [], 'error codes the code sends, not in ErrorCode');
  assert.deepEqual([...codeEnum].filter((c) => !facts.codes.has(c)).sort(), [], 'ErrorCode values the code never sends');
  // Each status the API sends is documented for at least one operation.
  const docStatuses = new Set(OPS.filter((o) => !isGateway(o)).flatMap((o) => Object.keys(o.op.responses)));
  const statuses = new Set([...facts.codes.values()].flatMap((s) => [...s]).map(String));
  statuses.delete('405'); // a method a path does not have: not an operation (see the document's header)
  assert.deepEqual([...statuses].filter((s) => !docStatuses.has(s)).sort(), [], 'statuses the code sends, documented nowhere');
});

test('every event kind that src/ records is an Event of the document', () => {
  const kinds = eventKinds();
  assert.ok(kinds.size >= 10 && kinds.has('egress.refused') && kinds.has('events.dropped'), `kinds found: ${[...kinds]}`);
  const enumKinds = new Set(schemas.EventKind?.enum ?? []);
  const branchKinds = new Set((schemas.Event?.oneOf ?? []).map((b) => deref(b).properties?.kind?.const));
  assert.deepEqual([...kinds].filter((k) => !enumKinds.has(k)).sort(), [], 'kinds recorded but not in EventKind');
  assert.deepEqual([...kinds].filter((k) => !branchKinds.has(k)).sort(), [], 'kinds recorded but without an Event schema');
  assert.deepEqual([...enumKinds].filter((k) => !kinds.has(k)).sort(), [], 'EventKind values never recorded');
  assert.deepEqual([...branchKinds].filter((k) => !enumKinds.has(k)).sort(), [], 'Event schemas not in EventKind');
  for (const [k, ref] of Object.entries(schemas.Event?.discriminator?.mapping ?? {})) {
    assert.equal(deref({ $ref: ref })?.properties?.kind?.const, k, `discriminator mapping of ${k}`);
  }
});

// ---------------------------------------------------------------- the daemon

let sb; // a sandbox with a name and labels, used throughout
let probeSb; // one made with every default, for the route probe
const NAME = token('oa').slice(0, 24);
let gateway; // {url, auth} of the hello server

before(async () => {
  if (skip) return;
  d = await startDaemon({ prefix: 'runtime-openapi-' });
});
after(async () => {
  await stopDaemon(d);
});

test('sandboxes: create, defaults, getOrCreate, get, list by label', { skip }, async () => {
  const spec = { name: NAME, memoryMiB: 256, cpus: 0.5, diskMiB: 256, idlePauseSeconds: 0,
    labels: { role: 'openapi', 'example.com/team': 'blue' }, env: { GREETING: 'hi' }, network: { internet: false, allow: [] } };
  sb = (await call('POST', '/v1/sandboxes', { body: spec, expect: 201 })).body;
  d.track(sb.id);
  assert.equal(sb.name, NAME);
  await call('POST', '/v1/sandboxes', { body: { name: NAME, getOrCreate: true }, expect: 200 });
  await callError('POST', '/v1/sandboxes', 409, 'name_taken', { body: { name: NAME }, reqValid: true });

  // An empty body: every default, and they are the document's.
  probeSb = (await call('POST', '/v1/sandboxes', { raw: '', expect: 201 })).body;
  d.track(probeSb.id);
  const props = schemas.SandboxCreate.properties;
  for (const k of ['memoryMiB', 'cpus', 'diskMiB', 'idlePauseSeconds', 'labels', 'env']) {
    assert.deepEqual(probeSb[k], props[k].default, `${k}: the default the document says`);
  }
  assert.deepEqual(probeSb.network, props.network.default);
  assert.deepEqual(probeSb.network, { internet: schemas.NetworkInput.properties.internet.default });
  assert.equal(probeSb.name, null);
  assert.ok(schemas.Isolation.enum.includes(probeSb.isolation), `isolation: the daemon's default, ${probeSb.isolation}`);
  await callError('POST', '/v1/sandboxes', 400, 'invalid_request', { body: { isolation: 'vm' }, reqValid: false });

  for (const ref of [sb.id, NAME]) await call('GET', '/v1/sandboxes/{id}', { params: { id: ref }, expect: 200 });
  const all = await call('GET', '/v1/sandboxes', { expect: 200 });
  assert.ok(all.body.data.some((s) => s.id === sb.id) && all.body.data.some((s) => s.id === probeSb.id));
  assert.equal(all.body.nextCursor, null);
  const byLabel = await call('GET', '/v1/sandboxes', { query: 'label=role%3Aopenapi', expect: 200 });
  assert.deepEqual(byLabel.body.data.map((s) => s.id), [sb.id]);
  const legacy = await call('GET', '/v1/sandboxes', { query: 'label=role%3Dopenapi', expect: 200 });
  assert.deepEqual(legacy.body.data.map((s) => s.id), [sb.id], 'label=K=V, as before, still filters');
  const bare = await call('GET', '/v1/sandboxes', { query: 'label=role&label=example.com%2Fteam%3Ablue', expect: 200 });
  assert.deepEqual(bare.body.data.map((s) => s.id), [sb.id]);
  const none = await call('GET', '/v1/sandboxes', { query: 'label=role%3Anone', expect: 200 });
  assert.deepEqual(none.body, { data: [], nextCursor: null });
  // Runtime Cloud's pages: limit, then the cursor each page ends with; name and state filter.
  const ids = all.body.data.map((s) => s.id);
  const paged = [];
  for (let cursor = null, first = true; first || cursor; first = false) {
    const page = await call('GET', '/v1/sandboxes', { query: `limit=1${cursor ? `&cursor=${cursor}` : ''}`, expect: 200 });
    assert.ok(page.body.data.length <= 1);
    paged.push(...page.body.data.map((s) => s.id));
    cursor = page.body.nextCursor;
  }
  assert.deepEqual(paged, ids, 'the pages, in order, are the whole list');
  assert.deepEqual((await call('GET', '/v1/sandboxes', { query: `name=${NAME}`, expect: 200 })).body.data.map((s) => s.id), [sb.id]);
  const running = await call('GET', '/v1/sandboxes', { query: 'state=running&state=paused', expect: 200 });
  assert.ok(running.body.data.every((s) => ['running', 'paused'].includes(s.state)) && running.body.data.length > 0);
  assert.deepEqual((await call('GET', '/v1/sandboxes', { query: 'state=stopped', expect: 200 })).body.data, []);
  await callError('GET', '/v1/sandboxes', 400, 'invalid_request', { query: 'limit=0' });
});

test('sandboxes: bad input, unknown ids, keys, too large', { skip }, async () => {
  await callError('POST', '/v1/sandboxes', 400, 'invalid_request', { raw: '{"name":', headers: { 'Content-Type': 'application/json' } });
  await callError('POST', '/v1/sandboxes', 400, 'invalid_request', { body: { colour: 'red' }, reqValid: false });
  await callError('POST', '/v1/sandboxes', 400, 'invalid_request', { body: { memoryMiB: 1 }, reqValid: false });
  await callError('POST', '/v1/sandboxes', 400, 'invalid_request', { body: { name: '-bad name' }, reqValid: false });
  await callError('POST', '/v1/sandboxes', 400, 'invalid_request', { body: { network: { internet: 'yes' } }, reqValid: false });
  await callError('POST', '/v1/sandboxes', 413, 'too_large', { body: { labels: { big: 'x'.repeat((1 << 20) + 1) } } });
  await callError('GET', '/v1/sandboxes/{id}', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
  await callError('DELETE', '/v1/sandboxes/{id}', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
  // Idempotency-Key: the same request again is the first answer, replayed; another is refused.
  const key = `openapi-${Date.now()}`;
  const once = await call('POST', '/v1/sandboxes', { body: { name: 'idem-openapi' }, headers: { 'Idempotency-Key': key }, expect: 201 });
  const twice = await call('POST', '/v1/sandboxes', { body: { name: 'idem-openapi' }, headers: { 'Idempotency-Key': key }, expect: 201 });
  assert.equal(twice.body.id, once.body.id);
  assert.equal(twice.body.replayed, true);
  assert.equal(twice.headers.get('idempotency-replayed'), 'true');
  await callError('POST', '/v1/sandboxes', 422, 'idempotency_key_reused', { body: { name: 'other' }, headers: { 'Idempotency-Key': key } });
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${once.body.id}`)).status, 200);
  await callError('GET', '/v1/sandboxes', 401, 'unauthorized', { key: null });
  await callError('GET', '/v1/sandboxes', 401, 'unauthorized', { key: 'wrong' });
  await callError('GET', '/metrics', 401, 'unauthorized', { key: null });
  await callError('GET', '/v1/usage', 401, 'unauthorized', { key: 'wrong' });
});

test('pause and resume', { skip }, async () => {
  const p = await call('POST', '/v1/sandboxes/{id}/pause', { params: { id: sb.id }, expect: 200 });
  assert.equal(p.body.status, 'paused');
  await call('POST', '/v1/sandboxes/{id}/pause', { params: { id: sb.id }, expect: 200 });
  // exec wakes a paused sandbox
  const e = await call('POST', '/v1/sandboxes/{id}/exec', { params: { id: sb.id }, body: { argv: ['true'] }, expect: 200 });
  assert.equal(e.body.exitCode, 0);
  await call('POST', '/v1/sandboxes/{id}/pause', { params: { id: sb.id }, expect: 200 });
  const r = await call('POST', '/v1/sandboxes/{id}/resume', { params: { id: sb.id }, expect: 200 });
  assert.equal(r.body.status, 'running');
  await call('POST', '/v1/sandboxes/{id}/resume', { params: { id: sb.id }, expect: 200 });
  await callError('POST', '/v1/sandboxes/{id}/pause', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
  await callError('POST', '/v1/sandboxes/{id}/resume', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
  await call('POST', '/v1/sandboxes/{id}/pause', { params: { id: sb.id }, expect: 200 });
  const w = await call('POST', '/v1/sandboxes/{id}/wake', { params: { id: sb.id }, expect: 200 });
  assert.equal(w.body.status, 'running');
  await callError('POST', '/v1/sandboxes/{id}/wake', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
});

test('stop and start', { skip }, async () => {
  await call('POST', '/v1/sandboxes/{id}/exec', { params: { id: sb.id }, body: { argv: ['sh', '-c', 'echo kept > /workspace/stop-start'] }, expect: 200 });
  const s = await call('POST', '/v1/sandboxes/{id}/stop', { params: { id: sb.id }, expect: 200 });
  assert.equal(s.body.status, 'stopped');
  await call('POST', '/v1/sandboxes/{id}/stop', { params: { id: sb.id }, expect: 200 });
  await callError('POST', '/v1/sandboxes/{id}/exec', 409, 'sandbox_stopped', { params: { id: sb.id }, body: { argv: ['true'] } });
  await callError('POST', '/v1/sandboxes/{id}/pause', 400, 'invalid_request', { params: { id: sb.id } });
  const t = await call('POST', '/v1/sandboxes/{id}/start', { params: { id: sb.id }, expect: 200 });
  assert.equal(t.body.status, 'running');
  await call('POST', '/v1/sandboxes/{id}/start', { params: { id: sb.id }, expect: 200 });
  const e = await call('POST', '/v1/sandboxes/{id}/exec', { params: { id: sb.id }, body: { argv: ['cat', '/workspace/stop-start'] }, expect: 200 });
  assert.equal(e.body.stdout, 'kept\n');
  await callError('POST', '/v1/sandboxes/{id}/stop', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
  // Runtime Cloud's form of the same changes: POST /v1/sandboxes/{id}:verb
  const p = await call('POST', '/v1/sandboxes/{id}:pause', { params: { id: sb.id }, expect: 200 });
  assert.deepEqual([p.body.status, p.body.state], ['paused', 'paused']);
  assert.equal((await call('POST', '/v1/sandboxes/{id}:wake', { params: { id: sb.id }, expect: 200 })).body.state, 'running');
  assert.equal((await call('POST', '/v1/sandboxes/{id}:stop', { params: { id: sb.id }, expect: 200 })).body.state, 'stopped');
  assert.equal((await call('POST', '/v1/sandboxes/{id}:restart', { params: { id: sb.id }, expect: 200 })).body.state, 'running');
  const x = await call('POST', '/v1/sandboxes/{id}:exec', { params: { id: sb.id }, body: { command: 'echo $((6 * 7))' }, expect: 200 });
  assert.equal(x.body.stdout, '42\n');
  await callError('POST', '/v1/sandboxes/{id}:exec', 400, 'invalid_request', { params: { id: sb.id }, body: { command: 'true', argv: ['true'] } });
  await callError('POST', '/v1/sandboxes/{id}:restart', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
  // Hibernation is gvisor's (tests/escape/hibernate.test.mjs); an ns sandbox says it cannot.
  if (sb.isolation === 'ns') {
    for (const t of ['/v1/sandboxes/{id}/hibernate', '/v1/sandboxes/{id}:hibernate'])
      await callError('POST', t, 501, 'feature_unavailable', { params: { id: sb.id } });
  } else {
    assert.equal((await call('POST', '/v1/sandboxes/{id}/hibernate', { params: { id: sb.id }, expect: 200 })).body.status, 'hibernated');
    assert.equal((await call('POST', '/v1/sandboxes/{id}:wake', { params: { id: sb.id }, expect: 200 })).body.state, 'running');
    assert.equal((await call('POST', '/v1/sandboxes/{id}:hibernate', { params: { id: sb.id }, expect: 200 })).body.status, 'hibernated');
  }
  for (const t of ['/v1/sandboxes/{id}:pause', '/v1/sandboxes/{id}:wake', '/v1/sandboxes/{id}:stop', '/v1/sandboxes/{id}:exec'])
    await callError('POST', t, 404, 'not_found', { params: { id: 'no-such-sandbox' }, body: t.endsWith('exec') ? { argv: ['true'] } : undefined });
  await callError('POST', '/v1/sandboxes/{id}/start', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
});

test('exec: result, stdin, env, cwd, timeout, errors', { skip }, async () => {
  const r = await call('POST', '/v1/sandboxes/{id}/exec', { params: { id: sb.id }, expect: 200, body: {
    argv: ['sh', '-c', 'cat; echo "$GREETING $EXTRA $(pwd)"; echo oops >&2; exit 3'],
    env: { EXTRA: 'there' }, cwd: '/tmp', stdin: 'in:', timeoutMs: 30000 } });
  assert.equal(r.body.exitCode, 3);
  assert.equal(r.body.stdout, 'in:hi there /tmp\n');
  assert.equal(r.body.stderr, 'oops\n');
  assert.equal(r.body.timedOut, false);
  const t = await call('POST', '/v1/sandboxes/{id}/exec', { params: { id: sb.id }, expect: 200,
    body: { argv: ['sleep', '5'], timeoutMs: 200 } });
  assert.equal(t.body.timedOut, true);
  await callError('POST', '/v1/sandboxes/{id}/exec', 400, 'exec_failed', { params: { id: sb.id },
    body: { argv: ['/no/such/program'] }, reqValid: true });
  await callError('POST', '/v1/sandboxes/{id}/exec', 400, 'invalid_request', { params: { id: sb.id }, body: { argv: [] }, reqValid: false });
  await callError('POST', '/v1/sandboxes/{id}/exec', 400, 'invalid_request', { params: { id: sb.id }, body: { argv: ['ls'], cwd: 'tmp' }, reqValid: false });
  await callError('POST', '/v1/sandboxes/{id}/exec', 400, 'invalid_request', { params: { id: sb.id }, body: { argv: ['ls'], timeoutMs: 0 }, reqValid: false });
  await callError('POST', '/v1/sandboxes/{id}/exec', 400, 'invalid_request', { params: { id: sb.id }, raw: 'nope' });
  await callError('POST', '/v1/sandboxes/{id}/exec', 404, 'not_found', { params: { id: 'no-such-sandbox' }, body: { argv: ['true'] } });
});

test('files: PUT with mode, GET with X-File-Mode, errors', { skip }, async () => {
  const bytes = Buffer.from([0, 1, 2, 255, 10, 65]);
  await call('PUT', '/v1/sandboxes/{id}/files', { params: { id: sb.id }, query: 'path=data.bin&mode=0640', raw: bytes, expect: 204 });
  const g = await call('GET', '/v1/sandboxes/{id}/files', { params: { id: sb.id }, query: 'path=%2Fworkspace%2Fdata.bin', expect: 200 });
  assert.deepEqual(g.buf, bytes);
  assert.equal(g.headers.get('x-file-mode'), '0640');
  await call('PUT', '/v1/sandboxes/{id}/files', { params: { id: sb.id }, query: 'path=empty&mode=755', raw: Buffer.alloc(0), expect: 204 });
  const e = await call('GET', '/v1/sandboxes/{id}/files', { params: { id: sb.id }, query: 'path=empty', expect: 200 });
  assert.equal(e.buf.length, 0);
  assert.equal(e.headers.get('x-file-mode'), '0755');
  await callError('GET', '/v1/sandboxes/{id}/files', 404, 'file_not_found', { params: { id: sb.id }, query: 'path=no-such-file' });
  await callError('GET', '/v1/sandboxes/{id}/files', 400, 'invalid_request', { params: { id: sb.id } });
  await callError('GET', '/v1/sandboxes/{id}/files', 400, 'invalid_request', { params: { id: sb.id }, query: 'path=data.bin&mode=0644' });
  await callError('PUT', '/v1/sandboxes/{id}/files', 400, 'invalid_request', { params: { id: sb.id }, query: 'path=x&mode=999', raw: 'x' });
  await call('PUT', '/v1/sandboxes/{id}/files', { params: { id: sb.id }, query: 'path=made/on/the/way/x', raw: 'x', expect: 204 });
  await callError('PUT', '/v1/sandboxes/{id}/files', 409, 'not_a_directory', { params: { id: sb.id }, query: 'path=data.bin/x', raw: 'x' });
  await callError('GET', '/v1/sandboxes/{id}/files', 409, 'is_a_directory', { params: { id: sb.id }, query: 'path=%2Fworkspace' });
  await callError('PUT', '/v1/sandboxes/{id}/files', 404, 'not_found', { params: { id: 'no-such-sandbox' }, query: 'path=x', raw: 'x' });
});

test('files tree: list, stat, mkdir, remove, rename, chmod, errors', { skip }, async () => {
  const id = { id: sb.id };
  const made = await call('POST', '/v1/sandboxes/{id}/files:mkdir', { params: id, body: { path: '/workspace/tree/sub', parents: true }, expect: 200 });
  assert.deepEqual(made.body, { path: '/workspace/tree/sub', created: true });
  await call('PUT', '/v1/sandboxes/{id}/files', { params: id, query: 'path=tree/sub/a.txt', raw: 'hi', expect: 204 });
  const listed = await call('GET', '/v1/sandboxes/{id}/files/list', { params: id, query: 'path=/workspace/tree&depth=2', expect: 200 });
  assert.deepEqual(listed.body.data.map((e) => e.path), ['/workspace/tree/sub', '/workspace/tree/sub/a.txt']);
  const st = await call('GET', '/v1/sandboxes/{id}/files/stat', { params: id, query: 'path=/workspace/tree/sub/a.txt', expect: 200 });
  assert.equal(st.body.size, 2);
  const none = await call('GET', '/v1/sandboxes/{id}/files/stat', { params: id, query: 'path=/workspace/tree/none', expect: 200 });
  assert.deepEqual(none.body, { exists: false, path: '/workspace/tree/none' });
  await call('POST', '/v1/sandboxes/{id}/files:chmod', { params: id, body: { path: '/workspace/tree/sub/a.txt', mode: '600' }, expect: 200 });
  await call('POST', '/v1/sandboxes/{id}/files:rename', { params: id, body: { from: '/workspace/tree/sub/a.txt', to: '/workspace/tree/b.txt' }, expect: 200 });
  await callError('POST', '/v1/sandboxes/{id}/files:remove', 409, 'not_empty', { params: id, body: { path: '/workspace/tree' } });
  const gone = await call('POST', '/v1/sandboxes/{id}/files:remove', { params: id, body: { path: '/workspace/tree', recursive: true }, expect: 200 });
  assert.equal(gone.body.removed, true);
  await callError('GET', '/v1/sandboxes/{id}/files/list', 404, 'file_not_found', { params: id, query: 'path=/workspace/tree' });
  await callError('GET', '/v1/sandboxes/{id}/files/list', 400, 'invalid_request', { params: id, query: 'limit=0' });
  await callError('POST', '/v1/sandboxes/{id}/files:mkdir', 400, 'invalid_request', { params: id, body: { path: 'x', colour: 1 }, reqValid: false });
});

test("files/content and uploads: Runtime Cloud's file routes", { skip }, async () => {
  const put = await call('PUT', '/v1/sandboxes/{id}/files/content', { params: { id: sb.id }, query: 'path=%2Fworkspace%2Fc%2Fa.txt&mode=600', raw: 'hello', expect: 200 });
  assert.deepEqual(put.body, { path: '/workspace/c/a.txt', size: 5 });
  const got = await call('GET', '/v1/sandboxes/{id}/files/content', { params: { id: sb.id }, query: 'path=%2Fworkspace%2Fc%2Fa.txt', expect: 200 });
  assert.equal(got.text, 'hello');
  assert.equal(got.headers.get('x-content-length'), '5');
  assert.equal(got.headers.get('x-file-mode'), '0600');
  const data = Buffer.alloc(1024 * 1024 + 3, 7);
  const sha256 = crypto.createHash('sha256').update(data).digest('hex');
  const up = await call('POST', '/v1/sandboxes/{id}/uploads', { params: { id: sb.id }, body: { path: '/workspace/c/big', size: data.length, sha256 }, expect: 201 });
  const uploadId = up.body.uploadId;
  for (const offset of [0, up.body.chunkBytes])
    await call('PUT', '/v1/sandboxes/{id}/uploads/{uploadId}', { params: { id: sb.id, uploadId }, query: `offset=${offset}`, raw: data.subarray(offset, offset + up.body.chunkBytes), expect: 200 });
  const done = await call('POST', '/v1/sandboxes/{id}/uploads/{uploadId}:commit', { params: { id: sb.id, uploadId }, body: {}, expect: 200 });
  assert.equal(done.body.sha256, sha256);
  const other = await call('POST', '/v1/sandboxes/{id}/uploads', { params: { id: sb.id }, body: { path: '/workspace/c/gone', size: 1, sha256 }, expect: 201 });
  await call('POST', '/v1/sandboxes/{id}/uploads/{uploadId}:abort', { params: { id: sb.id, uploadId: other.body.uploadId }, body: {}, expect: 200 });
  await callError('POST', '/v1/sandboxes/{id}/uploads/{uploadId}:commit', 404, 'not_found', { params: { id: sb.id, uploadId: other.body.uploadId }, body: {} });
  await callError('POST', '/v1/sandboxes/{id}/uploads', 400, 'invalid_request', { params: { id: sb.id }, body: { path: '/etc/x', size: 1, sha256 }, reqValid: false });
});

test(':update: labels, env as a patch; what runtimed cannot do is refused by name', { skip }, async () => {
  const before = await call('GET', '/v1/sandboxes/{id}', { params: { id: sb.id }, expect: 200 });
  const u = await call('POST', '/v1/sandboxes/{id}:update', { params: { id: sb.id }, body: { labels: { tier: 'x' }, env: { ADDED: '1' } }, expect: 200 });
  assert.deepEqual(u.body.labels, { tier: 'x' });
  assert.deepEqual(u.body.env, { ...before.body.env, ADDED: '1' });
  const back = await call('POST', '/v1/sandboxes/{id}:update', { params: { id: sb.id }, body: { labels: before.body.labels, env: { ADDED: null } }, expect: 200 });
  assert.deepEqual(back.body.env, before.body.env);
  await callError('POST', '/v1/sandboxes/{id}:update', 501, 'feature_unavailable', { params: { id: sb.id }, body: { autoWake: false } });
  await callError('POST', '/v1/sandboxes/{id}:update', 400, 'invalid_request', { params: { id: sb.id }, body: { memoryMiB: 2 }, reqValid: false });
  // isolation is fixed at create: its own value is accepted, another is refused though well-formed.
  const same = await call('POST', '/v1/sandboxes/{id}:update', { params: { id: sb.id }, body: { isolation: sb.isolation }, expect: 200 });
  assert.equal(same.body.isolation, sb.isolation);
  const other = sb.isolation === 'ns' ? 'gvisor' : 'ns';
  await callError('POST', '/v1/sandboxes/{id}:update', 400, 'invalid_request', { params: { id: sb.id }, body: { isolation: other }, reqValid: true });
  await callError('POST', '/v1/sandboxes/{id}:update', 400, 'invalid_request', { params: { id: sb.id }, body: { isolation: 'vm' }, reqValid: false });
});

test(':extend: a lease ends later; a sandbox without one has none to extend', { skip }, async () => {
  await callError('POST', '/v1/sandboxes/{id}:extend', 400, 'invalid_request', { params: { id: sb.id }, body: { seconds: 60 } });
  const leased = await call('POST', '/v1/sandboxes', { body: { timeoutSeconds: 600, onLeaseEnd: 'stop' }, expect: 201 });
  assert.deepEqual([leased.body.timeoutSeconds, leased.body.onLeaseEnd], [600, 'stop']);
  const before = Date.parse(leased.body.endsAt);
  const later = await call('POST', '/v1/sandboxes/{id}:extend', { params: { id: leased.body.id }, body: { seconds: 120 }, expect: 200 });
  assert.ok(Date.parse(later.body.endsAt) >= before + 120_000, `${leased.body.endsAt} -> ${later.body.endsAt}`);
  await callError('POST', '/v1/sandboxes/{id}:extend', 400, 'invalid_request', { params: { id: leased.body.id }, body: { seconds: 0 }, reqValid: false });
  await call('DELETE', '/v1/sandboxes/{id}', { params: { id: leased.body.id }, expect: 200 });
});

test('network: replace the policy, see it on the sandbox, errors', { skip }, async () => {
  const r = await call('PUT', '/v1/sandboxes/{id}/network', { params: { id: sb.id }, expect: 200,
    body: { internet: true, allow: ['example.com', '*.example.org'] } });
  assert.deepEqual(r.body, { internet: true, allow: ['example.com', '*.example.org'], openPorts: true });
  const g = await call('GET', '/v1/sandboxes/{id}', { params: { id: sb.id }, expect: 200 });
  assert.deepEqual(g.body.network, { internet: true, allow: ['example.com', '*.example.org'] });
  const got = await call('GET', '/v1/sandboxes/{id}/network', { params: { id: sb.id }, expect: 200 });
  assert.deepEqual(got.body, r.body);
  const empty = await call('PUT', '/v1/sandboxes/{id}/network', { params: { id: sb.id }, expect: 200, body: {} });
  assert.deepEqual(empty.body, { internet: true, openPorts: true }, 'an omitted field takes its default: no allow list');
  const none = await call('PUT', '/v1/sandboxes/{id}/network', { params: { id: sb.id }, expect: 200, body: { allow: [] } });
  assert.deepEqual(none.body, { internet: true, allow: [], openPorts: true }, 'an empty list is kept: no host');
  const rules = { internet: true, allow: ['*.example.com'], deny: ['bad.example.com', '203.0.113.0/24'], connect: ['db.example.net:5432'] };
  const denied = await call('PUT', '/v1/sandboxes/{id}/network', { params: { id: sb.id }, expect: 200, body: rules });
  assert.deepEqual(denied.body, { ...rules, openPorts: true }, 'deny and connect are kept, not dropped');
  const listed = await call('PUT', '/v1/sandboxes/{id}/network', { params: { id: sb.id }, expect: 200, body: { internet: false, allow: ['example.com'] } });
  assert.deepEqual(listed.body, { internet: true, allow: ['example.com'], openPorts: true }, "internet false with a list is that list (Runtime Cloud's reading)");
  await callError('PUT', '/v1/sandboxes/{id}/network', 400, 'invalid_request', { params: { id: sb.id }, body: { connect: ['db.example.net'] } });
  await callError('PUT', '/v1/sandboxes/{id}/network', 400, 'invalid_request', { params: { id: sb.id }, body: { internet: true, block: ['x.example'] }, reqValid: false });
  await call('PUT', '/v1/sandboxes/{id}/network', { params: { id: sb.id }, expect: 200, body: { internet: false } });
  await callError('PUT', '/v1/sandboxes/{id}/network', 400, 'invalid_request', { params: { id: sb.id }, body: { allow: 'example.com' }, reqValid: false });
  await callError('PUT', '/v1/sandboxes/{id}/network', 400, 'invalid_request', { params: { id: sb.id }, raw: '' });
  await callError('PUT', '/v1/sandboxes/{id}/network', 404, 'not_found', { params: { id: 'no-such-sandbox' }, body: {} });
});

test('events: a refused connection, pauses and resumes; after=', { skip }, async () => {
  // internet is off: a connection to a public address is refused (an egress.refused event).
  await call('POST', '/v1/sandboxes/{id}/exec', { params: { id: sb.id }, expect: 200, body: {
    argv: ['node', '-e', "const s=require('net').connect(80,'93.184.215.14');s.on('error',()=>{});setTimeout(()=>process.exit(0),1500)"],
    timeoutMs: 20000 } });
  const r = await call('GET', '/v1/sandboxes/{id}/events', { params: { id: sb.id }, expect: 200 });
  const kinds = r.body.map((e) => e.kind);
  for (const k of ['sandbox.paused', 'sandbox.resumed', 'egress.refused']) assert.ok(kinds.includes(k), `a ${k} event: ${kinds}`);
  const first = r.body[0].seq;
  const later = await call('GET', '/v1/sandboxes/{id}/events', { params: { id: sb.id }, query: `after=${first}`, expect: 200 });
  assert.ok(later.body.every((e) => e.seq > first) && later.body.length === r.body.length - 1);
  await callError('GET', '/v1/sandboxes/{id}/events', 400, 'invalid_request', { params: { id: sb.id }, query: 'after=-1' });
  await callError('GET', '/v1/sandboxes/{id}/events', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
});

test('mcp: start your own stdio server, wait, status, gateway, stop', { skip }, async () => {
  const none = await call('GET', '/v1/sandboxes/{id}/mcp', { params: { id: probeSb.id }, expect: 200 });
  assert.deepEqual(none.body, { running: false, port: null, servers: [], headers: {}, warnings: [] });
  await call('PUT', '/v1/sandboxes/{id}/files', { params: { id: sb.id }, query: 'path=hello.mjs', raw: fs.readFileSync(HELLO), expect: 204 });
  const hello = { name: 'hello', command: ['node', '/workspace/hello.mjs'] };
  const s = await call('POST', '/v1/sandboxes/{id}/mcp', { params: { id: sb.id }, body: { servers: [hello] }, expect: 202 });
  assert.equal(s.body.servers[0].name, 'hello');
  const w = await call('GET', '/v1/sandboxes/{id}/mcp', { params: { id: sb.id }, query: 'wait=60', expect: 200 });
  const srv = w.body.servers.find((x) => x.name === 'hello');
  assert.equal(srv.status, 'ready', JSON.stringify(w.body));
  assert.deepEqual(srv.tools, ['hello']);
  assert.match(srv.fingerprint, /^[0-9a-f]{16}$/);
  gateway = { url: srv.url, auth: w.body.headers.Authorization };
  const g = await call('GET', '/v1/sandboxes/{id}', { params: { id: sb.id }, expect: 200 });
  assert.equal(g.body.mcp.servers[0].name, 'hello');
  // the same again is left alone; other settings under that name conflict
  await call('POST', '/v1/sandboxes/{id}/mcp', { params: { id: sb.id }, body: { servers: [hello] }, expect: 202 });
  await callError('POST', '/v1/sandboxes/{id}/mcp', 409, 'conflict', { params: { id: sb.id },
    body: { servers: [{ ...hello, args: ['x'] }] }, reqValid: true });
  await callError('POST', '/v1/sandboxes/{id}/mcp', 400, 'invalid_request', { params: { id: sb.id }, body: { servers: [] }, reqValid: false });
  await callError('POST', '/v1/sandboxes/{id}/mcp', 400, 'invalid_request', { params: { id: sb.id },
    body: { servers: [{ name: 'Bad Name', command: ['node'] }] }, reqValid: false });
  await callError('POST', '/v1/sandboxes/{id}/mcp', 400, 'invalid_request', { params: { id: sb.id },
    body: { servers: [{ name: 'x', command: ['node'], fingerprint: 'xyz' }] }, reqValid: false });
  await callError('POST', '/v1/sandboxes/{id}/mcp', 400, 'invalid_request', { params: { id: sb.id },
    body: { servers: [{ id: 'no-such-catalog-id' }] }, reqValid: true });
  await callError('GET', '/v1/sandboxes/{id}/mcp', 400, 'invalid_request', { params: { id: sb.id }, query: 'wait=-1' });
  await callError('GET', '/v1/sandboxes/{id}/mcp', 404, 'not_found', { params: { id: 'no-such-sandbox' } });
  // Its output, as text (follow=1 is tested in tests/mcp/newcomer.test.mjs).
  const logs = await call('GET', '/v1/sandboxes/{id}/mcp/{name}/logs', { params: { id: sb.id, name: 'hello' }, expect: 200 });
  assert.equal(typeof logs.text, 'string');
  await callError('GET', '/v1/sandboxes/{id}/mcp/{name}/logs', 404, 'not_found', { params: { id: sb.id, name: 'nosuch' } });
  await callError('GET', '/v1/sandboxes/{id}/mcp/{name}/logs', 404, 'not_found', { params: { id: 'no-such-sandbox', name: 'hello' } });
  // A catalog entry read before any start: its reviewed list and findings.
  const cat = await call('GET', '/v1/mcp/catalog/{entryId}/review', { params: { entryId: 'memory' }, expect: 200 });
  assert.ok(cat.body.current.tools.length > 0);
  await callError('GET', '/v1/mcp/catalog/{entryId}/review', 404, 'not_found', { params: { entryId: 'no-such-entry' } });
  // Its review: nothing pending, the approved list is what it serves; nothing to approve.
  const rv = await call('GET', '/v1/sandboxes/{id}/mcp/{name}/review', { params: { id: sb.id, name: 'hello' }, expect: 200 });
  assert.equal(rv.body.pending, false);
  assert.deepEqual(rv.body.current, rv.body.approved);
  await callError('GET', '/v1/sandboxes/{id}/mcp/{name}/review', 404, 'not_found', { params: { id: sb.id, name: 'nosuch' } });
  const calls = await call('GET', '/v1/sandboxes/{id}/mcp/{name}/calls', { params: { id: sb.id, name: 'hello' }, expect: 200 });
  assert.ok(calls.body.total >= 0);
  await callError('GET', '/v1/sandboxes/{id}/mcp/{name}/calls', 404, 'not_found', { params: { id: sb.id, name: 'nosuch' } });
  await callError('POST', '/v1/sandboxes/{id}/mcp/{name}:approve', 409, 'conflict',
    { params: { id: sb.id, name: 'hello' }, body: { fingerprint: rv.body.current.fingerprint }, reqValid: true });
  await callError('POST', '/v1/sandboxes/{id}/mcp/{name}:approve', 400, 'invalid_request',
    { params: { id: sb.id, name: 'hello' }, body: { fingerprint: 'abc' }, reqValid: false });
  await callError('GET', '/v1/sandboxes/{id}/mcp/{name}/logs', 400, 'invalid_request', { params: { id: sb.id, name: 'hello' }, query: 'follow=maybe' });
});

/** A gateway request, its answer checked against the document's gateway operation. */
async function gw(method, url, { auth, headers = {}, body } = {}) {
  const h = { ...headers };
  if (auth) h.Authorization = auth;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const res = await fetch(url, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30000) });
  const buf = Buffer.from(await res.arrayBuffer());
  let json = null;
  try { json = JSON.parse(buf.toString()); } catch {}
  const r = { status: res.status, headers: res.headers, buf, text: buf.toString(), body: json };
  checkAnswer(opOf(method, '/mcp/{link}/{server}'), r, `gateway ${method}`);
  return r;
}

test('gateway: preflight, initialize, wrong token, wrong link, sessions', { skip }, async () => {
  assert.ok(gateway, 'the mcp test ran');
  const accept = { Accept: 'application/json, text/event-stream' };
  const pre = await gw('OPTIONS', gateway.url);
  assert.equal(pre.status, 204);
  const init = await gw('POST', gateway.url, { auth: gateway.auth, headers: accept, body: {
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'openapi-test', version: '1' } } } });
  assert.equal(init.status, 200, init.text);
  const sid = init.headers.get('mcp-session-id');
  assert.ok(sid, 'an Mcp-Session-Id');
  const sess = { ...accept, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18' };
  const note = await gw('POST', gateway.url, { auth: gateway.auth, headers: sess, body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
  assert.equal(note.status, 202);
  const bad = await gw('POST', gateway.url, { auth: 'Bearer wrong', headers: accept, body: { jsonrpc: '2.0', id: 2, method: 'ping' } });
  assert.equal(bad.status, 401);
  assert.equal(bad.headers.get('www-authenticate'), 'Bearer');
  const lost = await gw('POST', gateway.url.replace(/\/mcp\/[0-9a-f]+\//, '/mcp/00000000000000000000000000000000/'),
    { auth: gateway.auth, headers: accept, body: { jsonrpc: '2.0', id: 3, method: 'ping' } });
  assert.equal(lost.status, 404);
  // No session: 405 (2026-07-28 has no GET stream; a 2025 GET needs its session).
  const nosession = await gw('GET', gateway.url, { auth: gateway.auth, headers: { Accept: 'text/event-stream' } });
  assert.equal(nosession.status, 405);
  const modern = await gw('POST', gateway.url, {
    auth: gateway.auth,
    headers: { ...accept, 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/list' },
    body: { jsonrpc: '2.0', id: 4, method: 'tools/list', params: { _meta: {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } },
  });
  assert.equal(modern.status, 200, 'a 2026-07-28 request needs no session');
  const end = await gw('DELETE', gateway.url, { auth: gateway.auth, headers: sess });
  assert.equal(end.status, 200);
  const gone = await gw('DELETE', gateway.url, { auth: gateway.auth, headers: sess });
  assert.equal(gone.status, 404);
});

test('mcp: stop, and the mcp events', { skip }, async () => {
  await call('DELETE', '/v1/sandboxes/{id}/mcp/{name}', { params: { id: sb.id, name: 'hello' }, expect: 204 });
  await callError('DELETE', '/v1/sandboxes/{id}/mcp/{name}', 404, 'not_found', { params: { id: sb.id, name: 'nosuch' } });
  const st = await call('GET', '/v1/sandboxes/{id}/mcp', { params: { id: sb.id }, expect: 200 });
  assert.equal(st.body.servers[0].phase, 'stopped');
  assert.equal(st.body.servers[0].status, 'failed');
  assert.equal(st.body.running, false);
  const all = await call('DELETE', '/v1/sandboxes/{id}/mcp', { params: { id: sb.id }, expect: 200 });
  assert.deepEqual(all.body, { stopped: false }, 'nothing was running');
  const ev = await call('GET', '/v1/sandboxes/{id}/events', { params: { id: sb.id }, expect: 200 });
  const kinds = ev.body.map((e) => e.kind);
  for (const k of ['mcp.ready', 'mcp.stopped']) assert.ok(kinds.includes(k), `a ${k} event: ${kinds}`);
});

test('catalog: every entry matches, the optional lock and env included', { skip }, async () => {
  const r = await call('GET', '/v1/mcp/catalog', { expect: 200 });
  assert.ok(r.body.data.length > 0);
  assert.ok(r.body.data.some((e) => Array.isArray(e.lock)), 'an entry with a lock');
  assert.ok(r.body.data.some((e) => e.serverEnv && typeof e.serverEnv === 'object'), 'an entry with serverEnv');
  const github = r.body.data.find((e) => e.id === 'github');
  assert.deepEqual(github.env, [{ name: 'GITHUB_PERSONAL_ACCESS_TOKEN', description: github.settings[0].description, required: true, secret: true, hosts: ['api.github.com'] }]);
});

test('secrets: put, replace, list without values, delete, errors', { skip }, async () => {
  const name = 'OA_TOKEN';
  const body = { value: 'sekrit-value', hosts: ['api.example.com'], methods: ['GET'], paths: ['/repos/acme/*'] };
  const c = await call('PUT', '/v1/egress-secrets/{name}', { params: { name }, body, expect: 201 });
  assert.equal(c.body.value, undefined, 'the value is never shown');
  await call('PUT', '/v1/egress-secrets/{name}', { params: { name }, body: { value: 'v2', hosts: ['api.example.com'] }, expect: 200 });
  const l = await call('GET', '/v1/egress-secrets', { expect: 200 });
  assert.ok(l.body.secrets.some((s) => s.name === name));
  assert.ok(!l.text.includes('sekrit') && !l.text.includes('v2"'), 'no values in the listing');
  await callError('PUT', '/v1/egress-secrets/{name}', 400, 'invalid_request', { params: { name }, body: { value: 'x' }, reqValid: false });
  await callError('PUT', '/v1/egress-secrets/{name}', 400, 'invalid_request', { params: { name }, body: { value: 'a\nb', hosts: ['h.example'] }, reqValid: false });
  await callError('PUT', '/v1/egress-secrets/{name}', 400, 'invalid_request', { params: { name }, body: { value: 'x', hosts: ['h.example'], methods: ['get'] }, reqValid: false });
  await callError('PUT', '/v1/egress-secrets/{name}', 400, 'invalid_request', { params: { name: '1BAD' }, body: { value: 'x', hosts: ['h.example'] } });
  await callError('PUT', '/v1/egress-secrets/{name}', 413, 'too_large', { params: { name }, body: { value: 'x'.repeat(8193), hosts: ['h.example'] }, reqValid: false });
  await callError('PUT', '/v1/egress-secrets/{name}', 400, 'invalid_request', { params: { name }, raw: '{' });
  await call('DELETE', '/v1/egress-secrets/{name}', { params: { name }, expect: 200 });
  await callError('DELETE', '/v1/egress-secrets/{name}', 404, 'not_found', { params: { name } });
  await callError('GET', '/v1/secrets', 501, 'unavailable', {});
});

test('accounts: create, list, rotate, limits, an account\'s key, remove, errors', { skip }, async () => {
  const name = token('oa-acct').slice(0, 20);
  const c = await call('POST', '/v1/accounts', { body: { name, maxSandboxes: 1 }, expect: 201 });
  assert.equal(c.body.name, name);
  assert.equal(c.body.maxMemoryMiB, null);
  await callError('POST', '/v1/accounts', 409, 'conflict', { body: { name }, reqValid: true });
  await callError('POST', '/v1/accounts', 409, 'conflict', { body: { name: 'default' }, reqValid: true });
  await callError('POST', '/v1/accounts', 400, 'invalid_request', { body: { name: 'Bad Name' }, reqValid: false });
  await callError('POST', '/v1/accounts', 400, 'invalid_request', { body: { name: 'x', maxSandboxes: 0 }, reqValid: false });
  await callError('POST', '/v1/accounts', 400, 'invalid_request', { body: { name: 'x', colour: 'red' }, reqValid: false });
  await callError('POST', '/v1/accounts', 400, 'invalid_request', { raw: '{' });
  const l = await call('GET', '/v1/accounts', { expect: 200 });
  const row = l.body.find((a) => a.name === name);
  assert.deepEqual({ ...row, createdAt: undefined }, { name, createdAt: undefined, removing: false,
    maxSandboxes: 1, maxMemoryMiB: null, sandboxes: 0, memoryMiB: 0 });
  const k = await call('POST', '/v1/accounts/{name}/keys', { params: { name }, expect: 201 });
  assert.notEqual(k.body.apiKey, c.body.apiKey);
  await callError('POST', '/v1/accounts/{name}/keys', 404, 'not_found', { params: { name: 'no-such-account' } });

  // The account's key: its own sandbox and usage, its limit, nothing of the admin's.
  const key = k.body.apiKey;
  const own = await call('POST', '/v1/sandboxes', { key, body: { memoryMiB: 256 }, expect: 201 });
  // The admin lists and reaches the account's sandbox; the account lists no one else's.
  const adminView = await call('GET', '/v1/sandboxes', { query: `account=${name}`, expect: 200 });
  assert.deepEqual(adminView.body.data.map((x) => [x.id, x.account]), [[own.body.id, name]]);
  assert.equal((await call('GET', '/v1/sandboxes/{id}', { params: { id: own.body.id }, expect: 200 })).body.account, name);
  await callError('GET', '/v1/sandboxes', 403, 'forbidden', { key, query: 'account=default' });
  const over = await callError('POST', '/v1/sandboxes', 429, 'limit_reached', { key, body: { memoryMiB: 256 }, reqValid: true });
  assert.match(over.body.error.message, /maxSandboxes=1/);
  await callError('GET', '/v1/sandboxes/{id}', 404, 'not_found', { key, params: { id: sb.id } });
  const u = await call('GET', '/v1/usage', { key, expect: 200 });
  assert.deepEqual(u.body.sandboxes.map((r) => [r.sandbox, r.account]), [[own.body.id, name]]);
  assert.deepEqual(u.body.accounts.map((a) => a.account), [name]);
  await callError('GET', '/v1/accounts', 403, 'forbidden', { key });
  await callError('POST', '/v1/accounts', 403, 'forbidden', { key, body: { name: 'sneaky' } });
  await callError('POST', '/v1/accounts/{name}/keys', 403, 'forbidden', { key, params: { name } });
  await callError('DELETE', '/v1/accounts/{name}', 403, 'forbidden', { key, params: { name } });
  await callError('GET', '/metrics', 403, 'forbidden', { key });

  await callError('DELETE', '/v1/accounts/{name}', 403, 'forbidden', { params: { name: 'default' } });
  await call('DELETE', '/v1/accounts/{name}', { params: { name }, expect: 204 });
  await callError('DELETE', '/v1/accounts/{name}', 404, 'not_found', { params: { name } });
  await callError('GET', '/v1/sandboxes', 401, 'unauthorized', { key });
});

test('the event stream: opened with a key, refused without one', { skip }, async () => {
  const o = opOf('GET', '/v1/events/stream');
  const ctl = new AbortController();
  const res = await fetch(`${d.url}/v1/events/stream`, { headers: { Authorization: `Bearer ${d.key}` }, signal: ctl.signal });
  const first = await res.body.getReader().read(); // its first line; it never ends
  ctl.abort();
  checkAnswer(o, { status: res.status, headers: res.headers, buf: Buffer.from(first.value), text: Buffer.from(first.value).toString(), body: null }, 'stream');
  assert.match(Buffer.from(first.value).toString(), /^retry: \d+\n\n/);
  await callError('GET', '/v1/events/stream', 401, 'unauthorized', { key: 'wrong' });
});

test('login: connect start, token, approve, deny, confirm, connections, me, disconnect', { skip }, async () => {
  const pair = crypto.generateKeyPairSync('rsa', { modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } });
  const startBody = { agentName: 'openapi', publicKey: pair.publicKey, machine: 'probe' };
  const s = await call('POST', '/api/connect/start', { key: null, body: startBody, expect: 200 });
  const page = await call('GET', '/connect', { key: null, query: `code=${s.body.userCode}`, expect: 200 });
  assert.match(page.headers.get('content-security-policy'), /default-src 'none'/);
  await callError('POST', '/api/connect/start', 400, 'invalid_request', { key: null, body: { ...startBody, extra: 1 }, reqValid: false });
  await callError('POST', '/api/connect/start', 413, 'too_large', { key: null, raw: 'x'.repeat(20000) });
  const params = { userCode: s.body.userCode };
  await call('POST', '/api/connect/token', { key: null, body: { deviceCode: s.body.deviceCode }, expect: 200 });
  await callError('POST', '/api/connect/token', 400, 'invalid_request', { key: null, body: { deviceCode: 'x' }, reqValid: true });
  await callError('POST', '/api/connect/token', 404, 'not_found', { key: null, body: { deviceCode: 'A'.repeat(43) }, reqValid: true });
  await call('GET', '/v1/connect/requests/{userCode}', { params, expect: 200 });
  await callError('GET', '/v1/connect/requests/{userCode}', 404, 'not_found', { params: { userCode: '0000-0000-0000' } });
  const a = await call('POST', '/v1/connect/requests/{userCode}:approve', { params, body: {}, expect: 200 });
  await callError('POST', '/v1/connect/requests/{userCode}:approve', 409, 'conflict', { params, body: {} });
  await callError('POST', '/v1/connect/requests/{userCode}:deny', 409, 'conflict', { params });
  await callError('POST', '/v1/connect/requests/{userCode}:approve', 404, 'not_found', { params: { userCode: '0000-0000-0000' }, body: {} });
  await callError('POST', '/v1/connect/requests/{userCode}:deny', 404, 'not_found', { params: { userCode: '0000-0000-0000' } });
  const t = await call('POST', '/api/connect/token', { key: null, body: { deviceCode: s.body.deviceCode }, expect: 200 });
  // Answered pending when polled within 2 s of the last poll: polled at the daemon's pace.
  const connected = t.body.status === 'connected' ? t.body : await waitFor(async () => {
    const again = await call('POST', '/api/connect/token', { key: null, body: { deviceCode: s.body.deviceCode }, expect: 200 });
    return again.body.status === 'connected' && again.body;
  }, { timeoutMs: 20000, intervalMs: 2100, what: 'the token poll to answer connected' });
  const key = crypto.privateDecrypt({ key: pair.privateKey, oaepHash: 'sha256' },
    Buffer.from(connected.encryptedKey, 'base64')).toString('utf8');
  await call('POST', '/api/connect/confirm', { key, body: {}, expect: 200 });
  await callError('POST', '/api/connect/confirm', 401, 'unauthorized', { key: null, body: {} });
  const me = await call('GET', '/v1/me', { key, expect: 200 });
  assert.equal(me.body.credentialId, a.body.connectionId);
  await callError('GET', '/v1/me', 401, 'unauthorized', { key: null });
  await call('GET', '/v1/connect/connections', { expect: 200 });
  await callError('GET', '/v1/connect/connections', 401, 'unauthorized', { key: null });
  await call('POST', '/api/connect/disconnect', { key, body: {}, expect: 200 });
  await callError('POST', '/api/connect/disconnect', 401, 'unauthorized', { key, body: {} });
  const d2 = await call('POST', '/api/connect/start', { key: null, body: startBody, expect: 200 });
  await call('POST', '/v1/connect/requests/{userCode}:deny', { params: { userCode: d2.body.userCode }, expect: 200 });
  const d3 = await call('POST', '/api/connect/start', { key: null, body: startBody, expect: 200 });
  const a3 = await call('POST', '/v1/connect/requests/{userCode}:approve', { params: { userCode: d3.body.userCode }, body: {}, expect: 200 });
  await call('DELETE', '/v1/connect/connections/{connectionId}', { params: { connectionId: a3.body.connectionId }, expect: 204 });
  await callError('DELETE', '/v1/connect/connections/{connectionId}', 404, 'not_found', { params: { connectionId: a3.body.connectionId } });
});

test('usage and metrics', { skip }, async () => {
  const u = await call('GET', '/v1/usage', { expect: 200 });
  assert.ok(u.body.sandboxes.some((r) => r.sandbox === sb.id && r.account === 'default'));
  assert.ok(u.body.accounts.some((a) => a.account === 'default'), JSON.stringify(u.body.accounts));
  const series = await call('GET', '/v1/usage/series', { query: `sandbox=${sb.id}`, expect: 200 });
  assert.ok(series.body.points.length > 0, 'the usage call just counted it: a point now');
  await call('GET', '/v1/usage/series', { query: 'account=default', expect: 200 });
  await callError('GET', '/v1/usage/series', 404, 'not_found', { query: 'sandbox=no-such-sandbox' });
  await callError('GET', '/v1/usage/series', 404, 'not_found', { query: 'account=no-such-account' });
  await callError('GET', '/v1/usage/series', 400, 'invalid_request', { query: `sandbox=${sb.id}&account=default` });
  await callError('GET', '/v1/usage/series', 400, 'invalid_request', { query: 'colour=red' });
  const m = await call('GET', '/metrics', { expect: 200 });
  assert.match(m.text, /^# (HELP|TYPE) runtime_/m);
  // The health check takes no key, and says nothing but that the daemon answers.
  for (const key of [null, 'wrong']) {
    const h = await call('GET', '/healthz', { key, expect: 200 });
    assert.deepEqual(h.body, { ok: true });
  }
});

/** How the daemon answers one probe: unrouted (no route: 404 "no such API path",
 * 405, or the HTTP layer's 501), missing (a 404 of a thing: inconclusive for a path
 * made of guessed words) or served. */
async function probe(method, p) {
  const withBody = ['POST', 'PUT', 'DELETE', 'PATCH'].includes(method);
  const res = await fetch(d.url + p, { method, headers: { Authorization: `Bearer ${d.key}`,
    ...(withBody ? { 'Content-Type': 'application/json' } : {}) }, body: withBody ? '{' : undefined,
  signal: AbortSignal.timeout(30000) });
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) { // never ends
    await res.body.cancel();
    return { kind: 'served', status: res.status, text: '(a stream)' };
  }
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch {}
  if ((res.status === 404 && ['not_found', 'route_not_found'].includes(body?.error?.code) && /^no (such API path|change)/.test(body.error.message)) ||
      res.status === 405 || res.status === 501) return { kind: 'unrouted', status: res.status, text };
  if (res.status === 404) return { kind: 'missing', status: res.status, text };
  return { kind: 'served', status: res.status, text };
}

test('routes: what the daemon serves is exactly what the document describes', { skip }, async () => {
  const { words, methods } = routingFacts();
  const probeMethods = [...new Set([...methods, 'OPTIONS', 'PATCH'])];
  const id = probeSb.id;
  const W = [...words].filter((w) => !w.includes('/'));
  const concrete = (template) => template.replace('{id}', id).replace(/\{[^}]+\}/g, 'x-probe');
  // Candidates: every documented path, and the paths the code's words can form.
  const cands = new Set(OPS.filter((o) => !isGateway(o)).map((o) => concrete(o.template)));
  for (const w of W) {
    cands.add(`/${w}`);
    cands.add(`/v1/${w}`);
    cands.add(`/v1/${w}/x-probe`);
    cands.add(`/v1/sandboxes/${id}/${w}`);
    cands.add(`/v1/sandboxes/${id}/${w}/x-probe`);
    cands.add(`/v1/sandboxes/${id}/${w}/x-probe/x-probe`);
    for (const w2 of W) cands.add(`/v1/${w}/${w2}`);
  }
  for (const p of ['/', '/v1', '/v1/accounts', '/v1/accounts/x-probe']) cands.add(p);
  const selfDelete = `DELETE /v1/sandboxes/${id}`;
  const order = [...cands].flatMap((p) => probeMethods.map((m) => `${m} ${p}`)).filter((x) => x !== selfDelete);
  order.push(selfDelete); // last: it removes the probe sandbox
  const undocumented = [], unserved = [];
  for (const line of order) {
    const [method, p] = line.split(' ');
    const r = await probe(method, p);
    const o = OPS.find((x) => !isGateway(x) && x.method === method && x.re.test(p));
    const documentedHere = OPS.some((x) => !isGateway(x) && x.method === method && concrete(x.template) === p);
    if (r.kind === 'served' && !o) undocumented.push(`${line} -> ${r.status} ${r.text.slice(0, 120).trim()}`);
    // A path documented as Runtime Cloud's and not here answers its 501 (unavailable).
    const unavailable = r.status === 501 && o?.op.responses['501'];
    if (documentedHere && r.kind === 'unrouted' && !unavailable) unserved.push(`${line} -> ${r.status} ${r.text.slice(0, 120).trim()}`);
  }
  assert.deepEqual(undocumented, [], 'served, but not in the document');
  assert.deepEqual(unserved, [], 'in the document, but not served');
  const gone = await call('GET', '/v1/sandboxes/{id}', { params: { id } });
  assert.equal(gone.status, 404, 'the probe removed its sandbox last');
  // The gateway's routes: /mcp/... is the gateway's, before any API key is asked for.
  for (const o of OPS.filter(isGateway)) {
    const r = await fetch(d.url + concrete(o.template), { method: o.method, signal: AbortSignal.timeout(10000) });
    const text = await r.text();
    if (o.method === 'OPTIONS') assert.equal(r.status, 204, `${o.method} ${o.template}: ${text}`);
    else assert.ok(r.status === 404 && JSON.parse(text).jsonrpc === '2.0', `${o.method} ${o.template}: the gateway answers: ${r.status} ${text}`);
  }
});

test('sandboxes: delete', { skip }, async () => {
  const gone = await call('DELETE', '/v1/sandboxes/{id}', { params: { id: NAME }, expect: 200 });
  assert.equal(gone.body.status, 'deleted');
  assert.equal(gone.body.id, sb.id);
  await callError('GET', '/v1/sandboxes/{id}', 404, 'not_found', { params: { id: sb.id } });
  await callError('POST', '/v1/sandboxes/{id}/exec', 404, 'not_found', { params: { id: sb.id }, body: { argv: ['true'] } });
});

test('every operation of the document was called', { skip }, () => {
  const called = new Set([...covered].map((c) => c.split(' ').slice(0, 2).join(' ')));
  const never = OPS.map((o) => `${o.method} ${o.template}`).filter((k) => !called.has(k));
  assert.deepEqual(never, [], 'operations no test called');
});
