#!/usr/bin/env node
// Reviews the servers of catalog/servers.json: checks each package's version and
// license on its registry (npm or PyPI), installs it in a scratch dir as the daemon
// does (npm: install scripts off; PyPI: a venv of /usr/bin/python3, wheels only, from
// the entry's lock with --require-hashes), lists its
// tools over stdio with the official MCP SDK client, fingerprints the list with
// `build/runtime mcp fingerprint` and reads `build/runtime mcp review` on it.
//
//   node catalog/review-catalog.mjs [--dir DIR] [--only ID,ID] [--latest] [--write] [--tools]
//
//   --dir DIR   where packages are installed and logs kept (default /tmp/cat)
//   --only      review only these ids
//   --latest    review the registry's latest version instead of the catalog's
//   --write     put the results in catalog/servers.json: the fingerprint (or null)
//               and, with --latest, the new version and license
//   --tools     put each tool list whose fingerprint is the catalog's in
//               catalog/tools.json (the daemon carries it: a person reads an entry's
//               tools and their findings before its first start, docs/dashboard.md)
//
// Prints one line per entry: id, version, number of tools, fingerprint (or null and
// why). A fingerprint is only kept when the tool list is the same in two runs with
// different dummy settings and scratch workspaces, the server tried no network
// connection while listing, and the review has no alarming finding. Run as root so
// that each server runs in a network namespace of its own (unshare -n, no network at
// all) under strace, which records any connection it tries; without root or strace it
// still runs, but says that it could not watch the network.
//
// The registries are the only network this script uses (npm view and install, PyPI's
// JSON API and pip). A Python entry's lock comes from catalog/lock-python.py: run it
// first after moving a Python version (--latest reviews the catalog's lock).

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CATALOG = path.join(ROOT, 'catalog', 'servers.json');
const RUNTIME = path.join(ROOT, 'build', 'runtime');
const SDK = path.join(ROOT, 'tests', 'mcp', 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');
const LICENSES = new Set(['MIT', 'Apache-2.0']);
// Review findings that a tool description may carry for good reasons (a docs link, "call
// X first"); they are printed, and read by the reviewer, but do not null the fingerprint.
const BENIGN = new Set(['URL', 'order about when to call']);
const LIST_TIMEOUT_MS = 60000;
// Tool lists whose other findings a person has read in full and judged harmless, by
// fingerprint: a changed list is a new list and needs reading again.
const ACCEPTED = {
  // context7 4.1.1: "You MUST call this function before 'Query Documentation'" is the
  // order of its two tools; the "secret file path" hits are its warning NOT to put API
  // keys or passwords in a query.
  '36486f1d1d12a5ad': 'context7 4.1.1: tool order and a do-not-send-secrets warning',
};

function parseArgs(argv) {
  const o = { dir: '/tmp/cat', only: null, latest: false, write: false, tools: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--dir') o.dir = argv[++i];
    else if (a === '--only') o.only = new Set(argv[++i].split(','));
    else if (a === '--latest') o.latest = true;
    else if (a === '--write') o.write = true;
    else if (a === '--tools') o.tools = true;
    else {
      console.error(`unknown argument ${a}; usage: review-catalog.mjs [--dir DIR] [--only ID,ID] [--latest] [--write]`);
      process.exit(2);
    }
  }
  return o;
}

function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 300000, maxBuffer: 64 << 20, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  return r;
}

/** The registry's version and license of spec (pkg or pkg@version). */
function npmView(spec) {
  const r = sh('npm', ['view', spec, 'version', 'license', '--json']);
  if (r.status !== 0) throw new Error(`npm view ${spec}: ${r.stderr.trim()}`);
  // With one field missing (no license), npm prints the other as a bare string.
  const j = JSON.parse(r.stdout);
  if (typeof j === 'string') return { version: j, license: null };
  return { version: j.version, license: j.license ?? null };
}

/** PyPI's version and license of pkg (or pkg==version), read from the wheel's own
 * METADATA (pip download: this machine's PyPI has no JSON API): License-Expression,
 * else License, else an OSI classifier. */
function pypiView(pkg, version) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cat-pypi-'));
  try {
    const dl = sh('/usr/bin/python3', ['-m', 'pip', 'download', '--quiet', '--no-deps', '--only-binary=:all:',
      '--disable-pip-version-check', '-d', tmp, version ? `${pkg}==${version}` : pkg]);
    if (dl.status !== 0) throw new Error(`pip download ${pkg}: ${dl.stderr.trim()}`);
    const wheel = fs.readdirSync(tmp).find((f) => f.endsWith('.whl'));
    const meta = sh('/usr/bin/python3', ['-c', `import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
print(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())`, path.join(tmp, wheel)]);
    const field = (k) => new RegExp(`^${k}: (.*)$`, 'mi').exec(meta.stdout.split('\n\n')[0])?.[1]?.trim();
    const classifier = /^Classifier: License :: OSI Approved :: (.*)$/m.exec(meta.stdout)?.[1]?.trim();
    const fromClassifier = { 'MIT License': 'MIT', 'Apache Software License': 'Apache-2.0' }[classifier];
    return { version: field('Version'), license: field('License-Expression') || field('License') || fromClassifier || null };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Installs a Python entry as the daemon does: a venv, then its lock, wheels only. */
function installPython(dir, entry) {
  const prefix = path.join(dir, entry.id);
  const lock = path.join(prefix, 'requirements.txt');
  const want = entry.lock.join('\n') + '\n';
  if (fs.existsSync(lock) && fs.readFileSync(lock, 'utf8') === want) return prefix;
  fs.rmSync(prefix, { recursive: true, force: true });
  let r = sh('/usr/bin/python3', ['-m', 'venv', prefix]);
  if (r.status !== 0) throw new Error(`python3 -m venv: ${r.stderr.trim()}`);
  fs.writeFileSync(lock, want);
  r = sh(path.join(prefix, 'bin', 'python'), ['-m', 'pip', 'install', '--only-binary=:all:', '--require-hashes',
    '--no-input', '--disable-pip-version-check', '-r', lock]);
  fs.writeFileSync(path.join(dir, `${entry.id}.install.log`), r.stdout + r.stderr);
  if (r.status !== 0) throw new Error(`pip install of ${entry.package}==${entry.version} failed; see ${dir}/${entry.id}.install.log`);
  return prefix;
}

/** Installs pkg@version under dir/id unless it is there already; returns the install dir. */
function install(dir, id, pkg, version) {
  const prefix = path.join(dir, id);
  const manifest = path.join(prefix, 'node_modules', ...pkg.split('/'), 'package.json');
  try {
    if (JSON.parse(fs.readFileSync(manifest, 'utf8')).version === version) return prefix;
  } catch {}
  fs.rmSync(prefix, { recursive: true, force: true });
  fs.mkdirSync(prefix, { recursive: true });
  const r = sh('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--prefix', prefix, `${pkg}@${version}`]);
  fs.writeFileSync(path.join(dir, `${id}.install.log`), r.stdout + r.stderr);
  if (r.status !== 0) throw new Error(`npm install ${pkg}@${version} failed; see ${dir}/${id}.install.log`);
  return prefix;
}

function have(cmd) {
  return sh('sh', ['-c', `command -v ${cmd}`]).status === 0;
}

/** cmd's path on this script's PATH: the server's own env may set a PATH without it. */
function which(cmd) {
  return sh('sh', ['-c', `command -v ${cmd}`]).stdout.trim();
}

/** A dummy value for a setting; `variant` makes the two runs differ. */
function dummy(setting, variant) {
  if (/POSTGRES|DATABASE/.test(setting.env)) return `postgresql://user_${variant}:pw_${variant}@127.0.0.1:5432/db_${variant}`;
  if (/URL$/.test(setting.env)) return `https://${variant}.invalid/`;
  if (/PATH$/.test(setting.env)) return null; // a path the server would use: leave unset
  return `dummy-${variant}-${setting.env.toLowerCase()}`;
}

/**
 * Starts the server (argv from the catalog entry) over stdio, lists every page of its
 * tools and stops it. Returns {raw: [response lines], tools, network: [attempts], stderr}.
 * run.variant picks the dummies: "a" sets required settings only, "b" every secret too.
 */
async function listTools(entry, prefix, variant, logDir, watch) {
  const { Client } = await import(pathToFileURL(path.join(SDK, 'client', 'index.js')).href);
  const { StdioClientTransport } = await import(pathToFileURL(path.join(SDK, 'client', 'stdio.js')).href);
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), `cat-ws-${entry.id}-${variant}-`));
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `cat-home-${entry.id}-${variant}-`));
  const bin = entry.runtime === 'python' ? 'bin' : path.join('node_modules', '.bin');
  const env = {
    PATH: `${path.join(prefix, bin)}:/usr/local/bin:/usr/bin:/bin`,
    HOME: home,
    LANG: 'C.UTF-8',
  };
  const values = {};
  for (const s of entry.settings) {
    if (!s.required && !(variant === 'b' && s.secret)) continue;
    const v = dummy(s, variant);
    if (v !== null) values[s.env] = v;
  }
  Object.assign(env, values);
  // What the catalog fixes for the server, its install dir where the daemon has it.
  for (const [k, v] of Object.entries(entry.env ?? {})) env[k] = v.replaceAll(`/workspace/mcp/${entry.id}`, prefix);
  // The daemon's conventions: "${ENV}" arguments take the setting's value, /workspace is
  // the sandbox's workspace (here a scratch dir per run).
  const argv = entry.command.map((a) => {
    const m = /^\$\{([A-Z0-9_]+)\}$/.exec(a);
    if (m) return values[m[1]] ?? '';
    return a === '/workspace' ? ws : a;
  });
  const straceLog = path.join(logDir, `${entry.id}.${variant}.strace`);
  let command = argv[0];
  let args = argv.slice(1);
  if (watch.strace) {
    args = ['-f', '-qq', '-e', 'trace=connect,sendto,sendmsg', '-o', straceLog, command, ...args];
    command = which('strace');
  }
  if (watch.netns) {
    args = ['-n', command, ...args];
    command = which('unshare');
  }
  const transport = new StdioClientTransport({ command, args, env, cwd: ws, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => {
    if (stderr.length < 1 << 20) stderr += d.toString('utf8');
  });
  const client = new Client({ name: 'runtime-catalog-review', version: '1.0.0' });
  const raw = [];
  const tools = [];
  let error = null;
  const timer = setTimeout(() => transport.close().catch(() => {}), LIST_TIMEOUT_MS);
  try {
    await client.connect(transport);
    // The raw response lines, for a fingerprint of the bytes the server sent (the
    // gateway fingerprints those, not a re-serialisation).
    let buf = '';
    transport._process.stdout.on('data', (d) => {
      buf += d.toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, '');
        buf = buf.slice(i + 1);
        if (line.includes('"tools"')) raw.push(line);
      }
    });
    let cursor;
    for (let page = 0; page < 100; page++) {
      const r = await client.listTools(cursor ? { cursor } : undefined);
      tools.push(...r.tools);
      cursor = r.nextCursor;
      if (!cursor) break;
    }
  } catch (e) {
    error = e.message;
  } finally {
    clearTimeout(timer);
    const kids = descendants(transport.pid);
    await client.close().catch(() => {});
    // strace 6.1 has no --kill-on-exit: end what this run started and left, by pid.
    for (const pid of kids) try { process.kill(pid, 'SIGKILL'); } catch {}
    fs.rmSync(ws, { recursive: true, force: true });
    fs.rmSync(home, { recursive: true, force: true });
    fs.writeFileSync(path.join(logDir, `${entry.id}.${variant}.stderr`), stderr);
  }
  const network = watch.strace ? networkAttempts(straceLog) : [];
  return { raw, tools, network, stderr, error };
}

/** Every descendant of pid (from /proc), to clean up after a server. */
function descendants(pid) {
  if (!pid) return [];
  const parent = new Map();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {}
  }
  const out = [pid];
  for (let i = 0; i < out.length && out.length < 10000; i++) {
    for (const [p, pp] of parent) if (pp === out[i]) out.push(p);
  }
  return out;
}

/** Connections and datagrams to an IP address in an strace log. */
function networkAttempts(file) {
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text.split('\n').filter((l) => /sa_family=AF_INET6?\b/.test(l)).map((l) => l.replace(/^\d+\s+/, ''));
}

/** The tools/list result to fingerprint: the server's own bytes when it sent one page. */
function listFile(run, file) {
  const mine = run.raw.filter((l) => {
    try {
      return Array.isArray(JSON.parse(l).result?.tools);
    } catch {
      return false;
    }
  });
  const text = mine.length === 1 ? mine[0] : JSON.stringify({ tools: run.tools });
  fs.writeFileSync(file, text + '\n');
  return file;
}

function fingerprint(file) {
  const r = sh(RUNTIME, ['mcp', 'fingerprint', '--json', file]);
  if (r.status !== 0) throw new Error(`runtime mcp fingerprint ${file}: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout);
}

/** `runtime mcp review OLD NEW`: its text and the kinds of its findings. */
function review(oldFile, newFile) {
  const r = sh(RUNTIME, ['mcp', 'review', oldFile, newFile]);
  if (r.status !== 0 && r.status !== 1) throw new Error(`runtime mcp review: ${r.stderr.trim()}`);
  const kinds = [];
  for (const line of r.stdout.split('\n')) {
    const m = /^\S+: ([^:"]+): "/.exec(line);
    if (m) kinds.push(m[1]);
  }
  return { text: r.stdout, kinds };
}

async function reviewEntry(entry, opts, watch) {
  const python = entry.runtime === 'python';
  const version = opts.latest ? null : entry.version;
  const reg = python ? pypiView(entry.package, version) : npmView(version ? `${entry.package}@${version}` : entry.package);
  const out = { id: entry.id, version: reg.version, license: reg.license, tools: 0, fingerprint: null, why: [] };
  if (reg.version !== entry.version) out.why.push(`catalog has ${entry.version}`);
  if (!LICENSES.has(reg.license)) out.why.push(`registry license is ${JSON.stringify(reg.license)}, not MIT or Apache-2.0: check the package's LICENSE`);
  if (python && reg.version !== entry.version) throw new Error(`PyPI has ${reg.version}: run catalog/lock-python.py after moving the version`);
  const prefix = python ? installPython(opts.dir, entry) : install(opts.dir, entry.id, entry.package, reg.version);
  const a = await listTools(entry, prefix, 'a', opts.dir, watch);
  const b = await listTools(entry, prefix, 'b', opts.dir, watch);
  const net = [...a.network, ...b.network];
  const tried = net.length ? `tried the network while listing: ${net[0]}${net.length > 1 ? ` (+${net.length - 1})` : ''}` : null;
  if (a.error || b.error) {
    out.why.unshift(...[`tools/list failed: ${a.error ?? b.error}`, tried].filter(Boolean));
    out.ok = false;
    return out;
  }
  const fa = fingerprint(listFile(a, path.join(opts.dir, `${entry.id}.a.json`)));
  const fb = fingerprint(listFile(b, path.join(opts.dir, `${entry.id}.b.json`)));
  out.tools = fa.tools;
  const listed = JSON.parse(fs.readFileSync(path.join(opts.dir, `${entry.id}.a.json`), 'utf8'));
  out.list = listed.result?.tools ?? listed.tools; // the server's own response, or {tools}
  const rv = review(path.join(opts.dir, `${entry.id}.a.json`), path.join(opts.dir, `${entry.id}.b.json`));
  fs.writeFileSync(path.join(opts.dir, `${entry.id}.review.txt`), rv.text);
  const problems = [];
  if (fa.sha256 !== fb.sha256) problems.push(`tool list depends on settings or environment (${fa.fingerprint} vs ${fb.fingerprint})`);
  if (tried) problems.push(tried);
  if (fa.tools === 0) problems.push('listed no tools');
  const alarming = [...new Set(rv.kinds.filter((k) => !BENIGN.has(k)))];
  const accepted = ACCEPTED[fa.sha256.slice(0, 16)];
  if (alarming.length && accepted) out.why.push(`findings (${alarming.join(', ')}) read and accepted: ${accepted}`);
  else if (alarming.length) problems.push(`review findings: ${alarming.join(', ')}`);
  const benign = rv.kinds.filter((k) => BENIGN.has(k)).length;
  if (benign) out.why.push(`${benign} benign review finding(s)`);
  if (!watch.strace) out.why.push('network not watched (no strace)');
  if (problems.length) out.why.unshift(...problems);
  else out.fingerprint = fa.fingerprint;
  out.ok = problems.length === 0;
  return out;
}

/** The catalog in the file's own layout: one key per line, short arrays and each
 * setting on one line, so that a refresh shows as a small diff. */
export function formatCatalog(catalog) {
  const j = (v) => JSON.stringify(v).replace(/","/g, '", "').replace(/\["/g, '["');
  const entry = (e) => {
    const lines = Object.entries(e).map(([k, v]) => {
      if (k === 'lock') return `    "lock": [\n${v.map((l) => `      ${JSON.stringify(l)}`).join(',\n')}\n    ]`;
      if (k === 'settings') {
        if (!v.length) return '    "settings": []';
        const items = v.map((s) => {
          const { description, ...head } = s;
          const h = Object.entries(head).map(([hk, hv]) => `${JSON.stringify(hk)}: ${JSON.stringify(hv)}`).join(', ');
          return `      {${h},\n       "description": ${JSON.stringify(description)}}`;
        });
        return `    "settings": [\n${items.join(',\n')}\n    ]`;
      }
      return `    ${JSON.stringify(k)}: ${Array.isArray(v) ? j(v) : JSON.stringify(v)}`;
    });
    return `  {\n${lines.join(',\n')}\n  }`;
  };
  return `[\n${catalog.map(entry).join(',\n')}\n]\n`;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(RUNTIME)) {
    console.error(`${RUNTIME} is missing: build it with make -C ${ROOT}`);
    process.exit(1);
  }
  fs.mkdirSync(opts.dir, { recursive: true });
  const isRoot = process.getuid?.() === 0;
  const watch = { netns: isRoot && have('unshare'), strace: have('strace') };
  if (!watch.netns) console.error('# not root or no unshare: servers run with the host network (they should not use it)');
  const catalog = JSON.parse(fs.readFileSync(CATALOG, 'utf8'));
  const results = [];
  const TOOLS = path.join(ROOT, 'catalog', 'tools.json');
  const lists = fs.existsSync(TOOLS) ? JSON.parse(fs.readFileSync(TOOLS, 'utf8')) : {};
  for (const entry of catalog) {
    if (opts.only && !opts.only.has(entry.id)) continue;
    try {
      const r = await reviewEntry(entry, opts, watch);
      results.push(r);
      console.log([r.id, r.version, `${r.tools} tools`, r.fingerprint ?? 'null', r.why.join('; ')].join('\t'));
      if (opts.tools && r.fingerprint && r.fingerprint === entry.fingerprint) lists[entry.id] = r.list;
      if (opts.write) {
        entry.fingerprint = r.fingerprint;
        if (opts.latest && LICENSES.has(r.license)) {
          entry.version = r.version;
          entry.license = r.license;
        }
      }
    } catch (e) {
      console.log([entry.id, entry.version, '-', 'null', `failed: ${e.message}`].join('\t'));
      if (opts.write) entry.fingerprint = null;
    }
  }
  if (opts.tools) {
    const sorted = Object.fromEntries(Object.keys(lists).sort().map((k) => [k, lists[k]]));
    fs.writeFileSync(TOOLS, `${JSON.stringify(sorted)}\n`);
    console.error(`# wrote ${TOOLS}`);
  }
  if (opts.write) {
    fs.writeFileSync(CATALOG, formatCatalog(catalog));
    console.error(`# wrote ${CATALOG}`);
  }
  console.error(`# logs, tool lists and reviews in ${opts.dir}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(e.stack || e.message);
    process.exit(1);
  });
}
