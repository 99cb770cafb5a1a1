/**
 * Versioned schema migrations of meta's stores, one list for both dialects so that a version means
 * the same schema in SQLite and in PostgreSQL. A store applies the versions its database lacks, in
 * order, inside one transaction under a lock (several meta replicas may start at once), records each
 * in `schema_migrations`, and refuses a database that a newer Berth has already migrated.
 *
 * Migrations are append-only: never edit one that has shipped, add the next version. A dozen lines
 * of runner per store are simpler than a migration framework that would still need a storage
 * adapter and a lock for each dialect.
 */

export interface Migration {
  version: number;
  name: string;
  sqlite: string;
  postgres: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'registry, manifest and leases',
    // IF NOT EXISTS: SQLite files made before migrations existed already hold exactly this schema.
    sqlite: `
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
        name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL);`,
    // Text compares byte-wise (COLLATE "C"), as in SQLite, whatever the database's locale: ids
    // sort the same in both stores. No index on last_heartbeat: heartbeats update it 200 times a
    // second at 1,000 nodes, and an unindexed column keeps those updates HOT (no index writes).
    postgres: `
      CREATE TABLE nodes (
        id TEXT COLLATE "C" PRIMARY KEY, grp TEXT COLLATE "C" NOT NULL, url TEXT NOT NULL,
        vcpus DOUBLE PRECISION NOT NULL, started_at BIGINT NOT NULL, last_heartbeat BIGINT NOT NULL);
      CREATE TABLE tables (
        name TEXT COLLATE "C" PRIMARY KEY, timestamp_column TEXT NOT NULL, columns JSONB NOT NULL);
      CREATE TABLE segments (
        id TEXT COLLATE "C" PRIMARY KEY, tbl TEXT COLLATE "C" NOT NULL REFERENCES tables(name),
        min_ts BIGINT NOT NULL, max_ts BIGINT NOT NULL, rows BIGINT NOT NULL, bytes BIGINT NOT NULL,
        level INTEGER NOT NULL, state TEXT NOT NULL, created_at BIGINT NOT NULL, retired_at BIGINT,
        replaced_by TEXT COLLATE "C");
      CREATE INDEX segments_by_table ON segments (tbl, state, min_ts, max_ts);
      CREATE TABLE leases (
        name TEXT COLLATE "C" PRIMARY KEY, holder TEXT COLLATE "C" NOT NULL, expires_at BIGINT NOT NULL);`,
  },
  {
    version: 2,
    name: 'fencing tokens on leases',
    sqlite: `
      ALTER TABLE leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0;
      CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
      INSERT INTO counters (name, value) VALUES ('lease_token', 0);`,
    postgres: `
      ALTER TABLE leases ADD COLUMN token BIGINT NOT NULL DEFAULT 0;
      CREATE SEQUENCE lease_tokens;`,
  },
  {
    version: 3,
    name: 'manifest version per table',
    // Bumped by the database itself on every change to a table's active segments (a commit, a
    // swap, a retirement), in the same transaction: a reader that sees the same version has the
    // same manifest, whichever code path or replica made the change.
    sqlite: `
      ALTER TABLE tables ADD COLUMN manifest_version INTEGER NOT NULL DEFAULT 0;
      CREATE TRIGGER segments_added AFTER INSERT ON segments
        BEGIN UPDATE tables SET manifest_version = manifest_version + 1 WHERE name = NEW.tbl; END;
      CREATE TRIGGER segments_state_changed AFTER UPDATE OF state ON segments WHEN OLD.state IS NOT NEW.state
        BEGIN UPDATE tables SET manifest_version = manifest_version + 1 WHERE name = NEW.tbl; END;`,
    postgres: `
      ALTER TABLE tables ADD COLUMN manifest_version BIGINT NOT NULL DEFAULT 0;
      CREATE FUNCTION bump_manifest_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN UPDATE tables SET manifest_version = manifest_version + 1 WHERE name = NEW.tbl; RETURN NULL; END $$;
      CREATE TRIGGER segments_added AFTER INSERT ON segments FOR EACH ROW EXECUTE FUNCTION bump_manifest_version();
      CREATE TRIGGER segments_state_changed AFTER UPDATE OF state ON segments FOR EACH ROW
        WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION bump_manifest_version();`,
  },
  {
    version: 4,
    name: 'retired rows kept for the dedup window',
    // The janitor deletes a retired segment's object after its grace, records that here, and
    // deletes the row only once the dedup window has passed since the retirement: until then the
    // id is known and a batch sent again commits nothing. Two partial indexes, one per janitor
    // listing (objects still to delete; rows past the window), each holding only its own rows; the
    // active listing keeps its (tbl, state, …) index, which never reaches a retired row.
    sqlite: `
      ALTER TABLE segments ADD COLUMN object_deleted_at INTEGER;
      CREATE INDEX segments_retired_with_objects ON segments (retired_at)
        WHERE state = 'retired' AND object_deleted_at IS NULL;
      CREATE INDEX segments_retired_without_objects ON segments (retired_at) WHERE object_deleted_at IS NOT NULL;`,
    postgres: `
      ALTER TABLE segments ADD COLUMN object_deleted_at BIGINT;
      CREATE INDEX segments_retired_with_objects ON segments (retired_at)
        WHERE state = 'retired' AND object_deleted_at IS NULL;
      CREATE INDEX segments_retired_without_objects ON segments (retired_at) WHERE object_deleted_at IS NOT NULL;`,
  },
  {
    version: 5,
    name: 'retention per table',
    // NULL: the table's rows are kept for good.
    sqlite: `ALTER TABLE tables ADD COLUMN retention_ms INTEGER;`,
    postgres: `ALTER TABLE tables ADD COLUMN retention_ms BIGINT;`,
  },
  {
    version: 6,
    name: 'dropped tables and their incarnations',
    // A dropped table keeps its row (its retired segments refer to it, and the next incarnation
    // counts on from it); dropped_at hides it from every reader.
    sqlite: `
      ALTER TABLE tables ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE tables ADD COLUMN dropped_at INTEGER;`,
    postgres: `
      ALTER TABLE tables ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE tables ADD COLUMN dropped_at BIGINT;`,
  },
  {
    version: 7,
    name: 'deletes by predicate',
    // One row per request, kept once finished as its record; the partial index holds the pending.
    // Each segment a delete took rows from is recorded in the write that retired it.
    sqlite: `
      CREATE TABLE row_deletes (
        id INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL, incarnation INTEGER NOT NULL,
        predicate TEXT NOT NULL, from_ts INTEGER, to_ts INTEGER, requested_at INTEGER NOT NULL,
        finished_at INTEGER, rows_removed INTEGER);
      CREATE INDEX row_deletes_pending ON row_deletes (id) WHERE finished_at IS NULL;
      CREATE TABLE row_delete_segments (
        delete_id INTEGER NOT NULL, segment TEXT NOT NULL, removed INTEGER NOT NULL, replaced_by TEXT,
        PRIMARY KEY (delete_id, segment));`,
    postgres: `
      CREATE TABLE row_deletes (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tbl TEXT COLLATE "C" NOT NULL,
        incarnation INTEGER NOT NULL, predicate TEXT NOT NULL, from_ts BIGINT, to_ts BIGINT,
        requested_at BIGINT NOT NULL, finished_at BIGINT, rows_removed BIGINT);
      CREATE INDEX row_deletes_pending ON row_deletes (id) WHERE finished_at IS NULL;
      CREATE TABLE row_delete_segments (
        delete_id BIGINT NOT NULL, segment TEXT COLLATE "C" NOT NULL, removed BIGINT NOT NULL,
        replaced_by TEXT COLLATE "C", PRIMARY KEY (delete_id, segment));`,
  },
  {
    version: 8,
    name: 'attached objects',
    // Where an attached segment's object lies (AttachedObject as JSON); NULL for Berth's own.
    sqlite: 'ALTER TABLE segments ADD COLUMN object TEXT;',
    postgres: 'ALTER TABLE segments ADD COLUMN object JSONB;',
  },
  {
    version: 9,
    name: 'manifest changes by version, and a time index bounded on both sides',
    // Each segment row says at which of its table's manifest versions it was added and retired,
    // stamped by the triggers that move the version: "what changed since V" is two index ranges,
    // the change log is the manifest itself. Purging retired rows past the dedup window forgets
    // their retirements: log_floor says below which version a reader must read the whole manifest.
    // A segment spanning at most a day (every merged one) starts at most a day before a range
    // that it meets: the narrow index bounds min_ts on both sides; the few wider ones have their own.
    sqlite: `
      ALTER TABLE segments ADD COLUMN added_version INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE segments ADD COLUMN retired_version INTEGER;
      ALTER TABLE tables ADD COLUMN log_floor INTEGER NOT NULL DEFAULT 0;
      UPDATE segments SET retired_version = 0 WHERE state = 'retired';
      UPDATE tables SET log_floor = manifest_version;
      DROP TRIGGER segments_added;
      DROP TRIGGER segments_state_changed;
      CREATE TRIGGER segments_added AFTER INSERT ON segments BEGIN
        UPDATE tables SET manifest_version = manifest_version + 1 WHERE name = NEW.tbl;
        UPDATE segments SET added_version = (SELECT manifest_version FROM tables WHERE name = NEW.tbl) WHERE id = NEW.id;
      END;
      CREATE TRIGGER segments_state_changed AFTER UPDATE OF state ON segments WHEN OLD.state IS NOT NEW.state BEGIN
        UPDATE tables SET manifest_version = manifest_version + 1 WHERE name = NEW.tbl;
        UPDATE segments SET retired_version = (SELECT manifest_version FROM tables WHERE name = NEW.tbl)
          WHERE id = NEW.id AND NEW.state = 'retired';
      END;
      CREATE INDEX segments_added_version ON segments (tbl, added_version);
      CREATE INDEX segments_retired_version ON segments (tbl, retired_version) WHERE retired_version IS NOT NULL;
      CREATE INDEX segments_narrow ON segments (tbl, state, min_ts) WHERE max_ts - min_ts <= 86400000;
      CREATE INDEX segments_wide ON segments (tbl, state, min_ts) WHERE max_ts - min_ts > 86400000;`,
    postgres: `
      ALTER TABLE segments ADD COLUMN added_version BIGINT NOT NULL DEFAULT 0;
      ALTER TABLE segments ADD COLUMN retired_version BIGINT;
      ALTER TABLE tables ADD COLUMN log_floor BIGINT NOT NULL DEFAULT 0;
      UPDATE segments SET retired_version = 0 WHERE state = 'retired';
      UPDATE tables SET log_floor = manifest_version;
      CREATE OR REPLACE FUNCTION bump_manifest_version() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE v BIGINT;
        BEGIN
          UPDATE tables SET manifest_version = manifest_version + 1 WHERE name = NEW.tbl RETURNING manifest_version INTO v;
          IF TG_OP = 'INSERT' THEN UPDATE segments SET added_version = v WHERE id = NEW.id;
          ELSIF NEW.state = 'retired' THEN UPDATE segments SET retired_version = v WHERE id = NEW.id;
          END IF;
          RETURN NULL;
        END $$;
      CREATE INDEX segments_added_version ON segments (tbl, added_version);
      CREATE INDEX segments_retired_version ON segments (tbl, retired_version) WHERE retired_version IS NOT NULL;
      CREATE INDEX segments_narrow ON segments (tbl, state, min_ts) WHERE max_ts - min_ts <= 86400000;
      CREATE INDEX segments_wide ON segments (tbl, state, min_ts) WHERE max_ts - min_ts > 86400000;`,
  },
];

export const SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;

/** The migrations a database at `applied` still needs; refuses one that is ahead of this code. */
export function pendingMigrations(applied: number[]): Migration[] {
  const latest = Math.max(0, ...applied);
  if (latest > SCHEMA_VERSION) {
    throw new Error(
      `meta's database is at schema version ${latest}, newer than this Berth knows (${SCHEMA_VERSION}): run a Berth at least as new`,
    );
  }
  const done = new Set(applied);
  return MIGRATIONS.filter((m) => !done.has(m.version));
}

export const SCHEMA_MIGRATIONS_TABLE = {
  sqlite:
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
  postgres:
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
};
