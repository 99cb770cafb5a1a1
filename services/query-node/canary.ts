/**
 * The canary scan: this node reads Berth's canary object from storage — never from its cache — and
 * counts its rows with its own DuckDB. A backend that heartbeats but cannot reach storage or scan
 * fails here, which is what the heavy pool's last readiness layer needs to know.
 */
import { createWriteStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomUUID } from 'node:crypto';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { DuckDBInstance } from '@duckdb/node-api';
import { CANARY_OBJECT_KEY } from '../../core/identifiers.js';
import { sqlString, withConnection } from '../common/duckdb.js';
import type { CanaryResult } from './api.js';

export type { CanaryResult };

export async function runCanary(deps: {
  s3: S3Client;
  bucket: string;
  duckdb: DuckDBInstance;
  scratchDir: string;
}): Promise<CanaryResult> {
  const started = performance.now();
  const file = path.join(deps.scratchDir, `canary-${randomUUID()}.parquet`);
  try {
    const response = await deps.s3.send(new GetObjectCommand({ Bucket: deps.bucket, Key: CANARY_OBJECT_KEY }));
    await pipeline(response.Body as Readable, createWriteStream(file, { mode: 0o600 }));
    const { size } = await stat(file);
    const rows = await withConnection(deps.duckdb, async (c) =>
      Number((await c.runAndReadAll(`SELECT count(*) FROM read_parquet(${sqlString(file)})`)).getRows()[0]![0]),
    );
    return { rows, bytes: size, ms: Math.round(performance.now() - started) };
  } finally {
    await rm(file, { force: true });
  }
}
