/** A deterministic event data set (the corpus's `events` table), written as Parquet with DuckDB. */
import { DuckDBInstance } from '@duckdb/node-api';

/** Columns of `events`, as DuckDB types. */
export const EVENT_COLUMNS = [
  { name: 'ts', type: 'TIMESTAMP' },
  { name: 'service', type: 'VARCHAR' },
  { name: 'level', type: 'VARCHAR' },
  { name: 'status', type: 'INTEGER' },
  { name: 'latency_ms', type: 'DOUBLE' },
  { name: 'bytes', type: 'BIGINT' },
  { name: 'user_id', type: 'VARCHAR' },
  { name: 'region', type: 'VARCHAR' },
];

/**
 * The SQL for rows [from, to) of the data set: one row every 30 s from 2026-11-01, seven
 * services, some NULL users and regions.
 */
export function eventRowsSql(from: number, to: number): string {
  return `SELECT
      TIMESTAMP '2026-11-01' + to_seconds(i * 30) AS ts,
      ['api','web','auth','search','billing','mail','cdn'][1 + (hash(i) % 7)::INT] AS service,
      CASE WHEN hash(i * 7) % 20 = 0 THEN 'error' WHEN hash(i * 7) % 5 = 0 THEN 'warn' ELSE 'info' END AS level,
      [200, 200, 200, 201, 204, 301, 404, 500, 503][1 + (hash(i * 3) % 9)::INT]::INTEGER AS status,
      round((hash(i * 11) % 100000) / 100.0, 2)::DOUBLE AS latency_ms,
      (hash(i * 13) % 1000000)::BIGINT AS bytes,
      CASE WHEN hash(i * 17) % 4 = 0 THEN NULL ELSE 'u' || (hash(i * 19) % 500)::VARCHAR END AS user_id,
      CASE WHEN hash(i * 23) % 10 = 0 THEN NULL ELSE ['eu','us','ap'][1 + (hash(i * 29) % 3)::INT] END AS region
    FROM range(${from}, ${to}) t(i)`;
}

/** Writes `files` Parquet files of `rowsPerFile` consecutive rows each; returns their paths. */
export async function writeEventFiles(dir: string, files: number, rowsPerFile: number): Promise<string[]> {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  const paths: string[] = [];
  try {
    for (let f = 0; f < files; f++) {
      const file = `${dir}/events-${String(f).padStart(4, '0')}.parquet`;
      await connection.run(
        `COPY (${eventRowsSql(f * rowsPerFile, (f + 1) * rowsPerFile)} ORDER BY ts) TO '${file}' (FORMAT parquet)`,
      );
      paths.push(file);
    }
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
  return paths;
}

/** Rows [from, to) of the data set as newline-delimited JSON, as a client would send them. */
export async function eventNdjson(from: number, to: number): Promise<Buffer> {
  const { mkdtemp, readFile, rm } = await import('node:fs/promises');
  const os = await import('node:os');
  const dir = await mkdtemp(`${os.tmpdir()}/berth-ndjson-`);
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  try {
    await connection.run(`COPY (${eventRowsSql(from, to)}) TO '${dir}/rows.ndjson' (FORMAT json)`);
    return await readFile(`${dir}/rows.ndjson`);
  } finally {
    connection.closeSync();
    instance.closeSync();
    await rm(dir, { recursive: true, force: true });
  }
}
