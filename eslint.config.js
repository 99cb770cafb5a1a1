import { builtinModules } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
    // Temporal's workflow sandbox: no Node built-ins, and no module that needs WebAssembly set-up.
    files: ['workflows/**/*.ts', 'test/fixtures/**/*workflows*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: builtinModules.flatMap((m) => [m, `node:${m}`]),
          patterns: [
            {
              group: ['**/core/ownership*'],
              message: 'ownership needs WebAssembly: compute owners in an activity',
            },
          ],
        },
      ],
    },
  },
);
