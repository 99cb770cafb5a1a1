/**
 * One Temporal dev server, one S3 API (SeaweedFS, with credentials made for this run), one
 * Kubernetes control plane and one throwaway PostgreSQL cluster for the whole test run, on free
 * loopback ports; test files read their addresses with `inject(...)`. The dev server starts bare:
 * Berth's workers register their search attributes themselves.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { TestProject } from 'vitest/node';
import { startPostgresServer } from '../cli/embedded/postgres-server.js';
import { startS3Server } from '../cli/embedded/s3-server.js';
import { resolveTemporalCli } from '../cli/embedded/temporal-cli.js';
import { startTemporalDevServer } from '../cli/embedded/temporal-server.js';
import { allPayloadsOver } from './helpers/history.js';
import { resolveKubeBinaries, startKubeControlPlane } from './helpers/kube-control-plane.js';
import { killRecordedGroups } from './helpers/process-groups.js';

export const TEST_BUCKET = 'berth-test';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    s3Endpoint: string;
    s3Credentials: { accessKeyId: string; secretAccessKey: string };
    s3Bucket: string;
    kubeServer: string;
    kubeAdminToken: string;
    kubeAuditLog: string;
    /** The test cluster's superuser URL; each test makes its own database (test/helpers/postgres.ts). */
    postgresUrl: string;
    /** Where test helpers record the process groups they start (helpers/process-groups.ts). */
    processGroupDir: string;
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
    if (oversized.length > 0)
      throw new Error(`workflow histories hold payloads over 64 KiB: ${JSON.stringify(oversized.slice(0, 10))}`);
  } finally {
    await connection.close();
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-test-'));
  const log = (line: string) => console.log(`[global-setup] ${line}`);
  const parts = [
    resolveTemporalCli({ log }).then((executable) =>
      startTemporalDevServer({
        executable,
        // Suggest continue-as-new after 60 events, so that the heavy pool's hand-over is exercised.
        extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=60'],
      }),
    ),
    startS3Server({
      directory: path.join(dir, 'seaweedfs'),
      identitiesFile: path.join(dir, 's3-identities.json'),
      buckets: [TEST_BUCKET],
      logFile: path.join(dir, 'seaweedfs.log'),
      log,
    }),
    // Under CI the binaries must already be built (.ci/run builds them); a missing one fails the run.
    resolveKubeBinaries({ mustExist: process.env.CI === 'true' }).then(async (binaries) => {
      const startedAt = Date.now();
      const kube = await startKubeControlPlane({ binaries, dir: path.join(dir, 'kube') });
      log(
        `kubernetes: etcd, kube-apiserver, kube-controller-manager and kube-scheduler up in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`,
      );
      return kube;
    }),
    // Started here rather than by .ci/run: `npm test` alone then works wherever Debian's postgresql
    // package is installed, each run (other engineers' runs too) gets its own cluster on a free port,
    // and the server is this process's child, so it dies with the run.
    startPostgresServer(),
  ] as const;
  // One part failing to start stops the others, so that nothing outlives a failed run.
  const [temporal, s3, kube, postgres] = await Promise.all(parts).catch(async (error: unknown) => {
    await Promise.allSettled(parts.map(async (part) => (await part).stop()));
    throw error;
  });
  log(`temporal ${temporal.address}, s3 ${s3.endpoint}, kube-apiserver ${kube.server}, postgres ${postgres.url}`);
  project.provide('temporalAddress', temporal.address);
  project.provide('s3Endpoint', s3.endpoint);
  project.provide('s3Credentials', s3.credentials);
  project.provide('s3Bucket', TEST_BUCKET);
  project.provide('kubeServer', kube.server);
  project.provide('kubeAdminToken', kube.adminToken);
  project.provide('kubeAuditLog', kube.auditLog);
  project.provide('postgresUrl', postgres.url);
  const processGroupDir = path.join(dir, 'process-groups');
  await mkdir(processGroupDir);
  project.provide('processGroupDir', processGroupDir);
  return async () => {
    try {
      const left = await killRecordedGroups(processGroupDir);
      if (left > 0) log(`ended ${left} process group(s) that tests left running`);
      await assertSmallHistories(temporal.address, log);
    } finally {
      await Promise.all([temporal.stop(), s3.stop(), kube.stop(), postgres.stop()]);
      await rm(dir, { recursive: true, force: true });
    }
  };
}
