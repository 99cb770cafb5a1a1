/**
 * Meta's store in PostgreSQL: what lets meta run as any number of stateless replicas. Guarantees
 * hold across replicas through the database alone:
 * - a lease is taken in one `INSERT … ON CONFLICT DO UPDATE … WHERE` statement, which locks the
 *   lease row and decides on its latest committed version, so two replicas never grant it twice;
 * - a swap locks the fencing lease's row and then its inputs' rows (`FOR UPDATE`, in id order, so
 *   two swaps never deadlock) before it checks and writes, so of two racing swaps exactly one
 *   commits and a fenced swap sees any newer grant;
 * - time is the database's clock (unless a test injects one), so replicas whose clocks drift
 *   still agree on which nodes are alive and which leases have expired.
 * Transactions that PostgreSQL aborts as deadlocked or unserializable are run again.
 */
import pg from 'pg';
import { DomainError } from '../common/errors.js';
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

export interface PostgresMetaStoreOptions extends MetaStoreOptions {
  /** `postgres://user:password@host:port/database`, as the `pg` client reads it. */
  connectionString: string;
  /** Connections per meta replica. @default 10 */
  maxConnections?: number;
  /** Called when an idle pooled connection fails (the database restarted); the pool replaces it. */
  onIdleError?: (error: Error) => void;
}

// BIGINT columns hold epoch ms, row and byte counts: all below 2^53, so plain numbers.
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

/** The database's clock in epoch ms, unless the parameter carries an injected one. */
const now = (param: string) => `COALESCE(${param}::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)`;
const LEASE_COLUMNS = 'name, holder, expires_at AS "expiresAt", token';
const TIMESTAMP_COLUMN = `NULLIF(timestamp_column, '${NO_TIMESTAMP_COLUMN}') AS "timestampColumn"`;
const TABLE_COLUMNS = `name, ${TIMESTAMP_COLUMN}, columns, incarnation`;
/** One key for every Berth meta on a database: migrations run one replica at a time. */
const MIGRATION_LOCK = 0x6265_7274; // 'bert'
const RETRYABLE = new Set(['40001', '40P01']); // serialization failure, deadlock detected

export class PostgresMetaStore implements MetaStore {
  readonly expiryMs: number;
  private readonly heartbeatIntervalMs: number;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly options: PostgresMetaStoreOptions,
  ) {
    this.expiryMs = options.expiryMs ?? DEFAULT_EXPIRY_MS;
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_MS;
  }

  /** Connects, applies the migrations the database lacks, and returns the store. */
  static async open(options: PostgresMetaStoreOptions): Promise<PostgresMetaStore> {
    const pool = new pg.Pool({
      connectionString: options.connectionString,
      max: options.maxConnections ?? 10,
      connectionTimeoutMillis: 10_000,
      types,
      application_name: 'berth-meta',
    });
    pool.on('error', (error) => options.onIdleError?.(error));
    const store = new PostgresMetaStore(pool, options);
    try {
      await store.migrate();
    } catch (error) {
      await pool.end();
      throw new Error(`meta could not open its PostgreSQL database: ${(error as Error).message}`, { cause: error });
    }
    return store;
  }

  private async migrate(): Promise<void> {
    await this.transaction(async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await c.query(SCHEMA_MIGRATIONS_TABLE.postgres);
      const applied = (await c.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map(
        (r) => r.version,
      );
      for (const migration of pendingMigrations(applied)) {
        await c.query(migration.postgres);
        await c.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
          migration.version,
          migration.name,
          Date.now(),
        ]);
      }
    });
  }

  /** The injected clock's reading, or null for the database's own (see `now`). */
  private clock(): number | null {
    return this.options.now?.() ?? null;
  }

  private async query<R extends pg.QueryResultRow>(
    name: string,
    text: string,
    values: unknown[],
    client: pg.ClientBase | pg.Pool = this.pool,
  ): Promise<pg.QueryResult<R>> {
    // Named: each connection prepares a statement once and then only binds values.
    return await client.query<R>({ name, text, values });
  }

  /** Runs `work` in one transaction, again when PostgreSQL aborts it as deadlocked or unserializable. */
  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => (broken = true));
        const code = (error as { code?: string }).code;
        if (!(error instanceof DomainError) && code !== undefined && RETRYABLE.has(code) && attempt < 5) continue;
        throw error;
      } finally {
        client.release(broken);
      }
    }
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  // ── nodes ──────────────────────────────────────────────────────────────────────────────────

  async registerNode(node: NodeRegistration): Promise<void> {
    await this.query(
      'register',
      `INSERT INTO nodes (id, grp, url, vcpus, started_at, last_heartbeat) VALUES ($1, $2, $3, $4, $5, ${now('$6')})
       ON CONFLICT (id) DO UPDATE SET grp = excluded.grp, url = excluded.url, vcpus = excluded.vcpus,
         started_at = excluded.started_at, last_heartbeat = excluded.last_heartbeat`,
      [node.id, node.group, node.url, node.vcpus, node.startedAt, this.clock()],
    );
  }

  async deregisterNode(id: string): Promise<boolean> {
    return (await this.query('deregister', 'DELETE FROM nodes WHERE id = $1', [id])).rowCount === 1;
  }

  async heartbeat(id: string, vcpus: number): Promise<boolean> {
    return (
      (
        await this.query('heartbeat', `UPDATE nodes SET last_heartbeat = ${now('$1')}, vcpus = $2 WHERE id = $3`, [
          this.clock(),
          vcpus,
          id,
        ])
      ).rowCount === 1
    );
  }

  async members(group: string): Promise<Member[]> {
    const sql = `SELECT id, url, vcpus AS weight FROM nodes WHERE grp = $1 AND last_heartbeat >= ${now('$2')} - $3 ORDER BY id`;
    return (await this.query<Member>('members', sql, [group, this.clock(), this.expiryMs])).rows;
  }

  async backends(group?: string): Promise<Backend[]> {
    const sql = `SELECT *, ${now('$1')} AS now FROM nodes WHERE $2::text IS NULL OR grp = $2 ORDER BY grp, id`;
    const rows = (await this.query<NodeRow & { now: number }>('backends', sql, [this.clock(), group ?? null])).rows;
    return rows.map((r) => toBackend(r, r.now, this.expiryMs, this.heartbeatIntervalMs));
  }

  // ── tables and segments ────────────────────────────────────────────────────────────────────

  async ensureTable(table: NewTable): Promise<TableInfo> {
    const created = { name: table.name, timestampColumn: table.timestampColumn, columns: table.columns };
    const inserted = await this.query(
      'ensure-table',
      'INSERT INTO tables (name, timestamp_column, columns) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING',
      [table.name, table.timestampColumn ?? NO_TIMESTAMP_COLUMN, JSON.stringify(table.columns)],
    );
    if (inserted.rowCount === 1) return { ...created, incarnation: 1 };
    return await this.transaction(async (c) => {
      const existing = (
        await this.query<TableInfo & { droppedAt: number | null }>(
          'lock-table-row',
          `SELECT ${TABLE_COLUMNS}, dropped_at AS "droppedAt" FROM tables WHERE name = $1 FOR UPDATE`,
          [table.name],
          c,
        )
      ).rows[0]!;
      const { droppedAt, ...info } = existing;
      if (droppedAt === null) return sameTableOrConflict(info, table);
      // The lock waits for a retiring batch in flight (its triggers write this row): this reads after it.
      if (await this.hasActiveSegments(table.name, c)) throw tableDropping(table.name);
      await this.query(
        'recreate-table',
        `UPDATE tables SET timestamp_column = $2, columns = $3, retention_ms = NULL, dropped_at = NULL,
           incarnation = incarnation + 1 WHERE name = $1`,
        [table.name, table.timestampColumn ?? NO_TIMESTAMP_COLUMN, JSON.stringify(table.columns)],
        c,
      );
      return { ...created, incarnation: existing.incarnation + 1 };
    });
  }

  async dropTable(name: string, incarnation: number): Promise<void> {
    const dropped = await this.query<{ incarnation: number }>(
      'drop-table',
      `UPDATE tables SET dropped_at = COALESCE(dropped_at, CASE WHEN incarnation = $2 THEN ${now('$3')} END)
         WHERE name = $1 AND incarnation >= $2 RETURNING incarnation`,
      [name, incarnation, this.clock()],
    );
    if (dropped.rowCount === 0) throw tableNotFound(name);
  }

  async drops(): Promise<DroppedTable[]> {
    return (
      await this.query<DroppedTable>(
        'drops',
        `SELECT name AS "table", incarnation, dropped_at AS "droppedAt" FROM tables t WHERE dropped_at IS NOT NULL
           AND EXISTS (SELECT 1 FROM segments s WHERE s.tbl = t.name AND s.state = 'active') ORDER BY name`,
        [],
      )
    ).rows;
  }

  async retireDropped(name: string, incarnation: number, limit: number): Promise<DropRetired> {
    return await this.transaction(async (c) => {
      const row = (
        await this.query<{ incarnation: number; droppedAt: number | null }>(
          'dropped-table',
          'SELECT incarnation, dropped_at AS "droppedAt" FROM tables WHERE name = $1',
          [name],
          c,
        )
      ).rows[0];
      if (!row || row.incarnation < incarnation) throw tableNotFound(name);
      // A later incarnation exists only once every segment of the dropped one was retired.
      if (row.incarnation > incarnation) return { segments: 0, rows: 0, bytes: 0, more: false };
      if (row.droppedAt === null) throw tableNotDropped(name);
      const retired = (
        await this.query<{ rows: number; bytes: number }>(
          'retire-dropped',
          `UPDATE segments SET state = 'retired', retired_at = ${now('$1')}
             WHERE id IN (SELECT id FROM segments WHERE tbl = $2 AND state = 'active' ORDER BY id LIMIT $3 FOR UPDATE)
             RETURNING rows, bytes`,
          [this.clock(), name, limit],
          c,
        )
      ).rows;
      return {
        segments: retired.length,
        rows: retired.reduce((sum, r) => sum + r.rows, 0),
        bytes: retired.reduce((sum, r) => sum + r.bytes, 0),
        more: await this.hasActiveSegments(name, c),
      };
    });
  }

  async requestDelete(name: string, request: RowDeleteRequest): Promise<RowDelete> {
    const { rows } = await this.query<RowDelete>(
      'request-delete',
      `INSERT INTO row_deletes (tbl, incarnation, predicate, from_ts, to_ts, requested_at)
         SELECT name, incarnation, $3, $4, $5, ${now('$6')} FROM tables
         WHERE name = $1 AND incarnation = $2 AND dropped_at IS NULL
       RETURNING ${ROW_DELETE_COLUMNS}`,
      [name, request.incarnation, request.predicate, request.from ?? null, request.to ?? null, this.clock()],
    );
    if (!rows[0]) throw tableNotFound(name);
    return rows[0];
  }

  async pendingDeletes(): Promise<RowDelete[]> {
    return (
      await this.query<RowDelete>(
        'pending-deletes',
        `SELECT ${ROW_DELETE_COLUMNS} FROM row_deletes WHERE finished_at IS NULL ORDER BY id`,
        [],
      )
    ).rows;
  }

  async removeRows(deleteId: number, removal: SegmentRowsRemoval): Promise<void> {
    await this.transaction(async (c) => {
      // Lock order: the delete's record, then the segment.
      const record = (
        await this.query<RowDelete>(
          'lock-delete',
          `SELECT ${ROW_DELETE_COLUMNS} FROM row_deletes WHERE id = $1 FOR UPDATE`,
          [deleteId],
          c,
        )
      ).rows[0];
      const done = await this.query(
        'removal-done',
        'SELECT 1 FROM row_delete_segments WHERE delete_id = $1 AND segment = $2',
        [deleteId, removal.segment],
        c,
      );
      const locked = (
        await this.query<SegmentDbRow>(
          'lock-segment',
          'SELECT * FROM segments WHERE id = $1 FOR UPDATE',
          [removal.segment],
          c,
        )
      ).rows[0];
      if (checkRowsRemoval(deleteId, removal, record, done.rows.length > 0, locked && toSegment(locked))) return;
      const replacedBy = removal.replacement ? (await this.insertSegment(removal.replacement, c)).id : null;
      await this.query(
        'retire-removed',
        `UPDATE segments SET state = 'retired', retired_at = ${now('$1')}, replaced_by = $2 WHERE id = $3`,
        [this.clock(), replacedBy, removal.segment],
        c,
      );
      await this.query(
        'record-removal',
        'INSERT INTO row_delete_segments (delete_id, segment, removed, replaced_by) VALUES ($1, $2, $3, $4)',
        [deleteId, removal.segment, removal.removed, replacedBy],
        c,
      );
    });
  }

  async finishDelete(id: number): Promise<RowDeleteReport> {
    await this.query(
      'finish-delete',
      `UPDATE row_deletes SET finished_at = ${now('$2')}, rows_removed = (SELECT coalesce(sum(removed), 0)
         FROM row_delete_segments WHERE delete_id = row_deletes.id) WHERE id = $1 AND finished_at IS NULL`,
      [id, this.clock()],
    );
    const report = await this.deleteReport(id);
    if (!report) throw deleteNotFound(id);
    return report;
  }

  async deleteReport(id: number): Promise<RowDeleteReport | undefined> {
    const record = (
      await this.query<RowDelete>('get-delete', `SELECT ${ROW_DELETE_COLUMNS} FROM row_deletes WHERE id = $1`, [id])
    ).rows[0];
    if (!record) return undefined;
    const totals = (await this.query('delete-totals', ROW_DELETE_TOTALS_SQL, [id])).rows[0]!;
    const perSegment = (await this.query<SegmentRowsRemoved>('delete-segments', ROW_DELETE_SEGMENTS_SQL, [id])).rows;
    return toRowDeleteReport(record, totals, perSegment);
  }

  private async hasActiveSegments(table: string, client: pg.ClientBase): Promise<boolean> {
    const found = await this.query(
      'has-active',
      `SELECT 1 FROM segments WHERE tbl = $1 AND state = 'active' LIMIT 1`,
      [table],
      client,
    );
    return found.rowCount === 1;
  }

  async getTable(name: string): Promise<TableInfo | undefined> {
    const rows = (
      await this.query<TableInfo>(
        'get-table',
        `SELECT ${TABLE_COLUMNS} FROM tables WHERE name = $1 AND dropped_at IS NULL`,
        [name],
      )
    ).rows;
    return rows[0];
  }

  async tableVersion(name: string): Promise<TableVersion | undefined> {
    const rows = (
      await this.query<TableInfo & { manifest: string }>(
        'table-version',
        `SELECT ${TIMESTAMP_COLUMN}, columns, manifest_version AS manifest FROM tables WHERE name = $1 AND dropped_at IS NULL`,
        [name],
      )
    ).rows;
    return (
      rows[0] && { manifest: Number(rows[0].manifest), schema: schemaDigest(rows[0].timestampColumn, rows[0].columns) }
    );
  }

  async listTables(): Promise<TableInfo[]> {
    return (
      await this.query<TableInfo>(
        'list-tables',
        `SELECT ${TABLE_COLUMNS} FROM tables WHERE dropped_at IS NULL ORDER BY name`,
        [],
      )
    ).rows;
  }

  async setColumnTypes(name: string, from: ColumnSpec[], to: ColumnSpec[]): Promise<TableInfo> {
    // Of two changes made against the same columns, one lands.
    return await this.changeColumns(name, (current) => (checkColumnTypeChange(name, current, from, to) ? to : current));
  }

  async addColumns(name: string, columns: ColumnSpec[]): Promise<TableInfo> {
    // Two batches that add fields at once both land, one after the other.
    return await this.changeColumns(name, (current) => withColumnsAdded(current, columns));
  }

  /** Writes `change` of a table's columns, the row locked while it is read and written; `current` itself for no change. */
  private async changeColumns(name: string, change: (current: ColumnSpec[]) => ColumnSpec[]): Promise<TableInfo> {
    return await this.transaction(async (c) => {
      const existing = (
        await this.query<TableInfo>(
          'lock-table',
          `SELECT ${TABLE_COLUMNS} FROM tables WHERE name = $1 AND dropped_at IS NULL FOR UPDATE`,
          [name],
          c,
        )
      ).rows[0];
      if (!existing) throw tableNotFound(name);
      const columns = change(existing.columns);
      if (columns === existing.columns) return existing;
      await this.query(
        'set-columns',
        'UPDATE tables SET columns = $2 WHERE name = $1',
        [name, JSON.stringify(columns)],
        c,
      );
      return { ...existing, columns };
    });
  }

  async setRetention(name: string, retentionMs: number | null): Promise<void> {
    const updated = await this.query(
      'set-retention',
      'UPDATE tables SET retention_ms = $2 WHERE name = $1 AND dropped_at IS NULL',
      [name, retentionMs],
    );
    if (updated.rowCount === 0) throw tableNotFound(name);
  }

  async retentions(): Promise<Retention[]> {
    const { rows } = await this.query<{ table: string; retentionMs: string }>(
      'retentions',
      'SELECT name AS "table", retention_ms AS "retentionMs" FROM tables WHERE retention_ms IS NOT NULL AND dropped_at IS NULL ORDER BY name',
      [],
    );
    return rows.map((row) => ({ table: row.table, retentionMs: Number(row.retentionMs) }));
  }

  async tableStats(name: string): Promise<TableStats | undefined> {
    if (!(await this.getTable(name))) return undefined;
    return toTableStats((await this.query('table-stats', TABLE_STATS_SQL, [name])).rows[0]!);
  }

  async commitSegment(segment: Segment): Promise<SegmentRow> {
    const row = await this.insertSegment(segment, this.pool);
    // A batch sent again puts its object before it commits: a deleted one may be back, so the
    // janitor deletes it again. The row stays retired; the manifest does not move.
    if (row.state === 'retired') {
      await this.query(
        'object-back',
        'UPDATE segments SET object_deleted_at = NULL WHERE id = $1 AND object_deleted_at IS NOT NULL',
        [row.id],
      );
    }
    return row;
  }

  async swapSegments(retire: string[], add: Segment, fence?: Fence): Promise<SegmentRow> {
    return await this.transaction(async (c) => {
      // Lock order, the same in every swap: the lease, then the inputs by id.
      const lease =
        fence &&
        (
          await this.query<Lease>(
            'lock-lease',
            `SELECT ${LEASE_COLUMNS} FROM leases WHERE name = $1 FOR UPDATE`,
            [fence.lease],
            c,
          )
        ).rows[0];
      const locked = (
        await this.query<SegmentDbRow>(
          'lock-inputs',
          'SELECT * FROM segments WHERE id = ANY($1) ORDER BY id FOR UPDATE',
          [retire],
          c,
        )
      ).rows;
      const inputs = new Map(locked.map((r) => [r.id, toSegment(r)]));
      const merged = await this.readSegment(add.id, c);
      if (checkSwap(retire, add, inputs, merged, fence, lease)) return merged!;
      const row = merged ?? (await this.insertSegment(add, c));
      await this.query(
        'retire-inputs',
        `UPDATE segments SET state = 'retired', retired_at = ${now('$1')}, replaced_by = $2 WHERE id = ANY($3)`,
        [this.clock(), add.id, retire],
        c,
      );
      return row;
    });
  }

  async retireSegments(ids: string[]): Promise<void> {
    await this.transaction(async (c) => {
      const known = new Set(
        (
          await this.query<{ id: string }>(
            'lock-retire',
            'SELECT id FROM segments WHERE id = ANY($1) ORDER BY id FOR UPDATE',
            [ids],
            c,
          )
        ).rows.map((r) => r.id),
      );
      const missing = ids.find((id) => !known.has(id));
      if (missing !== undefined) throw segmentNotFound(missing);
      await this.query(
        'retire',
        `UPDATE segments SET state = 'retired', retired_at = ${now('$1')} WHERE id = ANY($2) AND state = 'active'`,
        [this.clock(), ids],
        c,
      );
    });
  }

  async getSegment(id: string): Promise<SegmentRow | undefined> {
    return await this.readSegment(id, this.pool);
  }

  async listSegments(table: string, range: { from?: number; to?: number } = {}): Promise<SegmentRow[]> {
    const rows = (
      await this.query<SegmentDbRow>('list-segments', SEGMENTS_IN_RANGE_SQL, [table, ...rangeBounds(range)])
    ).rows;
    return rows.map(toSegment);
  }

  async manifestChanges(name: string, since: number, limit: number): Promise<ManifestChanges | 'snapshot' | undefined> {
    // One snapshot: the version, the log's floor and the rows are of one moment.
    return await this.snapshot(async (c) => {
      const table = await this.manifestHead(name, c);
      if (!table) return undefined;
      if (since < table.log_floor || since > table.manifest_version) return 'snapshot' as const;
      const window = [name, since, table.manifest_version];
      const { n } = (await this.query<{ n: number }>('changes-count', CHANGES_SQL.count, window, c)).rows[0]!;
      if (n > limit) return 'snapshot' as const;
      const added = (await this.query<SegmentDbRow>('changes-added', CHANGES_SQL.added, window, c)).rows;
      const retired = (await this.query<{ id: string }>('changes-retired', CHANGES_SQL.retired, window, c)).rows;
      return {
        version: table.manifest_version,
        incarnation: table.incarnation,
        added: added.map(toSegment),
        retired: retired.map((r) => r.id),
      };
    });
  }

  async manifestPage(
    name: string,
    version: number | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<ManifestPage | undefined> {
    return await this.snapshot(async (c) => {
      const table = await this.manifestHead(name, c);
      if (!table) return undefined;
      const asOf = version ?? table.manifest_version;
      const rows = (
        await this.query<SegmentDbRow>('manifest-page', CHANGES_SQL.page, [name, asOf, after ?? '', limit], c)
      ).rows;
      return {
        version: asOf,
        incarnation: table.incarnation,
        segments: rows.map(toSegment),
        ...(rows.length === limit ? { next: rows.at(-1)!.id } : {}),
      };
    });
  }

  private async manifestHead(name: string, client: pg.ClientBase) {
    return (
      await this.query<{ manifest_version: number; log_floor: number; incarnation: number }>(
        'manifest-head',
        'SELECT manifest_version, log_floor, incarnation FROM tables WHERE name = $1 AND dropped_at IS NULL',
        [name],
        client,
      )
    ).rows[0];
  }

  /** Runs `work`'s reads in one snapshot of the database (REPEATABLE READ, read only). */
  private async snapshot<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => (broken = true));
      throw error;
    } finally {
      client.release(broken);
    }
  }

  async listRetired(before: number, limit: number): Promise<SegmentRow[]> {
    const rows = (
      await this.query<SegmentDbRow>(
        'list-retired',
        `SELECT * FROM segments WHERE state = 'retired' AND object_deleted_at IS NULL AND retired_at < $1 ORDER BY retired_at, id LIMIT $2`,
        [before, limit],
      )
    ).rows;
    return rows.map(toSegment);
  }

  async forgetSegments(ids: string[]): Promise<void> {
    await this.transaction(async (c) => {
      const active = await this.query<{ id: string }>(
        'forget-active',
        `SELECT id FROM segments WHERE id = ANY($1) AND state = 'active' ORDER BY id LIMIT 1 FOR UPDATE`,
        [ids],
        c,
      );
      if (active.rows[0]) throw segmentActive(active.rows[0].id);
      await this.query(
        'forget',
        `UPDATE segments SET object_deleted_at = ${now('$2')} WHERE id = ANY($1) AND state = 'retired' AND object_deleted_at IS NULL`,
        [ids, this.clock()],
        c,
      );
    });
  }

  async purgeRetired(limit: number): Promise<number> {
    // Their retirements leave the change log, in the same statement: a reader behind them reads the manifest whole.
    const purged = await this.query<{ n: number }>(
      'purge-retired',
      `WITH purged AS (
         DELETE FROM segments WHERE id IN (
           SELECT id FROM segments WHERE object_deleted_at IS NOT NULL AND retired_at < ${now('$1')} - $2 LIMIT $3)
         RETURNING tbl, retired_version),
       floors AS (SELECT tbl, max(coalesce(retired_version, 0)) AS floor FROM purged GROUP BY tbl),
       raised AS (UPDATE tables SET log_floor = greatest(log_floor, floors.floor) FROM floors WHERE name = floors.tbl)
       SELECT count(*)::bigint AS n FROM purged`,
      [this.clock(), this.options.dedupWindowMs ?? DEFAULT_DEDUP_WINDOW_MS, limit],
    );
    return Number(purged.rows[0]!.n);
  }

  async knownSegments(ids: string[]): Promise<string[]> {
    const known = new Set(
      (await this.query<{ id: string }>('known', 'SELECT id FROM segments WHERE id = ANY($1)', [ids])).rows.map(
        (r) => r.id,
      ),
    );
    return ids.filter((id) => known.has(id));
  }

  private async readSegment(id: string, client: pg.ClientBase | pg.Pool): Promise<SegmentRow | undefined> {
    const row = (await this.query<SegmentDbRow>('get-segment', 'SELECT * FROM segments WHERE id = $1', [id], client))
      .rows[0];
    return row && toSegment(row);
  }

  private async insertSegment(segment: Segment, client: pg.ClientBase | pg.Pool): Promise<SegmentRow> {
    const inserted = await this.query<SegmentDbRow>(
      'insert-segment',
      `INSERT INTO segments (id, tbl, min_ts, max_ts, rows, bytes, level, state, created_at, object)
       SELECT $1, name, $3, $4, $5, $6, $7, 'active', ${now('$8')}, $10::jsonb FROM tables
         WHERE name = $2 AND dropped_at IS NULL AND incarnation = COALESCE($9::integer, incarnation)
       ON CONFLICT (id) DO NOTHING RETURNING *`,
      [
        segment.id,
        segment.table,
        segment.minTs,
        segment.maxTs,
        segment.rows,
        segment.bytes,
        segment.level,
        this.clock(),
        segment.incarnation ?? null,
        segment.object ? JSON.stringify(segment.object) : null,
      ],
      client,
    );
    if (inserted.rows[0]) return toSegment(inserted.rows[0]);
    const existing = await this.readSegment(segment.id, client);
    if (existing) return sameSegmentOrConflict(existing, segment);
    const table = await this.getTable(segment.table);
    if (table && segment.incarnation !== undefined && segment.incarnation < table.incarnation)
      throw tableRecreated(segment.table, segment.incarnation);
    throw tableNotFound(segment.table);
  }

  // ── leases ─────────────────────────────────────────────────────────────────────────────────

  async acquireLease(name: string, holder: string, ttlMs: number): Promise<{ granted: boolean; lease: Lease }> {
    for (;;) {
      // Granted when free, expired or already the holder's; a new token only when it changes hands.
      const granted = await this.query<Lease>(
        'acquire-lease',
        `WITH clock AS (SELECT ${now('$4')} AS now)
         INSERT INTO leases AS l (name, holder, expires_at, token)
         SELECT $1, $2, clock.now + $3, nextval('lease_tokens') FROM clock
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
           token = CASE WHEN l.holder = excluded.holder THEN l.token ELSE excluded.token END
         WHERE l.holder = excluded.holder OR l.expires_at <= (SELECT now FROM clock)
         RETURNING ${LEASE_COLUMNS}`,
        [name, holder, ttlMs, this.clock()],
      );
      if (granted.rows[0]) return { granted: true, lease: granted.rows[0] };
      const current = await this.getLease(name);
      if (current) return { granted: false, lease: current };
      // Released between the two statements: ask again.
    }
  }

  async releaseLease(name: string, holder: string): Promise<boolean> {
    return (
      (await this.query('release-lease', 'DELETE FROM leases WHERE name = $1 AND holder = $2', [name, holder]))
        .rowCount === 1
    );
  }

  async releaseLeasesOf(holder: string): Promise<string[]> {
    return (
      await this.query<{ name: string }>('release-holder', 'DELETE FROM leases WHERE holder = $1 RETURNING name', [
        holder,
      ])
    ).rows
      .map((r) => r.name)
      .sort();
  }

  async getLease(name: string): Promise<Lease | undefined> {
    return (await this.query<Lease>('get-lease', `SELECT ${LEASE_COLUMNS} FROM leases WHERE name = $1`, [name]))
      .rows[0];
  }

  async listLeases(): Promise<Lease[]> {
    return (
      await this.query<Lease>(
        'list-leases',
        `SELECT ${LEASE_COLUMNS} FROM leases WHERE expires_at > ${now('$1')} ORDER BY name`,
        [this.clock()],
      )
    ).rows;
  }
}
