/**
 * The shapes of names that reach SQL and object keys. Checked at every service boundary, so that
 * no identifier can carry SQL or a path: ids never contain '/', '..' or quotes.
 */

/** Table names: lower-case SQL identifiers that start with a letter, so that every segment id made from one is a valid id. */
export const TABLE_NAME = /^[a-z][a-z0-9_]{0,62}$/;
/** Segment ids: letters, digits, '.', '_' and '-', starting with a letter or digit, no "..". */
export const SEGMENT_ID = /^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;
/** Node ids and group names. */
export const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** The longest column name a table may have (ingest refuses longer fields; meta's schema too). */
export const MAX_COLUMN_NAME_LENGTH = 200;
/**
 * A table's timestamp column: a plain SQL identifier, or one after an '@' (Elasticsearch's
 * `@timestamp`, which `_bulk` tables keep their times in). Every SQL that names it quotes it.
 */
export const COLUMN_NAME = /^@?[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** The first and last instants whose days a partition's eight digits can name. */
const FIRST_DAY_MS = Date.parse('0000-01-01T00:00:00Z');
const LAST_DAY_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * The UTC day (YYYYMMDD) a segment belongs to: that of its earliest timestamp. Instants before
 * year 0 (-infinity among them) fall in 00000101 and those after 9999 in 99991231, so
 * that every partition has eight digits.
 */
export const partitionOf = (minTs: number) =>
  new Date(Math.min(Math.max(minTs, FIRST_DAY_MS), LAST_DAY_MS)).toISOString().slice(0, 10).replaceAll('-', '');

/** A segment's id: its table, level, day partition (YYYYMMDD) and a digest of its content or inputs. */
export const segmentId = (table: string, level: number, partition: string, digest: string) =>
  `${table}-l${level}-${partition}-${digest}`;

/** A double-quoted SQL identifier (only ever applied to names that passed the checks above). */
export const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Where a segment's Parquet object lives in the bucket. */
export const segmentObjectKey = (table: string, segmentId: string) => `tables/${table}/${segmentId}.parquet`;

/**
 * Berth's own canary object: a small Parquet file of CANARY_ROWS rows, outside `tables/` (so the
 * janitor never sweeps it), that the heavy pool's canary scan reads from storage on each new
 * backend. A pool can therefore be proven before any data has been ingested.
 */
export const CANARY_OBJECT_KEY = 'berth/canary.parquet';
export const CANARY_ROWS = 1_000;
