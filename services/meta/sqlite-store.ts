/**
 * Meta's store in one SQLite file: the embedded default, for one meta process. Every multi-row
 * change is one `BEGIN IMMEDIATE` transaction (the write lock is taken up front), so a crash never
 * leaves half a swap and even a second process on the same file could not interleave with it.
 */
import type Database from 'better-sqlite3';
import { openSqlite } from '../common/sqlite.js';
import { DEFAULT_HEARTBEAT_MS } from '../common/config.js';
import { pendingMigrations, SCHEMA_MIGRATIONS_TABLE } from './migrations.js';
import {
  checkColumnTypeChange,
  checkRowsRemoval,
  checkSwap,
  deleteNotFound,
  ROW_DELETE_COLUMNS,
  ROW_DELETE_SEGMENTS_SQL,
  ROW_DELETE_TOTALS_SQL,
  toRowDeleteReport,
  DEFAULT_DEDUP_WINDOW_MS,
  DEFAULT_EXPIRY_MS,
  NO_TIMESTAMP_COLUMN,
  CHANGES_SQL,
  rangeBounds,
  SEGMENTS_IN_RANGE_SQL,
  sameSegmentOrConflict,
  sameTableOrConflict,
  segmentActive,
  segmentNotFound,
  tableDropping,
  tableNotDropped,
  tableNotFound,
  tableRecreated,
  withColumnsAdded,
  TABLE_STATS_SQL,
  toTableStats,
  type TableStats,
  toBackend,
  toSegment,
  type Backend,
  type ColumnSpec,
  type DroppedTable,
  type DropRetired,
  type Fence,
  type Lease,
  type ManifestChanges,
  type ManifestPage,
  type Member,
  type MetaStore,
  type MetaStoreOptions,
  type NewTable,
  type NodeRegistration,
  type NodeRow,
  type Retention,
  type RowDelete,
  type RowDeleteReport,
  type RowDeleteRequest,
  type Segment,
  type SegmentDbRow,
  type SegmentRow,
  type SegmentRowsRemoval,
  type SegmentRowsRemoved,
  type TableInfo,
  type TableVersion,
  schemaDigest,
} from './store.js';

export interface SqliteMetaStoreOptions extends MetaStoreOptions {
  /** SQLite file, or ':memory:'. */
  file: string;
}

const LEASE_COLUMNS = 'name, holder, expires_at AS expiresAt, token';

interface TableDbRow {
  name: string;
  timestamp_column: string;
  columns: string;
  incarnation: number;
  dropped_at: number | null;
}

const timestampColumnOf = (stored: string) => (stored === NO_TIMESTAMP_COLUMN ? null : stored);

const toTableInfo = (row: TableDbRow): TableInfo => ({
  name: row.name,
  timestampColumn: timestampColumnOf(row.timestamp_column),
  columns: JSON.parse(row.columns) as ColumnSpec[],
  incarnation: row.incarnation,
});

/** PostgreSQL's $n parameters as SQLite's named ones (@n), so that both stores share a statement. */
const sqliteParams = (sql: string) => sql.replace(/\$(\d+)/g, '@$1');

export class SqliteMetaStore implements MetaStore {
  private readonly db: Database.Database;
  private readonly now: () => number;
  readonly expiryMs: number;
  private readonly heartbeatIntervalMs: number;
  private readonly dedupWindowMs: number;

  constructor(options: SqliteMetaStoreOptions) {
    this.db = openSqlite(options.file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('foreign_keys = ON');
    this.migrate();
    this.now = options.now ?? Date.now;
    this.expiryMs = options.expiryMs ?? DEFAULT_EXPIRY_MS;
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_MS;
    this.dedupWindowMs = options.dedupWindowMs ?? DEFAULT_DEDUP_WINDOW_MS;
  }

  private migrate(): void {
    this.write(() => {
      this.db.exec(SCHEMA_MIGRATIONS_TABLE.sqlite);
      const applied = (this.db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map(
        (r) => r.version,
      );
      for (const migration of pendingMigrations(applied)) {
        this.db.exec(migration.sqlite);
        this.db
          .prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
          .run(migration.version, migration.name, Date.now());
      }
    });
  }

  /** Runs `work` as one write transaction. */
  private write<T>(work: () => T): T {
    return this.db.transaction(work).immediate();
  }

  async ping(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    this.db.close();
  }

  // ── nodes ──────────────────────────────────────────────────────────────────────────────────

  async registerNode(node: NodeRegistration): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO nodes (id, grp, url, vcpus, started_at, last_heartbeat) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET grp = excluded.grp, url = excluded.url, vcpus = excluded.vcpus,
           started_at = excluded.started_at, last_heartbeat = excluded.last_heartbeat`,
      )
      .run(node.id, node.group, node.url, node.vcpus, node.startedAt, this.now());
  }

  async deregisterNode(id: string): Promise<boolean> {
    return this.db.prepare('DELETE FROM nodes WHERE id = ?').run(id).changes === 1;
  }

  async heartbeat(id: string, vcpus: number): Promise<boolean> {
    return (
      this.db.prepare('UPDATE nodes SET last_heartbeat = ?, vcpus = ? WHERE id = ?').run(this.now(), vcpus, id)
        .changes === 1
    );
  }

  async members(group: string): Promise<Member[]> {
    return this.db
      .prepare('SELECT id, url, vcpus AS weight FROM nodes WHERE grp = ? AND last_heartbeat >= ? ORDER BY id')
      .all(group, this.now() - this.expiryMs) as Member[];
  }

  async backends(group?: string): Promise<Backend[]> {
    const rows = this.db
      .prepare(`SELECT * FROM nodes ${group === undefined ? '' : 'WHERE grp = ?'} ORDER BY grp, id`)
      .all(...(group === undefined ? [] : [group])) as NodeRow[];
    const now = this.now();
    return rows.map((r) => toBackend(r, now, this.expiryMs, this.heartbeatIntervalMs));
  }

  // ── tables and segments ────────────────────────────────────────────────────────────────────

  async ensureTable(table: NewTable): Promise<TableInfo> {
    return this.write(() => {
      const row = this.readTableRow(table.name);
      const created = { name: table.name, timestampColumn: table.timestampColumn, columns: table.columns };
      if (!row) {
        this.db
          .prepare('INSERT INTO tables (name, timestamp_column, columns) VALUES (?, ?, ?)')
          .run(table.name, table.timestampColumn ?? NO_TIMESTAMP_COLUMN, JSON.stringify(table.columns));
        return { ...created, incarnation: 1 };
      }
      if (row.dropped_at === null) return sameTableOrConflict(toTableInfo(row), table);
      if (this.hasActiveSegments(table.name)) throw tableDropping(table.name);
      this.db
        .prepare(
          `UPDATE tables SET timestamp_column = ?, columns = ?, retention_ms = NULL, dropped_at = NULL,
             incarnation = incarnation + 1 WHERE name = ?`,
        )
        .run(table.timestampColumn ?? NO_TIMESTAMP_COLUMN, JSON.stringify(table.columns), table.name);
      return { ...created, incarnation: row.incarnation + 1 };
    });
  }

  async dropTable(name: string, incarnation: number): Promise<void> {
    this.write(() => {
      const row = this.readTableRow(name);
      if (!row || row.incarnation < incarnation) throw tableNotFound(name);
      if (row.incarnation === incarnation && row.dropped_at === null)
        this.db.prepare('UPDATE tables SET dropped_at = ? WHERE name = ?').run(this.now(), name);
    });
  }

  async drops(): Promise<DroppedTable[]> {
    return this.db
      .prepare(
        `SELECT name AS "table", incarnation, dropped_at AS "droppedAt" FROM tables t WHERE dropped_at IS NOT NULL
           AND EXISTS (SELECT 1 FROM segments s WHERE s.tbl = t.name AND s.state = 'active') ORDER BY name`,
      )
      .all() as DroppedTable[];
  }

  async retireDropped(name: string, incarnation: number, limit: number): Promise<DropRetired> {
    return this.write(() => {
      const row = this.readTableRow(name);
      if (!row || row.incarnation < incarnation) throw tableNotFound(name);
      // A later incarnation exists only once every segment of the dropped one was retired.
      if (row.incarnation > incarnation) return { segments: 0, rows: 0, bytes: 0, more: false };
      if (row.dropped_at === null) throw tableNotDropped(name);
      const retired = this.db
        .prepare(
          `UPDATE segments SET state = 'retired', retired_at = ?
             WHERE id IN (SELECT id FROM segments WHERE tbl = ? AND state = 'active' LIMIT ?) RETURNING rows, bytes`,
        )
        .all(this.now(), name, limit) as { rows: number; bytes: number }[];
      return {
        segments: retired.length,
        rows: retired.reduce((sum, r) => sum + r.rows, 0),
        bytes: retired.reduce((sum, r) => sum + r.bytes, 0),
        more: this.hasActiveSegments(name),
      };
    });
  }

  async requestDelete(name: string, request: RowDeleteRequest): Promise<RowDelete> {
    return this.write(() => {
      if (this.readTable(name)?.incarnation !== request.incarnation) throw tableNotFound(name);
      return this.db
        .prepare(
          `INSERT INTO row_deletes (tbl, incarnation, predicate, from_ts, to_ts, requested_at) VALUES (?, ?, ?, ?, ?, ?)
           RETURNING ${ROW_DELETE_COLUMNS}`,
        )
        .get(
          name,
          request.incarnation,
          request.predicate,
          request.from ?? null,
          request.to ?? null,
          this.now(),
        ) as RowDelete;
    });
  }

  async pendingDeletes(): Promise<RowDelete[]> {
    return this.db
      .prepare(`SELECT ${ROW_DELETE_COLUMNS} FROM row_deletes WHERE finished_at IS NULL ORDER BY id`)
      .all() as RowDelete[];
  }

  async removeRows(deleteId: number, removal: SegmentRowsRemoval): Promise<void> {
    this.write(() => {
      const done = this.db
        .prepare('SELECT 1 FROM row_delete_segments WHERE delete_id = ? AND segment = ?')
        .get(deleteId, removal.segment);
      const segment = this.readSegment(removal.segment);
      if (checkRowsRemoval(deleteId, removal, this.readDelete(deleteId), done !== undefined, segment)) return;
      const replacedBy = removal.replacement ? this.insertSegment(removal.replacement).id : null;
      this.db
        .prepare(`UPDATE segments SET state = 'retired', retired_at = ?, replaced_by = ? WHERE id = ?`)
        .run(this.now(), replacedBy, removal.segment);
      this.db
        .prepare('INSERT INTO row_delete_segments (delete_id, segment, removed, replaced_by) VALUES (?, ?, ?, ?)')
        .run(deleteId, removal.segment, removal.removed, replacedBy);
    });
  }

  async finishDelete(id: number): Promise<RowDeleteReport> {
    this.write(() => {
      if (!this.readDelete(id)) throw deleteNotFound(id);
      this.db
        .prepare(
          `UPDATE row_deletes SET finished_at = ?, rows_removed = (SELECT coalesce(sum(removed), 0)
             FROM row_delete_segments WHERE delete_id = row_deletes.id) WHERE id = ? AND finished_at IS NULL`,
        )
        .run(this.now(), id);
    });
    return (await this.deleteReport(id))!;
  }

  async deleteReport(id: number): Promise<RowDeleteReport | undefined> {
    const record = this.readDelete(id);
    if (!record) return undefined;
    const totals = this.db.prepare(ROW_DELETE_TOTALS_SQL.replace('$1', '?')).get(id) as Record<string, unknown>;
    const perSegment = this.db.prepare(ROW_DELETE_SEGMENTS_SQL.replace('$1', '?')).all(id) as SegmentRowsRemoved[];
    return toRowDeleteReport(record, totals, perSegment);
  }

  private readDelete(id: number): RowDelete | undefined {
    return this.db.prepare(`SELECT ${ROW_DELETE_COLUMNS} FROM row_deletes WHERE id = ?`).get(id) as
      RowDelete | undefined;
  }

  private hasActiveSegments(table: string): boolean {
    return (
      this.db.prepare(`SELECT 1 FROM segments WHERE tbl = ? AND state = 'active' LIMIT 1`).get(table) !== undefined
    );
  }

  async getTable(name: string): Promise<TableInfo | undefined> {
    return this.readTable(name);
  }

  async tableVersion(name: string): Promise<TableVersion | undefined> {
    const row = this.db
      .prepare('SELECT timestamp_column, columns, manifest_version FROM tables WHERE name = ? AND dropped_at IS NULL')
      .get(name) as { timestamp_column: string; columns: string; manifest_version: number } | undefined;
    return (
      row && {
        manifest: row.manifest_version,
        schema: schemaDigest(timestampColumnOf(row.timestamp_column), JSON.parse(row.columns) as ColumnSpec[]),
      }
    );
  }

  async listTables(): Promise<TableInfo[]> {
    return (
      this.db.prepare('SELECT name FROM tables WHERE dropped_at IS NULL ORDER BY name').all() as { name: string }[]
    ).map((r) => this.readTable(r.name)!);
  }

  async setColumnTypes(name: string, from: ColumnSpec[], to: ColumnSpec[]): Promise<TableInfo> {
    return this.changeColumns(name, (current) => (checkColumnTypeChange(name, current, from, to) ? to : current));
  }

  async addColumns(name: string, columns: ColumnSpec[]): Promise<TableInfo> {
    return this.changeColumns(name, (current) => withColumnsAdded(current, columns));
  }

  /** Writes `change` of a table's columns in one write transaction; `current` itself for no change. */
  private changeColumns(name: string, change: (current: ColumnSpec[]) => ColumnSpec[]): TableInfo {
    return this.write(() => {
      const existing = this.readTable(name);
      if (!existing) throw tableNotFound(name);
      const columns = change(existing.columns);
      if (columns === existing.columns) return existing;
      this.db.prepare('UPDATE tables SET columns = ? WHERE name = ?').run(JSON.stringify(columns), name);
      return { ...existing, columns };
    });
  }

  async setRetention(name: string, retentionMs: number | null): Promise<void> {
    if (
      this.db.prepare('UPDATE tables SET retention_ms = ? WHERE name = ? AND dropped_at IS NULL').run(retentionMs, name)
        .changes === 0
    )
      throw tableNotFound(name);
  }

  async retentions(): Promise<Retention[]> {
    return this.db
      .prepare(
        'SELECT name AS "table", retention_ms AS "retentionMs" FROM tables WHERE retention_ms IS NOT NULL AND dropped_at IS NULL ORDER BY name',
      )
      .all() as Retention[];
  }

  async tableStats(name: string): Promise<TableStats | undefined> {
    if (!this.readTable(name)) return undefined;
    return toTableStats(this.db.prepare(TABLE_STATS_SQL.replace('$1', '?')).get(name) as Record<string, unknown>);
  }

  async commitSegment(segment: Segment): Promise<SegmentRow> {
    return this.write(() => {
      const row = this.insertSegment(segment);
      // A batch sent again puts its object before it commits: a deleted one may be back, so the
      // janitor deletes it again. The row stays retired; the manifest does not move.
      if (row.state === 'retired') {
        this.db
          .prepare('UPDATE segments SET object_deleted_at = NULL WHERE id = ? AND object_deleted_at IS NOT NULL')
          .run(row.id);
      }
      return row;
    });
  }

  async swapSegments(retire: string[], add: Segment, fence?: Fence): Promise<SegmentRow> {
    return this.write(() => {
      const inputs = new Map(
        retire
          .map((id) => [id, this.readSegment(id)] as const)
          .filter((e): e is [string, SegmentRow] => e[1] !== undefined),
      );
      const merged = this.readSegment(add.id);
      if (checkSwap(retire, add, inputs, merged, fence, fence && this.readLease(fence.lease))) return merged!;
      const row = merged ?? this.insertSegment(add);
      const retireStmt = this.db.prepare(
        `UPDATE segments SET state = 'retired', retired_at = ?, replaced_by = ? WHERE id = ?`,
      );
      for (const id of retire) retireStmt.run(this.now(), add.id, id);
      return row;
    });
  }

  async retireSegments(ids: string[]): Promise<void> {
    this.write(() => {
      const stmt = this.db.prepare(
        `UPDATE segments SET state = 'retired', retired_at = ? WHERE id = ? AND state = 'active'`,
      );
      for (const id of ids) {
        if (!this.readSegment(id)) throw segmentNotFound(id);
        stmt.run(this.now(), id);
      }
    });
  }

  async getSegment(id: string): Promise<SegmentRow | undefined> {
    return this.readSegment(id);
  }

  async listSegments(table: string, range: { from?: number; to?: number } = {}): Promise<SegmentRow[]> {
    const [from, to, narrowFrom] = rangeBounds(range);
    const rows = this.db.prepare(sqliteParams(SEGMENTS_IN_RANGE_SQL)).all({
      1: table,
      2: from,
      3: to,
      4: narrowFrom,
    }) as SegmentDbRow[];
    return rows.map(toSegment);
  }

  async manifestChanges(name: string, since: number, limit: number): Promise<ManifestChanges | 'snapshot' | undefined> {
    // One read transaction: the version and the rows are of one moment.
    return this.db.transaction(() => {
      const table = this.manifestHead(name);
      if (!table) return undefined;
      if (since < table.log_floor || since > table.manifest_version) return 'snapshot' as const;
      const window = { 1: name, 2: since, 3: table.manifest_version };
      const { n } = this.db.prepare(sqliteParams(CHANGES_SQL.count)).get(window) as { n: number };
      if (n > limit) return 'snapshot' as const;
      const added = this.db.prepare(sqliteParams(CHANGES_SQL.added)).all(window) as SegmentDbRow[];
      const retired = this.db.prepare(sqliteParams(CHANGES_SQL.retired)).all(window) as { id: string }[];
      return {
        version: table.manifest_version,
        incarnation: table.incarnation,
        added: added.map(toSegment),
        retired: retired.map((r) => r.id),
      };
    })();
  }

  async manifestPage(
    name: string,
    version: number | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<ManifestPage | undefined> {
    return this.db.transaction(() => {
      const table = this.manifestHead(name);
      if (!table) return undefined;
      const asOf = version ?? table.manifest_version;
      const rows = this.db
        .prepare(sqliteParams(CHANGES_SQL.page))
        .all({ 1: name, 2: asOf, 3: after ?? '', 4: limit }) as SegmentDbRow[];
      return {
        version: asOf,
        incarnation: table.incarnation,
        segments: rows.map(toSegment),
        ...(rows.length === limit ? { next: rows.at(-1)!.id } : {}),
      };
    })();
  }

  private manifestHead(name: string) {
    return this.db
      .prepare('SELECT manifest_version, log_floor, incarnation FROM tables WHERE name = ? AND dropped_at IS NULL')
      .get(name) as { manifest_version: number; log_floor: number; incarnation: number } | undefined;
  }

  async listRetired(before: number, limit: number): Promise<SegmentRow[]> {
    const rows = this.db
      .prepare(
        `SELECT * FROM segments WHERE state = 'retired' AND object_deleted_at IS NULL AND retired_at < ? ORDER BY retired_at, id LIMIT ?`,
      )
      .all(before, limit) as SegmentDbRow[];
    return rows.map(toSegment);
  }

  async forgetSegments(ids: string[]): Promise<void> {
    this.write(() => {
      const at = this.now();
      for (const id of ids) {
        if (this.readSegment(id)?.state === 'active') throw segmentActive(id);
        this.db
          .prepare(
            `UPDATE segments SET object_deleted_at = ? WHERE id = ? AND state = 'retired' AND object_deleted_at IS NULL`,
          )
          .run(at, id);
      }
    });
  }

  async purgeRetired(limit: number): Promise<number> {
    return this.write(() => {
      const purged = this.db
        .prepare(
          `SELECT id, tbl, retired_version FROM segments WHERE object_deleted_at IS NOT NULL AND retired_at < ? LIMIT ?`,
        )
        .all(this.now() - this.dedupWindowMs, limit) as { id: string; tbl: string; retired_version: number | null }[];
      // Their retirements leave the change log: a reader behind them reads the manifest whole.
      const raise = this.db.prepare('UPDATE tables SET log_floor = max(log_floor, ?) WHERE name = ?');
      const remove = this.db.prepare('DELETE FROM segments WHERE id = ?');
      for (const row of purged) {
        raise.run(row.retired_version ?? 0, row.tbl);
        remove.run(row.id);
      }
      return purged.length;
    });
  }

  async knownSegments(ids: string[]): Promise<string[]> {
    const stmt = this.db.prepare('SELECT 1 FROM segments WHERE id = ?');
    return ids.filter((id) => stmt.get(id) !== undefined);
  }

  /** The table's row, dropped or not. */
  private readTableRow(name: string): TableDbRow | undefined {
    return this.db.prepare('SELECT * FROM tables WHERE name = ?').get(name) as TableDbRow | undefined;
  }

  /** The table as readers see it: undefined once dropped. */
  private readTable(name: string): TableInfo | undefined {
    const row = this.readTableRow(name);
    return row && row.dropped_at === null ? toTableInfo(row) : undefined;
  }

  private readSegment(id: string): SegmentRow | undefined {
    const row = this.db.prepare('SELECT * FROM segments WHERE id = ?').get(id) as SegmentDbRow | undefined;
    return row && toSegment(row);
  }

  private insertSegment(segment: Segment): SegmentRow {
    const existing = this.readSegment(segment.id);
    if (existing) return sameSegmentOrConflict(existing, segment);
    const table = this.readTable(segment.table);
    if (!table) throw tableNotFound(segment.table);
    const written = segment.incarnation ?? table.incarnation;
    if (written < table.incarnation) throw tableRecreated(segment.table, written);
    if (written > table.incarnation) throw tableNotFound(segment.table);
    this.db
      .prepare(
        `INSERT INTO segments (id, tbl, min_ts, max_ts, rows, bytes, level, state, created_at, object) VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)`,
      )
      .run(
        segment.id,
        segment.table,
        segment.minTs,
        segment.maxTs,
        segment.rows,
        segment.bytes,
        segment.level,
        this.now(),
        segment.object ? JSON.stringify(segment.object) : null,
      );
    return this.readSegment(segment.id)!;
  }

  // ── leases ─────────────────────────────────────────────────────────────────────────────────

  async acquireLease(name: string, holder: string, ttlMs: number): Promise<{ granted: boolean; lease: Lease }> {
    return this.write(() => {
      const now = this.now();
      const current = this.readLease(name);
      if (current && current.holder !== holder && current.expiresAt > now) return { granted: false, lease: current };
      // A new token whenever the lease changes hands; a holder renewing keeps its own.
      const token =
        current?.holder === holder
          ? current.token
          : (
              this.db
                .prepare(`UPDATE counters SET value = value + 1 WHERE name = 'lease_token' RETURNING value`)
                .get() as { value: number }
            ).value;
      this.db
        .prepare(
          'INSERT INTO leases (name, holder, expires_at, token) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, token = excluded.token',
        )
        .run(name, holder, now + ttlMs, token);
      return { granted: true, lease: this.readLease(name)! };
    });
  }

  async releaseLease(name: string, holder: string): Promise<boolean> {
    return this.db.prepare('DELETE FROM leases WHERE name = ? AND holder = ?').run(name, holder).changes === 1;
  }

  async releaseLeasesOf(holder: string): Promise<string[]> {
    return (this.db.prepare('DELETE FROM leases WHERE holder = ? RETURNING name').all(holder) as { name: string }[])
      .map((r) => r.name)
      .sort();
  }

  async getLease(name: string): Promise<Lease | undefined> {
    return this.readLease(name);
  }

  async listLeases(): Promise<Lease[]> {
    return this.db
      .prepare(`SELECT ${LEASE_COLUMNS} FROM leases WHERE expires_at > ? ORDER BY name`)
      .all(this.now()) as Lease[];
  }

  private readLease(name: string): Lease | undefined {
    return this.db.prepare(`SELECT ${LEASE_COLUMNS} FROM leases WHERE name = ?`).get(name) as Lease | undefined;
  }
}
