// Loads a TypeScript module of src/ for node's test runner: esbuild bundles it (with its
// imports, jsdiff included) into one ES module, imported from a data: URL. No files written.
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export async function load(path) {
  const r = await build({ absWorkingDir: root, entryPoints: [path], bundle: true, format: 'esm', platform: 'neutral', write: false, logLevel: 'error' });
  return import('data:text/javascript;base64,' + Buffer.from(r.outputFiles[0].text).toString('base64'));
}
