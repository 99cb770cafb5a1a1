import { defineConfig } from 'vitest/config';

/** Test files that start no server: `npm run test:unit` runs them alone, in about a minute. */
const UNIT = [
  'admission',
  'cpu-priority',
  'duckdb-interrupt',
  'literal-template',
  'console-session',
  'console-paging',
  'console-what-if',
  'arrow-exchange',
  'attach-urls',
  'deploy-files',
  'exchange',
  'http-client',
  'json-typing',
  'local-platform',
  'member-view',
  'ndjson-lines',
  'merge-commit',
  'ownership-hash',
  'ownership',
  'plan-cache',
  'planner',
  'pool-rules',
  'postgres-codec',
  'preflight',
  'query-node-client',
  'python-tool',
  'routing-verdict',
  's3-fifo',
  'schema-connections',
  'segment-memory',
  'serving-admission',
  'segment-index',
  'sqlite',
  'storable-types',
  'vcpus',
].map((name) => `test/${name}.test.ts`);

export default defineConfig({
  test: {
    // Temporal's native bridge misbehaves in worker threads: one process per test file.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT } },
      {
        extends: true,
        // The real servers, started once for the whole run (test/global-setup.ts).
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: UNIT,
          globalSetup: ['test/global-setup.ts'],
          // Temporal's worker logs kept to warnings; the unit files never load the worker.
          setupFiles: ['test/setup-each-file.ts'],
        },
      },
    ],
  },
});
