/**
 * Activities of the janitor: delete the objects of retired segments once in-flight queries can no
 * longer need them, objects that were uploaded but never committed, and multipart uploads never
 * finished (a worker killed mid-merge leaves its parts behind, billed but never listed as objects).
 * Nothing active is touched: an object is deleted only when the manifest says its segment is
 * retired, or does not know it; an upload only once it is a day old and older than the grace time.
 *
 * A retired segment's row outlives its object: meta keeps it (retired, its object recorded as gone)
 * for its dedup window after the retirement, so that a batch sent again in that time commits
 * nothing, and deletes it when the janitor asks it to purge once the window has passed.
 */
import {
  AbortMultipartUploadCommand,
  DeleteObjectsCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Context } from '@temporalio/activity';
import { segmentObjectKey } from '../core/identifiers.js';
import type { MetaClient } from '../services/meta/client.js';
import { JANITOR_SWEEP_NAMED, type JanitorSweep } from '../workflows/contracts/janitor.js';
import { runLongStep } from './heartbeat.js';

export interface JanitorActivityDeps {
  s3: S3Client;
  bucket: string;
  meta: MetaClient;
  /** @default Date.now */
  now?: () => number;
}

const SEGMENT_KEY = /^tables\/([^/]+)\/([^/]+)\.parquet$/;
/**
 * The youngest a multipart upload is aborted at, whatever the grace time: a day, far past the 30
 * minutes a merge step may upload for (as S3's own AbortIncompleteMultipartUpload rules are set).
 */
export const UNFINISHED_UPLOAD_MIN_AGE_MS = 86_400_000;
/** Rows one purge call deletes at most: each call is one short write on meta's store. */
const PURGE_BATCH = 1_000;
/** The most keys one DeleteObjects call takes (S3's limit). */
const DELETE_BATCH = 1_000;
/** Retired segments taken per round: one listing, one DeleteObjects and one forget call. */
const RETIRED_BATCH = DELETE_BATCH;

/** Deletes these keys, DELETE_BATCH per call; a key already gone counts as deleted. */
async function deleteKeys(s3: S3Client, bucket: string, keys: string[], signal: AbortSignal): Promise<void> {
  for (let i = 0; i < keys.length; i += DELETE_BATCH) {
    const objects = keys.slice(i, i + DELETE_BATCH).map((Key) => ({ Key }));
    const answer = await s3.send(
      new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: objects, Quiet: true } }),
      { abortSignal: signal },
    );
    const failed = answer.Errors?.[0];
    if (failed) throw new Error(`S3 did not delete ${failed.Key}: ${failed.Code} ${failed.Message ?? ''}`.trim());
  }
}

/** The sweep so far: what the last heartbeat of an earlier attempt carried, or nothing yet. */
function sweepSoFar(): JanitorSweep {
  const details = Context.current().info.heartbeatDetails as { sweep?: JanitorSweep } | undefined;
  return details?.sweep
    ? { deleted: details.sweep.deleted, first: [...details.sweep.first] }
    : { deleted: 0, first: [] };
}

/** Counts `names` as deleted, naming the first few. */
function tally(sweep: JanitorSweep, names: string[]): void {
  sweep.deleted += names.length;
  sweep.first.push(...names.slice(0, JANITOR_SWEEP_NAMED - sweep.first.length));
}

export const createJanitorActivities = (deps: JanitorActivityDeps) => {
  const now = deps.now ?? Date.now;
  return {
    /**
     * Deletes retired segments' objects retired more than `graceMs` ago and records them gone
     * (their rows stay for meta's dedup window), a thousand at a time, then has meta delete the
     * rows past that window. Each round lists what is left, so a retry starts where the last
     * attempt stopped, and counts on from what its last heartbeat said.
     */
    async deleteRetiredSegments(input: { graceMs: number }): Promise<JanitorSweep> {
      return await runLongStep(async ({ signal, progress, checkpoint }) => {
        const sweep = sweepSoFar();
        const before = now() - input.graceMs;
        for (let listed = RETIRED_BATCH; listed === RETIRED_BATCH;) {
          signal.throwIfAborted();
          const retired = await deps.meta.listRetired(before, RETIRED_BATCH);
          listed = retired.length;
          if (listed === 0) break;
          // An attached object is not Berth's to delete: its segment is forgotten, the object stays.
          const ours = retired.filter((s) => !s.object).map((s) => segmentObjectKey(s.table, s.id));
          await deleteKeys(deps.s3, deps.bucket, ours, signal);
          const ids = retired.map((s) => s.id);
          await deps.meta.forgetSegments(ids);
          tally(sweep, ids);
          checkpoint({ sweep });
        }
        let purged = 0;
        for (let batch = PURGE_BATCH; batch === PURGE_BATCH;) {
          signal.throwIfAborted();
          batch = await deps.meta.purgeRetired(PURGE_BATCH);
          purged += batch;
          progress({ sweep, purged });
        }
        return sweep;
      });
    },

    /**
     * Deletes segment objects older than `graceMs` that the manifest does not know (uploads never
     * committed), and aborts multipart uploads of segments begun more than `graceMs` ago, and at
     * least UNFINISHED_UPLOAD_MIN_AGE_MS (uploads never finished: their parts go). Counts the keys
     * of both, on from what the last heartbeat of an earlier attempt said.
     */
    async deleteOrphanObjects(input: { graceMs: number }): Promise<JanitorSweep> {
      return await runLongStep(async ({ signal, checkpoint }) => {
        const sweep = sweepSoFar();
        let listed = 0;
        let token: string | undefined;
        do {
          const page = await deps.s3.send(
            new ListObjectsV2Command({ Bucket: deps.bucket, Prefix: 'tables/', ContinuationToken: token }),
            { abortSignal: signal },
          );
          listed += page.KeyCount ?? 0;
          const old = (page.Contents ?? []).filter(
            (o) => o.Key && SEGMENT_KEY.test(o.Key) && (o.LastModified?.getTime() ?? now()) < now() - input.graceMs,
          );
          const ids = old.map((o) => SEGMENT_KEY.exec(o.Key!)![2]!);
          const known = new Set(ids.length > 0 ? await deps.meta.knownSegments(ids) : []);
          const orphans = old.map((o) => o.Key!).filter((key) => !known.has(SEGMENT_KEY.exec(key)![2]!));
          await deleteKeys(deps.s3, deps.bucket, orphans, signal);
          tally(sweep, orphans);
          checkpoint({ listed, sweep });
          token = page.IsTruncated ? page.NextContinuationToken : undefined;
        } while (token);
        // A live upload is never aborted: only one begun before a merge or a delete could still be on it.
        const abandonedBefore = now() - Math.max(input.graceMs, UNFINISHED_UPLOAD_MIN_AGE_MS);
        let keyMarker: string | undefined;
        let uploadIdMarker: string | undefined;
        for (;;) {
          const page = await deps.s3.send(
            new ListMultipartUploadsCommand({
              Bucket: deps.bucket,
              Prefix: 'tables/',
              KeyMarker: keyMarker,
              UploadIdMarker: uploadIdMarker,
            }),
            { abortSignal: signal },
          );
          for (const upload of page.Uploads ?? []) {
            if (!upload.Key || !upload.UploadId || !SEGMENT_KEY.test(upload.Key)) continue;
            if ((upload.Initiated?.getTime() ?? now()) >= abandonedBefore) continue;
            try {
              await deps.s3.send(
                new AbortMultipartUploadCommand({ Bucket: deps.bucket, Key: upload.Key, UploadId: upload.UploadId }),
                { abortSignal: signal },
              );
            } catch (error) {
              if ((error as Error).name !== 'NoSuchUpload') throw error; // finished or aborted meanwhile
              continue;
            }
            tally(sweep, [upload.Key]);
          }
          checkpoint({ listed, sweep });
          // A store whose markers do not move on would list the same page forever.
          if (!page.IsTruncated || (page.NextKeyMarker === keyMarker && page.NextUploadIdMarker === uploadIdMarker))
            break;
          keyMarker = page.NextKeyMarker;
          uploadIdMarker = page.NextUploadIdMarker;
        }
        return sweep;
      });
    },
  };
};

export type JanitorActivities = ReturnType<typeof createJanitorActivities>;
