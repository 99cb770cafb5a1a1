/**
 * The query node's wire contract: the scan request's schema, the stats and error trailers that
 * follow a scan's rows, and every other route's request and response. Shared by the node's app and
 * its client, so that a caller (the coordinator, the worker) loads neither fastify nor the node's
 * metrics to call a node.
 */
import { Type, type Static } from 'typebox';
import { MAX_JOINED_TABLES } from '../../core/query-plan/broadcast.js';
import { ExchangeInput } from '../common/final-stage/contract.js';
import { ColumnSpec, NodeId, SegmentId, TableName } from '../common/schemas.js';
import { AttachedObject } from '../meta/api.js';
import { SqlParameters } from '../common/sql-parameters.js';

/** Trailers after a scan's Arrow stream: its stats, and the error that cut it short, if any. */
export const SCAN_STATS_TRAILER = 'x-berth-scan-stats';
export const SCAN_ERROR_TRAILER = 'x-berth-scan-error';

/**
 * The code of a scan refused (a 500) because a segment's file disagrees with its table's schema:
 * the data's fault, not the node's, so the caller answers it and tries no other node (a mismatch
 * is an error, never routed around to an answer).
 */
export const SEGMENT_SCHEMA_MISMATCH = 'segment_schema_mismatch';

/**
 * A trailer's value: JSON with every character past ASCII escaped, since a header may carry no
 * other (Node refuses the rest: a DuckDB message quoting the query's text would fail the scan).
 */
export const trailerJson = (value: unknown): string =>
  JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

export const ScanRequest = Type.Object(
  {
    sql: Type.String({ minLength: 1, maxLength: 1 << 20 }),
    tables: Type.Array(
      Type.Object({
        name: TableName,
        /** The table's schema. */
        schema: Type.Array(ColumnSpec, { minItems: 1 }),
        /** The columns the scan reads (the view over the segments has only these); all when absent. */
        columns: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 10_000 })),
        segments: Type.Array(SegmentId, { maxItems: 100_000 }),
        /** Where the objects of attached segments among them lie (meta's SegmentRow.object), by id. */
        objects: Type.Optional(Type.Record(SegmentId, AttachedObject)),
        /** Every segment of the table, whoever owns it: a broadcast join's small side, kept in the cache as owned ones are. */
        broadcast: Type.Optional(Type.Boolean()),
      }),
      { minItems: 1, maxItems: MAX_JOINED_TABLES },
    ),
    /** The coordinator's result cap: a larger result is a 413, and never leaves the node. */
    maxResultBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Values for the parameters `sql` names (`$p1`, …): the query's lifted literals. */
    parameters: Type.Optional(SqlParameters),
  },
  { additionalProperties: false },
);
export type ScanRequest = Static<typeof ScanRequest>;

/** What a scan reports after its rows (the `x-berth-scan-stats` trailer). */
export const ScanStats = Type.Object({
  node: Type.String(),
  /** Segments of its share scanned (not a broadcast join's small tables, which every owner reads). */
  segments: Type.Integer(),
  /** Cache hits and misses, GETs and bytes from S3: over every segment read, a broadcast join's small tables too. */
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

/** The error trailer of a scan cut short: the status the coordinator answers with, and why. */
export const ScanFailure = Type.Object({ status: Type.Integer(), error: Type.String(), message: Type.String() });
export type ScanFailure = Static<typeof ScanFailure>;

/** GET /readyz, answered 200 when ready and 503 when not. */
export const NodeReadiness = Type.Object({
  ready: Type.Boolean(),
  registered: Type.Boolean(),
  members: Type.Integer(),
});

/** Bytes a node owns and how many of them its cache holds. */
export const WarmShare = Type.Object({
  segments: Type.Integer(),
  bytes: Type.Integer(),
  warmBytes: Type.Integer(),
  /** warmBytes / bytes; 1 when there is nothing to hold. */
  fraction: Type.Number(),
});
export type WarmShare = Static<typeof WarmShare>;

export const Warmth = Type.Object({
  /** Everything the node owns, as of the warmer's last pass (none before its first). */
  owned: Type.Optional(WarmShare),
  /** The segments that moved to the node at the last membership change, and since when. */
  moved: Type.Optional(Type.Intersect([WarmShare, Type.Object({ since: Type.String() })])),
});
export type Warmth = Static<typeof Warmth>;

/** GET /v1/info: who the node is, its cache and its warm-up. */
export const NodeInfo = Type.Object({
  id: NodeId,
  group: Type.String(),
  owner: Type.Boolean(),
  cache: Type.Object({
    usedBytes: Type.Integer(),
    budgetBytes: Type.Integer(),
    segments: Type.Integer(),
    hits: Type.Integer(),
    misses: Type.Integer(),
    s3Gets: Type.Integer(),
    bytesFromS3: Type.Integer(),
  }),
  warmth: Warmth,
});
export type NodeInfo = Static<typeof NodeInfo>;

/** GET /v1/cache: the segments the cache holds. */
export const CacheList = Type.Object({ segments: Type.Array(SegmentId) });

/** POST /v1/segments/:id?table=: a pushed segment file. */
export const PushParams = Type.Object({ id: SegmentId });
export const PushQuery = Type.Object({ table: TableName });
/** A node keeps only the segments it owns: a push to another is declined, saying whose it is. */
export const PushResult = Type.Object({
  accepted: Type.Boolean(),
  owner: Type.Union([Type.String(), Type.Null()]),
  reason: Type.Optional(Type.String()),
  /** Bytes written to the cache, when accepted. */
  bytes: Type.Optional(Type.Integer()),
});
export type PushResult = Static<typeof PushResult>;

/** POST /v1/warm?segments=: one warmer pass, fetching at most `segments` (0: only survey). */
export const WarmQuery = Type.Object({ segments: Type.Optional(Type.Integer({ minimum: 0 })) });
export const WarmResult = Type.Object({ fetched: Type.Integer() });
export type WarmResult = Static<typeof WarmResult>;

/** POST /v1/canary: Berth's canary object read from storage and scanned. */
export const CanaryResult = Type.Object({ rows: Type.Integer(), bytes: Type.Integer(), ms: Type.Number() });
export type CanaryResult = Static<typeof CanaryResult>;

// ── final stages (a heavy query's, run on a heavy backend: final-stages.ts) ──

/** POST /v1/final-stages: opens one, with its inputs. */
export const FinalStageRequest = Type.Object(
  {
    inputs: Type.Array(ExchangeInput, { minItems: 1 }),
    /** Closed by itself after this long without a call: its coordinator is gone. */
    ttlMs: Type.Integer({ minimum: 1_000, maximum: 3_600_000 }),
  },
  { additionalProperties: false },
);
export type FinalStageRequest = Static<typeof FinalStageRequest>;
export const FinalStageOpened = Type.Object({ id: Type.String() });
export const FinalStageParams = Type.Object({ id: Type.String({ pattern: '^[0-9a-f-]{36}$' }) });
export const FinalStageInputParams = Type.Object({
  id: Type.String({ pattern: '^[0-9a-f-]{36}$' }),
  input: Type.String(),
});
export const FinalStagePartParams = Type.Object({
  id: Type.String({ pattern: '^[0-9a-f-]{36}$' }),
  input: Type.String(),
  part: Type.String(),
});
/** What POST /v1/final-stages/:id/inputs/:input answers once the stream is in. */
export const FinalStagePart = Type.Object({ part: Type.String(), rows: Type.Integer() });
export type FinalStagePart = Static<typeof FinalStagePart>;
/** POST /v1/final-stages/:id/answer: the final SQL. */
export const FinalStageAnswerRequest = Type.Object(
  { sql: Type.String({ minLength: 1 }), parameters: Type.Optional(SqlParameters) },
  { additionalProperties: false },
);

/**
 * The answer, as NDJSON: first `{"columns", "types"}`, then one line per batch of rows
 * (`{"rows": [...]}`), then `{"end": true}`, or `{"error", "status", "message"}` for a failure
 * after the first line (before it, the answer is an ordinary error).
 */
export type FinalStageLine =
  | { columns: string[]; types: string[] }
  | { rows: unknown[][] }
  | { end: true }
  | { error: string; status: number; message: string };
