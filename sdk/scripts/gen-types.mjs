#!/usr/bin/env node
// The TypeScript SDK's wire types, generated from the one description of the HTTP API:
// components.schemas of api/openapi.yaml becomes
//   sdk/typescript/src/api-types.gen.ts        (an interface or type per schema)
// It is committed; sdk/typescript/test/types-gen.test.mjs fails when it is not what
// this script makes of the document. (Python's client is Runtime Cloud's official
// package, withruntime on PyPI: this repository makes no Python types.)
//
//   node sdk/scripts/gen-types.mjs                  rewrite the file in place
//   node sdk/scripts/gen-types.mjs --out-dir DIR    write it into DIR instead
//
// It reads the YAML with the `yaml` package that tests/api pins (tests/api/package.json,
// installed by scripts/install-deps): no dependency of its own. The output depends on
// the document alone (its order included), so it is the same on every machine.
//
// What it understands is what the document uses: $ref to components.schemas, type
// (one or a list, 'null' among them), enum, const, properties/required,
// additionalProperties, items, oneOf/anyOf (unions), a single allOf, and annotations
// (description, default; validation keywords are ignored). Anything else stops it with
// the schema's location, so a new construct is added here rather than mistranslated.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOC = path.join(REPO, 'api', 'openapi.yaml');
export const OUTPUTS = {
  ts: path.join(REPO, 'sdk', 'typescript', 'src', 'api-types.gen.ts'),
};
const REGENERATE = 'node sdk/scripts/gen-types.mjs';
const SCHEMA_REF = '#/components/schemas/';

// Keywords that only constrain values or annotate: they do not change the type.
const IGNORED = new Set(['description', 'default', 'format', 'pattern', 'minLength', 'maxLength',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'minItems', 'maxItems',
  'uniqueItems', 'minProperties', 'maxProperties', 'propertyNames', 'readOnly', 'writeOnly',
  'examples', 'example', 'title', 'deprecated', 'contentMediaType', 'contentEncoding', 'discriminator']);
const STRUCTURAL = new Set(['$ref', 'type', 'enum', 'const', 'properties', 'required',
  'additionalProperties', 'items', 'oneOf', 'anyOf', 'allOf']);

// ------------------------------------------------------------------ the document

/** The `yaml` package from tests/api's pinned install. */
function yamlParser() {
  const from = createRequire(path.join(REPO, 'tests', 'api', 'package.json'));
  try {
    return from('yaml');
  } catch {
    throw new Error('gen-types: the yaml package is missing: run `npm ci` in tests/api ' +
      '(scripts/install-deps does)');
  }
}

export function readDocument(file = DOC) {
  return yamlParser().parse(fs.readFileSync(file, 'utf8'));
}

const refName = (ref, where) => {
  if (typeof ref !== 'string' || !ref.startsWith(SCHEMA_REF)) {
    throw new Error(`gen-types: ${where}: only $refs to ${SCHEMA_REF}* are supported, not ${ref}`);
  }
  return ref.slice(SCHEMA_REF.length);
};

/** Every $ref to a component schema inside v (any depth). */
function refsIn(v, out = new Set()) {
  if (Array.isArray(v)) v.forEach((x) => refsIn(x, out));
  else if (v && typeof v === 'object') {
    if (typeof v.$ref === 'string' && v.$ref.startsWith(SCHEMA_REF)) out.add(v.$ref.slice(SCHEMA_REF.length));
    Object.values(v).forEach((x) => refsIn(x, out));
  }
  return out;
}

/**
 * The component schemas that answers contain (reached from a response, through refs).
 * The document's convention is that answer objects are open: the daemon may add
 * fields, never rename them. Request bodies stay closed, so a misspelt option is
 * caught by the compiler.
 */
function answerSchemas(doc) {
  const schemas = doc.components?.schemas ?? {};
  const responses = doc.components?.responses ?? {};
  const queue = []; // schema names still to visit
  for (const item of Object.values(doc.paths ?? {})) {
    for (const op of Object.values(item)) {
      for (const r of Object.values(op?.responses ?? {})) {
        const resp = r.$ref ? responses[r.$ref.split('/').pop()] : r;
        queue.push(...refsIn(resp?.content ?? {}));
      }
    }
  }
  const seen = new Set();
  while (queue.length) {
    const name = queue.pop();
    if (seen.has(name)) continue;
    seen.add(name);
    queue.push(...refsIn(schemas[name]));
  }
  return seen;
}

// ------------------------------------------------------------------ the model
//
// A type is one of
//   {t: 'prim', name: 'string'|'integer'|'number'|'boolean'|'null'|'unknown'}
//   {t: 'lit', value}   {t: 'ref', name}   {t: 'array', items}   {t: 'map', values}
//   {t: 'union', of: [type]}   {t: 'all', of: [type]}
// and a declaration {name, description, default, type} (an alias) or
// {name, description, object: {props: [{key, type, required, description, default}], open, extra}}
// (extra: the type of the keys not named, when additionalProperties gives one).
// An object schema nested in a property gets a declaration of its own, named after
// its owner and the property (Usage.total -> UsageTotal), so both languages can name it.

const pascal = (s) => s.replace(/(^|[^A-Za-z0-9])([A-Za-z0-9])/g, (_, __, c) => c.toUpperCase());

class Model {
  constructor(doc) {
    this.schemas = doc.components?.schemas ?? {};
    this.answers = answerSchemas(doc);
    this.decls = [];
    this.names = new Set(Object.keys(this.schemas));
  }

  build() {
    for (const [name, schema] of Object.entries(this.schemas)) {
      const where = `${SCHEMA_REF}${name}`;
      const open = this.answers.has(name);
      if (isObjectWithProperties(schema)) this.declareObject(name, schema, where, open);
      else this.decls.push({ name, description: schema.description, default: schema.default, type: this.type(schema, name, where, open) });
    }
    return this.decls;
  }

  declareObject(name, schema, where, open) {
    const decl = { name, description: schema.description, object: null };
    this.decls.push(decl); // before its nested objects: they follow their owner
    const required = schema.required ?? [];
    const props = Object.entries(schema.properties ?? {});
    for (const key of required) {
      if (!props.some(([k]) => k === key)) throw new Error(`gen-types: ${where}: required "${key}" is not among its properties`);
    }
    const extra = schema.additionalProperties;
    decl.object = {
      open: open && extra === undefined,
      props: props.map(([key, s]) => ({
        key,
        required: required.includes(key),
        description: s.description,
        default: s.default,
        type: this.type(s, name + pascal(key), `${where}/properties/${key}`, open),
      })),
    };
    if (extra !== undefined && extra !== false) {
      // Named keys and others of one type (a map with some keys known): the value type
      // of the map covers the named ones too.
      const values = extra === true ? { t: 'prim', name: 'unknown' }
        : this.type(extra, `${name}Value`, `${where}/additionalProperties`, open);
      decl.object.extra = union([values, ...decl.object.props.map((p) => p.type)]);
    }
  }

  /** The type of schema s; hint names a nested object's declaration. */
  type(s, hint, where, open) {
    if (s === true || (s && typeof s === 'object' && Object.keys(s).every((k) => IGNORED.has(k)))) {
      return { t: 'prim', name: 'unknown' };
    }
    if (!s || typeof s !== 'object') throw new Error(`gen-types: ${where}: not a schema`);
    for (const k of Object.keys(s)) {
      if (!IGNORED.has(k) && !STRUCTURAL.has(k)) throw new Error(`gen-types: ${where}: keyword "${k}" is not supported`);
    }
    if (s.$ref !== undefined) {
      const name = refName(s.$ref, where);
      if (!(name in this.schemas)) throw new Error(`gen-types: ${where}: ${name} is not in components.schemas`);
      return { t: 'ref', name };
    }
    const choice = s.oneOf ?? s.anyOf;
    if (choice) {
      return union(choice.map((m, i) => this.type(m, `${hint}${i + 1}`, `${where}/${s.oneOf ? 'oneOf' : 'anyOf'}/${i}`, open)));
    }
    if (s.allOf) {
      const of = s.allOf.map((m, i) => this.type(m, `${hint}${i + 1}`, `${where}/allOf/${i}`, open));
      return of.length === 1 ? of[0] : { t: 'all', of };
    }
    if (s.const !== undefined) return { t: 'lit', value: s.const };
    if (s.enum) return union(s.enum.map((value) => ({ t: 'lit', value })));
    const types = s.type === undefined ? [] : [s.type].flat();
    if (types.length === 0) {
      if (s.properties) return this.nested(s, hint, where, open);
      throw new Error(`gen-types: ${where}: a schema without a type`);
    }
    return union(types.map((t) => this.single(t, s, hint, where, open)));
  }

  single(t, s, hint, where, open) {
    switch (t) {
      case 'string': case 'integer': case 'number': case 'boolean': case 'null':
        return { t: 'prim', name: t };
      case 'array':
        return { t: 'array', items: s.items === undefined ? { t: 'prim', name: 'unknown' } : this.type(s.items, `${hint}Item`, `${where}/items`, open) };
      case 'object':
        if (s.properties) return this.nested(s, hint, where, open);
        if (s.additionalProperties === false) throw new Error(`gen-types: ${where}: an object that has no properties at all`);
        return { t: 'map', values: s.additionalProperties === undefined || s.additionalProperties === true
          ? { t: 'prim', name: 'unknown' } : this.type(s.additionalProperties, `${hint}Value`, `${where}/additionalProperties`, open) };
      default:
        throw new Error(`gen-types: ${where}: type "${t}" is not supported`);
    }
  }

  nested(s, hint, where, open) {
    if (this.names.has(hint)) throw new Error(`gen-types: ${where}: the name ${hint} for this nested object is taken`);
    this.names.add(hint);
    this.declareObject(hint, s, where, open);
    return { t: 'ref', name: hint };
  }
}

function isObjectWithProperties(s) {
  return s && typeof s === 'object' && s.properties && (s.type === 'object' || s.type === undefined) &&
    !s.oneOf && !s.anyOf && !s.allOf && !s.$ref;
}

/** A union, flattened and without repeats; one member is that member. */
function union(members) {
  const out = [];
  for (const m of members.flatMap((x) => (x.t === 'union' ? x.of : [x]))) {
    if (!out.some((o) => JSON.stringify(o) === JSON.stringify(m))) out.push(m);
  }
  return out.length === 1 ? out[0] : { t: 'union', of: out };
}

const descriptionLines = (d) => (d === undefined ? [] : String(d).trim().split('\n').map((l) => l.trimEnd()));

// ------------------------------------------------------------------ TypeScript

const tsString = (v) => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;
const tsKey = (k) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : tsString(k));

function tsType(ty) {
  switch (ty.t) {
    case 'prim': return { string: 'string', integer: 'number', number: 'number', boolean: 'boolean', null: 'null', unknown: 'unknown' }[ty.name];
    case 'lit': return typeof ty.value === 'string' ? tsString(ty.value) : JSON.stringify(ty.value);
    case 'ref': return ty.name;
    case 'array': {
      const inner = tsType(ty.items);
      return ty.items.t === 'union' || ty.items.t === 'all' ? `(${inner})[]` : `${inner}[]`;
    }
    case 'map': return `Record<string, ${tsType(ty.values)}>`;
    case 'union': return ty.of.map(tsType).join(' | ');
    case 'all': return ty.of.map((m) => (m.t === 'union' ? `(${tsType(m)})` : tsType(m))).join(' & ');
  }
  throw new Error(`gen-types: no TypeScript for ${JSON.stringify(ty)}`);
}

/** A doc comment of these lines at this indentation ('' when there are none). */
function tsDoc(lines, indent) {
  const safe = lines.map((l) => l.replace(/\*\//g, '*\\/'));
  if (safe.length === 0) return '';
  if (safe.length === 1) return `${indent}/** ${safe[0]} */\n`;
  return `${indent}/**\n${safe.map((l) => `${indent} *${l ? ` ${l}` : ''}`).join('\n')}\n${indent} */\n`;
}

const tsDocLines = (description, dflt) =>
  [...descriptionLines(description), ...(dflt === undefined ? [] : [`@default ${JSON.stringify(dflt)}`])];

function tsDecl(d) {
  let out = tsDoc(tsDocLines(d.description, d.default), '');
  if (d.object) {
    const props = d.object.props.map((p) =>
      tsDoc(tsDocLines(p.description, p.default), '  ') + `  ${tsKey(p.key)}${p.required ? '' : '?'}: ${tsType(p.type)};\n`).join('');
    // A map with some keys known: a type literal and a Record, so that it is assignable to
    // Record<string, V> (HeadersInit, say), which an interface never is.
    if (d.object.extra) return `${out}export type ${d.name} = {\n${props}} & Record<string, ${tsType(d.object.extra)}>;\n`;
    return `${out}export interface ${d.name} {\n${props}${d.object.open ? '  [more: string]: unknown;\n' : ''}}\n`;
  }
  const one = `export type ${d.name} = ${tsType(d.type)};`;
  if (one.length <= 100 || d.type.t !== 'union') return `${out}${one}\n`;
  return `${out}export type ${d.name} =\n${d.type.of.map((m) => `  | ${tsType(m)}`).join('\n')};\n`;
}

export function typescript(decls) {
  const head = [
    `// Generated from api/openapi.yaml (components.schemas) by sdk/scripts/gen-types.mjs: do not edit.`,
    `// Regenerate with \`${REGENERATE}\` (sdk/typescript/test/types-gen.test.mjs checks it is current).`,
    '//',
    '// These are the wire types, exactly as the document gives them: `?` marks a property that',
    '// is not required, `| null` one that may be null. Objects that answers carry are open',
    '// (`[more: string]: unknown`): the daemon may add fields, never rename them. The SDK\'s',
    '// public names are in types.ts.',
  ].join('\n');
  return `${head}\n\n${decls.map(tsDecl).join('\n')}`;
}

// ------------------------------------------------------------------ main

export function generate(doc) {
  const decls = new Model(doc).build();
  return { ts: typescript(decls) };
}

function main(argv) {
  const outDir = argv.length === 2 && argv[0] === '--out-dir' ? argv[1] : undefined;
  if (argv.length !== 0 && !outDir) {
    console.error('usage: node sdk/scripts/gen-types.mjs [--out-dir DIR]');
    return 2;
  }
  const out = generate(readDocument());
  for (const [lang, file] of Object.entries(OUTPUTS)) {
    const target = outDir ? path.join(outDir, path.basename(file)) : file;
    const shown = path.relative(process.cwd(), target) || target;
    // An unchanged file is left alone: a new mtime would make the SDK's tests rebuild dist/.
    if (fs.existsSync(target) && fs.readFileSync(target, 'utf8') === out[lang]) {
      console.log(`gen-types: ${shown} is up to date`);
      continue;
    }
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, out[lang]);
    console.log(`gen-types: wrote ${shown}`);
  }
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    console.error(e.message);
    process.exitCode = 1;
  }
}
