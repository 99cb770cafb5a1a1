/**
 * One Temporal dev server and one S3 API for the whole test run, on free loopback ports; test
 * files read their addresses with `inject(...)`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { TestProject } from 'vitest/node';
import { startS3Server } from '../cli/embedded/s3-server.js';
import { resolveTemporalCli } from '../cli/embedded/temporal-cli.js';
import { startTemporalDevServer } from '../cli/embedded/temporal-server.js';
import { allPayloadsOver } from './helpers/history.js';

export const TEST_BUCKET = 'berth-test';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    s3Endpoint: string;
    s3Bucket: string;
  }
}

/**
 * Temporal refuses payloads over 2 MiB and histories over 50 MB: Berth keeps data out of workflows
 * altogether. Every history the whole run left is checked for a payload over 64 KiB.
 */
async function assertSmallHistories(address: string, log: (line: string) => void): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    const { runs, oversized } = await allPayloadsOver(new Client({ connection }), 64 * 1024);
    log(`${runs} workflow histories checked: ${oversized.length} payloads over 64 KiB`);
    if (oversized.length > 0) throw new Error(`workflow histories hold payloads over 64 KiB: ${JSON.stringify(oversized.slice(0, 10))}`);
  } finally {
    await connection.close();
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
    startS3Server({ directory: path.join(dir, 's3'), buckets: [TEST_BUCKET] }),
  ]);
  log(`temporal ${temporal.address}, s3 ${s3.endpoint}`);
  project.provide('temporalAddress', temporal.address);
  project.provide('s3Endpoint', s3.endpoint);
  project.provide('s3Bucket', TEST_BUCKET);
  return async () => {
    try {
      await assertSmallHistories(temporal.address, log);
    } finally {
      await Promise.all([temporal.stop(), s3.stop()]);
      await rm(dir, { recursive: true, force: true });
    }
  };
}
