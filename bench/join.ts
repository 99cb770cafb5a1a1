/**
 * bench/join: joins of a time-partitioned table of a few hundred thousand rows to small tables,
 * with a GROUP BY above them, as an analyst sends them: nycflights13's shape (336,776 flights in
 * twelve monthly segments, rows in no useful order inside them, joined to 16 carriers, 3,322
 * planes and 1,458 airports), each query with literals of its own every round (a month, a delay
 * threshold, an origin). Berth (the embedded cluster: coordinator plus 3 query nodes on this
 * machine, caches warm) runs each query twice: as sent, where the small tables are broadcast to
 * the owners of the flights, and with each small table behind a subquery, which Berth does not
 * broadcast (every projected flight goes to the coordinator, as every join did before). One
 * DuckDB answers it over the same files in this process, interleaved query by query; every answer
 * is checked against DuckDB's first.
 * Run: npm run bench:join [-- --rounds N]; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
 */
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { readJsonResult } from '../services/common/final-stage/result-json.js';
import { CoordinatorClient, type QueryResult } from '../services/coordinator/client.js';
import { answerDifference } from './answers.js';
import { startBenchCluster } from './bench-cluster.js';
import { segmentFiles } from './segment-files.js';
import { sized } from './smoke.js';
import { median } from './stats.js';

const arg = (name: string, fallback: number) => Number(process.argv[process.argv.indexOf(`--${name}`) + 1]) || fallback;
const FLIGHTS = sized(336_776, 12_000);
const MONTHS = 12;
const ROUNDS = arg('rounds', sized(7, 1));
const NODES = [2, 2, 2];
const BASE = path.join(os.tmpdir(), 'berth-bench-join');
const DATA = path.join(BASE, `data-${FLIGHTS}`);
const CARRIERS = 16;
const PLANES = 3_322;
const AIRPORTS = 1_458;

/** Flights of month `m` (i its row number): carriers skewed, a tail number unknown to planes now and then, NULL delays. */
const flightRows = (from: number, to: number) => `
  SELECT TIMESTAMP '2013-01-01' + to_seconds((i * 7919 % ${FLIGHTS}) * (365 * 86400 // ${FLIGHTS})) AS ts,
         'C' || lpad(((hash(i) % 100)::INTEGER * (hash(i) % 100)::INTEGER // 625)::VARCHAR, 2, '0') AS carrier,
         ['EWR', 'JFK', 'LGA'][1 + (hash(i * 3) % 3)::INTEGER] AS origin,
         'A' || lpad((hash(i * 5) % 105)::VARCHAR, 4, '0') AS dest,
         CASE WHEN i % 97 = 0 THEN NULL ELSE 'N' || lpad((hash(i * 7) % ${PLANES + 700})::VARCHAR, 5, '0') END AS tailnum,
         CASE WHEN i % 41 = 0 THEN NULL ELSE (hash(i * 11) % 180)::INTEGER - 30 END AS dep_delay,
         CASE WHEN i % 41 = 0 THEN NULL ELSE (hash(i * 13) % 200)::INTEGER - 60 END AS arr_delay,
         (80 + hash(i * 17) % 4900)::INTEGER AS distance
  FROM range(${from}, ${to}) t(i)`;
const dimensions: [table: string, rows: number, sql: string][] = [
  [
    'carriers',
    CARRIERS,
    `SELECT 'C' || lpad(i::VARCHAR, 2, '0') AS carrier, 'Carrier ' || i || ' Air Lines' AS name FROM range(${CARRIERS}) t(i)`,
  ],
  [
    'planes',
    PLANES,
    `SELECT 'N' || lpad(i::VARCHAR, 5, '0') AS tailnum, (1960 + hash(i) % 54)::INTEGER AS year,
            ['BOEING', 'AIRBUS', 'EMBRAER', 'BOMBARDIER', 'MCDONNELL DOUGLAS', 'CESSNA'][1 + (hash(i * 3) % 6)::INTEGER] AS manufacturer,
            (2 + hash(i * 5) % 400)::INTEGER AS seats
     FROM range(${PLANES}) t(i)`,
  ],
  [
    'airports',
    AIRPORTS,
    `SELECT 'A' || lpad(i::VARCHAR, 4, '0') AS faa, 'Airport ' || i AS name,
            (hash(i) % 6000)::DOUBLE / 100 AS lat, -(hash(i * 3) % 15000)::DOUBLE / 100 AS lon,
            ['America/New_York', 'America/Chicago', 'America/Denver', 'America/Los_Angeles'][1 + (hash(i * 7) % 4)::INTEGER] AS tz
     FROM range(${AIRPORTS}) t(i)`,
  ],
];

/** Each query's SQL for a round's literals, with `small(t)` for how it names a small table. */
type Query = (small: (t: string) => string, round: number) => string;
/** A dashboard's time range, as its literals: round r's months m to m + n (n ≤ 3). */
const month = (round: number, after = 0) => `2013-${String(1 + ((round * 5) % 9) + after).padStart(2, '0')}-01`;
const QUERIES: [name: string, sql: Query][] = [
  [
    'carriers, a month',
    (small, r) =>
      `SELECT c.name, count(*) AS flights, avg(f.dep_delay) AS delay FROM flights f JOIN ${small('carriers')} c ON f.carrier = c.carrier WHERE f.ts >= TIMESTAMP '${month(r)}' AND f.ts < TIMESTAMP '${month(r, 2)}' GROUP BY c.name ORDER BY flights DESC, c.name`,
  ],
  [
    'planes, delayed',
    (small, r) =>
      `SELECT p.manufacturer, count(*) AS flights, avg(f.arr_delay) AS arrival, max(p.seats) FROM flights f JOIN ${small('planes')} p ON f.tailnum = p.tailnum WHERE f.dep_delay > ${30 + r * 7} GROUP BY p.manufacturer ORDER BY flights DESC, 1`,
  ],
  [
    'airports, a quarter',
    (small, r) =>
      `SELECT a.tz, count(*) AS flights, sum(f.distance) AS miles, count(DISTINCT f.dest) AS airports FROM flights f JOIN ${small('airports')} a ON f.dest = a.faa WHERE f.ts BETWEEN TIMESTAMP '${month(r)}' AND TIMESTAMP '${month(r, 3)}' GROUP BY a.tz ORDER BY 1`,
  ],
  [
    'all three, one origin',
    (small, r) =>
      `SELECT c.name, p.manufacturer, count(*) AS flights, avg(f.dep_delay) AS delay FROM flights f JOIN ${small('carriers')} c ON f.carrier = c.carrier JOIN ${small('planes')} p ON p.tailnum = f.tailnum LEFT JOIN ${small('airports')} a ON a.faa = f.dest WHERE f.origin = '${['EWR', 'JFK', 'LGA'][r % 3]}' AND a.lat > ${10 + (r % 4) * 5} GROUP BY ALL ORDER BY flights DESC, 1, 2 LIMIT 20`,
  ],
];
const asSent = (t: string) => t;
/** A small table behind a subquery: not a table of the join, so not broadcast (the plan joins did before). */
const hidden = (t: string) => `(SELECT * FROM ${t})`;

const flights = await segmentFiles({
  dir: path.join(DATA, 'flights'),
  files: MONTHS,
  rowsPerFile: Math.ceil(FLIGHTS / MONTHS),
  name: (f) => `flights-${String(f).padStart(2, '0')}.parquet`,
  // A month's segment holds that month's flights, in the order the row numbers scatter them.
  rows: (from) =>
    `SELECT * FROM (${flightRows(0, FLIGHTS)}) WHERE month(ts) = ${1 + from / Math.ceil(FLIGHTS / MONTHS)} ORDER BY hash(ts)`,
});
const small = new Map<string, string[]>();
for (const [table, rows, sql] of dimensions)
  small.set(
    table,
    await segmentFiles({
      dir: path.join(DATA, table),
      files: 1,
      rowsPerFile: rows,
      name: () => `${table}.parquet`,
      rows: () => sql,
    }),
  );

const bench = await startBenchCluster(path.join(BASE, 'cluster'), NODES, 1024 ** 3);
try {
  await bench.load('flights', flights);
  for (const [table, files] of small) await bench.load(table, files, { timeless: true });
  const coordinator = new CoordinatorClient(bench.cluster.endpoints.coordinator);
  const baseline = await DuckDBInstance.create(':memory:');
  const connection = await baseline.connect();
  for (const [table, files] of [['flights', flights] as const, ...small])
    await connection.run(
      `CREATE VIEW ${table} AS SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`,
    );

  // Warm: every column of every table on every owner, and the OS page cache for DuckDB; then every answer checked.
  await coordinator.query(
    'SELECT max(ts), max(carrier), max(origin), max(dest), max(tailnum), max(dep_delay), max(arr_delay), max(distance) FROM flights',
  );
  for (const [name, query] of QUERIES) {
    const expected = await readJsonResult(await connection.stream(query(asSent, 0)));
    for (const [how, sql] of [
      ['broadcast', query(asSent, 0)],
      ['not broadcast', query(hidden, 0)],
    ]) {
      const answer = await coordinator.query(sql!);
      const differs = answerDifference(answer, expected);
      if (differs) throw new Error(`${name} (${how}): Berth and one DuckDB differ: ${differs}`);
      const broadcast = answer.stats.stages.scan.some((s) => s.broadcast);
      if (broadcast !== (how === 'broadcast')) throw new Error(`${name} (${how}): broadcast ${broadcast}`);
    }
  }

  type Sample = {
    duckdb: number;
    broadcast: number;
    rows: number;
    moved: number;
    movedRows: number;
    stats: QueryResult['stats'];
  };
  const samples = new Map<string, Sample[]>(QUERIES.map(([name]) => [name, []]));
  const timed = async (sql: string) => {
    const started = performance.now();
    const { stats } = await coordinator.query(sql);
    if (stats.result !== 'computed') throw new Error('answered from the result cache');
    return { ms: performance.now() - started, moved: stats.bytesMoved, stats };
  };
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, query] of QUERIES) {
      const started = performance.now();
      (await connection.runAndReadAll(query(asSent, round))).getRows();
      const duckdb = performance.now() - started;
      const broadcast = await timed(query(asSent, round));
      const rows = await timed(query(hidden, round));
      samples.get(name)!.push({
        duckdb,
        broadcast: broadcast.ms,
        rows: rows.ms,
        moved: broadcast.moved,
        movedRows: rows.moved,
        stats: broadcast.stats,
      });
    }
  }
  connection.closeSync();
  baseline.closeSync();

  const ms = (x: number) => x.toFixed(1);
  const kib = (x: number) => (x / 1024).toFixed(1);
  console.log(
    `# bench/join — ${QUERIES.length} joins of ${FLIGHTS.toLocaleString('en-US')} flights in ${MONTHS} segments to ${CARRIERS} carriers, ${PLANES.toLocaleString('en-US')} planes and ${AIRPORTS.toLocaleString('en-US')} airports; ${NODES.length} nodes, ${os.availableParallelism()} cores; medians of ${ROUNDS} rounds, each with its own literals\n`,
  );
  console.log(
    '| join | one DuckDB (ms) | Berth, broadcast (ms) | × | Berth, not broadcast (ms) | × | moved, broadcast (KiB) | moved, not broadcast (KiB) |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const [name] of QUERIES) {
    const s = samples.get(name)!;
    const pick = (f: (x: Sample) => number) => median(s.map(f));
    const duckdb = pick((x) => x.duckdb);
    console.log(
      `| ${name} | ${ms(duckdb)} | ${ms(pick((x) => x.broadcast))} | ${(pick((x) => x.broadcast) / duckdb).toFixed(2)} | ${ms(pick((x) => x.rows))} | ${(pick((x) => x.rows) / duckdb).toFixed(2)} | ${kib(pick((x) => x.moved))} | ${kib(pick((x) => x.movedRows))} |`,
    );
  }
  console.log("\nWhere a broadcast join's milliseconds go (medians, stats.timings):\n");
  console.log('| join | plan | scan stage | its slowest owner | final stage | segments | owners |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const [name] of QUERIES) {
    const pick = (f: (x: Sample) => number) => median(samples.get(name)!.map(f));
    const scan = (x: Sample) => x.stats.stages.scan[0]!;
    console.log(
      `| ${name} | ${ms(pick((x) => x.stats.timings.planMs))} | ${ms(pick((x) => x.stats.timings.scanMs))} | ${ms(pick((x) => scan(x).slowestNodeMs))} | ${ms(pick((x) => x.stats.timings.finalMs))} | ${pick((x) => scan(x).segments)} | ${pick((x) => Object.keys(scan(x).nodes).length)} |`,
    );
  }
} finally {
  await bench.stop();
}
