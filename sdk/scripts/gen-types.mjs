#!/usr/bin/env node
// The SDKs' wire types, generated from the one description of the HTTP API:
// components.schemas of api/openapi.yaml becomes
//   sdk/typescript/src/api-types.gen.ts        (an interface or type per schema)
//   sdk/python/src/withruntime/_api_types.py   (a TypedDict or alias per schema)
// Both are committed; sdk/typescript/test/types-gen.test.mjs fails when they are
// not what this script makes of the document.
//
//   node sdk/scripts/gen-types.mjs                  rewrite both files in place
//   node sdk/scripts/gen-types.mjs --out-dir DIR    write them into DIR instead
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
  py: path.join(REPO, 'sdk', 'python', 'src', 'withruntime', '_api_types.py'),
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

// ------------------------------------------------------------------ Python

const PY_KEYWORDS = new Set(['False', 'None', 'True', 'and', 'as', 'assert', 'async', 'await', 'break',
  'class', 'continue', 'def', 'del', 'elif', 'else', 'except', 'finally', 'for', 'from', 'global',
  'if', 'import', 'in', 'is', 'lambda', 'nonlocal', 'not', 'or', 'pass', 'raise', 'return', 'try',
  'while', 'with', 'yield']);

function pyRepr(v) {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number' || typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyRepr(x)}`).join(', ')}}`;
}

class Python {
  constructor() {
    this.imports = new Set();
  }

  type(ty) {
    switch (ty.t) {
      case 'prim':
        if (ty.name === 'unknown') this.imports.add('Any');
        return { string: 'str', integer: 'int', number: 'float', boolean: 'bool', null: 'None', unknown: 'Any' }[ty.name];
      case 'lit': return ty.value === null ? 'None' : this.literal([ty.value]);
      case 'ref': return ty.name;
      case 'array': return `list[${this.type(ty.items)}]`;
      case 'map': return `dict[str, ${this.type(ty.values)}]`;
      case 'union': return this.unionParts(ty).join(' | ');
      case 'all':
        throw new Error('gen-types: allOf of several schemas has no Python TypedDict form');
    }
    throw new Error(`gen-types: no Python for ${JSON.stringify(ty)}`);
  }

  /** A union's members; its literals (None aside) make one Literal[...], where the first was. */
  unionParts(ty) {
    const lits = ty.of.filter((m) => m.t === 'lit' && m.value !== null).map((m) => m.value);
    const parts = [];
    let litDone = false;
    for (const m of ty.of) {
      if (m.t === 'lit' && m.value !== null) {
        if (!litDone) parts.push(this.literal(lits));
        litDone = true;
      } else parts.push(m.t === 'lit' ? 'None' : this.type(m));
    }
    return parts;
  }

  literal(values) {
    this.imports.add('Literal');
    return `Literal[${values.map(pyRepr).join(', ')}]`;
  }

  /** An alias; a long union gets a line per member (per value, for a Literal). */
  alias(d) {
    this.imports.add('TypeAlias');
    const value = this.type(d.type);
    const one = `${d.name}: TypeAlias = ${value}`;
    const comment = pyComment(d.description, d.default, '');
    if (one.length <= 99 || d.type.t !== 'union') return `${comment}${one}\n`;
    const parts = this.unionParts(d.type);
    if (parts.length === 1) {
      const values = d.type.of.map((m) => `    ${pyRepr(m.value)},`);
      return `${comment}${d.name}: TypeAlias = Literal[\n${values.join('\n')}\n]\n`;
    }
    return `${comment}${d.name}: TypeAlias = (\n    ${parts.join('\n    | ')}\n)\n`;
  }

  /** A map with some keys known: a dict (a TypedDict cannot take other keys before Python
   * 3.15), the known keys named in its comment. */
  knownKeysMap(d) {
    this.imports.add('TypeAlias');
    const keys = d.object.props.map((p) => `${p.key}${p.description ? ` (${p.description})` : ''}`);
    const lines = [...descriptionLines(d.description), `keys include: ${keys.join(', ')}`];
    return `${lines.map((l) => `#: ${l}\n`).join('')}${d.name}: TypeAlias = dict[str, ${this.type(d.object.extra)}]\n`;
  }

  /** TypedDicts: the required keys in a base class, the others in a total=False class
   * (Python 3.10 has no NotRequired in its standard library). */
  typedDict(d) {
    if (d.object.extra) return this.knownKeysMap(d);
    this.imports.add('TypedDict');
    const req = d.object.props.filter((p) => p.required);
    const opt = d.object.props.filter((p) => !p.required);
    for (const p of d.object.props) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(p.key) || PY_KEYWORDS.has(p.key)) {
        throw new Error(`gen-types: ${d.name}.${p.key} is not a Python identifier; class TypedDicts cannot have it`);
      }
    }
    const body = (props, doc) => {
      const lines = [];
      if (doc.length) lines.push(pyDocstring(doc), '');
      for (const p of props) lines.push(pyComment(p.description, p.default, '    ') + `    ${p.key}: ${this.type(p.type)}`);
      if (lines.length === 0) lines.push('    pass');
      if (lines.at(-1) === '') lines.pop();
      return lines.join('\n');
    };
    const doc = descriptionLines(d.description);
    if (opt.length === 0) return `class ${d.name}(TypedDict):\n${body(req, doc)}\n`;
    if (req.length === 0) return `class ${d.name}(TypedDict, total=False):\n${body(opt, doc)}\n`;
    const base = `_${d.name}Required`;
    return `class ${base}(TypedDict):\n${body(req, [])}\n\n\nclass ${d.name}(${base}, total=False):\n${body(opt, doc)}\n`;
  }
}

function pyDocstring(lines) {
  const safe = lines.map((l) => l.replace(/\\/g, '\\\\').replace(/"""/g, '\\"\\"\\"'));
  if (safe.length === 1) return `    """${safe[0]}"""`;
  return `    """${safe[0]}\n${safe.slice(1).map((l) => (l ? `    ${l}` : '')).join('\n')}\n    """`;
}

/** `#:` comment lines (the attribute docs Sphinx reads): the description and the default. */
function pyComment(description, dflt, indent) {
  const lines = descriptionLines(description);
  if (dflt !== undefined) {
    if (lines.length) lines[lines.length - 1] += ` (default: ${pyRepr(dflt)})`;
    else lines.push(`default: ${pyRepr(dflt)}`);
  }
  return lines.map((l) => `${indent}#:${l ? ` ${l}` : ''}\n`).join('');
}

/** Declarations in an order Python can run: an alias is evaluated at once, so what it
 * names comes first; class annotations are not (from __future__ import annotations). */
function pythonOrder(decls) {
  const byName = new Map(decls.map((d) => [d.name, d]));
  const out = [];
  const state = new Map();
  const visit = (d, chain) => {
    if (state.get(d.name) === 'done') return;
    if (state.get(d.name) === 'active') throw new Error(`gen-types: aliases refer to each other: ${[...chain, d.name].join(' -> ')}`);
    state.set(d.name, 'active');
    const eager = d.object ? d.object.extra : d.type; // a TypedDict's annotations wait
    if (eager) {
      for (const n of refsOfType(eager)) {
        const dep = byName.get(n);
        if (!dep) throw new Error(`gen-types: ${d.name} refers to ${n}, which is not in components.schemas`);
        visit(dep, [...chain, d.name]);
      }
    }
    state.set(d.name, 'done');
    out.push(d);
  };
  decls.forEach((d) => visit(d, []));
  return out;
}

function refsOfType(ty) {
  switch (ty.t) {
    case 'ref': return [ty.name];
    case 'array': return refsOfType(ty.items);
    case 'map': return refsOfType(ty.values);
    case 'union': case 'all': return ty.of.flatMap(refsOfType);
    default: return [];
  }
}

export function python(decls) {
  const py = new Python();
  const ordered = pythonOrder(decls);
  const blocks = ordered.map((d) => (d.object ? py.typedDict(d) : py.alias(d)));
  const head = [
    `# Generated from api/openapi.yaml (components.schemas) by sdk/scripts/gen-types.mjs: do not edit.`,
    `# Regenerate with \`${REGENERATE}\` (sdk/typescript/test/types-gen.test.mjs checks it is current).`,
    '"""The API\'s wire types as TypedDicts, exactly as api/openapi.yaml gives them.',
    '',
    'Keys a schema requires are in a base class, the others in a ``total=False`` class',
    '(the standard library of Python 3.10 has no ``NotRequired``). Answers may carry keys',
    'that are not listed: the daemon adds fields, never renames them. The SDK\'s public',
    'names are in ``withruntime.models``.',
    '"""',
    '',
    'from __future__ import annotations',
    '',
    `from typing import ${[...py.imports].sort().join(', ')}`,
    '',
    '__all__ = [',
    ...ordered.map((d) => `    ${JSON.stringify(d.name)},`),
    ']',
  ].join('\n');
  return `${head}\n\n\n${blocks.join('\n\n')}`;
}

// ------------------------------------------------------------------ main

export function generate(doc) {
  const decls = new Model(doc).build();
  return { ts: typescript(decls), py: python(decls) };
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
