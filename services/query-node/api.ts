/**
 * The query node's wire contract: the scan request's schema and the stats and error trailers that
 * follow a scan's rows. Shared by the node's app and its client, so that a caller (the
 * coordinator, the worker) loads neither fastify nor the node's metrics to call a node.
 */
import { Type, type Static } from 'typebox';
import { SegmentId, TableName } from '../common/schemas.js';

/** Trailers after a scan's Arrow stream: its stats, and the error that cut it short, if any. */
export const SCAN_STATS_TRAILER = 'x-berth-scan-stats';
export const SCAN_ERROR_TRAILER = 'x-berth-scan-error';

export const ScanRequest = Type.Object(
  {
    sql: Type.String({ minLength: 1, maxLength: 1 << 20 }),
    tables: Type.Array(
      Type.Object({
        name: TableName,
        /** The table's schema. */
        schema: Type.Array(Type.Object({ name: Type.String({ minLength: 1 }), type: Type.String({ minLength: 1 }) }), { minItems: 1 }),
        /** The columns the scan reads (the view over the segments has only these); all when absent. */
        columns: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 10_000 })),
        segments: Type.Array(SegmentId, { maxItems: 100_000 }),
      }),
      { minItems: 1, maxItems: 16 },
    ),
    /** The coordinator's result cap: a larger result is a 413, and never leaves the node. */
    maxResultBytes: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  { additionalProperties: false },
);
export type ScanRequest = Static<typeof ScanRequest>;

/** What a scan reports after its rows (the `x-berth-scan-stats` trailer). */
export const ScanStats = Type.Object({
  node: Type.String(),
  segments: Type.Integer(),
  hits: Type.Integer(),
  misses: Type.Integer(),
  s3Gets: Type.Integer(),
  bytesFromS3: Type.Integer(),
  /** Segments read from S3 for this scan only, not kept: this node does not own them. */
  readThrough: Type.Integer(),
  rows: Type.Integer(),
  /** Bytes of Arrow IPC sent. */
  bytes: Type.Integer(),
  ms: Type.Number(),
});
export type ScanStats = Static<typeof ScanStats>;
