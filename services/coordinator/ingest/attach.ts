/**
 * Attaches Parquet objects that already lie in a bucket as segments of a table, without copying
 * them (`berth attach`). Only each object's footer is read: its columns, checked against the
 * table's (the first object creates the table; a later one may add columns), its row count, and
 * its time range from the timestamp column's statistics. The object's ETag is recorded, and every
 * read of it after sends If-Match, so a changed object is refused rather than read as something
 * else; attaching it again replaces the segment with the object as it is now.
 */
import { createHash } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import { HeadObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import picomatch from 'picomatch';
import { partitionOf, segmentId } from '../../../core/identifiers.js';
import { epochMsSql, TIMELESS } from '../../../core/time-bounds.js';
import { sqlString } from '../../common/duckdb.js';
import { badRequest, DomainError } from '../../common/errors.js';
import { passOnRefusal } from '../../common/http-client.js';
import { describe } from '../../common/parquet-columns.js';
import type { SegmentObjects } from '../../common/segment-objects.js';
import { timestampMismatchMessage, type AttachedObject, type ColumnSpec, type TableInfo } from '../../meta/api.js';
import type { MetaClient } from '../../meta/client.js';
import type { AttachRequest, AttachResult } from '../api.js';
import type { SegmentWriter } from './segment-writer.js';
import { TIMESTAMP_TYPES, checkStorable } from './typed-rows.js';

/** How much of an object's end the first read takes: its footer, usually whole. */
const TAIL_BYTES = 256 * 1024;
/** The ingest path attaching is counted under (ingest-metrics.ts). */
export const ATTACH_PATH = 'attach';

/** Objects one call attaches at most; the answer's `next` carries on from there. */
export const ATTACH_PAGE = 1_000;

interface Listed {
  key: string;
  etag: string;
  size: number;
}

/** What one object's footer says. */
interface Footer {
  columns: ColumnSpec[];
  rows: number;
  minTs: number;
  maxTs: number;
}

export class Attacher {
  constructor(
    private readonly options: {
      meta: MetaClient;
      objects: SegmentObjects;
      /** Its DuckDB reads footers from sparse scratch files. */
      writer: SegmentWriter;
    },
  ) {}

  /**
   * Attaches one page of the objects `request` names; `timestamp` is the new table's timestamp
   * column (default "ts") or null for none, as for ingest.
   */
  async attach(table: string, request: AttachRequest, timestamp?: string | null): Promise<AttachResult> {
    const { meta, objects } = this.options;
    const s3 = objects.client(request.profile);
    const { listed, next } = await list(s3, request);
    let info = await meta.findTable(table);
    if (info && timestamp !== undefined && info.timestampColumn !== timestamp)
      throw badRequest('table_mismatch', timestampMismatchMessage(info, timestamp));
    const timestampColumn = info ? info.timestampColumn : timestamp === undefined ? 'ts' : timestamp;
    // An object attached before under another ETag (overwritten since) is replaced by the object as it is now.
    const attachedKeys = new Map(
      info
        ? (await meta.listSegments(table))
            .filter((s) => s.object?.bucket === request.bucket && s.object.profile === request.profile)
            .map((s) => [s.object!.key, s])
        : [],
    );
    const result: AttachResult = {
      attached: 0,
      unchanged: 0,
      replaced: 0,
      rows: 0,
      refused: [],
      ...(next ? { next } : {}),
    };
    for (const object of listed) {
      const location: AttachedObject = {
        bucket: request.bucket,
        key: object.key,
        etag: object.etag,
        ...(request.profile !== undefined ? { profile: request.profile } : {}),
        ...(request.adopt ? { adopt: true } : {}),
      };
      const earlier = attachedKeys.get(object.key);
      if (earlier?.object?.etag === object.etag) {
        result.unchanged++;
        continue;
      }
      try {
        const footer = await this.readFooter(table, location, object.size, timestampColumn);
        if (!info) {
          info = await meta.ensureTable({ name: table, timestampColumn, columns: footer.columns }).catch(passOnRefusal);
        }
        const added = checkColumns(footer.columns, info, timestampColumn);
        if (added.length > 0) info = await meta.addColumns(table, added).catch(passOnRefusal);
        const digest = createHash('sha256')
          .update(JSON.stringify([location.profile ?? '', location.bucket, location.key, location.etag]))
          .digest('hex')
          .slice(0, 20);
        const segment = {
          id: segmentId(table, 0, partitionOf(footer.minTs), digest),
          table,
          minTs: footer.minTs,
          maxTs: footer.maxTs,
          rows: footer.rows,
          bytes: object.size,
          level: 0,
          incarnation: info.incarnation,
          object: location,
        };
        if (earlier) {
          await meta.swapSegments([earlier.id], segment).catch(passOnRefusal);
          result.replaced++;
        } else {
          await meta.commitSegment(segment).catch(passOnRefusal);
          result.attached++;
        }
        result.rows += footer.rows;
      } catch (error) {
        if (!(error instanceof DomainError) || error.kind !== 'invalid') throw error;
        result.refused.push({ key: object.key, reason: error.message });
      }
    }
    return result;
  }

  /** The object's footer, read into a sparse file of its size so that DuckDB finds it where it would. */
  private async readFooter(
    table: string,
    object: AttachedObject,
    size: number,
    timestampColumn: string | null,
  ): Promise<Footer> {
    const { objects, writer } = this.options;
    const ref = { table, id: '(being attached)', object };
    const tailBytes = async (length: number) => {
      const response = await objects.get(ref, `bytes=${size - length}-${size - 1}`).catch((error: unknown) => {
        if (error instanceof DomainError && error.code === 'object_changed')
          throw badRequest(
            'object_changed',
            `s3://${object.bucket}/${object.key} changed while it was attached: attach it again`,
          );
        throw error;
      });
      return Buffer.from(await response.Body!.transformToByteArray());
    };
    const notParquet = () => badRequest('not_parquet', `s3://${object.bucket}/${object.key} is not a Parquet file`);
    if (size < 12) throw notParquet();
    let tail = await tailBytes(Math.min(TAIL_BYTES, size));
    if (tail.toString('latin1', tail.length - 4) !== 'PAR1') throw notParquet();
    const footer = tail.readUInt32LE(tail.length - 8) + 8;
    if (footer > size - 4) throw notParquet();
    if (footer > tail.length) tail = await tailBytes(footer);
    const file = writer.scratchFile('.parquet');
    try {
      const handle = await open(file, 'w', 0o600);
      try {
        await handle.truncate(size);
        await handle.write(tail, 0, tail.length, size - tail.length);
      } finally {
        await handle.close();
      }
      return await writer.withDuckDB((c) => footerOf(c, file, object, timestampColumn));
    } finally {
      await rm(file, { force: true });
    }
  }
}

/** The columns, row count and time range a footer says, from DuckDB's reading of it. */
async function footerOf(
  c: Parameters<Parameters<SegmentWriter['withDuckDB']>[0]>[0],
  file: string,
  object: AttachedObject,
  timestampColumn: string | null,
): Promise<Footer> {
  const name = `s3://${object.bucket}/${object.key}`;
  const columns = await describe(c, `read_parquet(${sqlString(file)})`).catch((error: Error) => {
    throw badRequest('not_parquet', `${name} could not be read as Parquet: ${error.message.split('\n')[0]}`);
  });
  for (const column of columns) await checkStorable(c, column);
  const [rows] = (
    await c.runAndReadAll(`SELECT num_rows FROM parquet_file_metadata(${sqlString(file)})`)
  ).getRows()[0]!;
  if (timestampColumn === null) return { columns, rows: Number(rows), ...TIMELESS };
  const ts = columns.find((col) => col.name === timestampColumn);
  if (!ts)
    throw badRequest('missing_timestamp', `${name} has no "${timestampColumn}" column (the table's timestamp column)`);
  if (!TIMESTAMP_TYPES.has(ts.type))
    throw badRequest('timestamp_type', `${name}: column "${timestampColumn}" is ${ts.type}, not a timestamp`);
  // Each row group's statistics, as the column's own type: the time range without reading a row.
  const stats = (
    await c.runAndReadAll(
      `SELECT count(*), count(stats_min_value), count(stats_max_value),
         ${epochMsSql(`min(CAST(stats_min_value AS ${ts.type}))`, 'floor')}, ${epochMsSql(`max(CAST(stats_max_value AS ${ts.type}))`, 'ceil')},
         sum(stats_null_count)
       FROM parquet_metadata(${sqlString(file)}) WHERE path_in_schema = ${sqlString(timestampColumn)}`,
    )
  ).getRows()[0]!;
  const [groups, withMin, withMax, minTs, maxTs, nulls] = stats.map((v) => (v === null ? null : Number(v)));
  if (Number(rows) === 0) return { columns, rows: 0, minTs: 0, maxTs: 0 };
  if (groups === 0 || withMin !== groups || withMax !== groups)
    throw badRequest(
      'no_statistics',
      `${name}: column "${timestampColumn}" has no min/max statistics in every row group, which attaching reads its time range from: rewrite it with statistics, or ingest it`,
    );
  if (nulls) throw badRequest('missing_timestamp', `${name}: ${nulls} row(s) have no "${timestampColumn}" value`);
  return { columns, rows: Number(rows), minTs: minTs!, maxTs: maxTs! };
}

/** The object's columns the table lacks; a 400 for one the table has with another type, or in another case. */
function checkColumns(columns: ColumnSpec[], table: TableInfo, timestampColumn: string | null): ColumnSpec[] {
  const byName = new Map(table.columns.map((col) => [col.name, col]));
  const byLower = new Map(table.columns.map((col) => [col.name.toLowerCase(), col]));
  const added: ColumnSpec[] = [];
  for (const col of columns) {
    const same = byName.get(col.name);
    if (same) {
      if (same.type !== col.type)
        throw badRequest(
          'type_mismatch',
          `column "${col.name}" is ${col.type} in the object; the table's column is ${same.type}: attached objects are read as they are`,
        );
      continue;
    }
    const other = byLower.get(col.name.toLowerCase());
    if (other)
      throw badRequest(
        'column_case',
        `column "${col.name}" differs from the table's column "${other.name}" only in case`,
      );
    added.push(col);
  }
  if (timestampColumn !== null && !columns.some((col) => col.name === timestampColumn))
    throw badRequest('missing_timestamp', `the object has no "${timestampColumn}" column`);
  return added;
}

/** The objects a request names, one page of them, with the key to carry on from. */
async function list(s3: S3Client, request: AttachRequest): Promise<{ listed: Listed[]; next?: string }> {
  const limit = Math.min(request.limit ?? ATTACH_PAGE, ATTACH_PAGE);
  if (request.keys) {
    const start = request.startAfter === undefined ? 0 : request.keys.indexOf(request.startAfter) + 1;
    const page = request.keys.slice(start, start + limit);
    const listed = await Promise.all(
      page.map(async (key) => {
        const head = await s3
          .send(new HeadObjectCommand({ Bucket: request.bucket, Key: key }))
          .catch((error: Error) => {
            throw missing(request, key, error);
          });
        return { key, etag: head.ETag!, size: head.ContentLength! };
      }),
    );
    return { listed, ...(start + limit < request.keys.length ? { next: page.at(-1)! } : {}) };
  }
  // A glob lists what its literal start names, then keeps what it matches.
  const glob = request.glob;
  const prefix = glob ? glob.slice(0, glob.search(/[*?[{]|$/)) : (request.prefix ?? '');
  const matches = glob ? picomatch(glob, { dot: true }) : (key: string) => key.endsWith('.parquet');
  const listed: Listed[] = [];
  let token: string | undefined;
  let startAfter = request.startAfter;
  for (;;) {
    const page = await s3
      .send(
        new ListObjectsV2Command({
          Bucket: request.bucket,
          Prefix: prefix,
          ContinuationToken: token,
          ...(token ? {} : startAfter ? { StartAfter: startAfter } : {}),
        }),
      )
      .catch((error: Error) => {
        throw missing(request, prefix, error);
      });
    for (const object of page.Contents ?? []) {
      startAfter = object.Key!;
      if (!matches(object.Key!)) continue;
      listed.push({ key: object.Key!, etag: object.ETag!, size: object.Size! });
      if (listed.length === limit)
        return { listed, ...(page.IsTruncated || object !== page.Contents!.at(-1) ? { next: object.Key! } : {}) };
    }
    if (!page.IsTruncated) return { listed };
    token = page.NextContinuationToken;
  }
}

const missing = (request: AttachRequest, key: string, error: Error) =>
  badRequest(
    'object_unreadable',
    `s3://${request.bucket}/${key} cannot be read${request.profile ? ` with profile "${request.profile}"` : ''}: ${error.name}`,
  );
