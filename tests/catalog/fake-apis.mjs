// Fake upstream APIs for tests/catalog/api-servers.test.mjs, run inside the test's
// network namespace (`ip netns exec NS node fake-apis.mjs CONFIG.json`).
//
// One HTTPS port serves every API host: the certificate is picked by SNI (one per
// host name, signed by the test CA that the daemon gets with --upstream-ca), and a
// name it has no certificate for fails the handshake. Each host answers like the
// real API (paths, methods, the header that carries the key, status codes and
// error bodies as documented) with a response shaped like the real one, holding a
// marker string the test then looks for in the MCP tool result:
//
//   api.github.com        GET  /search/repositories   Authorization: Bearer
//   api.notion.com        POST /v1/search             Authorization: Bearer, Notion-Version
//   context7.com          GET  /api/v2/libs/search    Authorization: Bearer
//   api.search.brave.com  GET  /res/v1/web/search     X-Subscription-Token
//   api.exa.ai            POST /search                x-api-key
//   api.firecrawl.dev     POST /v2/scrape             Authorization: Bearer
//   api.supabase.com      GET  /v1/projects           Authorization: Bearer
//
// A request whose key is not the real one gets the API's own 401 (or Brave's 422),
// so a server that sent the placeholder could not show the marker. Bodies never
// repeat what a request carried: a forwarded key must not travel back into the
// sandbox.
//
// Every request is reported on stdout as one JSON line (the secrets suite's
// Upstream class reads them):
//   {ev:"listening"}
//   {ev:"req", id, sni, remote, method, target, headers:[[name, value]...], body, status, why?}
//   {ev:"tls-refused", sni}  a handshake for a name this fake has no certificate for
//
// Config (mode 0600, the keys are in it): {bind, port, hosts: {NAME: {cert, key, apiKey, marker}}}

import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import tls from 'node:tls';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const contexts = new Map(Object.entries(cfg.hosts).map(([name, h]) =>
  [name, tls.createSecureContext({ cert: fs.readFileSync(h.cert), key: fs.readFileSync(h.key) })]));

const NOW = '2026-01-15T09:30:00.000Z';
const uuid = () => crypto.randomUUID();
const bearer = (req) => /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];

/** A JSON body, or undefined when it is not JSON. */
function json(body) {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------- the APIs
//
// Each handler gets (req, url, body, host config) and returns [status, body, why?]:
// `why` says what the fake objected to, for the test's messages.

function github(req, url, body, h) {
  const unauthorized = [401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest', status: '401' }];
  if (req.method !== 'GET' || url.pathname !== '/search/repositories') {
    return [404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest', status: '404' }, 'route'];
  }
  if (bearer(req) !== h.apiKey) return [...unauthorized, 'key'];
  // GitHub refuses requests without a User-Agent.
  if (!req.headers['user-agent']) return [403, { message: 'Request forbidden by administrative rules.' }, 'user-agent'];
  if (!url.searchParams.get('q')) {
    return [422, { message: 'Validation Failed', errors: [{ resource: 'Search', field: 'q', code: 'missing' }], status: '422' }, 'q'];
  }
  const owner = {
    login: 'runtime-test', id: 4242, node_id: 'MDQ6VXNlcjQyNDI=', avatar_url: 'https://avatars.githubusercontent.com/u/4242?v=4',
    url: 'https://api.github.com/users/runtime-test', html_url: 'https://github.com/runtime-test', type: 'Organization',
  };
  const name = h.marker;
  const repo = {
    id: 987654321, node_id: 'R_kgDOOabcde', name, full_name: `runtime-test/${name}`, private: false, owner,
    html_url: `https://github.com/runtime-test/${name}`, description: 'A repository the fake api.github.com made up',
    fork: false, url: `https://api.github.com/repos/runtime-test/${name}`, created_at: '2025-03-01T10:00:00Z',
    updated_at: '2026-01-10T12:00:00Z', pushed_at: '2026-01-10T11:59:00Z',
    git_url: `git://github.com/runtime-test/${name}.git`, ssh_url: `git@github.com:runtime-test/${name}.git`,
    clone_url: `https://github.com/runtime-test/${name}.git`, default_branch: 'main',
    stargazers_count: 17, watchers_count: 17, forks_count: 2, language: 'C', score: 1.0,
  };
  return [200, { total_count: 1, incomplete_results: false, items: [repo] }];
}

function notion(req, url, body, h) {
  const err = (status, code, message, why) => [status, { object: 'error', status, code, message, request_id: uuid() }, why];
  if (req.method !== 'POST' || url.pathname !== '/v1/search') {
    return err(400, 'invalid_request_url', 'Invalid request URL.', 'route');
  }
  if (bearer(req) !== h.apiKey) return err(401, 'unauthorized', 'API token is invalid.', 'key');
  const version = req.headers['notion-version'];
  if (!/^\d{4}-\d{2}-\d{2}$/.test(version ?? '')) {
    return err(400, 'missing_version', `Notion-Version header failed validation: Notion-Version header should be defined, instead was \`${version}\`.`, 'notion-version');
  }
  const q = json(body);
  if (!q || typeof q !== 'object') return err(400, 'invalid_json', 'Error parsing JSON body.', 'body');
  const text = (content) => ({
    type: 'text', text: { content, link: null }, plain_text: content, href: null,
    annotations: { bold: false, italic: false, strikethrough: false, underline: false, code: false, color: 'default' },
  });
  const id = uuid();
  const page = {
    object: 'page', id, created_time: NOW, last_edited_time: NOW,
    created_by: { object: 'user', id: uuid() }, last_edited_by: { object: 'user', id: uuid() },
    cover: null, icon: null, parent: { type: 'workspace', workspace: true }, archived: false, in_trash: false,
    properties: { title: { id: 'title', type: 'title', title: [text(h.marker)] } },
    url: `https://www.notion.so/${h.marker}-${id.replace(/-/g, '')}`, public_url: null,
  };
  return [200, {
    object: 'list', results: [page], next_cursor: null, has_more: false,
    type: 'page_or_data_source', page_or_data_source: {}, request_id: uuid(),
  }];
}

function context7(req, url, body, h) {
  if (req.method !== 'GET' || url.pathname !== '/api/v2/libs/search') return [404, { error: 'not_found', message: 'Not found' }, 'route'];
  if (bearer(req) !== h.apiKey) {
    return [401, { error: 'unauthorized', message: "Invalid API key. Please check your API key. API keys should start with 'ctx7sk' prefix." }, 'key'];
  }
  if (!url.searchParams.get('libraryName')) return [400, { error: 'bad_request', message: 'libraryName is required' }, 'libraryName'];
  return [200, {
    results: [{
      id: `/runtime-test/${h.marker}`, title: 'Runtime Test Library', description: 'Documentation the fake context7.com made up',
      branch: 'main', lastUpdateDate: NOW, state: 'finalized', totalTokens: 123456, totalSnippets: 321,
      stars: 4242, trustScore: 8.5, benchmarkScore: 91.2, versions: ['v1.0.0'],
    }],
  }];
}

function brave(req, url, body, h) {
  const error = (status, code, detail, why) => [status, {
    type: 'ErrorResponse', error: { id: uuid(), status, code, detail, meta: { component: 'authentication' } }, time: Math.floor(Date.now() / 1000),
  }, why];
  if (req.method !== 'GET' || url.pathname !== '/res/v1/web/search') return error(404, 'RESOURCE_NOT_FOUND', 'Resource not found.', 'route');
  // Brave answers a missing or wrong token with 422, not 401.
  if (req.headers['x-subscription-token'] !== h.apiKey) {
    return error(422, 'SUBSCRIPTION_TOKEN_INVALID', 'The provided subscription token is invalid.', 'key');
  }
  const q = url.searchParams.get('q');
  if (!q) return error(422, 'VALIDATION', 'Unable to validate request parameter(s)', 'q');
  const link = `https://docs.example.com/${h.marker}`;
  return [200, {
    type: 'search',
    query: { original: q, show_strict_warning: false, is_navigational: false, is_news_breaking: false, spellcheck_off: true, country: 'us', bad_results: false, should_fallback: false, postal_code: '', city: '', header_country: '', more_results_available: false, state: '' },
    mixed: { type: 'mixed', main: [{ type: 'web', index: 0, all: false }], top: [], side: [] },
    web: {
      type: 'search',
      results: [{
        title: `Runtime test page ${h.marker}`, url: link, is_source_local: false, is_source_both: false,
        description: 'A page the fake api.search.brave.com made up.', page_age: NOW, language: 'en', family_friendly: true,
        type: 'search_result', subtype: 'generic', is_live: false,
        profile: { name: 'Example', url: link, long_name: 'docs.example.com', img: 'https://imgs.search.brave.com/x.png' },
        meta_url: { scheme: 'https', netloc: 'docs.example.com', hostname: 'docs.example.com', favicon: 'https://imgs.search.brave.com/f.png', path: `› ${h.marker}` },
        extra_snippets: ['One more snippet from the fake.'],
      }],
      family_friendly: true,
    },
  }];
}

function exa(req, url, body, h) {
  if (req.method !== 'POST' || url.pathname !== '/search') return [404, { requestId: uuid(), error: 'Not found' }, 'route'];
  if (req.headers['x-api-key'] !== h.apiKey) return [401, { requestId: uuid(), error: 'Invalid API key', tag: 'INVALID_API_KEY' }, 'key'];
  const q = json(body);
  if (!q || typeof q.query !== 'string' || !q.query) return [400, { requestId: uuid(), error: 'query is required', tag: 'INVALID_REQUEST_BODY' }, 'body'];
  const link = `https://blog.example.com/${h.marker}`;
  return [200, {
    requestId: uuid(), resolvedSearchType: 'neural', searchType: 'auto',
    results: [{
      id: link, title: `Runtime test post ${h.marker}`, url: link, publishedDate: '2026-01-02T00:00:00.000Z',
      author: 'Runtime Test', highlights: [`The fake api.exa.ai says: ${h.marker}.`], highlightScores: [0.61],
    }],
    searchTime: 321.5, costDollars: { total: 0.005, search: { neural: 0.005 } },
  }];
}

function firecrawl(req, url, body, h) {
  if (req.method !== 'POST' || url.pathname !== '/v2/scrape') return [404, { success: false, error: 'Not Found' }, 'route'];
  if (bearer(req) !== h.apiKey) return [401, { success: false, error: 'Unauthorized: Invalid token' }, 'key'];
  const q = json(body);
  if (!q || typeof q.url !== 'string') return [400, { success: false, error: 'Bad Request', details: [{ path: ['url'], message: 'Required' }] }, 'body'];
  return [200, {
    success: true,
    data: {
      markdown: `# Runtime test page\n\nThe fake api.firecrawl.dev scraped this: ${h.marker}\n`,
      metadata: {
        title: 'Runtime test page', language: 'en', sourceURL: q.url, url: q.url, statusCode: 200,
        contentType: 'text/html; charset=utf-8', scrapeId: uuid(), proxyUsed: 'basic', cacheState: 'miss', creditsUsed: 1,
      },
    },
  }];
}

function supabase(req, url, body, h) {
  if (req.method !== 'GET' || url.pathname !== '/v1/projects') return [404, { message: 'Cannot GET ' + url.pathname }, 'route'];
  if (bearer(req) !== h.apiKey) return [401, { message: 'Unauthorized' }, 'key'];
  const ref = 'abcdefghijklmnopqrst';
  return [200, [{
    id: ref, ref, organization_id: 'runtimetestorg', organization_slug: 'runtimetestorg', name: h.marker,
    region: 'eu-central-1', created_at: '2025-06-01T08:00:00.000Z', status: 'ACTIVE_HEALTHY',
    database: { host: `db.${ref}.supabase.co`, version: '15.8.1.085', postgres_engine: '15', release_channel: 'ga' },
  }]];
}

const APIS = {
  'api.github.com': github,
  'api.notion.com': notion,
  'context7.com': context7,
  'api.search.brave.com': brave,
  'api.exa.ai': exa,
  'api.firecrawl.dev': firecrawl,
  'api.supabase.com': supabase,
};

// ---------------------------------------------------------------- the server

let nextId = 1;
const server = https.createServer({
  SNICallback: (name, cb) => {
    const ctx = contexts.get(name);
    if (!ctx) emit({ ev: 'tls-refused', sni: name });
    cb(ctx ? null : new Error(`no certificate for ${name}`), ctx);
  },
}, (req, res) => {
  const chunks = [];
  req.on('data', (d) => chunks.push(d));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const sni = req.socket.servername || '';
    const host = (req.headers.host ?? '').replace(/:443$/, '');
    const url = new URL(req.url, `https://${host || 'invalid'}`);
    const h = cfg.hosts[sni];
    const api = APIS[sni];
    let answer;
    if (!h || !api) answer = [421, { message: 'Misdirected Request' }, 'sni'];
    else if (host !== sni) answer = [421, { message: 'Misdirected Request' }, 'host'];
    else answer = api(req, url, body, h);
    const [status, out, why] = answer;
    const headers = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
    emit({
      ev: 'req', id: nextId++, sni, remote: req.socket.remoteAddress, method: req.method, target: req.url,
      headers, body, status, ...(why ? { why } : {}),
    });
    const text = JSON.stringify(out);
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  });
});
server.on('tlsClientError', () => {});
server.listen({ host: cfg.bind, port: cfg.port }, () => emit({ ev: 'listening' }));
server.on('error', (e) => {
  emit({ ev: 'failed', error: String(e) });
  process.exit(1);
});
