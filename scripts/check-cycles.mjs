#!/usr/bin/env node
// Fails when any module of the repo imports itself back, through any chain of imports.
//
// Every file tsconfig.json includes counts, and every import of another of them: `import type`,
// `export … from` and import() included, since a cycle of types still ties the modules together.
// Imports resolve as tsc resolves them (NodeNext: './x.js' is './x.ts'). Run by `npm run lint`.
import console from 'node:console';
import path from 'node:path';
import process from 'node:process';
import ts from 'typescript';

const root = path.resolve(import.meta.dirname, '..');
const configPath = path.join(root, 'tsconfig.json');
const { config, error } = ts.readConfigFile(configPath, ts.sys.readFile);
if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
const { options, fileNames } = ts.parseJsonConfigFileContent(config, ts.sys, root, undefined, configPath);
const files = new Set(fileNames.map((f) => path.resolve(f)));

/** The repo's own modules `file` imports, in the order it names them. */
function importsOf(file) {
  const { importedFiles } = ts.preProcessFile(ts.sys.readFile(file) ?? '', true, true);
  const out = [];
  for (const { fileName: specifier } of importedFiles) {
    const { resolvedModule } = ts.resolveModuleName(
      specifier,
      file,
      options,
      ts.sys,
      undefined,
      undefined,
      ts.ModuleKind.ESNext,
    );
    const target = resolvedModule && path.resolve(resolvedModule.resolvedFileName);
    if (target && files.has(target) && !out.includes(target)) out.push(target);
  }
  return out;
}

const graph = new Map([...files].map((f) => [f, importsOf(f)]));

// Tarjan's strongly connected components: every component of more than one module (or a module
// that imports itself) is a cycle.
const index = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
const components = [];
let next = 0;
function connect(v) {
  index.set(v, next);
  low.set(v, next++);
  stack.push(v);
  onStack.add(v);
  for (const w of graph.get(v)) {
    if (!index.has(w)) {
      connect(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
  }
  if (low.get(v) !== index.get(v)) return;
  const component = [];
  let w;
  do {
    w = stack.pop();
    onStack.delete(w);
    component.push(w);
  } while (w !== v);
  if (component.length > 1 || graph.get(v).includes(v)) components.push(component);
}
for (const v of [...graph.keys()].sort()) if (!index.has(v)) connect(v);

/** One shortest chain of imports from `start` back to itself, inside its component. */
function cycleThrough(start, members) {
  const from = new Map([[start, undefined]]);
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift();
    for (const w of graph.get(v)) {
      if (w === start) {
        const chain = [start];
        for (let u = v; u !== start; u = from.get(u)) chain.splice(1, 0, u);
        return [...chain, start];
      }
      if (members.has(w) && !from.has(w)) {
        from.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

if (components.length === 0) {
  console.log(`check-cycles: no import cycle among ${files.size} modules`);
} else {
  for (const component of components) {
    const start = component.sort()[0];
    const chain = cycleThrough(start, new Set(component)).map((f) => path.relative(root, f));
    console.error(`import cycle (${component.length} modules): ${chain.join(' -> ')}`);
  }
  console.error(`check-cycles: ${components.length} import cycle(s)`);
  process.exitCode = 1;
}
