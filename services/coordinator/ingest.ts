/**
 * Ingest: a batch of NDJSON rows becomes one level-0 Parquet segment in S3, is pushed into its
 * owner's cache, and is committed to the manifest, after which it is queryable. The segment id is
 * derived from the table and the bytes, so sending the same batch again commits nothing new.
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { partitionOf, segmentId, segmentObjectKey } from '../../core/identifiers.js';
import { badRequest } from '../common/errors.js';
import type { MemberView } from '../common/member-view.js';
import type { MetaClient } from '../meta/client.js';
import { QueryNodeClient } from '../query-node/client.js';
import { DEFAULT_MAX_DEPTH, nestingLimit } from './ndjson-rows.js';
import type { SegmentWriter } from './segment-writer.js';
import type { IngestResult } from './api.js';

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
}

export class Ingestor {
  constructor(private readonly options: IngestOptions) {}

  /** `timestampColumn` names the new table's timestamp column (default "ts"); an existing table keeps its own. */
  async ingest(table: string, body: Readable, timestampColumn?: string): Promise<IngestResult> {
    const { writer, meta, s3, bucket } = this.options;
    const input = writer.scratchFile('.ndjson');
    const output = writer.scratchFile('.parquet');
    try {
      const hash = createHash('sha256').update(table);
      body.on('data', (chunk: Buffer) => hash.update(chunk));
      await pipeline(
        body,
        nestingLimit(this.options.maxDepth ?? DEFAULT_MAX_DEPTH),
        createWriteStream(input, { mode: 0o600 }),
      );

      const known = await meta.findTable(table);
      if (known && timestampColumn && known.timestampColumn !== timestampColumn) {
        throw badRequest(
          'table_mismatch',
          `table "${table}" keeps its timestamps in "${known.timestampColumn}", not "${timestampColumn}"`,
        );
      }
      const tsColumn = known?.timestampColumn ?? timestampColumn ?? 'ts';
      let file = await writer.ndjsonToSegment(input, output, tsColumn, known?.columns);
      if (!known) {
        const registered = await meta.ensureTable({ name: table, timestampColumn: tsColumn, columns: file.columns });
        // Another first batch won the race with its own schema: conform to it.
        if (JSON.stringify(registered.columns) !== JSON.stringify(file.columns))
          file = await writer.ndjsonToSegment(input, output, tsColumn, registered.columns);
      }

      const bytes = await readFile(output);
      const id = segmentId(table, 0, partitionOf(file.minTs), hash.digest('hex').slice(0, 20));
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: segmentObjectKey(table, id), Body: bytes }));
      const push = await this.push(table, id, bytes);
      const segment = await meta.commitSegment({
        id,
        table,
        minTs: file.minTs,
        maxTs: file.maxTs,
        rows: file.rows,
        bytes: bytes.length,
        level: 0,
      });
      return { segment, push };
    } finally {
      await Promise.all([rm(input, { force: true }), rm(output, { force: true })]);
    }
  }

  /** Best effort: a declined or failed push only means a cold first read. */
  private async push(table: string, id: string, bytes: Buffer): Promise<IngestResult['push']> {
    const owner = this.options.view.placement?.owner(id);
    const member = owner && this.options.view.member(owner.id);
    if (!member) return { owner: null, accepted: false, reason: 'no member list yet' };
    try {
      const result = await new QueryNodeClient(member.url, this.options.token).push(table, id, bytes);
      return { owner: member.id, accepted: result.accepted, ...(result.reason ? { reason: result.reason } : {}) };
    } catch (error) {
      return { owner: member.id, accepted: false, reason: (error as Error).message };
    }
  }
}
