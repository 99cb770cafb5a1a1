/**
 * One Temporal dev server, one S3 API and one throwaway PostgreSQL cluster for the whole test run,
 * on free loopback ports; test files read their addresses with `inject(...)`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startPostgresServer } from '../cli/embedded/postgres-server.js';
import { startS3Server } from '../cli/embedded/s3-server.js';
import { resolveTemporalCli } from '../cli/embedded/temporal-cli.js';
import { startTemporalDevServer } from '../cli/embedded/temporal-server.js';

export const TEST_BUCKET = 'berth-test';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    s3Endpoint: string;
    s3Bucket: string;
    /** The test cluster's superuser URL; each test makes its own database (test/helpers/postgres.ts). */
    postgresUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-test-'));
  const log = (line: string) => console.log(`[global-setup] ${line}`);
  const [temporal, s3, postgres] = await Promise.all([
    resolveTemporalCli({ log }).then((executable) =>
      startTemporalDevServer({
        executable,
        // Suggest continue-as-new after 60 events, so that the heavy pool's hand-over is exercised.
        extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=60'],
      }),
    ),
    startS3Server({ directory: path.join(dir, 's3'), buckets: [TEST_BUCKET] }),
    // Started here rather than by .ci/run: `npm test` alone then works wherever Debian's postgresql
    // package is installed, each run (other engineers' runs too) gets its own cluster on a free port,
    // and the server is this process's child, so it dies with the run.
    startPostgresServer(),
  ]);
  log(`temporal ${temporal.address}, s3 ${s3.endpoint}, postgres ${postgres.url}`);
  project.provide('temporalAddress', temporal.address);
  project.provide('s3Endpoint', s3.endpoint);
  project.provide('s3Bucket', TEST_BUCKET);
  project.provide('postgresUrl', postgres.url);
  return async () => {
    await Promise.all([temporal.stop(), s3.stop(), postgres.stop()]);
    await rm(dir, { recursive: true, force: true });
  };
}
