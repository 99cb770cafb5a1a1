/**
 * bench/scan: a scan-bound aggregate over at least 1 GB of Parquet on warm caches, Berth (the
 * embedded cluster: coordinator plus 4 query nodes as processes on this machine) against one
 * DuckDB over the same files in this process, timed in interleaved rounds. Before that, cold:
 * the first query on nodes that hold nothing (they fetch footers, then the chunks of the columns
 * it reads), a second that reads two more columns, and, on a second copy of the table, the first
 * query of one that reads every column (the bytes a whole-segment fetch moves), each with the
 * bytes it moved from S3 against the bytes of the columns it reads. Last, the seed's monthly
 * cumulative window (a window over a per-day aggregate), which Berth runs in two stages, against
 * one DuckDB and against the same query whole on one node that reads every segment itself (the
 * gather route Berth had before the two stages), with the bytes Berth moved between nodes set
 * against the compressed size of the columns the query reads.
 * Run: npm run bench:scan [-- --files N --rows-per-file N]; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
 */
import { readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { tokenFile } from '../cli/embedded/cluster.js';
import { readJsonResult } from '../services/common/final-stage/result-json.js';
import { CoordinatorClient } from '../services/coordinator/client.js';
import { QueryNodeClient } from '../services/query-node/client.js';
import { startBenchCluster } from './bench-cluster.js';
import { segmentFiles } from './segment-files.js';
import { sized } from './smoke.js';
import { median } from './stats.js';

const arg = (name: string, fallback: number) => Number(process.argv[process.argv.indexOf(`--${name}`) + 1]) || fallback;
const FILES = arg('files', sized(48, 4));
const ROWS_PER_FILE = arg('rows-per-file', sized(500_000, 5_000));
const ROUNDS = sized(5, 1);
/** The query nodes, by the vCPUs each declares. */
const NODES = sized([2, 2, 2, 2], [2, 2]);
const QUERY =
  'SELECT service, count(*) AS n, sum(bytes) AS bytes, avg(latency_ms) AS latency, max(latency_ms) AS worst FROM events GROUP BY service ORDER BY service';
/** Two more columns than QUERY. */
const WIDER =
  'SELECT service, status, count(*) AS n, sum(bytes) AS bytes, max(latency_ms) AS worst, min(ts) AS first FROM events GROUP BY service, status ORDER BY service, status';
/** Every column, on the table's second copy. */
const ALL_COLUMNS =
  'SELECT service, count(*) AS n, sum(bytes) AS bytes, max(latency_ms) AS worst, min(ts) AS first, max(status) AS status, max(request_id) AS request, max(user_id) AS user FROM events_copy GROUP BY service ORDER BY service';
/** The seed's monthly cumulative window (cli/demo.ts), with this data's errors: a status of 500 or more. */
const WINDOW_QUERY = `SELECT day, service, errors, sum(errors) OVER (PARTITION BY service ORDER BY day ROWS UNBOUNDED PRECEDING) AS month_to_date
  FROM (SELECT date_trunc('day', ts) AS day, service, count(*) FILTER (WHERE status >= 500) AS errors FROM events GROUP BY ALL)
  ORDER BY service, day`;
/** The columns WINDOW_QUERY reads. */
const WINDOW_COLUMNS = ['ts', 'service', 'status'];
const BASE = path.join(os.tmpdir(), 'berth-bench-scan');
const DATA = path.join(BASE, `data-${FILES}x${ROWS_PER_FILE}`);

/** Segment files of hard-to-compress rows (random numbers, hex ids), made once and kept for reruns. */
function makeData(): Promise<string[]> {
  return segmentFiles({
    dir: DATA,
    files: FILES,
    rowsPerFile: ROWS_PER_FILE,
    name: (f) => `events-bench-${String(f).padStart(4, '0')}.parquet`,
    rows: (from, to) => `SELECT TIMESTAMP '2026-10-01' + to_milliseconds(i * 50) AS ts,
          ['api','web','auth','search','billing','mail','cdn'][1 + (hash(i) % 7)::INT] AS service,
          (hash(i * 3) % 600)::INTEGER AS status, random() * 1000 AS latency_ms, (hash(i * 5) % 10000000)::BIGINT AS bytes,
          md5(i::VARCHAR) AS request_id, md5((i * 7)::VARCHAR)[1:16] AS user_id
        FROM range(${from}, ${to}) t(i) ORDER BY ts`,
  });
}

const files = await makeData();
const totalBytes = (await Promise.all(files.map((f) => stat(f)))).reduce((sum, s) => sum + s.size, 0);
console.error(
  `data: ${files.length} files, ${(totalBytes / 1e9).toFixed(2)} GB, ${(FILES * ROWS_PER_FILE).toLocaleString('en-US')} rows`,
);

/** Bytes of each column's chunks over all the files, from their footers. */
const columnBytes = new Map<string, number>();
{
  const db = await DuckDBInstance.create(':memory:');
  const c = await db.connect();
  const list = `[${files.map((f) => `'${f}'`).join(', ')}]`;
  for (const [column, bytes] of (
    await c.runAndReadAll(`SELECT path_in_schema, sum(total_compressed_size) FROM parquet_metadata(${list}) GROUP BY 1`)
  ).getRowsJson()) {
    columnBytes.set(String(column), Number(bytes));
  }
  c.closeSync();
  db.closeSync();
}
const bytesOf = (columns: string[]) => columns.reduce((sum, c) => sum + columnBytes.get(c)!, 0);

// No warmer passes while the cold queries run: they would fetch whole segments in the background.
process.env.BERTH_WARM_INTERVAL_MS = String(3_600_000);
const clusterDir = path.join(BASE, 'cluster');
const bench = await startBenchCluster(clusterDir, NODES, Math.ceil(totalBytes / 2)); // room for a node's share and more
const { cluster } = bench;
try {
  await bench.load('events', files);
  await bench.load('events_copy', files); // other segment ids: cold again

  const coordinator = new CoordinatorClient(cluster.endpoints.coordinator);
  const berthQuery = async (sql = QUERY) => {
    const started = performance.now();
    const result = await coordinator.query(sql);
    return { ms: performance.now() - started, result };
  };
  const baseline = await DuckDBInstance.create(':memory:');
  const connection = await baseline.connect();
  await connection.run(`CREATE VIEW events AS SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`);
  const duckdbQuery = async (sql = QUERY) => {
    const started = performance.now();
    const reader = await connection.runAndReadAll(sql);
    return { ms: performance.now() - started, rows: reader.getRowsJson() };
  };

  // Cold, on nodes that hold nothing: the query, then one that reads two more columns; then the
  // all-columns query on the second copy (what fetching whole segments moves).
  const cold = await berthQuery();
  const wider = await berthQuery(WIDER);
  const whole = await berthQuery(ALL_COLUMNS);
  // Warm both: the nodes' caches and the OS page cache for the baseline.
  await berthQuery();
  await duckdbQuery();
  const berthTimes: number[] = [];
  const duckdbTimes: number[] = [];
  let misses = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const b = await berthQuery();
    misses += b.result.stats.cacheMisses;
    berthTimes.push(b.ms);
    duckdbTimes.push((await duckdbQuery()).ms);
  }

  // The window, three ways, interleaved. The gather route as it was: the whole query on the node
  // that owns the most segments, which reads every other segment itself.
  const token = (await readFile(tokenFile(clusterDir), 'utf8')).trim();
  const segments = await bench.meta.listSegments('events');
  const table = (await bench.meta.findTable('events'))!;
  const owners = (await berthQuery('SELECT count(*) FROM events')).result.stats as unknown as {
    nodes: Record<string, number>;
  };
  const busiest = Object.entries(owners.nodes).sort((x, y) => y[1] - x[1])[0]![0];
  const gatherUrl = cluster.endpoints.nodes.find((n) => n.id === busiest)!.url;
  const gatherQuery = async () => {
    const started = performance.now();
    const response = await new QueryNodeClient(gatherUrl, token).scan(
      { sql: WINDOW_QUERY, tables: [{ name: 'events', schema: table.columns, segments: segments.map((s) => s.id) }] },
      AbortSignal.timeout(600_000),
    );
    for await (const part of response.body) void part;
    const stats = await response.ended;
    return { ms: performance.now() - started, stats };
  };
  const windowCheck = await berthQuery(WINDOW_QUERY);
  const expected = await readJsonResult(await connection.stream(WINDOW_QUERY));
  if (JSON.stringify(windowCheck.result.rows) !== JSON.stringify(expected.rows))
    throw new Error('Berth and DuckDB disagree on the window query');
  await gatherQuery();
  const windowTimes = { berth: [] as number[], duckdb: [] as number[], gather: [] as number[] };
  let bytesMoved = 0;
  let gatherBytesFromS3 = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const w = await berthQuery(WINDOW_QUERY);
    windowTimes.berth.push(w.ms);
    bytesMoved = w.result.stats.bytesMoved;
    windowTimes.duckdb.push((await duckdbQuery(WINDOW_QUERY)).ms);
    const g = await gatherQuery();
    windowTimes.gather.push(g.ms);
    gatherBytesFromS3 = g.stats.bytesFromS3;
  }
  connection.closeSync();
  baseline.closeSync();

  const [b, d] = [median(berthTimes), median(duckdbTimes)];
  const gb = (bytes: number) => `${(bytes / 1e9).toFixed(3)} GB`;
  const share = (bytes: number) => `${((100 * bytes) / totalBytes).toFixed(1)} %`;
  const queryColumns = ['service', 'bytes', 'latency_ms'];
  const widerColumns = ['status', 'ts'];
  console.log(
    `# bench/scan — ${(totalBytes / 1e9).toFixed(2)} GB of Parquet in ${files.length} segments, ${(FILES * ROWS_PER_FILE).toLocaleString('en-US')} rows, ${os.availableParallelism()} cores\n`,
  );
  console.log(`Query: \`${QUERY}\`\n`);
  console.log(`| run | median of ${ROUNDS} (ms) | vs one DuckDB |`);
  console.log('|---|---:|---:|');
  console.log(`| one DuckDB over the local files (baseline) | ${d.toFixed(0)} | 1.00× |`);
  console.log(
    `| Berth, warm caches: coordinator + ${NODES.length} query nodes, route ${cold.result.stats.route} | ${b.toFixed(0)} | **${(b / d).toFixed(2)}×** the time |`,
  );
  console.log(`\nCache misses in the timed rounds: ${misses}.\n`);
  console.log(
    "| cold query (nodes holding nothing of the table) | ms | vs warm | moved from S3 | of the objects | its columns' chunks | moved / chunks | segments missed |",
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  const row = (label: string, run: Awaited<ReturnType<typeof berthQuery>>, columns: string[]) =>
    console.log(
      `| ${label} | ${run.ms.toFixed(0)} | **${(run.ms / b).toFixed(2)}×** | ${gb(run.result.stats.bytesFromS3)} | ${share(run.result.stats.bytesFromS3)} | ${gb(bytesOf(columns))} (${share(bytesOf(columns))}) | ${(run.result.stats.bytesFromS3 / bytesOf(columns)).toFixed(3)} | ${run.result.stats.cacheMisses} |`,
    );
  row(`the query above, first (reads ${queryColumns.length} of ${columnBytes.size} columns)`, cold, queryColumns);
  row(`then one that also reads ${widerColumns.join(' and ')}: only their chunks move`, wider, widerColumns);
  row(`a query reading all ${columnBytes.size} columns, first, on a copy of the table (= whole segments)`, whole, [
    ...columnBytes.keys(),
  ]);

  const [wb, wd, wg] = [median(windowTimes.berth), median(windowTimes.duckdb), median(windowTimes.gather)];
  const projected = bytesOf(WINDOW_COLUMNS);
  console.log(`\nWindow query: \`${WINDOW_QUERY.replaceAll(/\s+/g, ' ')}\`\n`);
  console.log(`| run | median of ${ROUNDS} (ms) | vs one DuckDB | bytes moved between nodes |`);
  console.log('|---|---:|---:|---:|');
  console.log(`| one DuckDB over the local files (baseline) | ${wd.toFixed(0)} | 1.00× | — |`);
  console.log(
    `| Berth, two stages (scan: ${windowCheck.result.stats.stages.scan.map((s) => s.split).join(', ')} on the owners; final on the coordinator) | ${wb.toFixed(0)} | **${(wb / wd).toFixed(2)}×** | ${bytesMoved.toLocaleString('en-US')} B |`,
  );
  console.log(
    `| the gather route: the whole query on one node, which reads the segments it does not own from S3 | ${wg.toFixed(0)} | ${(wg / wd).toFixed(2)}× | ${gatherBytesFromS3.toLocaleString('en-US')} B of segments |`,
  );
  console.log(
    `\nThe columns the window reads (${WINDOW_COLUMNS.join(', ')}) are ${projected.toLocaleString('en-US')} B compressed: Berth moved ${(bytesMoved / projected).toExponential(2)}× that (the goal: at most 1.5×).`,
  );
} finally {
  await bench.stop();
}
