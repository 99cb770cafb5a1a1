import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Temporal's native bridge misbehaves in worker threads: one process per test file.
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-each-file.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
