/** What the cluster benchmarks share: the embedded cluster on free ports, and segments loaded straight into it. */
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import {
  s3IdentitiesFile,
  startEmbeddedCluster,
  tokenFile,
  type EmbeddedCluster,
  type EmbeddedClusterOptions,
} from '../cli/embedded/cluster.js';
import { readS3Credentials } from '../cli/embedded/s3-server.js';
import { segmentObjectKey } from '../core/identifiers.js';
import { TIMELESS } from '../core/time-bounds.js';
import { createS3Client } from '../services/common/s3-client.js';
import { MetaClient, type ColumnSpec } from '../services/meta/client.js';

export interface BenchCluster {
  cluster: EmbeddedCluster;
  meta: MetaClient;
  /**
   * Uploads Parquet files as level-0 segments of `table` and commits them, as ingest would; the
   * table's columns are the first file's schema, its timestamp column `ts` unless `timeless` (a
   * dimension table, whose segments span all of time). Resolves with those columns.
   */
  load(table: string, files: string[], options?: { timeless?: boolean }): Promise<ColumnSpec[]>;
  stop(): Promise<void>;
}

export async function startBenchCluster(
  dataDir: string,
  vcpus: number[],
  cacheBytes: number,
  heavy?: EmbeddedClusterOptions['heavy'],
  verdict?: EmbeddedClusterOptions['verdict'],
): Promise<BenchCluster> {
  await rm(dataDir, { recursive: true, force: true });
  const cluster = await startEmbeddedCluster({
    dataDir,
    vcpus,
    cacheBytes,
    temporalPort: 0,
    temporalUiPort: 0,
    s3Port: 0,
    metaPort: 0,
    coordinatorPort: 0,
    postgresPort: 0,
    controllerPort: 0,
    bucket: 'berth-bench',
    heavy,
    verdict,
    log: (line) => console.error(`cluster: ${line}`),
  });
  const meta = new MetaClient(cluster.endpoints.meta, (await readFile(tokenFile(dataDir), 'utf8')).trim());
  const s3 = createS3Client({
    endpoint: cluster.endpoints.s3,
    credentials: await readS3Credentials(s3IdentitiesFile(dataDir)),
  });
  const duckdb = await DuckDBInstance.create(':memory:');
  return {
    cluster,
    meta,
    load: async (table, files, { timeless = false } = {}) => {
      const c = await duckdb.connect();
      try {
        const described = await c.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${files[0]}')`);
        const columns = described.getRows().map((r) => ({ name: String(r[0]), type: String(r[1]) }));
        await meta.ensureTable({ name: table, timestampColumn: timeless ? null : 'ts', columns });
        const span = timeless
          ? `${TIMELESS.minTs}, ${TIMELESS.maxTs}`
          : 'epoch_ms(min(ts)), ceil(epoch_us(max(ts)) / 1000)';
        for (const file of files) {
          const id = `${table}-l0-${path.basename(file, '.parquet')}`;
          const [rows, minTs, maxTs] = (await c.runAndReadAll(`SELECT count(*), ${span} FROM read_parquet('${file}')`))
            .getRows()[0]!
            .map(Number);
          await s3.send(
            new PutObjectCommand({
              Bucket: 'berth-bench',
              Key: segmentObjectKey(table, id),
              Body: await readFile(file),
            }),
          );
          await meta.commitSegment({
            id,
            table,
            minTs: minTs!,
            maxTs: maxTs!,
            rows: rows!,
            bytes: (await stat(file)).size,
            level: 0,
          });
        }
        return columns;
      } finally {
        c.closeSync();
      }
    },
    stop: async () => {
      duckdb.closeSync();
      s3.destroy();
      await cluster.stop();
    },
  };
}
