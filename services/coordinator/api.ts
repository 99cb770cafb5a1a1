/**
 * The coordinator's wire contract: every route's request and response schema, and the types derived
 * from them (a query's result and stats, an ingest's result, the node list, the workload groups).
 * The app validates and serializes with them; the query service, the ingestor and the client speak
 * their types. A query's rows are open (JSON values, one per column); the routing verdict and the
 * compute concentration are core's, and pass through as core defines them.
 */
import { Type, type Static } from 'typebox';
import type { Concentration } from '../../core/compute-concentration.js';
import { SPLITS, type Split as SplitName } from '../../core/query-plan/decompose.js';
import type { Verdict } from '../../core/routing-verdict.js';
import { DefinedIn, TableName, TimestampColumn } from '../common/schemas.js';
import { AttachedObject, Backend, RowDelete, SegmentRow, TableInfo, TableStats } from '../meta/api.js';
import { Warmth } from '../query-node/api.js';

/** GET /readyz, answered 200 when ready and 503 when not (with the reason meta is unreachable). */
export const CoordinatorReadiness = Type.Object({
  ready: Type.Boolean(),
  members: Type.Integer(),
  /** Why meta could not be reached. */
  reason: Type.Optional(Type.String()),
  /** Each other dependency that is down (s3, temporal), with why. */
  down: Type.Optional(Type.Record(Type.String(), Type.String())),
});

// ── queries ──

/** The media type a client accepts to have POST /v1/query stream its answer as NDJSON (streamed-answer.ts). */
export const NDJSON_TYPE = 'application/x-ndjson';

/** POST /v1/query. */
export const QueryRequest = Type.Object(
  { sql: Type.String({ minLength: 1, maxLength: 100_000 }) },
  { additionalProperties: false },
);

/**
 * How a read is split between its segments' owners and the final stage (core/query-plan/decompose.ts):
 * `aggregate` (the owners send partial aggregates), `select` (a distinct or top-k select) or `rows`
 * (the rows, filtered). A query's route is the split of its one read when the final stage only
 * finishes that read's partials, else `rows`: the final stage runs the query's own SQL.
 */
export const Split = Type.Unsafe<SplitName>(Type.Union(SPLITS.map((split) => Type.Literal(split))));
export type Split = SplitName;

/** Segments scanned, or bytes read, per node id. */
const PerNode = Type.Record(Type.String(), Type.Number());

/** One read's scan stage, as it ran. */
export const ScanStage = Type.Object({
  /** The name the final stage read it by. */
  input: Type.String(),
  table: Type.String(),
  split: Split,
  /** The table's columns the owners read. */
  columns: Type.Array(Type.String()),
  segments: Type.Integer(),
  /** Rows and Arrow IPC bytes the owners sent. */
  rows: Type.Integer(),
  bytes: Type.Integer(),
  /** Segments scanned per node id. */
  nodes: PerNode,
  /** The slowest owner's own time for its scan, from its request to its last byte (ms). */
  slowestNodeMs: Type.Number(),
  /**
   * A broadcast join's small tables, which every owner read whole beside its segments (from its
   * cache or S3, never through the coordinator): each table's columns read, segments and their
   * Parquet bytes, per owner.
   */
  broadcast: Type.Optional(
    Type.Array(
      Type.Object({
        table: Type.String(),
        columns: Type.Array(Type.String()),
        segments: Type.Integer(),
        bytes: Type.Integer(),
      }),
    ),
  ),
});
export type ScanStage = Static<typeof ScanStage>;

/**
 * Where a computed query's time went, in ms: planning (the plan, the manifest, the verdict),
 * waiting for admission (and opening a heavy query's final stage on its backend), the scan stage
 * (from the first request to the owners to the last byte they sent), and the final stage over
 * what they sent. What elapsedMs has beyond their sum is the result cache's and the answer's.
 */
export const QueryTimings = Type.Object({
  planMs: Type.Number(),
  queuedMs: Type.Number(),
  scanMs: Type.Number(),
  finalMs: Type.Number(),
});
export type QueryTimings = Static<typeof QueryTimings>;

export const QueryStats = Type.Object({
  /**
   * `computed` by this query, or `cached`: the answer an earlier query computed over the same
   * table versions (the result cache; the other figures are that query's).
   */
  result: Type.Union([Type.Literal('computed'), Type.Literal('cached')]),
  /** The routing verdict at plan time: light (serving group) or heavy (the elastic pool), with the bottleneck. */
  verdict: DefinedIn<Verdict>('core/routing-verdict.ts (Verdict)'),
  /** The compute group that ran the query. */
  group: Type.String(),
  route: Split,
  /** Why the query is not one aggregate or select over one table. */
  reason: Type.Optional(Type.String()),
  /** Whether the plan was made for this query or reused from an earlier one with the same SQL and schemas. */
  plan: Type.Union([Type.Literal('planned'), Type.Literal('cached')]),
  /**
   * The two stages: each read's scan on the owners, then the final stage: `coordinator` (light
   * queries), or the node id of the heavy backend a heavy query's final stage ran on.
   */
  stages: Type.Object({ scan: Type.Array(ScanStage), final: Type.String() }),
  /** Bytes the scan stage sent to the final stage (Arrow IPC). */
  bytesMoved: Type.Integer(),
  /** Bytes each node read from S3 for this query. */
  s3BytesByNode: PerNode,
  placement: Type.Union([Type.Literal('owner'), Type.Literal('round-robin'), Type.Literal('local')]),
  segments: Type.Object({ total: Type.Integer(), scanned: Type.Integer(), pruned: Type.Integer() }),
  /** Bytes of the segments left after pruning: what the routing verdict weighed. */
  scanBytes: Type.Integer(),
  /** Segments scanned per node id. */
  nodes: PerNode,
  cacheHits: Type.Integer(),
  cacheMisses: Type.Integer(),
  s3Gets: Type.Integer(),
  bytesFromS3: Type.Integer(),
  fallbacks: Type.Integer(),
  elapsedMs: Type.Number(),
  timings: QueryTimings,
  /** For a heavy query: the pool's workflow and how long the query waited to be admitted. */
  pool: Type.Optional(Type.Object({ workflowId: Type.String(), waitedMs: Type.Number() })),
});
export type QueryStats = Static<typeof QueryStats>;

/** A JSON value, as a result's cells are. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export const QueryResult = Type.Object({
  columns: Type.Array(Type.String()),
  /** DuckDB's type of each column. */
  types: Type.Array(Type.String()),
  /** Open: one JSON value per column (see result-json.ts for how DuckDB's types map to JSON). */
  rows: Type.Unsafe<JsonValue[][]>(Type.Unknown({ description: 'rows of JSON values, one per column' })),
  stats: QueryStats,
});
export type QueryResult = Static<typeof QueryResult>;

/**
 * GET /v1/query-log/recent (token): the last queries this coordinator answered or refused over
 * HTTP, newest first, with their SQL (the console's Queries view).
 */
export const RecentQuery = Type.Object({
  /** Counts up from 1 since the coordinator started. */
  id: Type.Integer(),
  /** When it was answered or refused (ms since the epoch). */
  at: Type.Number(),
  sql: Type.String(),
  /** Rows in the answer. */
  rows: Type.Optional(Type.Integer()),
  /** The answer's stats; absent for a refused query. */
  stats: Type.Optional(QueryStats),
  /** Why a refused query was refused. */
  error: Type.Optional(Type.String()),
});
export type RecentQuery = Static<typeof RecentQuery>;
export const RecentQueries = Type.Object({ capacity: Type.Integer(), queries: Type.Array(RecentQuery) });
export type RecentQueries = Static<typeof RecentQueries>;

// ── ingest ──

/**
 * POST /v1/tables/:table/rows?timestampColumn=: NDJSON rows. A new table keeps its timestamps in
 * `timestampColumn` (default "ts"), or with `noTimestamp=true` has none (a dimension table).
 */
export const IngestParams = Type.Object({ table: TableName });
/**
 * POST /v1/tables/:table/rows (token): a batch of rows by its Content-Type, NDJSON
 * (`application/x-ndjson`), CSV (`text/csv`, `text/tab-separated-values`) or Parquet
 * (`application/vnd.apache.parquet`), optionally `Content-Encoding: gzip`. The CSV options are
 * DuckDB's read_csv's; unset, DuckDB detects them (a header row is assumed).
 */
export const IngestQuery = Type.Object({
  timestampColumn: Type.Optional(TimestampColumn),
  noTimestamp: Type.Optional(Type.Boolean()),
  header: Type.Optional(Type.Boolean()),
  delimiter: Type.Optional(Type.String({ minLength: 1, maxLength: 4 })),
  quote: Type.Optional(Type.String({ maxLength: 1 })),
  escape: Type.Optional(Type.String({ maxLength: 1 })),
});
export type IngestQuery = Static<typeof IngestQuery>;

/**
 * PUT /v1/tables/:table/retention (token): how long the table's rows are kept, in ms of age;
 * retention's schedule retires every segment whose newest row is older. DELETE keeps them for good.
 */
export { RetentionSetting } from '../meta/api.js';

/**
 * POST /v1/tables/:table/attach (token): attaches Parquet objects that lie in a bucket as segments
 * of the table, without copying them: those under `prefix` (every `.parquet` key), those a `glob`
 * over the bucket's keys matches, or the `keys` given; read with `profile`'s credentials (Berth's
 * own when absent). One page of at most `limit` objects per call: `next` says where to carry on.
 */
export const AttachRequest = Type.Object(
  {
    bucket: AttachedObject.properties.bucket,
    prefix: Type.Optional(Type.String({ maxLength: 1024 })),
    glob: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    keys: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 1024 }), { minItems: 1, maxItems: 1_000 })),
    profile: AttachedObject.properties.profile,
    startAfter: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000 })),
    /** Merges may rewrite these objects into Berth's own bucket (never deleting them). @default false */
    adopt: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type AttachRequest = Static<typeof AttachRequest>;
/** The new table's timestamp column, as for ingest. */
export const AttachQuery = Type.Pick(IngestQuery, ['timestampColumn', 'noTimestamp']);
export const AttachResult = Type.Object({
  /** Objects attached as new segments; already attached and unchanged; attached before and changed since (their segments replaced). */
  attached: Type.Integer(),
  unchanged: Type.Integer(),
  replaced: Type.Integer(),
  /** Rows the objects attached or replaced hold. */
  rows: Type.Integer(),
  /** Objects not attached, and why. */
  refused: Type.Array(Type.Object({ key: Type.String(), reason: Type.String() })),
  /** The key to pass as `startAfter` for the next page; absent after the last. */
  next: Type.Optional(Type.String()),
});
export type AttachResult = Static<typeof AttachResult>;

export const IngestResult = Type.Object({
  segment: SegmentRow,
  /** Where the segment was pushed, and whether the owner took it. */
  push: Type.Object({
    owner: Type.Union([Type.String(), Type.Null()]),
    accepted: Type.Boolean(),
    reason: Type.Optional(Type.String()),
  }),
});
export type IngestResult = Static<typeof IngestResult>;

// ── the cluster ──

/** GET /v1/query-log/concentration?since=: compute concentration over the queries logged since then (ms since the epoch). */
export const ConcentrationQuery = Type.Object({ since: Type.Optional(Type.Integer({ minimum: 0 })) });
/** Compute concentration over the queries the coordinator logged, how many it keeps, and since when. */
export const ConcentrationReport = DefinedIn<Concentration & { capacity: number; from?: number }>(
  'core/compute-concentration.ts (Concentration), with capacity and from',
);
export type ConcentrationReport = Static<typeof ConcentrationReport>;

export const TableList = Type.Object({ tables: Type.Array(TableInfo) });

/** GET /v1/tables/:table: what `berth table show` prints. */
export const TableDetails = Type.Intersect([
  TableInfo,
  TableStats,
  Type.Object({
    /** The schema's version: a digest that moves with every column added or retyped. */
    schema: Type.String(),
    /** How long rows are kept (ms of age), null for good. */
    retentionMs: Type.Union([Type.Integer(), Type.Null()]),
  }),
]);
export type TableDetails = Static<typeof TableDetails>;

/** GET /v1/tables/:table/days: its active segments by the UTC day of their oldest row (the console's chart). */
export const SegmentDays = Type.Object({
  days: Type.Array(
    Type.Object({ day: Type.String(), segments: Type.Integer(), rows: Type.Integer(), bytes: Type.Integer() }),
  ),
});
export type SegmentDays = Static<typeof SegmentDays>;

/**
 * DELETE /v1/tables/:table (token): the table is gone from queries and ingest at once; the drop
 * workflow (`workflowId`) retires these segments, the janitor deletes their objects after its
 * grace time, and then the name may be created again, empty.
 */
export const TableDropped = Type.Intersect([
  TableStats,
  Type.Object({ table: Type.String(), incarnation: Type.Integer(), workflowId: Type.String() }),
]);
export type TableDropped = Static<typeof TableDropped>;

/**
 * POST /v1/tables/:table/deletes (token): removes the rows `where` holds true for, as a query's
 * WHERE would pick them (the table's own columns, no subquery). Answered 202 once recorded: the
 * delete workflow (`workflowId`) rewrites each segment holding such rows without them.
 */
export const DeleteRequest = Type.Object(
  { where: Type.String({ minLength: 1, maxLength: 10_000 }) },
  { additionalProperties: false },
);
export const DeleteRequested = Type.Intersect([
  RowDelete,
  Type.Object({ where: Type.String(), workflowId: Type.String() }),
]);
export type DeleteRequested = Static<typeof DeleteRequested>;

/** A query node as `GET /v1/nodes` lists it: its registration, weight, share of the data and warm-up. */
export const NodeRow = Type.Intersect([
  Backend,
  Type.Object({ weight: Type.Number(), share: Type.Number(), warmth: Type.Optional(Warmth) }),
]);
export type NodeRow = Static<typeof NodeRow>;
export const NodeList = Type.Object({ nodes: Type.Array(NodeRow) });

/** A workload group's running and waiting queries, and its limits. */
export const WorkloadGroupStatus = Type.Object({
  name: Type.String(),
  running: Type.Integer(),
  waiting: Type.Integer(),
  maxConcurrency: Type.Optional(Type.Integer()),
  maxQueueSize: Type.Optional(Type.Integer()),
  /** Why the figures are this coordinator's own instead of the whole group's. */
  unavailable: Type.Optional(Type.String()),
});
export type WorkloadGroupStatus = Static<typeof WorkloadGroupStatus>;
export const WorkloadGroups = Type.Object({ groups: Type.Array(WorkloadGroupStatus) });
