/**
 * Activities of the merge workflows. Each is idempotent: the merged segment's id is derived from
 * its inputs, so a retried merge writes the same object, and meta's swap commits it once. The long
 * ones (merge, push) heartbeat with their progress, keep the merge's lease alive while they run,
 * and stop their downloads, DuckDB query, upload or push as soon as they are cancelled.
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { DuckDBInstance } from '@duckdb/node-api';
import pLimit from 'p-limit';
import { partitionOf, quoteIdent, segmentId, segmentObjectKey } from '../core/identifiers.js';
import { Placement } from '../core/ownership.js';
import { sqlString, withConnection } from '../services/common/duckdb.js';
import { ServiceCallError } from '../services/common/http-client.js';
import type { Fence, MetaClient, Segment, SegmentRow } from '../services/meta/client.js';
import { pushToNode } from '../services/query-node/client.js';
import { runLongStep, type KeptLease, type LongStep } from './heartbeat.js';
import { LEASE_LOST, LOST_MERGE_RACE, MERGE_REFUSED } from '../workflows/api.js';

export interface MergeActivityDeps {
  s3: S3Client;
  bucket: string;
  meta: MetaClient;
  token: string;
  /** DuckDB confined to `workDir`. */
  duckdb: DuckDBInstance;
  workDir: string;
  /** The group whose owners receive merged segments. @default 'serving' */
  group?: string;
}


/** A merge's lease, as the workflow holds it. */
export interface MergeLease {
  name: string;
  holder: string;
  ttlMs: number;
}

export { partitionOf };

/** The merged segment's id: a function of its table, partition, level and inputs only. */
export function mergedSegmentId(table: string, partition: string, level: number, inputs: string[]): string {
  const digest = createHash('sha256').update([...inputs].sort().join('\n')).digest('hex').slice(0, 20);
  return segmentId(table, level, partition, digest);
}

export const createMergeActivities = (deps: MergeActivityDeps) => ({
  /** Takes (or renews) a lease; says who holds it when it is not granted, and its fencing token when it is. */
  async acquireLease(input: { name: string; holder: string; ttlMs: number }): Promise<{ granted: boolean; holder: string; expiresAt: number; token: number }> {
    const { granted, lease } = await deps.meta.acquireLease(input.name, input.holder, input.ttlMs);
    return { granted, holder: lease.holder, expiresAt: lease.expiresAt, token: lease.token };
  },

  async releaseLease(input: { name: string; holder: string }): Promise<boolean> {
    return await deps.meta.releaseLease(input.name, input.holder);
  },

  /** Active segments of one level and partition, oldest first, at most `maxInputs`. */
  async pickMergeInputs(input: { table: string; partition: string; level: number; maxInputs: number }): Promise<SegmentRow[]> {
    const segments = await deps.meta.listSegments(input.table);
    return segments
      .filter((s) => s.level === input.level && partitionOf(s.minTs) === input.partition)
      .sort((a, b) => a.minTs - b.minTs || a.id.localeCompare(b.id))
      .slice(0, input.maxInputs);
  },

  /** Partitions of a table holding at least `minInputs` active segments of `level`. */
  async listMergeablePartitions(input: { table: string; level: number; minInputs: number }): Promise<string[]> {
    const counts = new Map<string, number>();
    for (const s of await deps.meta.listSegments(input.table)) {
      if (s.level === input.level) counts.set(partitionOf(s.minTs), (counts.get(partitionOf(s.minTs)) ?? 0) + 1);
    }
    return [...counts].filter(([, n]) => n >= input.minInputs).map(([p]) => p).sort();
  },

  /** Downloads the inputs, merges them with DuckDB into one Parquet sorted by time, and uploads it. */
  async mergeSegments(input: { table: string; partition: string; level: number; inputs: string[]; lease?: MergeLease }): Promise<Segment> {
    return await runLongStep((step) => merge(deps, input, step), { lease: input.lease && keptLease(deps.meta, input.lease) });
  },

  /** Pushes a segment into its owner's cache. Declined or failed only means a cold first read. */
  async pushToOwner(input: { table: string; segmentId: string; lease?: MergeLease }): Promise<{ owner: string | null; accepted: boolean; reason?: string }> {
    return await runLongStep((step) => push(deps, input, step), { lease: input.lease && keptLease(deps.meta, input.lease) });
  },

  /**
   * Swaps the inputs for the merged segment in the manifest, atomically and once; fenced, only while
   * the merge's lease is still its own. Only inputs another merge retired first are a lost race; a
   * merged id already committed with other contents means the merge is not deterministic, a bug
   * that must fail the workflow rather than pass as a race.
   */
  async commitMerge(input: { inputs: string[]; merged: Segment; fence?: Fence }): Promise<void> {
    try {
      await deps.meta.swapSegments(input.inputs, input.merged, input.fence);
    } catch (error) {
      if (!(error instanceof ServiceCallError) || error.status >= 500) throw error;
      const message = error.body?.message ?? error.message;
      if (error.code === 'segment_retired') throw ApplicationFailure.nonRetryable(message, LOST_MERGE_RACE);
      if (error.code === 'lease_lost') throw ApplicationFailure.nonRetryable(message, LEASE_LOST);
      if (error.code === 'segment_exists') {
        throw ApplicationFailure.nonRetryable(
          `merged segment ${input.merged.id} is already committed with different contents: the same inputs merged to different bytes, so the merge is not deterministic (${message})`,
          MERGE_REFUSED,
        );
      }
      throw ApplicationFailure.nonRetryable(`meta refused the swap for ${input.merged.id} (${error.code ?? error.status}): ${message}`, MERGE_REFUSED);
    }
  },
});

export type MergeActivities = ReturnType<typeof createMergeActivities>;

/** Renewed every third of its TTL, so that two renewals can fail before it runs out. */
const keptLease = (meta: MetaClient, lease: MergeLease): KeptLease => ({
  name: lease.name,
  everyMs: Math.max(100, Math.floor(lease.ttlMs / 3)),
  renew: async () => (await meta.acquireLease(lease.name, lease.holder, lease.ttlMs)).granted,
});

async function merge(deps: MergeActivityDeps, input: { table: string; partition: string; level: number; inputs: string[] }, step: LongStep): Promise<Segment> {
  const { signal } = step;
  const table = await deps.meta.findTable(input.table);
  if (!table) throw ApplicationFailure.nonRetryable(`table "${input.table}" does not exist`, 'UnknownTable');
  const id = mergedSegmentId(input.table, input.partition, input.level + 1, input.inputs);
  const dir = path.join(deps.workDir, `merge-${id}-${Context.current().info.attempt}`);
  await mkdir(dir, { recursive: true });
  try {
    const limit = pLimit(8);
    let downloaded = 0;
    let downloadedBytes = 0;
    step.progress({ step: 'download', segments: 0, of: input.inputs.length });
    const files = await Promise.all(
      input.inputs.map((segment) =>
        limit(async () => {
          const object = await deps.s3.send(new GetObjectCommand({ Bucket: deps.bucket, Key: segmentObjectKey(input.table, segment) }), { abortSignal: signal });
          const file = path.join(dir, `${segment}.parquet`);
          await pipeline(object.Body as Readable, createWriteStream(file), { signal });
          downloadedBytes += object.ContentLength ?? 0;
          step.progress({ step: 'download', segments: ++downloaded, of: input.inputs.length, bytes: downloadedBytes });
          return file;
        }),
      ),
    );
    step.progress({ step: 'merge', segments: files.length, bytes: downloadedBytes });
    const out = path.join(dir, `${id}.parquet`);
    // Every column in the order: the same inputs always give the same bytes.
    const order = [table.timestampColumn, ...table.columns.map((c) => c.name).filter((n) => n !== table.timestampColumn)].map(quoteIdent).join(', ');
    const ts = quoteIdent(table.timestampColumn);
    const stats = await withConnection(
      deps.duckdb,
      async (c) => {
        await c.run(`CREATE TEMP VIEW inputs AS SELECT * FROM read_parquet([${files.map(sqlString).join(', ')}])`);
        await c.run(`COPY (SELECT * FROM inputs ORDER BY ${order}) TO ${sqlString(out)} (FORMAT parquet)`);
        const [rows, minTs, maxTs] = (await c.runAndReadAll(`SELECT count(*), epoch_ms(min(${ts})), ceil(epoch_us(max(${ts})) / 1000) FROM read_parquet(${sqlString(out)})`)).getRows()[0]!;
        return { rows: Number(rows), minTs: Number(minTs), maxTs: Number(maxTs) };
      },
      signal,
    );
    const { size } = await stat(out);
    step.progress({ step: 'upload', segment: id, bytes: size, rows: stats.rows });
    await deps.s3.send(new PutObjectCommand({ Bucket: deps.bucket, Key: segmentObjectKey(input.table, id), Body: await readFile(out, { signal }) }), { abortSignal: signal });
    return { id, table: input.table, level: input.level + 1, bytes: size, ...stats };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function push(deps: MergeActivityDeps, input: { table: string; segmentId: string }, step: LongStep): Promise<{ owner: string | null; accepted: boolean; reason?: string }> {
  const { signal } = step;
  const members = await deps.meta.members(deps.group ?? 'serving');
  const owner = new Placement(members.map((m) => ({ id: m.id, weight: m.weight }))).owner(input.segmentId);
  const member = owner && members.find((m) => m.id === owner.id);
  if (!member) return { owner: null, accepted: false, reason: 'no live query node' };
  try {
    step.progress({ step: 'read', segment: input.segmentId, owner: member.id });
    const object = await deps.s3.send(new GetObjectCommand({ Bucket: deps.bucket, Key: segmentObjectKey(input.table, input.segmentId) }), { abortSignal: signal });
    const body = Buffer.from(await object.Body!.transformToByteArray());
    step.progress({ step: 'push', segment: input.segmentId, owner: member.id, bytes: body.length });
    const result = await pushToNode(member.url, input.table, input.segmentId, body, deps.token, 30_000, signal);
    return { owner: member.id, accepted: result.accepted, ...(result.reason ? { reason: result.reason } : {}) };
  } catch (error) {
    if (signal.aborted) throw signal.reason; // stopped, not declined
    return { owner: member.id, accepted: false, reason: (error as Error).message };
  }
}
