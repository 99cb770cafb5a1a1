import { builtinModules } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const NO_CLI = {
  group: ['**/cli/**', '../cli/*'],
  message: 'services, workers, activities and workflows never import the CLI',
};
const SERVICES = ['meta', 'query-node', 'coordinator', 'controller'];

/**
 * What a file of `service` (or of common) may not import: another service past its wire contract
 * (api.ts) and client (client.ts), at any depth of folders, and the CLI.
 */
const servicePatterns = (service) => [
  {
    group: SERVICES.filter((other) => other !== service).flatMap((other) => [
      `**/${other}/*`,
      `!**/${other}/api.js`,
      `!**/${other}/client.js`,
    ]),
    message: 'a service imports another service only through its api.ts or client.ts',
  },
  NO_CLI,
];

/**
 * The coordinator's folders along a query's path: planning/ makes a plan (stages.ts), admission/
 * lets the query in, execution/ runs it, ingest/ writes rows. The top level composes them
 * (sql-engine.ts, query-service.ts, coordinator.ts); no folder imports another, nor the top level
 * past the wire contract (api.ts) and the plan's types (stages.ts).
 */
const COORDINATOR_FOLDERS = ['planning', 'execution', 'admission', 'ingest', 'postgres'];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      // On Node 24 a garbage-collected better-sqlite3 object aborts the process: openSqlite keeps them.
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'better-sqlite3', message: 'open SQLite with openSqlite (services/common/sqlite.ts)' }] },
      ],
    },
  },
  {
    files: ['services/common/sqlite.ts', 'services/meta/sqlite-store.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    // Temporal's workflow sandbox: no Node built-ins, no module that needs WebAssembly set-up, and
    // activities as types only (they run in the worker, never in the sandbox).
    files: ['workflows/**/*.ts', 'test/fixtures/**/*workflows*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: builtinModules.flatMap((m) => [m, `node:${m}`]),
          patterns: [
            {
              group: ['**/core/ownership*'],
              message: 'ownership needs WebAssembly: compute owners in an activity',
            },
            {
              group: ['**/activities/**'],
              allowTypeImports: true,
              message: 'workflows import activities as types only: `import type`, then proxyActivities',
            },
            NO_CLI,
          ],
        },
      ],
    },
  },
  {
    // Below the CLI: nothing imports it.
    files: ['activities/**/*.ts', 'workers/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [NO_CLI] }] },
  },
  {
    // Pure, deterministic code: no Node built-ins, and nothing of the rest of Berth.
    files: ['core/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: builtinModules.flatMap((m) => [m, `node:${m}`]),
          patterns: [
            {
              group: ['activities', 'bench', 'cli', 'services', 'test', 'workers', 'workflows'].map(
                (dir) => `**/${dir}/**`,
              ),
              message: 'core/ imports only core/ and packages: the rest of Berth builds on it, never the other way',
            },
          ],
        },
      ],
    },
  },
  // A service reaches another only through its wire contract (api.ts) and client (client.ts).
  ...[...SERVICES, 'common'].map((service) => ({
    files: [`services/${service}/**/*.ts`],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: servicePatterns(service) }] },
  })),
  ...COORDINATOR_FOLDERS.map((folder) => ({
    files: [`services/coordinator/${folder}/**/*.ts`],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            ...servicePatterns('coordinator'),
            {
              group: [
                ...COORDINATOR_FOLDERS.filter((other) => other !== folder).map((other) => `../${other}/*`),
                '../*.js',
                '!../api.js',
                '!../stages.js',
              ],
              message: `coordinator/${folder}/ imports no other folder of the coordinator, and of the top level only api.ts and stages.ts`,
            },
          ],
        },
      ],
    },
  })),
);
