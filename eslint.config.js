import { builtinModules } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const NO_CLI = {
  group: ['**/cli/**', '../cli/*'],
  message: 'services, workers, activities and workflows never import the CLI',
};
const SERVICES = ['meta', 'query-node', 'coordinator', 'controller'];

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
    },
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
    files: ['activities/**/*.ts', 'core/**/*.ts', 'workers/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [NO_CLI] }] },
  },
  // A service reaches another only through its wire contract (api.ts) and client (client.ts).
  ...[...SERVICES, 'common'].map((service) => ({
    files: [`services/${service}/**/*.ts`],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: SERVICES.filter((other) => other !== service).flatMap((other) => [
                `../${other}/*`,
                `!../${other}/api.js`,
                `!../${other}/client.js`,
              ]),
              message: 'a service imports another service only through its api.ts or client.ts',
            },
            NO_CLI,
          ],
        },
      ],
    },
  })),
);
