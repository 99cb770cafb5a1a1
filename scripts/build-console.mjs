#!/usr/bin/env node
// Builds the console the coordinator serves at /console/ into dist/console: the page's TypeScript
// bundled with uPlot into one app.js (no CDN: it works offline), its stylesheet with uPlot's, and
// index.html. Run by `npm run build` (and so by `npm ci`'s prepare).
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';

const root = path.resolve(import.meta.dirname, '..');
const source = path.join(root, 'console');
const out = path.join(root, 'dist', 'console');
await mkdir(out, { recursive: true });
await build({
  entryPoints: [path.join(source, 'src', 'main.ts')],
  outfile: path.join(out, 'app.js'),
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: false,
  legalComments: 'inline',
  logLevel: 'warning',
});
const uplotCss = await readFile(path.join(root, 'node_modules', 'uplot', 'dist', 'uPlot.min.css'), 'utf8');
await writeFile(path.join(out, 'app.css'), `${uplotCss}\n${await readFile(path.join(source, 'app.css'), 'utf8')}`);
await copyFile(path.join(source, 'index.html'), path.join(out, 'index.html'));
