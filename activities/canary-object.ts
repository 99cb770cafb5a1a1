/**
 * Keeps Berth's canary object in the bucket: written once, with the same bytes every time (DuckDB
 * over a fixed range), so that any number of workers may ensure it at once.
 */
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { HeadObjectCommand, NotFound, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { DuckDBInstance } from '@duckdb/node-api';
import { CANARY_OBJECT_KEY, CANARY_ROWS } from '../core/identifiers.js';
import { sqlString, withConnection } from '../services/common/duckdb.js';

export async function ensureCanaryObject(deps: {
  s3: S3Client;
  bucket: string;
  duckdb: DuckDBInstance;
  workDir: string;
}): Promise<void> {
  try {
    await deps.s3.send(new HeadObjectCommand({ Bucket: deps.bucket, Key: CANARY_OBJECT_KEY }));
    return;
  } catch (error) {
    if (
      !(error instanceof NotFound) &&
      (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode !== 404
    )
      throw error;
  }
  const file = path.join(deps.workDir, `canary-${process.pid}-${Date.now()}.parquet`);
  try {
    await withConnection(deps.duckdb, (c) =>
      c.run(`COPY (SELECT range AS n FROM range(${CANARY_ROWS})) TO ${sqlString(file)} (FORMAT parquet)`),
    );
    await deps.s3.send(
      new PutObjectCommand({ Bucket: deps.bucket, Key: CANARY_OBJECT_KEY, Body: await readFile(file) }),
    );
  } finally {
    await rm(file, { force: true });
  }
}
