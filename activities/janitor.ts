/**
 * Activities of the janitor: delete the objects of retired segments once in-flight queries can no
 * longer need them, and objects that were uploaded but never committed. Nothing active is touched:
 * an object is deleted only when the manifest says its segment is retired, or does not know it.
 */
import { DeleteObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { segmentObjectKey } from '../core/identifiers.js';
import type { MetaClient } from '../services/meta/client.js';
import { runLongStep } from './heartbeat.js';

export interface JanitorActivityDeps {
  s3: S3Client;
  bucket: string;
  meta: MetaClient;
  /** @default Date.now */
  now?: () => number;
}

const SEGMENT_KEY = /^tables\/([^/]+)\/([^/]+)\.parquet$/;

export const createJanitorActivities = (deps: JanitorActivityDeps) => {
  const now = deps.now ?? Date.now;
  return {
    /** Deletes retired segments' objects retired more than `graceMs` ago, then forgets them. */
    async deleteRetiredSegments(input: { graceMs: number }): Promise<string[]> {
      return await runLongStep(async ({ signal, progress }) => {
        const deleted: string[] = [];
        const retired = await deps.meta.listRetired(now() - input.graceMs);
        for (const segment of retired) {
          await deps.s3.send(
            new DeleteObjectCommand({ Bucket: deps.bucket, Key: segmentObjectKey(segment.table, segment.id) }),
            { abortSignal: signal },
          );
          await deps.meta.forgetSegment(segment.id);
          deleted.push(segment.id);
          progress({ deleted: deleted.length, of: retired.length });
        }
        return deleted;
      });
    },

    /** Deletes segment objects older than `graceMs` that the manifest does not know (uploads never committed). */
    async deleteOrphanObjects(input: { graceMs: number }): Promise<string[]> {
      return await runLongStep(async ({ signal, progress }) => {
        const deleted: string[] = [];
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
          for (const object of old) {
            if (known.has(SEGMENT_KEY.exec(object.Key!)![2]!)) continue;
            await deps.s3.send(new DeleteObjectCommand({ Bucket: deps.bucket, Key: object.Key }), {
              abortSignal: signal,
            });
            deleted.push(object.Key!);
          }
          progress({ listed, deleted: deleted.length });
          token = page.IsTruncated ? page.NextContinuationToken : undefined;
        } while (token);
        return deleted;
      });
    },
  };
};

export type JanitorActivities = ReturnType<typeof createJanitorActivities>;
