/** The merge activities' clients over a test cluster, for running an activity in the test's own process. */
import { randomUUID } from 'node:crypto';
import type { MergeActivityDeps } from '../../activities/merge.js';
import { openSandboxedDuckDB } from '../../services/common/duckdb.js';
import { createS3Client } from '../../services/common/s3-client.js';
import { TOKEN, type TestCluster } from './cluster.js';

/** A worker's S3 client, meta, token and DuckDB (in a work dir of its own); close() lets them go. */
export async function mergeDeps(cluster: TestCluster): Promise<MergeActivityDeps & { close(): void }> {
  const workDir = `${cluster.dir}/worker-${randomUUID()}`;
  const s3 = createS3Client(cluster.s3);
  const duckdb = await openSandboxedDuckDB({ allowedDirectories: [workDir], tempDirectory: `${workDir}/spill` });
  return {
    s3,
    bucket: cluster.bucket,
    meta: cluster.meta,
    token: TOKEN,
    duckdb,
    workDir,
    close: () => {
      duckdb.closeSync();
      s3.destroy();
    },
  };
}
