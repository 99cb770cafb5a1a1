/** One DuckDB over exactly the Parquet objects a test cluster's manifest lists: the answer Berth must give. */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import { segmentObjectKey } from '../../core/identifiers.js';
import { createS3Client } from '../../services/common/s3-client.js';
import { readJsonResult, type JsonResult } from '../../services/common/final-stage/result-json.js';
import type { TestCluster } from './cluster.js';

export interface Reference {
  /**
   * The reference's answer, or DuckDB's error. `everyRow` runs it without statistics propagation,
   * by which DuckDB proves an expression's value from a column's range and never evaluates it.
   */
  run(sql: string, options?: { everyRow?: boolean }): Promise<{ result: JsonResult } | { error: string }>;
  close(): void;
}

export async function referenceFor(cluster: TestCluster, tables: string[]): Promise<Reference> {
  const s3 = createS3Client(cluster.s3);
  const dir = path.join(cluster.dir, `reference-${Date.now()}`);
  await mkdir(dir);
  const instance = await DuckDBInstance.create(':memory:');
  const setup = await instance.connect();
  try {
    for (const table of tables) {
      const files: string[] = [];
      for (const segment of await cluster.meta.listSegments(table)) {
        const object = await s3.send(
          new GetObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey(table, segment.id) }),
        );
        const file = path.join(dir, `${segment.id}.parquet`);
        await writeFile(file, await object.Body!.transformToByteArray());
        files.push(file);
      }
      // By name: segments written before a column was added lack it (schema evolution).
      await setup.run(
        `CREATE VIEW ${table} AS SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}], union_by_name = true)`,
      );
    }
  } finally {
    setup.closeSync();
    s3.destroy();
  }
  return {
    run: async (sql, options) => {
      const c = await instance.connect();
      try {
        if (options?.everyRow) await c.run(`SET disabled_optimizers = 'statistics_propagation'`);
        return { result: await readJsonResult(await c.stream(sql)) };
      } catch (error) {
        return { error: (error as Error).message };
      } finally {
        c.closeSync();
      }
    },
    close: () => instance.closeSync(),
  };
}
