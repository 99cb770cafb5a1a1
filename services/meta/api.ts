/**
 * The meta service's wire contract: every route's request and response schema, and the types
 * derived from them. The app validates and serializes with them, the client and the store speak
 * their types, so a node, a table, a segment or a lease is defined here once.
 */
import { Type, type Static } from 'typebox';
import { ColumnSpec, GroupName, HttpUrl, NodeId, SegmentId, TableName, TimestampColumn } from '../common/schemas.js';

export { ColumnSpec };

// ── nodes ──

/** The most vCPUs a node may declare unless meta is told otherwise. */
export const DEFAULT_MAX_VCPUS = 1024;

/** A node's vCPUs; `max` is the most a node may declare (a node's weight is its share of the data). */
export const Vcpus = (max = DEFAULT_MAX_VCPUS) => Type.Number({ exclusiveMinimum: 0, maximum: max });

/** POST /v1/nodes. */
export const NodeRegistration = (maxVcpus?: number) =>
  Type.Object(
    {
      id: NodeId,
      group: GroupName,
      url: HttpUrl({ maxLength: 500 }),
      vcpus: Vcpus(maxVcpus),
      /** When the node process started (epoch ms). */
      startedAt: Type.Integer({ minimum: 0 }),
    },
    { additionalProperties: false },
  );
export type NodeRegistration = Static<ReturnType<typeof NodeRegistration>>;

export const NodeParams = Type.Object({ id: NodeId });
/** POST /v1/nodes/:id/heartbeat. */
export const Heartbeat = (maxVcpus?: number) =>
  Type.Object({ vcpus: Vcpus(maxVcpus) }, { additionalProperties: false });

/** DELETE /v1/nodes/:id. */
export const Removed = Type.Object({ removed: Type.Boolean() });

/** A live node of a group, weighted by vCPU: what every reader places segments over. */
export const Member = Type.Object({ id: Type.String(), url: Type.String(), weight: Type.Number() });
export type Member = Static<typeof Member>;

/**
 * GET /v1/groups/:group/members: the group's live members, with their version as an ETag. With
 * If-None-Match naming the current version, a 304, after waiting up to `wait` ms for a change.
 */
export const GroupParams = Type.Object({ group: GroupName });
export const MembersQuery = Type.Object({ wait: Type.Optional(Type.Integer({ minimum: 0, maximum: 60_000 })) });
export const MemberList = Type.Object({ group: Type.String(), members: Type.Array(Member) });

/** One row of the SHOW BACKENDS view. */
export const Backend = Type.Object({
  id: Type.String(),
  group: Type.String(),
  url: Type.String(),
  cpuCores: Type.Number(),
  alive: Type.Boolean(),
  lastStartTime: Type.String(),
  lastHeartbeat: Type.String(),
  /** Heartbeats missed since the last one that arrived. */
  heartbeatFailures: Type.Integer(),
});
export type Backend = Static<typeof Backend>;

/** GET /v1/backends?group=. */
export const BackendsQuery = Type.Object({ group: Type.Optional(GroupName) });
export const BackendList = Type.Object({ backends: Type.Array(Backend) });

// ── tables and segments ──

export const TableParams = Type.Object({ table: TableName });

/** PUT /v1/tables/:table: the table's timestamp column (null for a table without one) and columns. */
export const TableDefinition = Type.Object(
  {
    timestampColumn: Type.Union([TimestampColumn, Type.Null()]),
    columns: Type.Array(ColumnSpec, { minItems: 1, maxItems: 2000 }),
  },
  { additionalProperties: false },
);

/**
 * PUT /v1/tables/:table/column-types: changes only the types of a table's columns, never their
 * names or order (a repair: meta's types made to say what the segments hold). `from` is the
 * columns the change was decided on: it lands only while the table still has them (409
 * `table_changed` otherwise), and a repeat of a change that already landed is a no-op.
 */
export const ColumnTypeChange = Type.Object(
  {
    from: Type.Array(ColumnSpec, { minItems: 1, maxItems: 2000 }),
    to: Type.Array(ColumnSpec, { minItems: 1, maxItems: 2000 }),
  },
  { additionalProperties: false },
);
export type ColumnTypeChange = Static<typeof ColumnTypeChange>;

/**
 * POST /v1/tables/:table/columns: schema evolution. Appends the columns the table lacks (by name,
 * in any case) and answers the table as it then is; a column it has is left as it is. Repeating
 * it is a no-op, and two batches adding fields at once both land.
 */
export const ColumnsAdded = Type.Object(
  { columns: Type.Array(ColumnSpec, { minItems: 1, maxItems: 2000 }) },
  { additionalProperties: false },
);

export const TableInfo = Type.Object({
  name: Type.String(),
  /**
   * The column segments are partitioned and pruned by, or null for a table without a clock (a
   * dimension table): its segments span all of time (TIMELESS), so no time range prunes them, a
   * merge takes them by count rather than by day, and no retention period applies.
   */
  timestampColumn: Type.Union([Type.String(), Type.Null()]),
  columns: Type.Array(ColumnSpec),
  /**
   * Which life of the name this is: 1 at first, one more each time a dropped name is created
   * again. Segment ids carry it, so a re-created table never shares an id with the dropped one.
   */
  incarnation: Type.Integer({ minimum: 1 }),
});
export type TableInfo = Static<typeof TableInfo>;
/** A table as its first batch defines it: meta gives it its incarnation. */
export type NewTable = Omit<TableInfo, 'incarnation'>;

/** The words for a batch or a definition whose timestamp column (null: none) is not the table's. */
export const timestampMismatchMessage = (table: NewTable, asked: string | null) =>
  table.timestampColumn === null
    ? `table "${table.name}" has no timestamp column, not "${asked}"`
    : `table "${table.name}" keeps its timestamps in "${table.timestampColumn}"${asked === null ? ': it is not a table without one' : `, not "${asked}"`}`;
export const TableList = Type.Object({ tables: Type.Array(TableInfo) });

/**
 * PUT /v1/tables/:table/retention: how long the table's rows are kept, in ms of age; the retention
 * workflow retires every segment whose newest row is older. DELETE keeps them for good again. (Not
 * a null in the body: Fastify's type coercion would read a 0 sent by mistake as that null.)
 */
export const RetentionSetting = Type.Object(
  { retentionMs: Type.Integer({ minimum: 1 }) },
  { additionalProperties: false },
);

export const Retention = Type.Object({ table: Type.String(), retentionMs: Type.Integer({ minimum: 1 }) });
export type Retention = Static<typeof Retention>;
/** GET /v1/retentions: every table that has a retention period. */
export const RetentionList = Type.Object({ retentions: Type.Array(Retention) });

/**
 * DELETE /v1/tables/:table?incarnation=: drops that incarnation of the table. It is gone from
 * every reader at once; its segments are retired afterwards by the drop workflow (POST
 * /v1/tables/:table/drop/retire) and their objects deleted by the janitor. Until every segment is
 * retired the name cannot be created again (409 `table_dropping`). Repeating a drop is a no-op.
 */
export const DropQuery = Type.Object({ incarnation: Type.Integer({ minimum: 1 }) });
/** A dropped incarnation of a table. */
export const DroppedTable = Type.Object({
  table: Type.String(),
  incarnation: Type.Integer(),
  /** When it was dropped (epoch ms). */
  droppedAt: Type.Integer(),
});
export type DroppedTable = Static<typeof DroppedTable>;
/** GET /v1/drops: the dropped tables some of whose segments are still active, by name. */
export const DropList = Type.Object({ drops: Type.Array(DroppedTable) });
/** POST /v1/tables/:table/drop/retire: retires at most `limit` active segments of the dropped incarnation. */
export const DropRetireRequest = Type.Object(
  { incarnation: Type.Integer({ minimum: 1 }), limit: Type.Integer({ minimum: 1, maximum: 10_000 }) },
  { additionalProperties: false },
);
/** What one such call retired, and whether any segment of the dropped incarnation is still active. */
export const DropRetired = Type.Object({
  segments: Type.Integer(),
  rows: Type.Integer(),
  bytes: Type.Integer(),
  more: Type.Boolean(),
});
export type DropRetired = Static<typeof DropRetired>;
/** GET /v1/tables/:table/stats: a table's active segments, summed by meta's store (no listing). */
export const TableStats = Type.Object({
  segments: Type.Integer(),
  rows: Type.Integer(),
  bytes: Type.Integer(),
  /** The earliest and latest timestamp of its rows (epoch ms), null without segments. */
  oldest: Type.Union([Type.Integer(), Type.Null()]),
  newest: Type.Union([Type.Integer(), Type.Null()]),
});
export type TableStats = Static<typeof TableStats>;

/** What a reader caches a table by: both change whenever what they describe does. */
export const TableVersion = Type.Object({
  /** Grows with every change to the table's active segments (commit, swap, retirement). */
  manifest: Type.Integer(),
  /** A digest of the table's timestamp column and columns. */
  schema: Type.String(),
});
export type TableVersion = Static<typeof TableVersion>;

/**
 * A Parquet object Berth did not write, attached as a segment where it lies (`berth attach`):
 * read from `bucket`/`key` with the credentials of `profile` (Berth's own when absent), only
 * while S3 still answers with `etag`. Berth never deletes it; merges rewrite it into Berth's own
 * bucket only when `adopt` says so.
 */
export const AttachedObject = Type.Object(
  {
    bucket: Type.String({ minLength: 3, maxLength: 63, pattern: '^[a-z0-9][a-z0-9.-]*[a-z0-9]$' }),
    key: Type.String({ minLength: 1, maxLength: 1024 }),
    etag: Type.String({ minLength: 1, maxLength: 200 }),
    profile: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' })),
    adopt: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type AttachedObject = Static<typeof AttachedObject>;

/** A segment as it is committed. */
export const Segment = Type.Object(
  {
    id: SegmentId,
    table: TableName,
    /** Earliest and latest timestamp in the segment (epoch ms, floor and ceiling). */
    minTs: Type.Integer(),
    maxTs: Type.Integer(),
    rows: Type.Integer({ minimum: 0 }),
    bytes: Type.Integer({ minimum: 0 }),
    level: Type.Integer({ minimum: 0, maximum: 16 }),
    /**
     * The table incarnation the segment was written for: a commit for one that has since been
     * dropped is refused (404, or 409 `table_recreated` once the name lives again), never added
     * to the new table. Omitted by a merge's swap, whose inputs already tie it to its table.
     */
    incarnation: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Where an attached segment's object lies; absent for Berth's own, at segmentObjectKey. */
    object: Type.Optional(AttachedObject),
  },
  { additionalProperties: false },
);
export type Segment = Static<typeof Segment>;

/** A segment as the manifest holds it. */
export const SegmentRow = Type.Object({
  id: Type.String(),
  table: Type.String(),
  minTs: Type.Integer(),
  maxTs: Type.Integer(),
  rows: Type.Integer(),
  bytes: Type.Integer(),
  level: Type.Integer(),
  state: Type.Union([Type.Literal('active'), Type.Literal('retired')]),
  createdAt: Type.Integer(),
  retiredAt: Type.Union([Type.Integer(), Type.Null()]),
  replacedBy: Type.Union([Type.String(), Type.Null()]),
  /** Where an attached segment's object lies; absent for Berth's own. */
  object: Type.Optional(AttachedObject),
});
export type SegmentRow = Static<typeof SegmentRow>;
export const SegmentList = Type.Object({ segments: Type.Array(SegmentRow) });

/**
 * GET /v1/tables/:table/changes?since=V: how the table's active segments changed after manifest
 * version V, up to `version`: segments added (and still active), ids retired. A 410
 * `snapshot_needed` when the log no longer reaches back to V (retired rows purged past the dedup
 * window) or holds more than `limit` changes: read the manifest whole instead.
 */
export const ChangesQuery = Type.Object({
  since: Type.Integer({ minimum: 0 }),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
});
export const ManifestChanges = Type.Object({
  version: Type.Integer(),
  incarnation: Type.Integer(),
  added: Type.Array(SegmentRow),
  retired: Type.Array(Type.String()),
});
export type ManifestChanges = Static<typeof ManifestChanges>;
/**
 * GET /v1/tables/:table/manifest?version=&after=&limit=: the table's active segments as of
 * manifest `version` (the current one when absent), a page at a time by id after `after`; `next`
 * is the `after` of the page that follows. Pages of one version make one consistent manifest.
 */
export const ManifestQuery = Type.Object({
  version: Type.Optional(Type.Integer({ minimum: 0 })),
  after: Type.Optional(SegmentId),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
});
export const ManifestPage = Type.Object({
  version: Type.Integer(),
  incarnation: Type.Integer(),
  segments: Type.Array(SegmentRow),
  next: Type.Optional(Type.String()),
});
export type ManifestPage = Static<typeof ManifestPage>;
/** Changes one `changes` call answers at most unless asked for fewer. */
export const MAX_MANIFEST_CHANGES = 100_000;
/** Segments one manifest page holds unless asked for fewer. */
export const MANIFEST_PAGE = 10_000;

/** GET /v1/tables/:table/segments?from=&to=: the active segments overlapping the range. */
export const SegmentRange = Type.Object({ from: Type.Optional(Type.Integer()), to: Type.Optional(Type.Integer()) });
export const SegmentParams = Type.Object({ id: SegmentId });

export const LeaseName = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$' });

/** A manifest change made under a lease: it commits only while the lease still carries this token. */
export const Fence = Type.Object(
  { lease: LeaseName, token: Type.Integer({ minimum: 0 }) },
  { additionalProperties: false },
);
export type Fence = Static<typeof Fence>;

/** POST /v1/segments/swap: retires `retire` and commits `add` in one step. */
export const SegmentSwap = Type.Object(
  {
    retire: Type.Array(SegmentId, { minItems: 1, maxItems: 10_000 }),
    add: Segment,
    // A swap made under a lease: it commits only while the lease still carries this token (409 lease_lost otherwise).
    fence: Type.Optional(Fence),
  },
  { additionalProperties: false },
);

/** POST /v1/segments/retire. */
export const SegmentIds = Type.Object(
  { ids: Type.Array(SegmentId, { minItems: 1, maxItems: 10_000 }) },
  { additionalProperties: false },
);

/**
 * POST /v1/tables/:table/deletes: records a delete by predicate for the delete workflow. The
 * coordinator checked `predicate` and gives it as a whole statement, `SELECT *, (<predicate>) AS
 * berth_delete FROM "<table>"`, and the time range its predicate bounds (epoch ms), if any.
 */
export const RowDeleteRequest = Type.Object(
  {
    incarnation: Type.Integer({ minimum: 1 }),
    predicate: Type.String({ minLength: 1, maxLength: 100_000 }),
    from: Type.Optional(Type.Integer()),
    to: Type.Optional(Type.Integer()),
  },
  { additionalProperties: false },
);
export type RowDeleteRequest = Static<typeof RowDeleteRequest>;
export const RowDelete = Type.Object({
  id: Type.Integer(),
  table: Type.String(),
  incarnation: Type.Integer(),
  predicate: Type.String(),
  from: Type.Union([Type.Integer(), Type.Null()]),
  to: Type.Union([Type.Integer(), Type.Null()]),
  requestedAt: Type.Integer(),
  /** When the workflow finished it, and how many rows it removed in all; null while pending. */
  finishedAt: Type.Union([Type.Integer(), Type.Null()]),
  rowsRemoved: Type.Union([Type.Integer(), Type.Null()]),
});
export type RowDelete = Static<typeof RowDelete>;
/** GET /v1/deletes: the deletes not finished yet, oldest first. */
export const RowDeleteList = Type.Object({ deletes: Type.Array(RowDelete) });
export const RowDeleteParams = Type.Object({ id: Type.Integer({ minimum: 1 }) });
/**
 * POST /v1/deletes/:id/segments: one segment's matching rows removed, in one write: the segment
 * retired, replaced by `replacement` (its other rows) unless every row matched, and recorded
 * against the delete, so that the delete's account stays exact whatever worker dies when. A
 * repeat is a no-op; a segment no longer active is a 409 `segment_retired` (a merge took it first).
 */
export const SegmentRowsRemoval = Type.Object(
  { segment: SegmentId, removed: Type.Integer({ minimum: 1 }), replacement: Type.Optional(Segment) },
  { additionalProperties: false },
);
export type SegmentRowsRemoval = Static<typeof SegmentRowsRemoval>;
/** Rows one segment lost to a delete, as meta recorded them. */
export const SegmentRowsRemoved = Type.Object({
  segment: Type.String(),
  removed: Type.Integer(),
  /** The segment that replaced it, or null when every row of it matched. */
  replacedBy: Type.Union([Type.String(), Type.Null()]),
});
export type SegmentRowsRemoved = Static<typeof SegmentRowsRemoved>;
/**
 * POST /v1/deletes/:id/finish (and GET /v1/deletes/:id): a delete's account from meta's records.
 * Per segment only the first ROW_DELETE_SEGMENTS_LISTED, so that it stays bounded however many
 * segments the rows were spread over. The first finish stands; a repeat answers the same.
 */
export const RowDeleteReport = Type.Intersect([
  RowDelete,
  Type.Object({
    segmentsRewritten: Type.Integer(),
    segmentsRetired: Type.Integer(),
    perSegment: Type.Array(SegmentRowsRemoved),
  }),
]);
export type RowDeleteReport = Static<typeof RowDeleteReport>;
export const ROW_DELETE_SEGMENTS_LISTED = 100;
/** Retired segments one listing returns by default: a page, however many a merge or a drop retired. */
export const RETIRED_LISTED = 1_000;
/** GET /v1/segments/retired?before=&limit=: at most `limit` segments retired before then (epoch ms), oldest first. */
export const RetiredQuery = Type.Object({
  before: Type.Integer(),
  limit: Type.Integer({ minimum: 1, maximum: 10_000, default: RETIRED_LISTED }),
});
/** POST /v1/segments/purge: deletes at most `limit` retired rows past the dedup window whose objects are gone. */
export const PurgeRequest = Type.Object(
  { limit: Type.Integer({ minimum: 1, maximum: 100_000 }) },
  { additionalProperties: false },
);
export const Purged = Type.Object({ purged: Type.Integer() });
/** POST /v1/segments/known: which of these ids the manifest holds (ids of any form: a janitor asks about every object it finds). */
export const KnownQuery = Type.Object(
  { ids: Type.Array(Type.String({ maxLength: 300 }), { maxItems: 10_000 }) },
  { additionalProperties: false },
);
export const KnownList = Type.Object({ known: Type.Array(Type.String()) });

// ── leases ──

export const Lease = Type.Object({
  name: Type.String(),
  holder: Type.String(),
  expiresAt: Type.Integer(),
  /**
   * The fencing token: it grows each time the lease changes hands and stays the same while one
   * holder renews it, so a swap fenced with it commits only while that grant is still current.
   */
  token: Type.Integer(),
});
export type Lease = Static<typeof Lease>;

export const LeaseParams = Type.Object({ name: LeaseName });
const Holder = Type.String({ minLength: 1, maxLength: 200 });
/** POST /v1/leases/:name/acquire. */
export const LeaseRequest = Type.Object(
  { holder: Holder, ttlMs: Type.Integer({ minimum: 1, maximum: 86_400_000 }) },
  { additionalProperties: false },
);
/** Not granted is an answer, not an error: `lease` says who holds it and until when. */
export const LeaseGrant = Type.Object({ granted: Type.Boolean(), lease: Lease });
export type LeaseGrant = Static<typeof LeaseGrant>;
/** POST /v1/leases/:name/release and /v1/leases/release-holder. */
export const HolderBody = Type.Object({ holder: Holder }, { additionalProperties: false });
export const LeaseReleased = Type.Object({ released: Type.Boolean() });
/** The names of the leases released. */
export const LeasesReleased = Type.Object({ released: Type.Array(Type.String()) });
export const LeaseList = Type.Object({ leases: Type.Array(Lease) });
