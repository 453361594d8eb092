// A real PostgreSQL 15 (Debian's) for the local catalog tests: a fresh cluster made
// with initdb in a temp dir as the postgres user, its postmaster listening on one
// address inside the test's network namespace, a database with a table of known
// rows and a login role that may only read it.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { pidAlive, waitFor } from '../e2e/lib.mjs';

const BIN = '/usr/lib/postgresql/15/bin';

export const PG_DB = 'catl';
export const PG_USER = 'catl_reader';
/** The rows of the planets table, in primary-key order. */
export const PG_ROWS = [
  { name: 'Earth', moons: 1 },
  { name: 'Jupiter', moons: 95 },
  { name: 'Mars', moons: 2 },
];

function havePostgres() {
  return fs.existsSync(path.join(BIN, 'postgres')) &&
    spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).status === 0;
}

function must(cmd, args, what) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${what}: ${cmd} ${args.join(' ')}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

export class LocalPostgres {
  /** ns: the network namespace; bind: its address there; client: the address the
   * daemon connects from; dir: a root-owned temp dir. */
  constructor(ns, bind, client, dir, { port = 5432 } = {}) {
    this.ns = ns;
    this.client = client;
    this.bind = bind;
    this.port = port;
    this.dir = path.join(dir, 'pg');
    this.data = path.join(this.dir, 'data');
    this.sock = path.join(this.dir, 'sock');
    this.password = `pw-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
    this.proc = null;
    this.log = '';
  }

  async start() {
    if (!havePostgres()) throw new Error(`no PostgreSQL server in ${BIN} (or no postgres user): run scripts/install-deps`);
    fs.mkdirSync(this.sock, { recursive: true });
    must('chown', ['-R', 'postgres:postgres', this.dir], 'chown');
    const asPg = (args) => ['--reuid=postgres', '--regid=postgres', '--clear-groups', ...args];
    must('setpriv', asPg([path.join(BIN, 'initdb'), '-D', this.data, '-U', 'postgres', '--auth-local=trust',
      '--auth-host=scram-sha-256', '--no-sync', '-E', 'UTF8', '--locale=C']), 'initdb');
    // Connections come from the daemon's proxy, i.e. the host end of the veth.
    fs.appendFileSync(path.join(this.data, 'pg_hba.conf'), `host all all ${this.client}/32 scram-sha-256\n`);
    // ip netns exec and setpriv both exec, so the pid held is the postmaster's.
    this.proc = spawn('ip', ['netns', 'exec', this.ns, 'setpriv', ...asPg([path.join(BIN, 'postgres'),
      '-D', this.data, '-p', String(this.port), '-c', `listen_addresses=${this.bind}`,
      '-c', `unix_socket_directories=${this.sock}`, '-c', 'fsync=off'])], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stdout.on('data', (b) => { this.log += b; });
    this.proc.stderr.on('data', (b) => { this.log += b; });
    this.proc.on('exit', (code, signal) => { this.exited = { code, signal }; });
    await waitFor(() => {
      if (this.exited) throw Object.assign(new Error(`postgres exited: ${this.log}`), { fatal: true });
      return spawnSync(path.join(BIN, 'pg_isready'), ['-q', '-h', this.sock, '-p', String(this.port)]).status === 0;
    }, { timeoutMs: 30000, what: 'postgres to accept connections' });
    this.psql('postgres', `CREATE DATABASE ${PG_DB}`);
    this.psql(PG_DB, [
      'CREATE TABLE planets (name text PRIMARY KEY, moons integer NOT NULL)',
      `INSERT INTO planets VALUES ${PG_ROWS.map((r) => `('${r.name}', ${r.moons})`).join(', ')}`,
      `CREATE ROLE ${PG_USER} LOGIN PASSWORD '${this.password}'`,
      `GRANT CONNECT ON DATABASE ${PG_DB} TO ${PG_USER}`,
      `GRANT USAGE ON SCHEMA public TO ${PG_USER}`,
      `GRANT SELECT ON planets TO ${PG_USER}`,
    ].join(';\n'));
    return this;
  }

  /** Runs SQL as the superuser over the unix socket; returns psql's output. */
  psql(db, sql) {
    return must(path.join(BIN, 'psql'), ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', this.sock, '-p', String(this.port),
      '-U', 'postgres', '-d', db, '-At', '-c', sql], 'psql');
  }

  /** The connection string a client at `host` (a name pinned to bind) uses. */
  url(host) {
    return `postgresql://${PG_USER}:${this.password}@${host}:${this.port}/${PG_DB}`;
  }

  /** Fast shutdown (SIGINT), then SIGKILL if it lingers. */
  async stop() {
    if (!this.proc || this.exited) return;
    const pid = this.proc.pid;
    try { process.kill(pid, 'SIGINT'); } catch {}
    await waitFor(() => this.exited, { timeoutMs: 10000, what: 'postgres to stop' })
      .catch(() => { try { process.kill(pid, 'SIGKILL'); } catch {} });
  }

  /** For the exit hook: no waiting possible. */
  killSync() {
    if (this.proc && !this.exited && pidAlive(this.proc.pid)) try { process.kill(this.proc.pid, 'SIGKILL'); } catch {}
  }
}
