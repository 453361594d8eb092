// Builds the dashboard into dist/: app.js (one minified ES module: Preact, jsdiff, uPlot and
// the page), app.css (ours, then uPlot's), index.html. Deterministic: the same sources give
// the same bytes (no timestamps, no absolute paths, no source map).
import { build } from 'esbuild';
import { mkdir, readFile, writeFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });

const js = await build({
  absWorkingDir: here,
  entryPoints: ['src/main.tsx'],
  bundle: true,
  format: 'esm',
  target: ['es2020'],
  minify: true,
  legalComments: 'none',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  charset: 'utf8',
  write: false,
  outfile: 'dist/app.js',
  define: { 'process.env.NODE_ENV': '"production"' },
  logLevel: 'warning',
});
const css = await build({
  absWorkingDir: here,
  entryPoints: ['src/app.css'],
  bundle: true,
  minify: true,
  legalComments: 'none',
  charset: 'utf8',
  write: false,
  outfile: 'dist/app.css',
  logLevel: 'warning',
});

const banner = '/* runtime dashboard; licences of the bundled libraries: LICENSES.md */\n';
await writeFile(join(dist, 'app.js'), banner + js.outputFiles[0].text);
await writeFile(join(dist, 'app.css'), banner + css.outputFiles[0].text);
await writeFile(join(dist, 'index.html'), await readFile(join(here, 'src/index.html')));

for (const f of ['app.js', 'app.css', 'index.html']) {
  const b = (await readFile(join(dist, f))).length;
  console.log(`dist/${f} ${(b / 1024).toFixed(1)} KiB`);
}
