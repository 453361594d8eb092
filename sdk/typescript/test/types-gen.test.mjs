// The SDK's wire types come from api/openapi.yaml: the committed src/api-types.gen.ts
// must be what sdk/scripts/gen-types.mjs makes of the document now, and what it says
// must be what the document says (a property optional exactly when it is not required,
// each enum's values), read back from the file by the TypeScript compiler.
// Needs neither root nor the daemon.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REPO = path.resolve(PKG, '..', '..');
const GEN = path.join(REPO, 'sdk', 'scripts', 'gen-types.mjs');
const { OUTPUTS, readDocument, generate } = await import(GEN);
const REGENERATE = 'node sdk/scripts/gen-types.mjs';
const doc = readDocument();
const schemas = doc.components.schemas;

/** The component schemas that are objects with properties: name -> {required, optional}. */
function documentedKeys() {
  const out = {};
  for (const [name, s] of Object.entries(schemas)) {
    if (!s.properties || s.additionalProperties || s.oneOf || s.anyOf) continue;
    const required = s.required ?? [];
    const keys = Object.keys(s.properties);
    out[name] = { required: keys.filter((k) => required.includes(k)).sort(), optional: keys.filter((k) => !required.includes(k)).sort() };
  }
  return out;
}

/** The component schemas that are enums: name -> values. */
const documentedEnums = () => Object.fromEntries(Object.entries(schemas).filter(([, s]) => s.enum).map(([n, s]) => [n, s.enum]));

test('the committed types are what gen-types.mjs makes of api/openapi.yaml', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'withruntime-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const r = spawnSync(process.execPath, [GEN, '--out-dir', dir], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, `gen-types failed:\n${r.stdout}${r.stderr}`);
  for (const file of Object.values(OUTPUTS)) {
    const fresh = fs.readFileSync(path.join(dir, path.basename(file)), 'utf8');
    const committed = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    const line = firstDifference(committed, fresh);
    assert.ok(line === 0, `${path.relative(REPO, file)} is not what api/openapi.yaml gives (line ${line} differs): ` +
      `run \`${REGENERATE}\` in the repository and commit the result`);
  }
});

/** The first line (1-based) where a and b differ, 0 when they are the same. */
function firstDifference(a, b) {
  if (a === b) return 0;
  const x = a.split('\n'), y = b.split('\n');
  for (let i = 0; ; i++) if (x[i] !== y[i]) return i + 1;
}

test('TypeScript: a property is optional exactly when the document does not require it; enums are their values', () => {
  const ts = createRequire(path.join(PKG, 'package.json'))('typescript');
  const src = ts.createSourceFile('api-types.gen.ts', fs.readFileSync(OUTPUTS.ts, 'utf8'), ts.ScriptTarget.ES2022, true);
  const keys = {}, unions = {};
  for (const st of src.statements) {
    if (ts.isInterfaceDeclaration(st)) {
      const props = st.members.filter(ts.isPropertySignature);
      const name = (p) => p.name.getText(src);
      keys[st.name.text] = { required: props.filter((p) => !p.questionToken).map(name).sort(), optional: props.filter((p) => p.questionToken).map(name).sort() };
    } else if (ts.isTypeAliasDeclaration(st) && ts.isUnionTypeNode(st.type)) {
      unions[st.name.text] = st.type.types.map((m) => (ts.isLiteralTypeNode(m) && ts.isStringLiteral(m.literal) ? m.literal.text : m.getText(src)));
    }
  }
  for (const [name, want] of Object.entries(documentedKeys())) assert.deepEqual(keys[name], want, `interface ${name}`);
  for (const [name, values] of Object.entries(documentedEnums())) assert.deepEqual(unions[name], values, `type ${name}`);
});

// What the comments of src/types.ts promise, as the compiler sees it: answers take the
// fields a newer daemon adds, events narrow on kind, the gateway's headers can be sent
// as they are, and the SDK's inputs reject a misspelt key (each @ts-expect-error must
// meet its error, or tsc fails).
const PUBLIC_TYPES_USE = `
import type { CreateSandbox, McpGateway, McpServerRequest, NetworkRules, SandboxEvent, SandboxInfo, Usage } from 'TYPES';
declare const info: SandboxInfo, events: SandboxEvent[], gateway: McpGateway, usage: Usage;
const later: unknown = info.someFieldAddedLater;
const asRecord: Record<string, unknown> = info;
const name: string | null = info.name;
for (const e of events) {
  const host: unknown = e.host;
  if (e.kind === 'egress.refused') { const h: string = e.host; const port: number = e.port; void h; void port; }
  void host;
}
const headers: HeadersInit = gateway.headers;
const auth: string | undefined = gateway.headers.Authorization;
const cost: number = usage.sandboxes[0]!.cost.total + usage.total.cost.total + usage.rates.gbMonth;
const options: CreateSandbox = { name: 'x', memoryMiB: 512, network: { internet: false } };
const specs: McpServerRequest[] = [{ id: 'github', secrets: { A: 'B' } }, { name: 'own', command: ['node', 's.js'], args: ['-v'] }];
const policy: NetworkRules = { internet: true, allow: ['api.example.com'] };
// @ts-expect-error a misspelt option
const badOptions: CreateSandbox = { memoryMib: 512 };
// @ts-expect-error a misspelt key of the policy network.set() takes
const badPolicy: NetworkRules = { internet: true, alow: [] };
// @ts-expect-error name is always there (null when the sandbox has none)
const missingName: SandboxInfo = { ...info, name: undefined };
void later, asRecord, name, headers, auth, cost, options, specs, policy, badOptions, badPolicy, missingName;
`;

test('the SDK\'s public types: open answers, narrowing events, sendable headers, inputs that catch typos', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'withruntime-types-use-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'use.mts');
  fs.writeFileSync(file, PUBLIC_TYPES_USE.replace("'TYPES'", JSON.stringify(path.join(PKG, 'src', 'types.js'))));
  const tsc = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '--noEmit', '--strict', '--noUncheckedIndexedAccess', '--module', 'nodenext',
    '--target', 'es2022', '--typeRoots', path.join(PKG, 'node_modules', '@types'), '--types', 'node', file],
  { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `tsc:\n${r.stdout}${r.stderr}`);
});

test('the generator stops, naming the place, at a schema it cannot translate', () => {
  const broken = structuredClone(doc);
  broken.components.schemas.Sandbox.properties.status = { not: { type: 'null' } };
  assert.throws(() => generate(broken), /#\/components\/schemas\/Sandbox\/properties\/status: keyword "not" is not supported/);
  broken.components.schemas.Sandbox.properties.status = { $ref: '#/components/schemas/NoSuchSchema' };
  assert.throws(() => generate(broken), /#\/components\/schemas\/Sandbox\/properties\/status: NoSuchSchema is not in components\.schemas/);
});
