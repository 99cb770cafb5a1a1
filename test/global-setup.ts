/**
 * One Temporal dev server and one S3 API (SeaweedFS, with credentials made for this run) for the
 * whole test run, on free loopback ports; test files read their addresses with `inject(...)`.
 * The dev server starts bare: Berth's workers register their search attributes themselves.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startS3Server } from '../cli/embedded/s3-server.js';
import { resolveTemporalCli } from '../cli/embedded/temporal-cli.js';
import { startTemporalDevServer } from '../cli/embedded/temporal-server.js';

export const TEST_BUCKET = 'berth-test';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    s3Endpoint: string;
    s3Credentials: { accessKeyId: string; secretAccessKey: string };
    s3Bucket: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-test-'));
  const log = (line: string) => console.log(`[global-setup] ${line}`);
  const [temporal, s3] = await Promise.all([
    resolveTemporalCli({ log }).then((executable) =>
      startTemporalDevServer({
        executable,
        // Suggest continue-as-new after 60 events, so that the heavy pool's hand-over is exercised.
        extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=60'],
      }),
    ),
    startS3Server({ directory: path.join(dir, 'seaweedfs'), identitiesFile: path.join(dir, 's3-identities.json'), buckets: [TEST_BUCKET], logFile: path.join(dir, 'seaweedfs.log'), log }),
  ]);
  log(`temporal ${temporal.address}, s3 ${s3.endpoint}`);
  project.provide('temporalAddress', temporal.address);
  project.provide('s3Endpoint', s3.endpoint);
  project.provide('s3Credentials', s3.credentials);
  project.provide('s3Bucket', TEST_BUCKET);
  return async () => {
    await Promise.all([temporal.stop(), s3.stop()]);
    await rm(dir, { recursive: true, force: true });
  };
}
