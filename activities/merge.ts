/**
 * Activities of the merge workflows. Each is idempotent: the merged segment's id is derived from
 * its inputs, so a retried merge writes the same object, and meta's swap commits it once. The long
 * ones heartbeat with their progress, keep the merge's lease alive while they run, and stop their
 * downloads, DuckDB query, upload or push as soon as they are cancelled.
 *
 * `mergePushAndCommit` is the merge in one step, its I/O overlapped: inputs fetched in parallel,
 * then merged by DuckDB (loading each into DuckDB as it landed was measured slower: see
 * BENCHMARKS.md); the merged file uploaded by multipart and pushed to its owner as DuckDB writes
 * it, both read from that file
 * (segment-publish.ts: the worker holds a bounded window of it, never the whole segment, and
 * nothing is published before the file is final and checked); then swapped in. Its heartbeats
 * carry what is done, so a retry resumes after the upload (or returns at once after the swap)
 * instead of merging again. The separate merge, push and commit activities remain for runs
 * started before it (see the workflow's patch).
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { S3Profiles } from '../services/common/s3-client.js';
import { SegmentObjects } from '../services/common/segment-objects.js';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { DuckDBInstance } from '@duckdb/node-api';
import pLimit from 'p-limit';
import { partitionOf, quoteIdent, segmentId, segmentObjectKey } from '../core/identifiers.js';
import { Placement } from '../core/ownership.js';
import { epochMsSql, TIMELESS } from '../core/time-bounds.js';
import { DEFAULT_SERVING_GROUP } from '../services/common/config.js';
import { sqlString, withConnection } from '../services/common/duckdb.js';
import { ServiceCallError } from '../services/common/http-client.js';
import { columnsDisagree, describe, segmentShapes } from '../services/common/parquet-columns.js';
import { segmentsSql } from '../services/common/scanner.js';
import type { Fence, MetaClient, Segment, SegmentRow } from '../services/meta/client.js';
import { QueryNodeClient } from '../services/query-node/client.js';
import { runLongStep, type KeptLease, type LongStep } from './heartbeat.js';
import { followedFileOnceBegun, uploadSegmentFile } from './segment-publish.js';
import { LEASE_LOST, LOST_MERGE_RACE, MERGE_REFUSED, SEGMENT_DISAGREES } from '../workflows/contracts/segment-merge.js';

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
  /** Named S3 endpoints for the buckets of attached segments (a delete, or a merge adopting them, reads them where they lie). */
  profiles?: S3Profiles;
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
  const digest = createHash('sha256')
    .update([...inputs].sort().join('\n'))
    .digest('hex')
    .slice(0, 20);
  return segmentId(table, level, partition, digest);
}

/** Where a merge's segment went: its owner, and whether the owner took it into its cache. */
export interface PushOutcome {
  owner: string | null;
  accepted: boolean;
  reason?: string;
}

/** Which inputs to merge: active segments of one level and partition, oldest first, at most `maxInputs`. */
export interface MergePick {
  table: string;
  partition: string;
  level: number;
  maxInputs: number;
}

/** What `mergePushAndCommit`'s heartbeats carry, and so what its next attempt finds done. */
interface MergeStepDetails {
  step: string;
  /** Set once the merged object is uploaded. */
  merged?: Segment;
  /** Set once the push has an answer. */
  push?: PushOutcome;
  /** Set once the swap is committed. */
  committed?: boolean;
  [detail: string]: unknown;
}

export const createMergeActivities = (deps: MergeActivityDeps) => ({
  /**
   * Takes (or renews) a lease; says who holds it when it is not granted, and its fencing token when
   * it is. With `pick`, a granted lease also returns the inputs to merge (one round trip, not two).
   */
  async acquireLease(input: {
    name: string;
    holder: string;
    ttlMs: number;
    pick?: MergePick;
  }): Promise<{ granted: boolean; holder: string; expiresAt: number; token: number; inputs?: SegmentRow[] }> {
    const { granted, lease } = await deps.meta.acquireLease(input.name, input.holder, input.ttlMs);
    const taken = { granted, holder: lease.holder, expiresAt: lease.expiresAt, token: lease.token };
    return granted && input.pick ? { ...taken, inputs: await pickInputs(deps, input.pick) } : taken;
  },

  async releaseLease(input: { name: string; holder: string }): Promise<boolean> {
    return await deps.meta.releaseLease(input.name, input.holder);
  },

  /** Active segments of one level and partition, oldest first, at most `maxInputs`. */
  async pickMergeInputs(input: MergePick): Promise<SegmentRow[]> {
    return await pickInputs(deps, input);
  },

  /** Partitions of a table holding at least `minInputs` active segments of `level`. */
  async listMergeablePartitions(input: { table: string; level: number; minInputs: number }): Promise<string[]> {
    const counts = new Map<string, number>();
    for (const s of await deps.meta.listSegments(input.table)) {
      if (s.level === input.level && mergeable(s))
        counts.set(partitionOf(s.minTs), (counts.get(partitionOf(s.minTs)) ?? 0) + 1);
    }
    return [...counts]
      .filter(([, n]) => n >= input.minInputs)
      .map(([p]) => p)
      .sort();
  },

  /**
   * The whole merge: downloads the inputs, merges them with DuckDB into one Parquet sorted by time,
   * uploads it while pushing the same bytes into its owner's cache, then swaps it for its inputs in
   * the manifest (fenced, as `commitMerge`). A declined or failed push only means a cold first read.
   */
  async mergePushAndCommit(
    input: MergeInputs & { lease?: MergeLease; fence?: Fence },
  ): Promise<{ merged: Segment; push: PushOutcome }> {
    return await runLongStep((step) => mergePushCommit(deps, input, step), {
      lease: input.lease && keptLease(deps.meta, input.lease),
    });
  },

  /** Downloads the inputs, merges them with DuckDB into one Parquet sorted by time, and uploads it. */
  async mergeSegments(input: MergeInputs & { lease?: MergeLease }): Promise<Segment> {
    return await runLongStep((step) => mergeAndUpload(deps, input, step), {
      lease: input.lease && keptLease(deps.meta, input.lease),
    });
  },

  /** Pushes a segment into its owner's cache, read back from storage. Declined or failed only means a cold first read. */
  async pushToOwner(input: { table: string; segmentId: string; lease?: MergeLease }): Promise<PushOutcome> {
    return await runLongStep(
      (step) => {
        step.progress({ step: 'read back and push', segment: input.segmentId });
        return pushSegment(
          deps,
          input.table,
          input.segmentId,
          () => readObject(deps, input.table, input.segmentId, step.signal),
          step.signal,
        );
      },
      { lease: input.lease && keptLease(deps.meta, input.lease) },
    );
  },

  /** Swaps the inputs for the merged segment in the manifest (see commit below). */
  async commitMerge(input: { inputs: string[]; merged: Segment; fence?: Fence }): Promise<void> {
    await commit(deps, input.inputs, input.merged, input.fence);
  },
});

interface MergeInputs {
  table: string;
  partition: string;
  level: number;
  inputs: string[];
}

export type MergeActivities = ReturnType<typeof createMergeActivities>;

/** Renewed every third of its TTL, so that two renewals can fail before it runs out. */
const keptLease = (meta: MetaClient, lease: MergeLease): KeptLease => ({
  name: lease.name,
  everyMs: Math.max(100, Math.floor(lease.ttlMs / 3)),
  renew: async () => (await meta.acquireLease(lease.name, lease.holder, lease.ttlMs)).granted,
});

/** Berth merges its own segments, and attached objects only when attached to be adopted (`--adopt`). */
const mergeable = (segment: SegmentRow): boolean => segment.object === undefined || segment.object.adopt === true;

async function pickInputs(deps: MergeActivityDeps, pick: MergePick): Promise<SegmentRow[]> {
  return (await deps.meta.listSegments(pick.table))
    .filter((s) => s.level === pick.level && partitionOf(s.minTs) === pick.partition && mergeable(s))
    .sort((a, b) => a.minTs - b.minTs || a.id.localeCompare(b.id))
    .slice(0, pick.maxInputs);
}

async function mergePushCommit(
  deps: MergeActivityDeps,
  input: MergeInputs & { fence?: Fence },
  step: LongStep,
): Promise<{ merged: Segment; push: PushOutcome }> {
  // What an earlier attempt finished is not done again.
  const id = mergedSegmentId(input.table, input.partition, input.level + 1, input.inputs);
  const earlier = Context.current().info.heartbeatDetails as MergeStepDetails | undefined;
  const state: MergeStepDetails = earlier?.merged?.id === id ? { ...earlier } : { step: 'download' };
  if (state.committed && state.push) return { merged: state.merged!, push: state.push };

  if (!state.merged) {
    await inWorkDir(deps, `merge-${id}`, async (dir) => {
      // The upload and the push follow the merged file as DuckDB writes it: both stop with the merge.
      const stopped = new AbortController();
      const signal = AbortSignal.any([step.signal, stopped.signal]);
      const file = await mergedFile(dir, id);
      const merging = mergeInto(deps, input, { ...step, signal }, dir, file);
      const uploading = uploadSegmentFile(
        deps.s3,
        deps.bucket,
        { table: input.table, id },
        { file, written: merging },
        signal,
      );
      const pushing = pushSegment(
        deps,
        input.table,
        id,
        () => followedFileOnceBegun(file, merging, signal),
        signal,
        deadlineAfter(merging, PUSH_TIMEOUT_MS),
      );
      try {
        const [merged] = await Promise.all([merging, uploading]);
        state.merged = merged; // uploaded: a retry from here on skips the merge
        step.checkpoint({ ...state, step: 'push' });
        state.push = await pushing;
      } catch (error) {
        stopped.abort(error);
        await Promise.allSettled([merging, uploading, pushing]); // nothing reads the file once it is gone
        throw error;
      }
    });
  } else if (!state.push) {
    step.progress({ ...state, step: 'read back and push' });
    state.push = await pushSegment(
      deps,
      input.table,
      id,
      () => readObject(deps, input.table, id, step.signal),
      step.signal,
    );
  }
  const done = { merged: state.merged!, push: state.push! };
  step.checkpoint({ ...state, step: 'commit' });
  await commit(deps, input.inputs, done.merged, input.fence);
  step.checkpoint({ ...state, step: 'committed', committed: true });
  return done;
}

/** The merge and its upload, in two steps: the push reads the object back (runs started before `mergePushAndCommit`). */
async function mergeAndUpload(deps: MergeActivityDeps, input: MergeInputs, step: LongStep): Promise<Segment> {
  const id = mergedSegmentId(input.table, input.partition, input.level + 1, input.inputs);
  return await inWorkDir(deps, `merge-${id}`, async (dir) => {
    const file = await mergedFile(dir, id);
    const merging = mergeInto(deps, input, step, dir, file);
    const [merged] = await Promise.all([
      merging,
      uploadSegmentFile(deps.s3, deps.bucket, { table: input.table, id }, { file, written: merging }, step.signal),
    ]);
    return merged;
  });
}

/** How long an owner has to take the rest of a pushed segment once all of it is written. */
const PUSH_TIMEOUT_MS = 30_000;

/** A directory of this attempt's own under the work dir, removed once `work` is done. */
async function inWorkDir<T>(deps: MergeActivityDeps, name: string, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = path.join(deps.workDir, `${name}-${Context.current().info.attempt}`);
  await mkdir(dir, { recursive: true });
  try {
    return await work(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The merged segment's file, made empty before DuckDB writes it, so that its readers can follow it from the start. */
async function mergedFile(dir: string, id: string): Promise<string> {
  const file = path.join(dir, `${id}.parquet`);
  await writeFile(file, '', { mode: 0o600 });
  return file;
}

/** Aborts, saying why, `ms` after `settled` settles. */
function deadlineAfter(settled: Promise<unknown>, ms: number): AbortSignal {
  const deadline = new AbortController();
  const start = () =>
    setTimeout(
      () => deadline.abort(new Error(`the owner took no more of it within ${ms} ms of its last byte`)),
      ms,
    ).unref();
  settled.then(start, start);
  return deadline.signal;
}

/**
 * Downloads the inputs into `dir` (8 at a time, each streamed to a file), then has DuckDB write
 * them to `out` as one Parquet sorted by time and every column, with the columns some input holds,
 * and checks it. Resolves with the merged segment once `out` is final.
 */
async function mergeInto(
  deps: MergeActivityDeps,
  input: MergeInputs,
  step: LongStep,
  dir: string,
  out: string,
): Promise<Segment> {
  const { signal } = step;
  const table = await deps.meta.findTable(input.table);
  if (!table) throw ApplicationFailure.nonRetryable(`table "${input.table}" does not exist`, 'UnknownTable');
  const id = mergedSegmentId(input.table, input.partition, input.level + 1, input.inputs);
  const stats = await withConnection(
    deps.duckdb,
    async (c) => {
      const limit = pLimit(8);
      // The first failure stops the rest; nothing leaves here while a GET still writes.
      const failed = new AbortController();
      const stopping = AbortSignal.any([signal, failed.signal]);
      let downloaded = 0;
      let downloadedBytes = 0;
      step.progress({ step: 'download', segments: 0, of: input.inputs.length });
      // An adopted object is read where it lies (and only while unchanged); Berth's own from its bucket.
      const objects = new SegmentObjects({ s3: deps.s3, bucket: deps.bucket }, deps.profiles);
      const landed = await Promise.allSettled(
        input.inputs.map((segment) =>
          limit(async () => {
            stopping.throwIfAborted();
            const { object: attached } = (await deps.meta.getSegment(segment)) ?? {};
            const object = await objects.get(
              { table: input.table, id: segment, ...(attached ? { object: attached } : {}) },
              undefined,
              stopping,
            );
            const file = path.join(dir, `${segment}.parquet`);
            await pipeline(object.Body as Readable, createWriteStream(file), { signal: stopping });
            downloadedBytes += object.ContentLength ?? 0;
            step.progress({
              step: 'download',
              segments: ++downloaded,
              of: input.inputs.length,
              bytes: downloadedBytes,
            });
            return file;
          }).catch((error: unknown) => {
            failed.abort(error);
            throw error;
          }),
        ),
      );
      if (signal.aborted) throw signal.reason;
      if (failed.signal.aborted) throw failed.signal.reason;
      const files = landed.map((l) => (l as PromiseFulfilledResult<string>).value);
      // The columns any input holds, in the table's order (an input written before one was added
      // reads it as NULL): the same inputs always give the same bytes, whatever the table gained since.
      const shapes = await segmentShapes(c, files, table.columns);
      const columns = table.columns.filter((col) => [...shapes.values()].some((s) => !s.lacking.includes(col.name)));
      // Every column in the order, the timestamp first.
      const ts = table.timestampColumn;
      const order = [...(ts === null ? [] : [ts]), ...columns.map((col) => col.name).filter((n) => n !== ts)]
        .map(quoteIdent)
        .join(', ');
      await c.run(`CREATE TEMP VIEW inputs AS ${segmentsSql({ name: input.table, schema: columns, files, shapes })}`);
      step.progress({ step: 'merge, upload and push', segment: id, segments: input.inputs.length });
      // Written in place (no temporary file renamed over it): the upload and the push follow this file.
      await c.run(
        `COPY (SELECT * FROM inputs ORDER BY ${order}) TO ${sqlString(out)} (FORMAT parquet, USE_TMP_FILE false)`,
      );
      const disagreement = columnsDisagree(await describe(c, `read_parquet(${sqlString(out)})`), columns);
      if (disagreement)
        throw ApplicationFailure.nonRetryable(
          `the merged segment ${id} disagrees with table "${input.table}": ${disagreement}`,
          SEGMENT_DISAGREES,
        );
      const range =
        ts === null
          ? `${TIMELESS.minTs}, ${TIMELESS.maxTs}`
          : `${epochMsSql(`min(${quoteIdent(ts)})`, 'floor')}, ${epochMsSql(`max(${quoteIdent(ts)})`, 'ceil')}`;
      const [rows, minTs, maxTs] = (
        await c.runAndReadAll(`SELECT count(*), ${range} FROM read_parquet(${sqlString(out)})`)
      ).getRows()[0]!;
      return { rows: Number(rows), minTs: Number(minTs), maxTs: Number(maxTs) };
    },
    signal,
  );
  const { size } = await stat(out);
  step.progress({ step: 'upload and push', segment: id, bytes: size, rows: stats.rows });
  return { id, table: input.table, level: input.level + 1, bytes: size, ...stats };
}

/** Pushes a segment into its owner's cache. A decline or a failure is an outcome (a cold first read), not an error, unless `signal` stopped it. */
export async function pushSegment(
  deps: MergeActivityDeps,
  table: string,
  segmentId: string,
  body: () => Promise<Buffer | Readable>,
  signal: AbortSignal,
  /** A time limit, or a signal that says when to give up (a push streamed as its file is written). */
  timeout: number | AbortSignal = PUSH_TIMEOUT_MS,
): Promise<PushOutcome> {
  let owner: string | null = null;
  try {
    const members = await deps.meta.members(deps.group ?? DEFAULT_SERVING_GROUP);
    owner = new Placement(members.map((m) => ({ id: m.id, weight: m.weight }))).owner(segmentId)?.id ?? null;
    const member = members.find((m) => m.id === owner);
    if (!member) return { owner: null, accepted: false, reason: 'no live query node' };
    const result = await new QueryNodeClient(member.url, deps.token).push(
      table,
      segmentId,
      await body(),
      typeof timeout === 'number'
        ? { timeoutMs: timeout, signal }
        : { timeoutMs: Infinity, signal: AbortSignal.any([signal, timeout]) },
    );
    return { owner, accepted: result.accepted, ...(result.reason ? { reason: result.reason } : {}) };
  } catch (error) {
    if (signal.aborted) throw signal.reason; // stopped, not declined
    return { owner, accepted: false, reason: (error as Error).message };
  }
}

/** A segment's object, streamed from storage (a push read back from it holds no more than a stream's buffer). */
async function readObject(
  deps: MergeActivityDeps,
  table: string,
  segmentId: string,
  signal: AbortSignal,
): Promise<Readable> {
  const object = await deps.s3.send(
    new GetObjectCommand({ Bucket: deps.bucket, Key: segmentObjectKey(table, segmentId) }),
    { abortSignal: signal },
  );
  return object.Body as Readable;
}

/**
 * Swaps the inputs for the merged segment in the manifest, atomically and once; fenced, only while
 * the merge's lease is still its own. Only inputs another merge retired first are a lost race; a
 * merged id already committed with other contents means the merge is not deterministic, a bug
 * that must fail the workflow rather than pass as a race.
 */
async function commit(
  deps: MergeActivityDeps,
  inputs: string[],
  merged: Segment,
  fence: Fence | undefined,
): Promise<void> {
  try {
    await deps.meta.swapSegments(inputs, merged, fence);
  } catch (error) {
    if (!(error instanceof ServiceCallError) || error.status >= 500) throw error;
    const message = error.body?.message ?? error.message;
    if (error.code === 'segment_retired') throw ApplicationFailure.nonRetryable(message, LOST_MERGE_RACE);
    if (error.code === 'lease_lost') throw ApplicationFailure.nonRetryable(message, LEASE_LOST);
    if (error.code === 'segment_exists') {
      throw ApplicationFailure.nonRetryable(
        `merged segment ${merged.id} is already committed with different contents: the same inputs merged to different bytes, so the merge is not deterministic (${message})`,
        MERGE_REFUSED,
      );
    }
    throw ApplicationFailure.nonRetryable(
      `meta refused the swap for ${merged.id} (${error.code ?? error.status}): ${message}`,
      MERGE_REFUSED,
    );
  }
}
