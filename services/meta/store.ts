/**
 * Meta's durable state in one SQLite file: the node registry, the table and segment manifest, and
 * leases. Every multi-row change is one transaction, so a crash never leaves half a swap.
 */
import type Database from 'better-sqlite3';
import { conflict, notFound } from '../common/errors.js';
import { openSqlite } from '../common/sqlite.js';

export interface NodeRegistration {
  id: string;
  group: string;
  url: string;
  vcpus: number;
  /** When the node process started (epoch ms). */
  startedAt: number;
}

/** One row of the SHOW BACKENDS view. */
export interface Backend {
  id: string;
  group: string;
  url: string;
  cpuCores: number;
  alive: boolean;
  lastStartTime: string;
  lastHeartbeat: string;
  /** Heartbeats missed since the last one that arrived. */
  heartbeatFailures: number;
}

export interface Member {
  id: string;
  url: string;
  weight: number;
}

export interface ColumnSpec {
  name: string;
  type: string;
}

export interface TableInfo {
  name: string;
  timestampColumn: string;
  columns: ColumnSpec[];
}

export interface Segment {
  id: string;
  table: string;
  /** Earliest and latest timestamp in the segment (epoch ms, floor and ceiling). */
  minTs: number;
  maxTs: number;
  rows: number;
  bytes: number;
  level: number;
}

export interface SegmentRow extends Segment {
  state: 'active' | 'retired';
  createdAt: number;
  retiredAt: number | null;
  replacedBy: string | null;
}

export interface Lease {
  name: string;
  holder: string;
  expiresAt: number;
}

export interface MetaStoreOptions {
  /** SQLite file, or ':memory:'. */
  file: string;
  /** A node is alive while its last heartbeat is at most this old. @default 30000 */
  expiryMs?: number;
  /** The nodes' heartbeat interval, to count missed heartbeats. @default 5000 */
  heartbeatIntervalMs?: number;
  /** @default Date.now */
  now?: () => number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS nodes (
  id TEXT PRIMARY KEY, grp TEXT NOT NULL, url TEXT NOT NULL, vcpus REAL NOT NULL,
  started_at INTEGER NOT NULL, last_heartbeat INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tables (
  name TEXT PRIMARY KEY, timestamp_column TEXT NOT NULL, columns TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segments (
  id TEXT PRIMARY KEY, tbl TEXT NOT NULL REFERENCES tables(name), min_ts INTEGER NOT NULL,
  max_ts INTEGER NOT NULL, rows INTEGER NOT NULL, bytes INTEGER NOT NULL, level INTEGER NOT NULL,
  state TEXT NOT NULL, created_at INTEGER NOT NULL, retired_at INTEGER, replaced_by TEXT);
CREATE INDEX IF NOT EXISTS segments_by_table ON segments (tbl, state, min_ts, max_ts);
CREATE TABLE IF NOT EXISTS leases (
  name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL);
`;

interface SegmentDbRow {
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
}

const toSegment = (r: SegmentDbRow): SegmentRow => ({
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
});

export class MetaStore {
  private readonly db: Database.Database;
  private readonly now: () => number;
  readonly expiryMs: number;
  private readonly heartbeatIntervalMs: number;

  constructor(options: MetaStoreOptions) {
    this.db = openSqlite(options.file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('foreign_keys = ON');
    this.db.exec(SCHEMA);
    this.now = options.now ?? Date.now;
    this.expiryMs = options.expiryMs ?? 30_000;
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? 5_000;
  }

  close(): void {
    this.db.close();
  }

  // ── nodes ──────────────────────────────────────────────────────────────────────────────────

  /** Registers a node, or re-registers it after a restart (same id, new start time). */
  registerNode(node: NodeRegistration): void {
    this.db
      .prepare(
        `INSERT INTO nodes (id, grp, url, vcpus, started_at, last_heartbeat) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET grp = excluded.grp, url = excluded.url, vcpus = excluded.vcpus,
           started_at = excluded.started_at, last_heartbeat = excluded.last_heartbeat`,
      )
      .run(node.id, node.group, node.url, node.vcpus, node.startedAt, this.now());
  }

  /** Removes a node that is leaving on purpose (drain, scale-down), so readers stop routing to it at once. */
  deregisterNode(id: string): boolean {
    return this.db.prepare('DELETE FROM nodes WHERE id = ?').run(id).changes === 1;
  }

  /** Records a heartbeat and the node's current vCPUs; false when the node is unknown. */
  heartbeat(id: string, vcpus: number): boolean {
    return this.db.prepare('UPDATE nodes SET last_heartbeat = ?, vcpus = ? WHERE id = ?').run(this.now(), vcpus, id).changes === 1;
  }

  /** The live nodes of a group, weighted by vCPU: what every reader places segments over. */
  members(group: string): Member[] {
    return this.db
      .prepare('SELECT id, url, vcpus AS weight FROM nodes WHERE grp = ? AND last_heartbeat >= ? ORDER BY id')
      .all(group, this.now() - this.expiryMs) as Member[];
  }

  /** Every registered node, alive or not, in the spirit of SHOW BACKENDS. */
  backends(group?: string): Backend[] {
    const rows = this.db
      .prepare(`SELECT * FROM nodes ${group === undefined ? '' : 'WHERE grp = ?'} ORDER BY grp, id`)
      .all(...(group === undefined ? [] : [group])) as {
      id: string;
      grp: string;
      url: string;
      vcpus: number;
      started_at: number;
      last_heartbeat: number;
    }[];
    const now = this.now();
    return rows.map((r) => ({
      id: r.id,
      group: r.grp,
      url: r.url,
      cpuCores: r.vcpus,
      alive: r.last_heartbeat >= now - this.expiryMs,
      lastStartTime: new Date(r.started_at).toISOString(),
      lastHeartbeat: new Date(r.last_heartbeat).toISOString(),
      heartbeatFailures: Math.max(0, Math.floor((now - r.last_heartbeat) / this.heartbeatIntervalMs) - 1),
    }));
  }

  // ── tables and segments ────────────────────────────────────────────────────────────────────

  /** Creates a table on first use; later calls must agree on its timestamp column. */
  ensureTable(table: TableInfo): TableInfo {
    const existing = this.getTable(table.name);
    if (existing) {
      if (existing.timestampColumn !== table.timestampColumn) {
        throw conflict('table_mismatch', `table "${table.name}" keeps its timestamps in "${existing.timestampColumn}", not "${table.timestampColumn}"`);
      }
      return existing;
    }
    this.db.prepare('INSERT INTO tables (name, timestamp_column, columns) VALUES (?, ?, ?)').run(table.name, table.timestampColumn, JSON.stringify(table.columns));
    return table;
  }

  getTable(name: string): TableInfo | undefined {
    const row = this.db.prepare('SELECT * FROM tables WHERE name = ?').get(name) as { name: string; timestamp_column: string; columns: string } | undefined;
    return row && { name: row.name, timestampColumn: row.timestamp_column, columns: JSON.parse(row.columns) as ColumnSpec[] };
  }

  listTables(): TableInfo[] {
    return (this.db.prepare('SELECT name FROM tables ORDER BY name').all() as { name: string }[]).map((r) => this.getTable(r.name)!);
  }

  /** Commits one new segment. Committing the same segment again is a no-op; a different one under the same id is a conflict. */
  commitSegment(segment: Segment): SegmentRow {
    return this.db.transaction(() => this.insertSegment(segment))();
  }

  /**
   * Atomically retires `retire` and commits `add` in their place (a merge's swap). Exactly one of
   * two racing swaps over the same inputs wins; repeating a swap that already happened is a no-op.
   */
  swapSegments(retire: string[], add: Segment): SegmentRow {
    return this.db.transaction(() => {
      const existing = this.getSegment(add.id);
      if (existing && retire.every((id) => this.getSegment(id)?.replacedBy === add.id)) return existing;
      for (const id of retire) {
        const input = this.getSegment(id);
        if (!input) throw notFound('segment_not_found', `segment "${id}" is not in the manifest`);
        if (input.table !== add.table) throw conflict('table_mismatch', `segment "${id}" belongs to table "${input.table}", not "${add.table}"`);
        if (input.state !== 'active') {
          throw conflict('segment_retired', `segment "${id}" was already retired${input.replacedBy ? ` by "${input.replacedBy}"` : ''}`);
        }
      }
      const row = this.insertSegment(add);
      const retireStmt = this.db.prepare(`UPDATE segments SET state = 'retired', retired_at = ?, replaced_by = ? WHERE id = ?`);
      for (const id of retire) retireStmt.run(this.now(), add.id, id);
      return row;
    })();
  }

  /** Retires segments without a replacement (data expiry). Unknown ids are an error; retired ones stay as they were. */
  retireSegments(ids: string[]): void {
    this.db.transaction(() => {
      for (const id of ids) {
        if (!this.getSegment(id)) throw notFound('segment_not_found', `segment "${id}" is not in the manifest`);
        this.db.prepare(`UPDATE segments SET state = 'retired', retired_at = ? WHERE id = ? AND state = 'active'`).run(this.now(), id);
      }
    })();
  }

  getSegment(id: string): SegmentRow | undefined {
    const row = this.db.prepare('SELECT * FROM segments WHERE id = ?').get(id) as SegmentDbRow | undefined;
    return row && toSegment(row);
  }

  /** Active segments of a table whose time range overlaps [from, to] (epoch ms, either end open). */
  listSegments(table: string, range: { from?: number; to?: number } = {}): SegmentRow[] {
    const rows = this.db
      .prepare(`SELECT * FROM segments WHERE tbl = ? AND state = 'active' AND max_ts >= ? AND min_ts <= ? ORDER BY max_ts DESC, id`)
      .all(table, range.from ?? Number.MIN_SAFE_INTEGER, range.to ?? Number.MAX_SAFE_INTEGER) as SegmentDbRow[];
    return rows.map(toSegment);
  }

  /** Retired segments whose retirement is older than `before` (epoch ms): what the janitor may delete. */
  listRetired(before: number): SegmentRow[] {
    const rows = this.db.prepare(`SELECT * FROM segments WHERE state = 'retired' AND retired_at < ? ORDER BY retired_at, id`).all(before) as SegmentDbRow[];
    return rows.map(toSegment);
  }

  /** Forgets a retired segment whose object is gone. An active segment is never forgotten. */
  forgetSegment(id: string): void {
    const segment = this.getSegment(id);
    if (!segment) return;
    if (segment.state === 'active') throw conflict('segment_active', `segment "${id}" is active: only retired segments can be forgotten`);
    this.db.prepare(`DELETE FROM segments WHERE id = ? AND state = 'retired'`).run(id);
  }

  /** Which of these ids the manifest knows, in any state. */
  knownSegments(ids: string[]): string[] {
    const stmt = this.db.prepare('SELECT 1 FROM segments WHERE id = ?');
    return ids.filter((id) => stmt.get(id) !== undefined);
  }

  private insertSegment(segment: Segment): SegmentRow {
    if (!this.getTable(segment.table)) throw notFound('table_not_found', `table "${segment.table}" does not exist`);
    const existing = this.getSegment(segment.id);
    if (existing) {
      const same = (['table', 'minTs', 'maxTs', 'rows', 'bytes', 'level'] as const).every((k) => existing[k] === segment[k]);
      if (same) return existing;
      throw conflict('segment_exists', `segment "${segment.id}" is already committed with different contents`);
    }
    this.db
      .prepare(`INSERT INTO segments (id, tbl, min_ts, max_ts, rows, bytes, level, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?)`)
      .run(segment.id, segment.table, segment.minTs, segment.maxTs, segment.rows, segment.bytes, segment.level, this.now());
    return this.getSegment(segment.id)!;
  }

  // ── leases ─────────────────────────────────────────────────────────────────────────────────

  /** Takes or renews a lease; granted when it is free, expired, or already the holder's. */
  acquireLease(name: string, holder: string, ttlMs: number): { granted: boolean; lease: Lease } {
    return this.db.transaction(() => {
      const now = this.now();
      const current = this.getLease(name);
      if (current && current.holder !== holder && current.expiresAt > now) return { granted: false, lease: current };
      this.db
        .prepare('INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at')
        .run(name, holder, now + ttlMs);
      return { granted: true, lease: this.getLease(name)! };
    })();
  }

  /** Releases a lease if `holder` holds it; true when something was released. */
  releaseLease(name: string, holder: string): boolean {
    return this.db.prepare('DELETE FROM leases WHERE name = ? AND holder = ?').run(name, holder).changes === 1;
  }

  /** Releases every lease held by `holder` (a compute group parking at zero); returns their names. */
  releaseLeasesOf(holder: string): string[] {
    const names = (this.db.prepare('SELECT name FROM leases WHERE holder = ?').all(holder) as { name: string }[]).map((r) => r.name);
    this.db.prepare('DELETE FROM leases WHERE holder = ?').run(holder);
    return names;
  }

  getLease(name: string): Lease | undefined {
    const row = this.db.prepare('SELECT name, holder, expires_at AS expiresAt FROM leases WHERE name = ?').get(name) as Lease | undefined;
    return row;
  }

  /** Leases that have not expired. */
  listLeases(): Lease[] {
    return this.db.prepare('SELECT name, holder, expires_at AS expiresAt FROM leases WHERE expires_at > ? ORDER BY name').all(this.now()) as Lease[];
  }
}
