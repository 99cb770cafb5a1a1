/**
 * bench/ingest: a file far larger than a batch, ingested with `berth ingest` into the embedded
 * cluster, with the memory it takes: the coordinator's and the command's peak RSS, sampled every
 * 100 ms, against the file's size; and the time against one DuckDB reading the same file into
 * Parquet (the baseline, in the same run). Every row is counted back with a query.
 * Run: npm run bench:ingest [-- --gigabytes 2 --format csv]; BERTH_BENCH_SMOKE=1 runs it small.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DuckDBInstance } from '@duckdb/node-api';
import { startBenchCluster } from './bench-cluster.js';
import { servicePids } from './dashboard-load.js';
import { failInSmoke, sized } from './smoke.js';

const { values: args } = parseArgs({
  options: {
    gigabytes: { type: 'string', default: sized('2', '0.01') },
    format: { type: 'string', default: 'csv' },
  },
});
const FORMAT = args.format as 'csv' | 'ndjson';
const TARGET_BYTES = Number(args.gigabytes) * 1024 ** 3;
/** Bytes a row of the generated data takes as CSV, about: the row count aims at the size asked. */
const BYTES_PER_ROW = 94;
const ROWS = Math.ceil(TARGET_BYTES / BYTES_PER_ROW);
// The command as users run it (dist/bench/ is two levels below the package's bin/).
const BERTH = fileURLToPath(new URL('../../bin/berth.js', import.meta.url));
const dir = path.join(os.tmpdir(), `berth-bench-ingest-${process.pid}`);
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const log = (line: string) => console.error(`[ingest] ${line}`);

/** Log events in no order of time, of the widths a request log has. */
const rowsSql = (rows: number) => `SELECT
    TIMESTAMP '2026-11-01' + to_milliseconds((hash(i) % 2592000000)::BIGINT) AS ts,
    ['checkout','search','auth','payments','catalog','gateway'][1 + (hash(i, 1) % 6)::INT] AS service,
    [200, 200, 200, 201, 304, 404, 500, 503][1 + (hash(i, 2) % 8)::INT] AS status,
    round((hash(i, 3) % 100000) / 10.0, 1) AS latency_ms,
    (hash(i, 4) % 1000000)::BIGINT - 500000 AS delta,
    'user-' || (hash(i, 5) % 100000)::VARCHAR AS user_id,
    md5(i::VARCHAR) AS trace_id
  FROM range(${rows}) t(i)`;

/** Peak resident memory of each pid while `work` runs, sampled every 100 ms. */
async function peaks(pids: () => Promise<Record<string, number | undefined>>, work: Promise<void>) {
  const peak: Record<string, number> = {};
  let done = false;
  const sampling = (async () => {
    while (!done) {
      for (const [name, pid] of Object.entries(await pids())) {
        if (!pid) continue;
        const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
        const rss = 1024 * Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
        peak[name] = Math.max(peak[name] ?? 0, rss);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  try {
    await work;
  } finally {
    done = true;
    await sampling;
  }
  return peak;
}

await rm(dir, { recursive: true, force: true });
await mkdir(dir, { recursive: true });
const file = path.join(dir, `events.${FORMAT}`);
const duckdb = await DuckDBInstance.create(':memory:', { threads: '2', memory_limit: '1GB' });
const c = await duckdb.connect();
log(`writing ${ROWS.toLocaleString('en-US')} rows as ${FORMAT}`);
await c.run(`COPY (${rowsSql(ROWS)}) TO '${file}' (FORMAT ${FORMAT === 'csv' ? 'csv, HEADER' : 'json'})`);
const size = (await stat(file)).size;

// The baseline: one DuckDB reading the same file into Parquet.
let t = performance.now();
const reader = FORMAT === 'csv' ? `read_csv('${file}', sample_size = -1)` : `read_json('${file}')`;
await c.run(`COPY (SELECT * FROM ${reader}) TO '${path.join(dir, 'baseline.parquet')}' (FORMAT parquet)`);
const baselineMs = performance.now() - t;
c.closeSync();
duckdb.closeSync();

const dataDir = path.join(dir, 'cluster');
const bench = await startBenchCluster(dataDir, [2, 2, 1], 8 * 1024 ** 3);
try {
  const coordinator = (await servicePids(dataDir)).get('coordinator')?.[0];
  let command: number | undefined;
  t = performance.now();
  const ingest = new Promise<void>((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [BERTH, 'ingest', file, '--table', 'big', '--data-dir', dataDir],
      { maxBuffer: 16 << 20 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`berth ingest failed: ${stderr || error.message}`)) : resolve(),
    );
    command = child.pid;
  });
  const peak = await peaks(async () => ({ coordinator, command }), ingest);
  const ingestMs = performance.now() - t;
  const response = await fetch(`${bench.cluster.endpoints.coordinator}/v1/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sql: 'SELECT count(*) FROM big' }),
  });
  const counted = Number(((await response.json()) as { rows: number[][] }).rows[0]![0]);
  failInSmoke('rows counted back', counted === ROWS ? 0 : 1, `${counted} of ${ROWS}`);

  console.log(
    [
      `| file | rows | berth ingest | one DuckDB into Parquet | ratio | coordinator peak RSS | \`berth ingest\` peak RSS |`,
      `|---|---:|---:|---:|---:|---:|---:|`,
      `| ${FORMAT}, ${mib(size)} | ${ROWS.toLocaleString('en-US')} (counted back: ${counted.toLocaleString('en-US')}) | ${(ingestMs / 1000).toFixed(1)} s | ${(baselineMs / 1000).toFixed(1)} s | ${(ingestMs / baselineMs).toFixed(2)}× | ${mib(peak.coordinator ?? 0)} (${((100 * (peak.coordinator ?? 0)) / size).toFixed(1)} % of the file) | ${mib(peak.command ?? 0)} |`,
    ].join('\n'),
  );
} finally {
  await bench.stop();
  await rm(dir, { recursive: true, force: true });
}
