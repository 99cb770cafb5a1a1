/**
 * `berth ingest FILE --table T`: sends a file of rows to the cluster in batches, one segment each.
 *
 * NDJSON (gzip or not) goes line by line, typed by the cluster's NDJSON rule. CSV and Parquet are
 * read by a DuckDB of the command's own, over the whole file at once, so that the table gets the
 * types one DuckDB gives that file (a CSV column's type from every row, not from one batch's);
 * it writes the rows as Parquet batches in a scratch directory, streaming, and each is sent as it
 * is. Memory stays bounded whatever the file's size; the scratch directory holds the file's rows
 * as Parquet until they are sent.
 */
import { createReadStream } from 'node:fs';
import { mkdtemp, open, readdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { DuckDBInstance } from '@duckdb/node-api';
import { SingleBar } from 'cli-progress';
import { Command, Option } from 'commander';
import { sqlString } from '../../services/common/duckdb.js';
import { ndjsonLines } from '../../services/common/ndjson-lines.js';
import type { IngestResult } from '../../services/coordinator/client.js';
import { TEXT_TYPES } from '../../services/coordinator/ingest/typed-rows.js';
import { ask, dataDirOption, openCluster, type ClusterHandle } from '../cluster-client.js';
import { count } from '../format.js';
import { UsageError } from '../usage-error.js';

type Format = 'ndjson' | 'csv' | 'parquet';
const FORMATS: Format[] = ['ndjson', 'csv', 'parquet'];

interface IngestOptions {
  table: string;
  format?: Format;
  batchRows: string;
  timestampColumn?: string;
  timestamp: boolean;
  header: boolean;
  delimiter?: string;
  quote?: string;
  escape?: string;
  dataDir: string;
}

export function ingestCommand(): Command {
  return new Command('ingest')
    .description('ingest a file of rows (NDJSON, CSV or Parquet) into a table, in batches')
    .argument('<file>', 'NDJSON (.ndjson, .jsonl, .json; gzip as .gz), CSV (.csv, .tsv; .gz) or Parquet (.parquet)')
    .requiredOption('--table <name>', 'the table to add the rows to')
    .addOption(new Option('--format <format>', 'the file’s format, when its name does not say').choices(FORMATS))
    .addOption(new Option('--batch-rows <n>', 'rows per batch (each batch becomes one segment)').default('100000'))
    .option('--timestamp-column <name>', 'the timestamp column of a new table (default: ts)')
    .option('--no-timestamp', 'a new table without a timestamp column (a dimension table: never pruned by time)')
    .option('--no-header', 'CSV: the first line is a row, not the column names (columns are column0, column1, …)')
    .option('--delimiter <text>', 'CSV: the field delimiter (default: detected)')
    .option('--quote <char>', 'CSV: the quote character (default: detected)')
    .option('--escape <char>', 'CSV: the escape character (default: detected)')
    .addOption(dataDirOption())
    .action(async (file: string, options: IngestOptions) => {
      if (!options.timestamp && options.timestampColumn !== undefined)
        throw new UsageError('--timestamp-column and --no-timestamp: give one or the other');
      const timestamp = options.timestamp ? { timestampColumn: options.timestampColumn } : { noTimestamp: true };
      const batchRows = Number(options.batchRows);
      if (!Number.isInteger(batchRows) || batchRows < 1)
        throw new UsageError(`--batch-rows: "${options.batchRows}" must be a positive whole number`);
      const size = await stat(file)
        .then((s) => s.size)
        .catch(() => {
          throw new UsageError(`cannot read ${file}`);
        });
      const format = options.format ?? formatOf(file);
      const cluster = await openCluster(options.dataDir);
      const sent =
        format === 'ndjson'
          ? await sendNdjson(cluster, file, size, batchRows, options.table, timestamp)
          : await sendTyped(cluster, file, format, batchRows, options, timestamp);
      console.log(`ingested ${count(sent.rows)} rows into ${options.table} as ${sent.segments} segment(s)`);
    });
}

/** The format a file's name says, or a usage error. */
function formatOf(file: string): Format {
  const name = file.toLowerCase().replace(/\.gz$/, '');
  if (/\.(ndjson|jsonl|json)$/.test(name)) return 'ndjson';
  if (/\.(csv|tsv)$/.test(name)) return 'csv';
  if (name.endsWith('.parquet')) return 'parquet';
  throw new UsageError(`cannot tell the format of ${file} from its name: give --format ndjson, csv or parquet`);
}

type Timestamp = { timestampColumn?: string; noTimestamp?: boolean };

/** A progress bar on a terminal, nothing elsewhere. */
function progress(total: number, unit: string) {
  const bar = process.stderr.isTTY
    ? new SingleBar({ format: `ingest [{bar}] {percentage}% · {rows} rows · {segments} segments (${unit})` })
    : undefined;
  bar?.start(total, 0, { rows: 0, segments: 0 });
  return bar;
}

async function sendNdjson(
  cluster: ClusterHandle,
  file: string,
  size: number,
  batchRows: number,
  table: string,
  timestamp: Timestamp,
): Promise<{ rows: number; segments: number }> {
  const bar = progress(size, 'bytes read');
  let rows = 0;
  let segments = 0;
  let batch: string[] = [];
  const stream = createReadStream(file);
  const flush = async () => {
    if (batch.length === 0) return;
    await send(cluster, table, `${batch.join('\n')}\n`, timestamp);
    rows += batch.length;
    segments++;
    batch = [];
    bar?.update(Math.min(stream.bytesRead, size), { rows: count(rows), segments });
  };
  const lines: Readable = (await isGzip(file)) ? stream.pipe(createGunzip()) : stream;
  stream.on('error', (error) => lines.destroy(error));
  for await (const line of ndjsonLines(lines)) {
    if (line.trim() === '') continue;
    batch.push(line);
    if (batch.length >= batchRows) await flush();
  }
  await flush();
  bar?.stop();
  return { rows, segments };
}

/** Whether a file starts as gzip does. */
async function isGzip(file: string): Promise<boolean> {
  const handle = await open(file);
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(2), 0, 2, 0);
    return bytesRead === 2 && buffer[0] === 0x1f && buffer[1] === 0x8b;
  } finally {
    await handle.close();
  }
}

async function sendTyped(
  cluster: ClusterHandle,
  file: string,
  format: 'csv' | 'parquet',
  batchRows: number,
  options: IngestOptions,
  timestamp: Timestamp,
): Promise<{ rows: number; segments: number }> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'berth-ingest-'));
  const duckdb = await DuckDBInstance.create(':memory:', {
    // One thread writes batches of the size asked; a small budget, spilling to the scratch directory.
    threads: '1',
    memory_limit: '512MB',
    temp_directory: path.join(scratch, 'spill'),
  });
  try {
    const c = await duckdb.connect();
    try {
      // CSV columns the table keeps as text are read as text, as the coordinator reads a CSV batch.
      const known = await ask(cluster.coordinator, (client) => client.tables()).then((tables) =>
        tables.find((t) => t.name === options.table),
      );
      const header =
        format === 'csv'
          ? (await c.runAndReadAll(`SELECT * FROM ${readSql(file, format, options, [], false)} LIMIT 0`)).columnNames()
          : [];
      const typed = (known?.columns ?? []).filter((col) => header.includes(col.name) && TEXT_TYPES.has(col.type));
      const source = readSql(file, format, options, typed);
      process.stderr.write(`reading ${file} …\n`);
      await c
        .run(
          `COPY (SELECT * FROM ${source}) TO ${sqlString(path.join(scratch, 'batches'))} (FORMAT parquet, ROW_GROUP_SIZE ${batchRows}, ROW_GROUPS_PER_FILE 1)`,
        )
        .catch((error: Error) => {
          throw new UsageError(`${file} could not be read as ${format}: ${error.message.split('\n')[0]}`);
        });
    } finally {
      c.closeSync();
    }
    const batches = (await readdir(path.join(scratch, 'batches')))
      .filter((name) => name.endsWith('.parquet'))
      .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
    const bar = progress(batches.length, 'batches');
    let rows = 0;
    for (const [i, name] of batches.entries()) {
      const batch = path.join(scratch, 'batches', name);
      const result = await send(cluster, options.table, await readFile(batch), {
        ...timestamp,
        contentType: 'application/vnd.apache.parquet',
      });
      await rm(batch);
      rows += result.segment.rows;
      bar?.update(i + 1, { rows: count(rows), segments: i + 1 });
    }
    bar?.stop();
    return { rows, segments: batches.length };
  } finally {
    duckdb.closeSync();
    await rm(scratch, { recursive: true, force: true });
  }
}

/** DuckDB's reading of the file: Parquet as typed, CSV with every row sampled (or DuckDB's sample, for its header alone). */
function readSql(
  file: string,
  format: 'csv' | 'parquet',
  options: IngestOptions,
  known: readonly { name: string; type: string }[],
  everyRow = true,
): string {
  if (format === 'parquet') return `read_parquet(${sqlString(file)})`;
  const settings = [
    `header = ${options.header}`,
    // No row dropped by a guess (a preamble, a comment): as the coordinator reads CSV (typed-rows.ts).
    'skip = 0',
    "comment = ''",
    ...(everyRow ? ['sample_size = -1'] : []),
    ...(options.delimiter !== undefined ? [`delim = ${sqlString(options.delimiter)}`] : []),
    ...(options.quote !== undefined ? [`quote = ${sqlString(options.quote)}`] : []),
    ...(options.escape !== undefined ? [`escape = ${sqlString(options.escape)}`] : []),
  ];
  const types = known.map((col) => `${sqlString(col.name)}: ${sqlString(col.type)}`);
  if (types.length > 0) settings.push(`types = {${types.join(', ')}}`);
  return `read_csv(${sqlString(file)}, ${settings.join(', ')})`;
}

async function send(
  cluster: ClusterHandle,
  table: string,
  rows: string | Buffer,
  options: Timestamp & { contentType?: string },
): Promise<IngestResult> {
  return await ask(cluster.coordinator, (c) => c.ingest(table, rows, options));
}
