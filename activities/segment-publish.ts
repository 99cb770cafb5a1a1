/**
 * Publishes a segment file while it is being written: its object uploaded to S3 in parts, and the
 * same bytes pushed into its owner's cache, each read from the local file as the writer appends
 * to it. The upload and the push overlap the write instead of following it, and the worker holds a
 * bounded window of the segment in memory (PUBLISH_MEMORY_BYTES), never the whole of it.
 *
 * The writer must only append to the file it was handed (DuckDB's Parquet writer does: it never
 * seeks back; COPY's USE_TMP_FILE false keeps it on that file), and `written` must settle once the
 * file is final and checked: nothing is published before. Should it reject, the upload is aborted
 * (no object appears) and the push cut short (the owner keeps nothing).
 */
import { watch } from 'node:fs';
import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { segmentObjectKey } from '../core/identifiers.js';

/** A part of the multipart upload (S3's least is 5 MiB but for the last). */
export const UPLOAD_PART_BYTES = 8 * 1024 * 1024;
/** Parts sent at once. */
const UPLOAD_PARTS_IN_FLIGHT = 2;
/** What one read of the file takes, for the upload or the push. */
const READ_BYTES = 1024 * 1024;
/**
 * The most of a segment the worker holds while it publishes it. The upload joins reads into a
 * part once it has more than a part's bytes, so each buffer it joins is a part and one read long,
 * and it keeps that buffer while any of it is unsent: the parts in flight (each counted twice, for
 * what the S3 client's request may hold of it while it sends), the one it gathers and the copy it
 * joins them into; then the reads queued for each of the two readers. 62 MiB.
 */
export const PUBLISH_MEMORY_BYTES =
  (2 * UPLOAD_PARTS_IN_FLIGHT + 2) * (UPLOAD_PART_BYTES + READ_BYTES) + 8 * READ_BYTES;

/**
 * The file's bytes as a writer appends them, from the start; done once `written` has resolved and
 * every byte up to the file's final size is read. Waits on the file's change events, not a clock.
 */
export async function* followFile(
  file: string,
  written: Promise<unknown>,
  signal: AbortSignal,
): AsyncGenerator<Buffer> {
  let done = false;
  let failure: { error: unknown } | undefined;
  let changed = true;
  let wake: (() => void) | undefined;
  const rouse = () => {
    changed = true;
    wake?.();
  };
  written.then(
    () => ((done = true), rouse()),
    (error: unknown) => ((failure = { error }), rouse()),
  );
  const watcher = watch(file, rouse);
  signal.addEventListener('abort', rouse);
  const handle = await open(file, 'r');
  try {
    let position = 0;
    for (;;) {
      signal.throwIfAborted();
      if (failure) throw failure.error;
      if (!changed) await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
      changed = false;
      // Taken before reading: every byte written before `written` resolved is read in this pass.
      const final = done;
      for (;;) {
        const { bytesRead, buffer } = await handle.read(Buffer.allocUnsafe(READ_BYTES), 0, READ_BYTES, position);
        if (bytesRead === 0) break;
        position += bytesRead;
        yield bytesRead === READ_BYTES ? buffer : buffer.subarray(0, bytesRead);
      }
      if (final && !failure) return;
    }
  } finally {
    watcher.close();
    signal.removeEventListener('abort', rouse);
    await handle.close();
  }
}

/** A Readable over the file as it is written, holding one read ahead at most. */
export const followedFile = (file: string, written: Promise<unknown>, signal: AbortSignal): Readable =>
  Readable.from(followFile(file, written, signal), { objectMode: false, highWaterMark: READ_BYTES });

/**
 * The same, once the writer has written its first bytes (or is done): a push opened then is not
 * held idle while the writer sorts.
 */
export async function followedFileOnceBegun(
  file: string,
  written: Promise<unknown>,
  signal: AbortSignal,
): Promise<Readable> {
  const chunks = followFile(file, written, signal);
  const first = await chunks.next();
  async function* all() {
    if (!first.done) yield first.value;
    yield* chunks;
  }
  return Readable.from(all(), { objectMode: false, highWaterMark: READ_BYTES });
}

/** Uploads a segment's file as it is written, in parts; resolves once the object is in place. */
export async function uploadSegmentFile(
  s3: S3Client,
  bucket: string,
  object: { table: string; id: string },
  source: { file: string; written: Promise<unknown> },
  signal: AbortSignal,
): Promise<void> {
  const stopped = new AbortController();
  const body = followedFile(source.file, source.written, AbortSignal.any([signal, stopped.signal]));
  const upload = new Upload({
    client: s3,
    params: { Bucket: bucket, Key: segmentObjectKey(object.table, object.id), Body: body },
    partSize: UPLOAD_PART_BYTES,
    queueSize: UPLOAD_PARTS_IN_FLIGHT,
    abortController: stopped,
  });
  const abort = () => stopped.abort(signal.reason);
  signal.addEventListener('abort', abort, { once: true });
  try {
    await upload.done();
  } catch (error) {
    stopped.abort(error); // the reader stops too, and the upload's parts are dropped
    body.destroy();
    throw signal.aborted ? signal.reason : error;
  } finally {
    signal.removeEventListener('abort', abort);
  }
}
