/**
 * The contract of meta's durable state: the node registry, the table and segment manifest, and
 * leases. Two stores keep it: SQLite (sqlite-store.ts, the embedded default, one meta process) and
 * PostgreSQL (postgres-store.ts, any number of stateless meta replicas); test/meta-store.test.ts
 * holds both to it. Every operation is idempotent, so a client may repeat any call on another
 * replica after a failure without changing the outcome.
 */
import { createHash } from 'node:crypto';
import { badRequest, conflict, notFound } from '../common/errors.js';
import { MAX_COLUMNS } from '../common/schemas.js';
import type {
  AttachedObject,
  Backend,
  ColumnSpec,
  DroppedTable,
  DropRetired,
  Fence,
  Lease,
  ManifestChanges,
  ManifestPage,
  Member,
  NewTable,
  NodeRegistration,
  Retention,
  RowDelete,
  RowDeleteReport,
  RowDeleteRequest,
  Segment,
  SegmentRow,
  SegmentRowsRemoval,
  SegmentRowsRemoved,
  TableInfo,
  TableStats,
  TableVersion,
} from './api.js';
import { ROW_DELETE_SEGMENTS_LISTED, timestampMismatchMessage } from './api.js';

// The shapes it takes and returns are meta's wire contract (api.ts).
export type * from './api.js';

export interface MetaStoreOptions {
  /** A node is alive while its last heartbeat is at most this old. @default 30000 */
  expiryMs?: number;
  /** The nodes' heartbeat interval, to count missed heartbeats. @default 5000 */
  heartbeatIntervalMs?: number;
  /** The clock (epoch ms). @default the store's own: Date.now for SQLite, the database's for PostgreSQL */
  now?: () => number;
  /**
   * How long a retired segment's row outlives its retirement once the janitor has deleted its
   * object: while it is kept, its id is known and committing it again is a no-op, so a batch sent
   * again (a shipper's retry) commits nothing. @default DEFAULT_DEDUP_WINDOW_MS (7 days)
   */
  dedupWindowMs?: number;
}

export interface MetaStore {
  // ── nodes ── (liveness is computed when read, from the last heartbeat: no sweeper, any number of replicas)

  /** Registers a node, or re-registers it after a restart (same id, new start time). */
  registerNode(node: NodeRegistration): Promise<void>;
  /** Removes a node that is leaving on purpose (drain, scale-down), so readers stop routing to it at once. */
  deregisterNode(id: string): Promise<boolean>;
  /** Records a heartbeat and the node's current vCPUs; false when the node is unknown. */
  heartbeat(id: string, vcpus: number): Promise<boolean>;
  /** The live nodes of a group, weighted by vCPU, by id: what every reader places segments over. */
  members(group: string): Promise<Member[]>;
  /** Every registered node, alive or not, by group and id, in the spirit of SHOW BACKENDS. */
  backends(group?: string): Promise<Backend[]>;

  // ── tables and segments ──

  /**
   * Creates a table on first use; later calls must agree on its timestamp column. A dropped name
   * is created again as its next incarnation, empty, once every segment of the dropped one is
   * retired (409 `table_dropping` until then).
   */
  ensureTable(table: NewTable): Promise<TableInfo>;
  /**
   * Drops one incarnation of a table: from this call on, no reader finds it (getTable,
   * tableVersion, listTables, retentions) and no segment commits to it; its segments stay active
   * for `retireDropped` to retire in batches. Repeating it, or naming an incarnation a later one
   * has replaced, is a no-op.
   */
  dropTable(name: string, incarnation: number): Promise<void>;
  /** Dropped tables some of whose segments are still active: the drops left to finish, by name. */
  drops(): Promise<DroppedTable[]>;
  /** Retires at most `limit` active segments of a dropped incarnation, in one short write; a repeat finds only what is left. */
  retireDropped(name: string, incarnation: number, limit: number): Promise<DropRetired>;
  /** Records a delete by predicate of a live table's rows, for the delete workflow to carry out. */
  requestDelete(name: string, request: RowDeleteRequest): Promise<RowDelete>;
  /** The deletes not finished yet, oldest first. */
  pendingDeletes(): Promise<RowDelete[]>;
  /**
   * Removes one segment's matching rows for a delete in one write (see SegmentRowsRemoval): the
   * segment retired, its replacement added, and the removal recorded. A repeat is a no-op.
   */
  removeRows(deleteId: number, removal: SegmentRowsRemoval): Promise<void>;
  /** Records a delete as finished, with the rows its removals add up to; the first finish stands. Unknown ids are a 404. */
  finishDelete(id: number): Promise<RowDeleteReport>;
  /** A delete's record and account so far. */
  deleteReport(id: number): Promise<RowDeleteReport | undefined>;
  getTable(name: string): Promise<TableInfo | undefined>;
  /**
   * How the table's active segments changed after manifest version `since`; 'snapshot' when the
   * log no longer reaches back so far or holds more than `limit` changes; undefined: no such table.
   */
  manifestChanges(name: string, since: number, limit: number): Promise<ManifestChanges | 'snapshot' | undefined>;
  /** A page of the table's active segments as of a manifest version (the current one when absent), by id. */
  manifestPage(
    name: string,
    version: number | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<ManifestPage | undefined>;
  /** The table's versions: a cheap check of whether a cached schema or manifest is still current. */
  tableVersion(name: string): Promise<TableVersion | undefined>;
  listTables(): Promise<TableInfo[]>;
  /**
   * Changes only the types of a table's columns (`to` has `from`'s names in `from`'s order),
   * while the table still has the columns `from`; a change that already landed is a no-op. The
   * table's schema digest moves with it, so readers' cached schemas and plans are dropped.
   */
  setColumnTypes(name: string, from: ColumnSpec[], to: ColumnSpec[]): Promise<TableInfo>;
  /**
   * Schema evolution: appends the columns the table lacks, in the order given, and answers the
   * table as it then is. A column it already has under the same name, in any case, is left as it
   * is, whatever its type: of two batches that bring the same field, the first one's type stands
   * and the other is checked against it. The schema digest moves with any column added.
   */
  addColumns(name: string, columns: ColumnSpec[]): Promise<TableInfo>;
  /** Sets how long a table's rows are kept (epoch ms of age), or with null keeps them for good. */
  setRetention(name: string, retentionMs: number | null): Promise<void>;
  /** Every table that has a retention period, by name. */
  retentions(): Promise<Retention[]>;
  /** A table's active segments, counted and summed; undefined for a table that does not exist. */
  tableStats(name: string): Promise<TableStats | undefined>;
  /**
   * Commits one new segment. Committing a segment whose id the manifest holds, active or retired,
   * is a no-op answered with the row it holds (a retired one stays retired); a different one under
   * the same id is a conflict. Retired rows are kept for the dedup window (`dedupWindowMs`), so a
   * batch sent again within it commits nothing even after a merge and the janitor.
   */
  commitSegment(segment: Segment): Promise<SegmentRow>;
  /**
   * Atomically retires `retire` and commits `add` in their place (a merge's swap). Exactly one of
   * two racing swaps over the same inputs wins; repeating a swap that already happened is a no-op;
   * with a fence, nothing commits unless the lease still carries the fence's token.
   */
  swapSegments(retire: string[], add: Segment, fence?: Fence): Promise<SegmentRow>;
  /** Retires segments without a replacement (data expiry). Unknown ids are an error; retired ones stay as they were. */
  retireSegments(ids: string[]): Promise<void>;
  getSegment(id: string): Promise<SegmentRow | undefined>;
  /** Active segments of a table whose time range overlaps [from, to] (epoch ms, either end open), newest first. */
  listSegments(table: string, range?: { from?: number; to?: number }): Promise<SegmentRow[]>;
  /**
   * At most `limit` retired segments whose retirement is older than `before` (epoch ms) and whose
   * objects may still exist, oldest retirement first: what the janitor may delete. A segment
   * committed again after `forgetSegments` (its object may have been uploaded again) is listed again.
   */
  listRetired(before: number, limit: number): Promise<SegmentRow[]>;
  /**
   * Records that these retired segments' objects are gone, in one transaction. Their rows stay,
   * retired and known (never listed as active), until the dedup window has passed since their
   * retirement (`purgeRetired`). An active segment is never forgotten: naming one is a 409
   * `segment_active`, and none of the others is forgotten either.
   */
  forgetSegments(ids: string[]): Promise<void>;
  /**
   * Deletes the rows of at most `limit` retired segments whose objects are gone and whose
   * retirement is older than the dedup window; returns how many. A row whose object the janitor
   * has not deleted is kept, however old.
   */
  purgeRetired(limit: number): Promise<number>;
  /** Which of these ids the manifest knows, in any state. */
  knownSegments(ids: string[]): Promise<string[]>;

  // ── leases ──

  /** Takes or renews a lease; granted when it is free, expired, or already the holder's. */
  acquireLease(name: string, holder: string, ttlMs: number): Promise<{ granted: boolean; lease: Lease }>;
  /** Releases a lease if `holder` holds it; true when something was released. */
  releaseLease(name: string, holder: string): Promise<boolean>;
  /** Releases every lease held by `holder` (a compute group parking at zero); returns their names, sorted. */
  releaseLeasesOf(holder: string): Promise<string[]>;
  getLease(name: string): Promise<Lease | undefined>;
  /** Leases that have not expired, by name. */
  listLeases(): Promise<Lease[]>;

  /** Resolves when the store can serve (readiness); rejects when its database is unreachable. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

// ── what both stores share ────────────────────────────────────────────────────────────────────

/** Whether meta's database setting names PostgreSQL (anything else is a SQLite file). */
export const isPostgresUrl = (database: string) => /^postgres(ql)?:\/\//i.test(database);

/** How long meta keeps a node among the members after its last heartbeat. */
export const DEFAULT_EXPIRY_MS = 30_000;
/** A week: longer than shippers are configured to retry a batch for (set the window past yours if it is not). */
export const DEFAULT_DEDUP_WINDOW_MS = 7 * 24 * 3_600_000;

/** A node row as both stores keep it. */
export interface NodeRow {
  id: string;
  grp: string;
  url: string;
  vcpus: number;
  started_at: number;
  last_heartbeat: number;
}

/** The SHOW BACKENDS row of a node, as seen at `now`. */
export function toBackend(r: NodeRow, now: number, expiryMs: number, heartbeatIntervalMs: number): Backend {
  return {
    id: r.id,
    group: r.grp,
    url: r.url,
    cpuCores: r.vcpus,
    alive: r.last_heartbeat >= now - expiryMs,
    lastStartTime: new Date(r.started_at).toISOString(),
    lastHeartbeat: new Date(r.last_heartbeat).toISOString(),
    heartbeatFailures: Math.max(0, Math.floor((now - r.last_heartbeat) / heartbeatIntervalMs) - 1),
  };
}

/** A segment row as both stores keep it. */
export interface SegmentDbRow {
  id: string;
  tbl: string;
  min_ts: number;
  max_ts: number;
  rows: number;
  bytes: number;
  level: number;
  state: 'active' | 'retired';
  created_at: number;
  retired_at: number | null;
  replaced_by: string | null;
  /** When the janitor deleted the object of this retired segment; null while it may exist. */
  object_deleted_at: number | null;
  /** An attached segment's object: JSON text in SQLite, parsed by PostgreSQL's driver. */
  object: string | AttachedObject | null;
  /** The table's manifest versions at which the segment was added and retired. */
  added_version: number;
  retired_version: number | null;
}

/** A day: no merged segment spans more, so one that meets a range starts at most this long before it. */
export const NARROW_SPAN_MS = 86_400_000;

/**
 * The active segments overlapping [from, to], in two index ranges (migration 9): those spanning
 * at most NARROW_SPAN_MS start within a day before `from`; the few wider ones are read apart.
 * Parameters: $1 table, $2 from, $3 to, $4 from - NARROW_SPAN_MS.
 */
export const SEGMENTS_IN_RANGE_SQL = `SELECT * FROM (
    SELECT * FROM segments WHERE tbl = $1 AND state = 'active' AND max_ts - min_ts <= ${NARROW_SPAN_MS}
      AND min_ts >= $4 AND min_ts <= $3 AND max_ts >= $2
    UNION ALL
    SELECT * FROM segments WHERE tbl = $1 AND state = 'active' AND max_ts - min_ts > ${NARROW_SPAN_MS}
      AND min_ts <= $3 AND max_ts >= $2) AS s
  ORDER BY max_ts DESC, id`;

/** The bounds SEGMENTS_IN_RANGE_SQL takes, for a range that may be open on either side. */
export const rangeBounds = (range: { from?: number; to?: number }): [number, number, number] => {
  const from = range.from ?? Number.MIN_SAFE_INTEGER;
  return [from, range.to ?? Number.MAX_SAFE_INTEGER, Math.max(from - NARROW_SPAN_MS, Number.MIN_SAFE_INTEGER)];
};

/**
 * The change log's reads, for table $1 after version $2 up to the table's version $3 (read in the
 * same snapshot): segments added and still active at $3, segments active at $2 retired since.
 */
export const CHANGES_SQL = {
  count: `SELECT (SELECT count(*) FROM segments WHERE tbl = $1 AND added_version > $2 AND added_version <= $3)
    + (SELECT count(*) FROM segments WHERE tbl = $1 AND retired_version > $2 AND retired_version <= $3) AS n`,
  added: `SELECT * FROM segments WHERE tbl = $1 AND added_version > $2 AND added_version <= $3
    AND (retired_version IS NULL OR retired_version > $3) ORDER BY added_version, id`,
  retired: `SELECT id FROM segments WHERE tbl = $1 AND retired_version > $2 AND retired_version <= $3
    AND added_version <= $2 ORDER BY id`,
  /** A page of the manifest as of version $2, by id after $3, at most $4 rows. */
  page: `SELECT * FROM segments WHERE tbl = $1 AND added_version <= $2
    AND (retired_version IS NULL OR retired_version > $2) AND id > $3 ORDER BY id LIMIT $4`,
};

export const toSegment = (r: SegmentDbRow): SegmentRow => ({
  id: r.id,
  table: r.tbl,
  minTs: r.min_ts,
  maxTs: r.max_ts,
  rows: r.rows,
  bytes: r.bytes,
  level: r.level,
  state: r.state,
  createdAt: r.created_at,
  retiredAt: r.retired_at,
  replacedBy: r.replaced_by,
  ...(r.object === null || r.object === undefined
    ? {}
    : { object: typeof r.object === 'string' ? (JSON.parse(r.object) as AttachedObject) : r.object }),
});

/** The answer to committing `segment` when `existing` already has its id: itself if the same, else a conflict. */
export function sameSegmentOrConflict(existing: SegmentRow, segment: Segment): SegmentRow {
  const same = (['table', 'minTs', 'maxTs', 'rows', 'bytes', 'level'] as const).every(
    (k) => existing[k] === segment[k],
  );
  if (same) return existing;
  throw conflict('segment_exists', `segment "${segment.id}" is already committed with different contents`);
}

/** The schema digest of a table's version (TableVersion.schema). */
export const schemaDigest = (timestampColumn: string | null, columns: ColumnSpec[]): string =>
  createHash('sha256')
    .update(JSON.stringify([timestampColumn, columns.map((c) => [c.name, c.type])]))
    .digest('hex')
    .slice(0, 16);

/** The table's columns with those of `added` it lacks (by name, in any case) appended; `current` itself when there are none. */
export function withColumnsAdded(current: ColumnSpec[], added: ColumnSpec[]): ColumnSpec[] {
  const names = new Set(current.map((c) => c.name.toLowerCase()));
  const fresh: ColumnSpec[] = [];
  for (const column of added) {
    if (names.has(column.name.toLowerCase())) continue;
    names.add(column.name.toLowerCase());
    fresh.push(column);
  }
  if (fresh.length === 0) return current;
  // Batches that each fit may together not: the last to land is refused.
  if (current.length + fresh.length > MAX_COLUMNS)
    throw badRequest(
      'too_many_columns',
      `a table has at most ${MAX_COLUMNS} columns; these would make ${current.length + fresh.length}`,
    );
  return [...current, ...fresh];
}

/** One SQL for both stores: the active segments' totals, through the (tbl, state, …) index. */
export const TABLE_STATS_SQL = `SELECT count(*) AS segments, coalesce(sum(rows), 0) AS rows, coalesce(sum(bytes), 0) AS bytes,
  min(min_ts) AS oldest, max(max_ts) AS newest FROM segments WHERE tbl = $1 AND state = 'active'`;

/** A stats row as either driver reads it (PostgreSQL's bigints come as strings). */
export const toTableStats = (row: Record<string, unknown>): TableStats => ({
  segments: Number(row.segments),
  rows: Number(row.rows),
  bytes: Number(row.bytes),
  oldest: row.oldest === null ? null : Number(row.oldest),
  newest: row.newest === null ? null : Number(row.newest),
});

/** The answer to ensureTable when `existing` already has the table's name. */
export function sameTableOrConflict(existing: TableInfo, table: NewTable): TableInfo {
  if (existing.timestampColumn !== table.timestampColumn) throw timestampMismatch(existing, table.timestampColumn);
  return existing;
}

/**
 * The checks of a column type change against the table's current columns: true when it is to be
 * written, false when it already landed (a repeat), an error when it must not land.
 */
export function checkColumnTypeChange(
  name: string,
  current: ColumnSpec[],
  from: ColumnSpec[],
  to: ColumnSpec[],
): boolean {
  const names = (columns: ColumnSpec[]) => JSON.stringify(columns.map((c) => c.name));
  if (names(from) !== names(to)) {
    throw badRequest(
      'only_types_change',
      `a column type change of table "${name}" keeps the columns' names and order: ${names(from)} became ${names(to)}`,
    );
  }
  const same = (a: ColumnSpec[], b: ColumnSpec[]) =>
    a.length === b.length && a.every((c, i) => c.name === b[i]!.name && c.type === b[i]!.type);
  if (same(current, to)) return false;
  if (!same(current, from)) {
    throw conflict(
      'table_changed',
      `table "${name}" no longer has the columns the type change was made against: look at it again`,
    );
  }
  return true;
}

/**
 * The checks of a swap, run inside its transaction once the lease and the inputs are locked:
 * true when this very swap already happened (repeat: no-op), an error when it must not commit.
 */
export function checkSwap(
  retire: string[],
  add: Segment,
  inputs: Map<string, SegmentRow>,
  merged: SegmentRow | undefined,
  fence: Fence | undefined,
  lease: Lease | undefined,
): boolean {
  if (merged && retire.every((id) => inputs.get(id)?.replacedBy === add.id)) return true;
  if (fence && (lease === undefined || lease.token !== fence.token)) {
    const now = lease ? `it is now held by "${lease.holder}" under token ${lease.token}` : 'it is not held';
    throw conflict(
      'lease_lost',
      `lease "${fence.lease}" no longer carries token ${fence.token} (${now}): the swap is fenced off`,
    );
  }
  for (const id of retire) {
    const input = inputs.get(id);
    if (!input) throw notFound('segment_not_found', `segment "${id}" is not in the manifest`);
    if (input.table !== add.table)
      throw conflict('table_mismatch', `segment "${id}" belongs to table "${input.table}", not "${add.table}"`);
    if (input.state !== 'active') {
      throw conflict(
        'segment_retired',
        `segment "${id}" was already retired${input.replacedBy ? ` by "${input.replacedBy}"` : ''}`,
      );
    }
  }
  if (merged) sameSegmentOrConflict(merged, add);
  return false;
}

const timestampMismatch = (table: NewTable, asked: string | null) =>
  conflict('table_mismatch', timestampMismatchMessage(table, asked));

/**
 * How a table's missing timestamp column is kept in the stores' NOT NULL column: an empty string,
 * which no column name can be. Read back as null.
 */
export const NO_TIMESTAMP_COLUMN = '';

/** The answer to ensureTable for a dropped name whose segments are not all retired yet. */
export const tableDropping = (name: string) =>
  conflict(
    'table_dropping',
    `table "${name}" is being dropped: it can be created again once its drop has retired every segment`,
  );

/** The answer to a commit for an incarnation of the table that was dropped and has a successor. */
export const tableRecreated = (name: string, incarnation: number) =>
  conflict(
    'table_recreated',
    `table "${name}" was dropped and created again since this segment was written for it (incarnation ${incarnation})`,
  );

/** The answer to retireDropped for a table that is not dropped. */
export const tableNotDropped = (name: string) =>
  conflict('table_not_dropped', `table "${name}" is not dropped: only a dropped table's segments are retired at once`);

/** A row_deletes row as either driver reads it, in RowDelete's shape. */
export const ROW_DELETE_COLUMNS = `id, tbl AS "table", incarnation, predicate, from_ts AS "from", to_ts AS "to",
  requested_at AS "requestedAt", finished_at AS "finishedAt", rows_removed AS "rowsRemoved"`;

export const deleteNotFound = (id: number) => notFound('delete_not_found', `delete ${id} was never requested`);
export const deleteFinished = (id: number) =>
  conflict('delete_finished', `delete ${id} is finished: it removes no more rows`);

/** A delete's account from its removals ($1 its id), in RowDeleteReport's shape but for the record. */
export const ROW_DELETE_TOTALS_SQL = `SELECT coalesce(sum(removed), 0) AS "rowsRemoved",
  count(replaced_by) AS "segmentsRewritten", count(*) - count(replaced_by) AS "segmentsRetired"
  FROM row_delete_segments WHERE delete_id = $1`;
export const ROW_DELETE_SEGMENTS_SQL = `SELECT segment, removed, replaced_by AS "replacedBy"
  FROM row_delete_segments WHERE delete_id = $1 ORDER BY segment LIMIT ${ROW_DELETE_SEGMENTS_LISTED}`;

/** The report of `record`, from the two queries above as either driver reads them. */
export const toRowDeleteReport = (
  record: RowDelete,
  totals: Record<string, unknown>,
  perSegment: SegmentRowsRemoved[],
): RowDeleteReport => ({
  ...record,
  rowsRemoved: record.rowsRemoved ?? Number(totals.rowsRemoved),
  segmentsRewritten: Number(totals.segmentsRewritten),
  segmentsRetired: Number(totals.segmentsRetired),
  perSegment: perSegment.map((s) => ({ ...s, removed: Number(s.removed) })),
});

/**
 * Checks that a delete may remove rows from `segment` (the store holds its lock): the delete is
 * pending and the segment active. True when this removal is recorded already (a repeat).
 */
export function checkRowsRemoval(
  deleteId: number,
  removal: SegmentRowsRemoval,
  record: RowDelete | undefined,
  done: boolean,
  segment: SegmentRow | undefined,
): boolean {
  if (!record) throw deleteNotFound(deleteId);
  if (done) return true;
  if (record.finishedAt !== null) throw deleteFinished(deleteId);
  if (!segment) throw segmentNotFound(removal.segment);
  if (segment.table !== record.table)
    throw conflict(
      'table_mismatch',
      `segment "${segment.id}" belongs to table "${segment.table}", not "${record.table}"`,
    );
  if (segment.state !== 'active')
    throw conflict(
      'segment_retired',
      `segment "${segment.id}" was already retired${segment.replacedBy ? ` by "${segment.replacedBy}"` : ''}`,
    );
  if (removal.replacement && removal.replacement.table !== record.table)
    throw conflict('table_mismatch', `a replacement of a segment of "${record.table}" belongs to that table`);
  return false;
}

export const tableNotFound = (name: string) => notFound('table_not_found', `table "${name}" does not exist`);
export const segmentNotFound = (id: string) => notFound('segment_not_found', `segment "${id}" is not in the manifest`);
export const segmentActive = (id: string) =>
  conflict('segment_active', `segment "${id}" is active: only retired segments can be forgotten`);
