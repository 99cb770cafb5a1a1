/**
 * Finds tables whose meta types no Parquet segment can hold, checks what their segments really
 * hold, and sets meta's types to that: the repair of tables written by an earlier Berth.
 *
 * Until the typing rule of core/json-typing.ts, a table's first batch was typed by DuckDB's
 * inference, which gives integers HUGEINT (or UHUGEINT), nested too (`STRUCT(id HUGEINT)`,
 * `HUGEINT[]`). Meta recorded that type, but DuckDB's Parquet writer has no 128-bit integer and
 * wrote those columns as DOUBLE: every segment of such a table holds DOUBLE where meta says
 * HUGEINT, scans read one type's bytes as another's, and ingests into it are now refused.
 *
 * The repair changes meta, never the segments: values past 2^53 were already rounded when they
 * were written, so rewriting them as integers would present rounded numbers as exact; DOUBLE is
 * what the files really hold, and saying so loses nothing more. Before it changes a table, it
 * reads the Parquet footers (a ranged GET of each object's tail, DESCRIBE over it) of a bounded
 * sample of the table's active segments, the newest few and a few spread evenly over the rest
 * (the oldest included), and changes the table only when each of them agrees with the repaired
 * schema exactly. A segment outside the sample that still disagrees is refused by the query
 * nodes' own check on scan, never read as noise. The change is compare-and-set in meta, so
 * workers and `berth doctor` running at once change a table once.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, open, rm } from 'node:fs/promises';
import path from 'node:path';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { DuckDBInstance } from '@duckdb/node-api';
import { segmentObjectKey } from '../core/identifiers.js';
import { sqlString, withConnection } from '../services/common/duckdb.js';
import { ServiceCallError } from '../services/common/http-client.js';
import { columnsDisagree, describe } from '../services/common/parquet-columns.js';
import type { ColumnSpec, MetaClient, SegmentRow, TableInfo } from '../services/meta/client.js';

export interface LegacyTypeDeps {
  s3: S3Client;
  bucket: string;
  meta: Pick<MetaClient, 'listTables' | 'listSegments' | 'setColumnTypes'>;
  /** DuckDB allowed to read `workDir`. */
  duckdb: DuckDBInstance;
  /** Scratch space for the footers read (a directory of its own is made in it, and removed). */
  workDir: string;
  /** How many segments of a table have their footers read. @default { newest: 4, spread: 4 } */
  sample?: { newest: number; spread: number };
  /** How much of an object's end the first GET reads: its footer, usually whole. @default 65536 */
  tailBytes?: number;
}

/** One column of a legacy table: the type meta has, the type its segments hold. */
export interface LegacyColumn {
  name: string;
  declared: string;
  held: string;
}

export interface LegacyTypeFinding {
  table: string;
  columns: LegacyColumn[];
  /**
   * `repaired`: meta now says what the segments hold. `found`: it would be, but no repair was
   * asked for. `refused`: a segment holds something else, and the table is left as it is.
   * `changed`: the table changed while it was checked; the next check looks at it again.
   */
  outcome: 'repaired' | 'found' | 'refused' | 'changed';
  /** Segments whose footers were read, of the table's active segments. */
  checked: number;
  segments: number;
  /** What was found and what was done, in words, a line per column and one that says why. */
  message: string;
}

const WHY =
  'DOUBLE is what the files hold: values past 2^53 were already rounded when they were written, so ' +
  'rewriting them as integers would present rounded numbers as exact';

/**
 * The type a Parquet segment written by DuckDB holds for a column of `type`: HUGEINT and
 * UHUGEINT, wherever they appear in it, become DOUBLE (a quoted struct field name stays as it is).
 */
export const parquetHeldType = (type: string): string =>
  type.replace(/"(?:[^"]|"")*"|\bU?HUGEINT\b/g, (token) => (token.startsWith('"') ? token : 'DOUBLE'));

/** The table's columns whose type no Parquet segment holds, with the type the segments hold instead. */
export const legacyColumns = (table: TableInfo): LegacyColumn[] =>
  table.columns
    .map((c) => ({ name: c.name, declared: c.type, held: parquetHeldType(c.type) }))
    .filter((c) => c.held !== c.declared);

/** The segments whose footers are read: the `newest` first ones (newest first), and `spread` evenly over the rest, the last included. */
export function sampleSegments<T>(segments: readonly T[], newest: number, spread: number): T[] {
  if (segments.length <= newest + spread) return [...segments];
  const rest = segments.slice(newest);
  const picks = Array.from({ length: spread }, (_, i) => rest[Math.round(((i + 1) * (rest.length - 1)) / spread)]!);
  return [...segments.slice(0, newest), ...picks];
}

/**
 * Checks every table meta lists, and with `repair` sets the types of each legacy one whose
 * segments agree. Only tables with a column no Parquet segment holds are findings.
 */
export async function checkLegacyTypes(
  deps: LegacyTypeDeps,
  options: { repair: boolean; signal?: AbortSignal },
): Promise<LegacyTypeFinding[]> {
  const findings: LegacyTypeFinding[] = [];
  const tables = (await orAbort(deps.meta.listTables(), options.signal)).filter((t) => legacyColumns(t).length > 0);
  if (tables.length === 0) return findings;
  const dir = path.join(deps.workDir, `legacy-types-${randomUUID()}`);
  await mkdir(dir, { recursive: true });
  try {
    for (const table of tables) findings.push(await checkTable(deps, table, dir, options));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return findings;
}

async function checkTable(
  deps: LegacyTypeDeps,
  table: TableInfo,
  dir: string,
  options: { repair: boolean; signal?: AbortSignal },
): Promise<LegacyTypeFinding> {
  const columns = legacyColumns(table);
  const to: ColumnSpec[] = table.columns.map((c) => ({ name: c.name, type: parquetHeldType(c.type) }));
  const segments = await orAbort(deps.meta.listSegments(table.name), options.signal);
  const { newest, spread } = deps.sample ?? { newest: 4, spread: 4 };
  const sample = sampleSegments(segments, newest, spread);
  const finding = (outcome: LegacyTypeFinding['outcome'], message: string): LegacyTypeFinding => ({
    table: table.name,
    columns,
    outcome,
    checked: sample.length,
    segments: segments.length,
    message,
  });

  for (const segment of sample) {
    const disagreement = await segmentDisagrees(deps, table.name, segment, to, dir, options.signal);
    if (disagreement) {
      const lines = columns.map(
        (c) =>
          `table ${table.name}: column ${c.name} is ${c.declared} in meta, a type Parquet cannot hold, but segment ` +
          `${segment.id} does not hold ${c.held} as written by an earlier Berth (${disagreement}); left as it is`,
      );
      return finding('refused', lines.join('\n'));
    }
  }

  // What was found, a line per column ending in what was done about it, then why.
  const say = (done: (c: LegacyColumn) => string) =>
    [
      ...columns.map((c) =>
        segments.length === 0
          ? `table ${table.name}: column ${c.name} is ${c.declared} in meta, a type Parquet cannot hold, and the table has no segments yet; ${done(c)}`
          : `table ${table.name}: column ${c.name} is ${c.declared} in meta but its segments hold ${c.held} (written by an earlier Berth); ${done(c)}`,
      ),
      segments.length === 0
        ? "  no segment to check: DuckDB's Parquet writer stores a 128-bit integer as DOUBLE, so DOUBLE is what its segments would hold"
        : `  checked the Parquet footers of ${sample.length} of its ${segments.length} segment${segments.length === 1 ? '' : 's'}; ${WHY}`,
    ].join('\n');

  if (!options.repair)
    return finding(
      'found',
      say((c) => `\`berth doctor --repair\` sets it to ${c.held}`),
    );
  try {
    await orAbort(deps.meta.setColumnTypes(table.name, table.columns, to), options.signal);
  } catch (error) {
    if (error instanceof ServiceCallError && (error.code === 'table_changed' || error.code === 'table_not_found')) {
      const why = error.body?.message ?? error.message;
      return finding('changed', `table ${table.name}: changed while it was checked (${why}); checked again next time`);
    }
    throw new Error(`setting the types of table "${table.name}" failed`, { cause: error });
  }
  return finding(
    'repaired',
    say((c) => `set to ${c.held}`),
  );
}

/**
 * `call`'s answer, or the signal's reason as soon as it aborts: meta's calls take no signal, and
 * a worker that stops must not wait for one (a type change abandoned in flight lands or not, and
 * the next check sees which).
 */
function orAbort<T>(call: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return call;
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason as Error);
    if (signal.aborted) abort();
    signal.addEventListener('abort', abort, { once: true });
    call.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

/** How the segment's Parquet schema differs from `columns`, or undefined when they agree. */
async function segmentDisagrees(
  deps: LegacyTypeDeps,
  table: string,
  segment: SegmentRow,
  columns: ColumnSpec[],
  dir: string,
  signal: AbortSignal | undefined,
): Promise<string | undefined> {
  const file = path.join(dir, `${segment.id}.parquet`);
  try {
    await fetchFooter(deps, segmentObjectKey(table, segment.id), file, signal);
    const found = await withConnection(deps.duckdb, (c) => describe(c, `read_parquet(${sqlString(file)})`), signal);
    return columnsDisagree(found, columns);
  } catch (error) {
    if (signal?.aborted) throw error;
    return `its object could not be read: ${(error as Error).message}`;
  } finally {
    await rm(file, { force: true });
  }
}

/**
 * Writes an object's Parquet footer at its offset in a sparse file of the object's size, which
 * DuckDB opens as the object itself for DESCRIBE (it reads the footer alone).
 */
async function fetchFooter(deps: LegacyTypeDeps, key: string, file: string, signal?: AbortSignal): Promise<void> {
  const get = async (range: string) => {
    const response = await deps.s3.send(new GetObjectCommand({ Bucket: deps.bucket, Key: key, Range: range }), {
      abortSignal: signal,
    });
    const body = Buffer.from(await response.Body!.transformToByteArray());
    // No Content-Range: the server sent the whole object.
    const [, start, total] = /^bytes (\d+)-\d+\/(\d+)$/.exec(response.ContentRange ?? '') ?? [];
    return start === undefined
      ? { body, start: 0, size: body.length }
      : { body, start: Number(start), size: Number(total) };
  };
  const tailBytes = deps.tailBytes ?? 64 * 1024;
  const first = await get(`bytes=-${tailBytes}`);
  const { size } = first;
  // A server that ignores suffix ranges answers from the start: ask for the end by offsets.
  let tail =
    first.start + first.body.length === size
      ? first.body
      : (await get(`bytes=${Math.max(0, size - tailBytes)}-${size - 1}`)).body;
  if (tail.length < 8 || tail.toString('latin1', tail.length - 4) !== 'PAR1')
    throw new Error(`object ${key} is not a Parquet file (no footer at its end)`);
  const footer = tail.readUInt32LE(tail.length - 8) + 8;
  if (footer > size) throw new Error(`object ${key} is not a Parquet file (its footer is longer than it)`);
  if (footer > tail.length)
    tail = Buffer.concat([(await get(`bytes=${size - footer}-${size - tail.length - 1}`)).body, tail]);
  const handle = await open(file, 'w', 0o600);
  try {
    await handle.truncate(size);
    await handle.write(tail, 0, tail.length, size - tail.length);
  } finally {
    await handle.close();
  }
}
