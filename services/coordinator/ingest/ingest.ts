/**
 * Ingest: a batch of rows (NDJSON, CSV or Parquet) becomes one level-0 Parquet segment in S3, is pushed into its
 * owner's cache, and is committed to the manifest, after which it is queryable. The segment id is
 * derived from the table and the bytes, so sending the same batch again commits nothing new. The
 * put has the S3 timeout (past it, or with S3 down, a 503 naming S3 and nothing committed); the push
 * is best effort and has a short timeout of its own (past it, the commit goes ahead: a cold read).
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { PutObjectCommand, S3ServiceException, type S3Client } from '@aws-sdk/client-s3';
import { partitionOf, segmentId, segmentObjectKey } from '../../../core/identifiers.js';
import { badRequest, DomainError } from '../../common/errors.js';
import { passOnRefusal } from '../../common/http-client.js';
import type { MemberView } from '../../common/member-view.js';
import { DEFAULT_S3_TIMEOUT_MS } from '../../common/s3-client.js';
import { timestampMismatchMessage } from '../../meta/api.js';
import type { MetaClient, TableInfo } from '../../meta/client.js';
import { QueryNodeClient } from '../../query-node/client.js';
import { DEFAULT_MAX_DEPTH, nestingLimit, NewField } from './ndjson-rows.js';
import type { SegmentFile, SegmentWriter } from './segment-writer.js';
import type { CsvOptions, TypedSource } from './typed-rows.js';
import type { IngestResult } from '../api.js';

export type { IngestResult };

export interface IngestOptions {
  writer: SegmentWriter;
  /** Deepest nesting a row may have. @default DEFAULT_MAX_DEPTH */
  maxDepth?: number;
  meta: MetaClient;
  view: MemberView;
  s3: S3Client;
  bucket: string;
  token: string;
  /** How long the put of a segment may take, its retries included (BERTH_S3_TIMEOUT_MS). @default DEFAULT_S3_TIMEOUT_MS */
  s3TimeoutMs?: number;
  /** How long the best-effort push to the owner may hold the commit back (BERTH_PUSH_TIMEOUT_MS). @default 5000 */
  pushTimeoutMs?: number;
}

/** How a batch's bytes are read: NDJSON by the typing rule, CSV by DuckDB's reading, Parquet as typed. */
export type BatchFormat = { format: 'ndjson' } | { format: 'csv'; csv: CsvOptions } | { format: 'parquet' };
export const NDJSON: BatchFormat = { format: 'ndjson' };

/** The media types a batch may be sent as, and the format each names. */
export const BATCH_FORMATS: Record<string, BatchFormat['format']> = {
  'application/x-ndjson': 'ndjson',
  'application/jsonl': 'ndjson',
  'text/csv': 'csv',
  'application/vnd.apache.parquet': 'parquet',
};

/** The format of a batch sent with `contentType`, its CSV options from the request's query. */
export function batchFormat(contentType: string, query: CsvOptions): BatchFormat {
  const media = contentType.split(';')[0]!.trim().toLowerCase();
  if (media === 'text/tab-separated-values') return { format: 'csv', csv: { delimiter: '\t', ...csvOptions(query) } };
  const format = BATCH_FORMATS[media] ?? 'ndjson'; // the parsers registered take no other type
  return format === 'csv' ? { format, csv: csvOptions(query) } : { format };
}

const csvOptions = ({ header, delimiter, quote, escape }: CsvOptions): CsvOptions => ({
  ...(header !== undefined ? { header } : {}),
  ...(delimiter !== undefined ? { delimiter } : {}),
  ...(quote !== undefined ? { quote } : {}),
  ...(escape !== undefined ? { escape } : {}),
});

/** The largest batch one ingest call takes, as sent and as unpacked (BERTH_INGEST_MAX_BYTES). */
export const DEFAULT_MAX_INGEST_BYTES = 256 * 1024 * 1024;

/** How long the push to a segment's owner may hold a commit back, unless the coordinator is told otherwise. */
export const DEFAULT_PUSH_TIMEOUT_MS = 5_000;

/** The push reason of a batch sent again: it was committed before, and nothing was done this time. */
export const ALREADY_COMMITTED = 'the batch was committed before';

/**
 * A batch's digest in its segment id: of its table and content, and from a table's second
 * incarnation on of that too, so that a batch sent to a re-created table never counts as sent
 * before (the dropped table's ids stay known for the dedup window).
 */
const batchDigest = (content: string, incarnation: number) =>
  (incarnation === 1 ? content : createHash('sha256').update(`${content}/${incarnation}`).digest('hex')).slice(0, 20);

export class Ingestor {
  constructor(private readonly options: IngestOptions) {}

  /**
   * `timestampColumn` names the new table's timestamp column (default "ts"), or with null makes it
   * a table without one; an existing table keeps its own, and a batch that names another is a 400.
   */
  async ingest(
    table: string,
    body: Readable,
    timestampColumn?: string | null,
    format: BatchFormat = NDJSON,
  ): Promise<IngestResult> {
    const { writer, meta, s3, bucket } = this.options;
    const input = writer.scratchFile(`.${format.format}`);
    const output = writer.scratchFile('.parquet');
    try {
      const hash = createHash('sha256').update(table);
      // A typed batch's id also says how its bytes are read: the same bytes as other CSV are other rows.
      if (format.format !== 'ndjson') hash.update(`\0${JSON.stringify(format)}\0`);
      body.on('data', (chunk: Buffer) => hash.update(chunk));
      const scratch = createWriteStream(input, { mode: 0o600 });
      // NDJSON's nesting is counted as it streams in (DuckDB chokes on deep rows); typed batches have their own shape.
      if (format.format === 'ndjson')
        await pipeline(body, nestingLimit(this.options.maxDepth ?? DEFAULT_MAX_DEPTH), scratch);
      else await pipeline(body, scratch);

      const known = await meta.findTable(table);
      if (known && timestampColumn !== undefined && known.timestampColumn !== timestampColumn)
        throw badRequest('table_mismatch', timestampMismatchMessage(known, timestampColumn));
      const tsColumn = known ? known.timestampColumn : timestampColumn === undefined ? 'ts' : timestampColumn;
      const typed = format.format === 'ndjson' ? undefined : { ...format, file: input };
      const conform = (info: TableInfo) =>
        typed ? this.typedSegmentOf(table, typed, output, info) : this.segmentOf(table, input, output, info);
      let written = known
        ? await conform(known)
        : typed
          ? await writer.typedToSegment(typed, output, tsColumn)
          : await writer.ndjsonToSegment(input, output, tsColumn);
      let info = known;
      if (!info) {
        info = await meta
          .ensureTable({ name: table, timestampColumn: tsColumn, columns: written.columns })
          .catch(passOnRefusal);
        // Another first batch won the race with its own schema: conform to it.
        if (JSON.stringify(info.columns) !== JSON.stringify(written.columns)) written = await conform(info);
      }
      const { incarnation } = info;

      const bytes = await readFile(output);
      const id = segmentId(table, 0, partitionOf(written.minTs), batchDigest(hash.digest('hex'), incarnation));
      // A batch meta already knows (sent again, perhaps after a merge retired it and the janitor
      // deleted its object) is answered with the row committed first: nothing uploaded, pushed or added.
      if ((await meta.knownSegments([id])).length > 0)
        return {
          segment: await meta.getSegment(id),
          push: { owner: null, accepted: false, reason: ALREADY_COMMITTED },
        };
      const s3TimeoutMs = this.options.s3TimeoutMs ?? DEFAULT_S3_TIMEOUT_MS;
      await s3
        .send(new PutObjectCommand({ Bucket: bucket, Key: segmentObjectKey(table, id), Body: bytes }), {
          abortSignal: AbortSignal.timeout(s3TimeoutMs),
        })
        .catch((error: unknown) => {
          throw storageFailure(error, s3TimeoutMs);
        });
      const push = await this.push(table, id, bytes);
      // Refused when the table was dropped meanwhile (404) or dropped and created again (409).
      const segment = await meta
        .commitSegment({
          id,
          table,
          minTs: written.minTs,
          maxTs: written.maxTs,
          rows: written.rows,
          bytes: bytes.length,
          level: 0,
          incarnation,
        })
        .catch(passOnRefusal);
      return { segment, push };
    } finally {
      await Promise.all([rm(input, { force: true }), rm(output, { force: true })]);
    }
  }

  /**
   * The batch as a segment of an existing table. Fields the table lacks become new nullable
   * columns first (segments written before read them as NULL); meta adds only those the table
   * still lacks, so batches adding fields at once converge, each checked against what stands.
   */
  private async segmentOf(table: string, input: string, output: string, known: TableInfo): Promise<SegmentFile> {
    const { writer, meta } = this.options;
    try {
      return await writer.ndjsonToSegment(input, output, known.timestampColumn, known.columns);
    } catch (error) {
      if (!(error instanceof NewField)) throw error;
      const added = await writer.newColumns(input, known.columns);
      // Meta refuses what batches adding fields at once would make together (too many columns): the batch's 400.
      const { columns } = await meta.addColumns(table, added).catch(passOnRefusal);
      return await writer.ndjsonToSegment(input, output, known.timestampColumn, columns);
    }
  }

  /** A CSV or Parquet batch as a segment of an existing table, its new columns added first (as segmentOf). */
  private async typedSegmentOf(
    table: string,
    source: TypedSource,
    output: string,
    known: TableInfo,
  ): Promise<SegmentFile> {
    const { writer, meta } = this.options;
    const { added } = await writer.planTyped(source, known.timestampColumn, known.columns);
    const columns =
      added.length > 0 ? (await meta.addColumns(table, added).catch(passOnRefusal)).columns : known.columns;
    return await writer.typedToSegment(source, output, known.timestampColumn, columns);
  }

  /** Best effort: a declined or failed push only means a cold first read. */
  private async push(table: string, id: string, bytes: Buffer): Promise<IngestResult['push']> {
    const owner = this.options.view.placement?.owner(id);
    const member = owner && this.options.view.member(owner.id);
    if (!member) return { owner: null, accepted: false, reason: 'no member list yet' };
    try {
      const result = await new QueryNodeClient(member.url, this.options.token).push(table, id, bytes, {
        timeoutMs: this.options.pushTimeoutMs ?? DEFAULT_PUSH_TIMEOUT_MS,
      });
      return { owner: member.id, accepted: result.accepted, ...(result.reason ? { reason: result.reason } : {}) };
    } catch (error) {
      return { owner: member.id, accepted: false, reason: (error as Error).message };
    }
  }
}

/** Network failures that mean S3 could not be reached at all. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * What a failed put of a segment is answered with, in Berth's words (the SDK's error is its cause):
 * S3 silent, unreachable or answering 5xx is a 503 naming S3, to be sent again; S3 refusing the put
 * (credentials, bucket) is a 502. Never a 500: the batch was fine, the store was not.
 */
function storageFailure(error: unknown, timeoutMs: number): DomainError {
  const failure = error as Error & { code?: string };
  const status = error instanceof S3ServiceException ? error.$metadata.httpStatusCode : undefined;
  if (status !== undefined && status < 500 && status !== 408 && status !== 429)
    return new DomainError(
      'upstream_failed',
      's3_refused',
      `S3 refused the segment (${status} ${failure.name}); the batch is not committed`,
      { cause: error },
    );
  const code = failure.code ?? '';
  const reason =
    status !== undefined
      ? `answered ${status} (${failure.name})`
      : UNREACHABLE.has(code)
        ? `is unreachable (${code})`
        : code === 'ECONNRESET' || code === 'EPIPE'
          ? `closed the connection (${code})`
          : failure.name === 'AbortError' || failure.name === 'TimeoutError' || code === 'ETIMEDOUT'
            ? `did not answer within ${timeoutMs} ms (BERTH_S3_TIMEOUT_MS)`
            : `could not be called (${failure.name})`;
  return new DomainError('unavailable', 's3_unavailable', `S3 ${reason}; the batch is not committed: send it again`, {
    cause: error,
  });
}
