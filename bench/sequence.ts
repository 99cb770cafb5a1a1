/**
 * bench/sequence: many different small analytical queries, one at a time, as a person at a SQL
 * prompt or a notebook sends them: ClickBench's query shapes over a wide table (60 columns, about
 * 120,000 rows in 8 segments), Berth (the embedded cluster: coordinator plus 3 query nodes on
 * this machine, caches warm) against one DuckDB over the same files in this process. Each query
 * is new to the planner every time (BERTH_PLAN_CACHE_SIZE=0; the result cache is off by default),
 * as each of a sequence of different queries is. Rounds interleave Berth and DuckDB query by
 * query. For each query, Berth's time is split as its stats say (stats.timings): planning, the
 * scan stage (and its slowest owner's own time), the final stage, and the rest (HTTP and JSON
 * between the client and the coordinator). Where the fixed milliseconds go is what this measures.
 * Run: npm run bench:sequence [-- --rounds N]; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
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
const FILES = sized(8, 2);
const ROWS_PER_FILE = sized(15_000, 2_000);
const ROUNDS = arg('rounds', sized(5, 1));
const NODES = [2, 2, 2];
const BASE = path.join(os.tmpdir(), 'berth-bench-sequence');
const DATA = path.join(BASE, `data-${FILES}x${ROWS_PER_FILE}`);

/** ClickBench's `hits` cut to 60 columns: its names and types, with values drawn from the row number. */
const COLUMNS: [name: string, sql: string][] = [
  ['ts', "TIMESTAMP '2013-07-01' + to_seconds(i * 17 % 2678400)"],
  ['WatchID', '(hash(i) >> 1)::BIGINT'],
  ['JavaEnable', '(hash(i * 2) % 2)::SMALLINT'],
  ['Title', "'title ' || (hash(i * 3) % 5000)"],
  ['GoodEvent', '1::SMALLINT'],
  ['EventDate', "DATE '2013-07-01' + (i * 17 % 2678400 // 86400)::INTEGER"],
  ['CounterID', '(hash(i * 5) % 120)::INTEGER'],
  ['ClientIP', '(hash(i * 7) % 2000000000)::INTEGER'],
  ['RegionID', '(hash(i * 11) % 400)::INTEGER'],
  ['UserID', '(hash(i * 13) % 30000)::BIGINT * 1000003'],
  ['CounterClass', '(hash(i * 17) % 3)::SMALLINT'],
  ['OS', '(hash(i * 19) % 60)::SMALLINT'],
  ['UserAgent', '(hash(i * 23) % 50)::SMALLINT'],
  [
    'URL',
    "'http://site' || (hash(i * 29) % 300) || '.example/' || (CASE WHEN i % 9 = 0 THEN 'google/' ELSE '' END) || 'page' || (hash(i * 31) % 2000)",
  ],
  ['Referer', "'http://ref' || (hash(i * 37) % 500) || '.example/'"],
  ['IsRefresh', '(hash(i * 41) % 10 = 0)::SMALLINT'],
  ['RefererCategoryID', '(hash(i * 43) % 20)::SMALLINT'],
  ['RefererRegionID', '(hash(i * 47) % 400)::INTEGER'],
  ['URLCategoryID', '(hash(i * 53) % 20)::SMALLINT'],
  ['URLRegionID', '(hash(i * 59) % 400)::INTEGER'],
  ['ResolutionWidth', '(800 + hash(i * 61) % 1200)::SMALLINT'],
  ['ResolutionHeight', '(600 + hash(i * 67) % 800)::SMALLINT'],
  ['ResolutionDepth', '(16 + 8 * (hash(i * 71) % 3))::SMALLINT'],
  ['FlashMajor', '(hash(i * 73) % 12)::SMALLINT'],
  ['FlashMinor', '(hash(i * 79) % 10)::SMALLINT'],
  ['NetMajor', '(hash(i * 83) % 5)::SMALLINT'],
  ['NetMinor', '(hash(i * 89) % 10)::SMALLINT'],
  ['UserAgentMajor', '(hash(i * 97) % 40)::SMALLINT'],
  ['UserAgentMinor', '(hash(i * 101) % 10)::VARCHAR'],
  ['CookieEnable', '(hash(i * 103) % 20 <> 0)::SMALLINT'],
  ['JavascriptEnable', '(hash(i * 107) % 20 <> 0)::SMALLINT'],
  ['IsMobile', '(hash(i * 109) % 4 = 0)::SMALLINT'],
  ['MobilePhone', '(CASE WHEN hash(i * 109) % 4 = 0 THEN hash(i * 113) % 30 ELSE 0 END)::SMALLINT'],
  ['MobilePhoneModel', "CASE WHEN hash(i * 109) % 4 = 0 THEN 'model ' || (hash(i * 127) % 80) ELSE '' END"],
  ['Params', "CASE WHEN i % 7 = 0 THEN 'p=' || (hash(i * 131) % 100) ELSE '' END"],
  ['IPNetworkID', '(hash(i * 137) % 100000)::INTEGER'],
  ['TraficSourceID', '((hash(i * 139) % 10)::INTEGER - 1)::SMALLINT'],
  ['SearchEngineID', '(CASE WHEN i % 5 = 0 THEN 1 + hash(i * 149) % 30 ELSE 0 END)::SMALLINT'],
  ['SearchPhrase', "CASE WHEN i % 5 = 0 THEN 'phrase ' || (hash(i * 151) % 3000) ELSE '' END"],
  ['AdvEngineID', '(CASE WHEN i % 50 = 0 THEN hash(i * 157) % 30 ELSE 0 END)::SMALLINT'],
  ['IsArtifical', '0::SMALLINT'],
  ['WindowClientWidth', '(700 + hash(i * 163) % 1200)::SMALLINT'],
  ['WindowClientHeight', '(500 + hash(i * 167) % 800)::SMALLINT'],
  ['ClientTimeZone', '((hash(i * 173) % 25)::INTEGER - 12)::SMALLINT'],
  ['ClientEventTime', "TIMESTAMP '2013-07-01' + to_seconds(i * 17 % 2678400 + hash(i) % 60)"],
  ['SilverlightVersion1', '(hash(i * 179) % 6)::SMALLINT'],
  ['SilverlightVersion2', '(hash(i * 181) % 10)::SMALLINT'],
  ['PageCharset', "['utf-8', 'windows-1251', 'koi8-r'][1 + (hash(i * 191) % 3)::INTEGER]"],
  ['CodeVersion', '(hash(i * 193) % 500)::INTEGER'],
  ['IsLink', '(hash(i * 197) % 30 = 0)::SMALLINT'],
  ['IsDownload', '(hash(i * 199) % 50 = 0)::SMALLINT'],
  ['IsNotBounce', '(hash(i * 211) % 3 = 0)::SMALLINT'],
  ['FUniqID', '(hash(i * 223) >> 2)::BIGINT'],
  ['OriginalURL', "CASE WHEN i % 11 = 0 THEN 'http://orig' || (hash(i * 227) % 100) ELSE '' END"],
  ['HID', '(hash(i * 229) % 1000000)::INTEGER'],
  ['IsOldCounter', '0::SMALLINT'],
  ['DontCountHits', '(hash(i * 233) % 20 = 0)::SMALLINT'],
  ['WithHash', '(hash(i * 239) % 10 = 0)::SMALLINT'],
  ['HitColor', "['E', 'D', 'F'][1 + (hash(i * 241) % 3)::INTEGER]"],
  ['Age', '(hash(i * 251) % 80)::SMALLINT'],
];

/** ClickBench's shapes, on these columns (its numbering where the query is one of its 43). */
const QUERIES: [name: string, sql: string][] = [
  ['Q0', 'SELECT COUNT(*) FROM hits'],
  ['Q1', 'SELECT COUNT(*) FROM hits WHERE AdvEngineID <> 0'],
  ['Q2', 'SELECT SUM(AdvEngineID), COUNT(*), AVG(ResolutionWidth) FROM hits'],
  ['Q3', 'SELECT AVG(UserID) FROM hits'],
  ['Q4', 'SELECT COUNT(DISTINCT UserID) FROM hits'],
  ['Q5', 'SELECT COUNT(DISTINCT SearchPhrase) FROM hits'],
  ['Q6', 'SELECT MIN(EventDate), MAX(EventDate) FROM hits'],
  [
    'Q7',
    'SELECT AdvEngineID, COUNT(*) FROM hits WHERE AdvEngineID <> 0 GROUP BY AdvEngineID ORDER BY COUNT(*) DESC, AdvEngineID',
  ],
  ['Q8', 'SELECT RegionID, COUNT(DISTINCT UserID) AS u FROM hits GROUP BY RegionID ORDER BY u DESC, RegionID LIMIT 10'],
  [
    'Q9',
    'SELECT RegionID, SUM(AdvEngineID), COUNT(*) AS c, AVG(ResolutionWidth), COUNT(DISTINCT UserID) FROM hits GROUP BY RegionID ORDER BY c DESC, RegionID LIMIT 10',
  ],
  [
    'Q10',
    "SELECT MobilePhoneModel, COUNT(DISTINCT UserID) AS u FROM hits WHERE MobilePhoneModel <> '' GROUP BY MobilePhoneModel ORDER BY u DESC, MobilePhoneModel LIMIT 10",
  ],
  [
    'Q12',
    "SELECT SearchPhrase, COUNT(*) AS c FROM hits WHERE SearchPhrase <> '' GROUP BY SearchPhrase ORDER BY c DESC, SearchPhrase LIMIT 10",
  ],
  [
    'Q14',
    "SELECT SearchEngineID, SearchPhrase, COUNT(*) AS c FROM hits WHERE SearchPhrase <> '' GROUP BY SearchEngineID, SearchPhrase ORDER BY c DESC, 1, 2 LIMIT 10",
  ],
  ['Q15', 'SELECT UserID, COUNT(*) FROM hits GROUP BY UserID ORDER BY COUNT(*) DESC, UserID LIMIT 10'],
  [
    'Q18',
    'SELECT UserID, extract(minute FROM ts) AS m, SearchPhrase, COUNT(*) FROM hits GROUP BY UserID, m, SearchPhrase ORDER BY COUNT(*) DESC, 1, 2, 3 LIMIT 10',
  ],
  ['Q19', 'SELECT UserID FROM hits WHERE UserID = 30000090'],
  ['Q20', "SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'"],
  [
    'Q21',
    "SELECT SearchPhrase, MIN(URL), COUNT(*) AS c FROM hits WHERE URL LIKE '%google%' AND SearchPhrase <> '' GROUP BY SearchPhrase ORDER BY c DESC, SearchPhrase LIMIT 10",
  ],
  ['Q23', "SELECT * FROM hits WHERE URL LIKE '%google%' ORDER BY ts, WatchID LIMIT 10"],
  ['Q24', "SELECT SearchPhrase FROM hits WHERE SearchPhrase <> '' ORDER BY ts, SearchPhrase LIMIT 10"],
  [
    'Q27',
    "SELECT CounterID, AVG(length(URL)) AS l, COUNT(*) AS c FROM hits WHERE URL <> '' GROUP BY CounterID HAVING COUNT(*) > 100 ORDER BY l DESC, CounterID LIMIT 25",
  ],
  [
    'Q29',
    'SELECT SUM(ResolutionWidth), SUM(ResolutionWidth + 1), SUM(ResolutionWidth + 2), SUM(ResolutionWidth + 3) FROM hits',
  ],
  [
    'Q30',
    "SELECT SearchEngineID, ClientIP, COUNT(*) AS c, SUM(IsRefresh), AVG(ResolutionWidth) FROM hits WHERE SearchPhrase <> '' GROUP BY SearchEngineID, ClientIP ORDER BY c DESC, 1, 2 LIMIT 10",
  ],
  ['Q33', 'SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC, URL LIMIT 10'],
  [
    'Q35',
    'SELECT ClientIP, ClientIP - 1, ClientIP - 2, ClientIP - 3, COUNT(*) AS c FROM hits GROUP BY ClientIP, ClientIP - 1, ClientIP - 2, ClientIP - 3 ORDER BY c DESC, 1 LIMIT 10',
  ],
  [
    'Q36',
    "SELECT URL, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND DontCountHits = 0 AND IsRefresh = 0 AND URL <> '' GROUP BY URL ORDER BY PageViews DESC, URL LIMIT 10",
  ],
  [
    'Q42',
    "SELECT DATE_TRUNC('minute', ts) AS M, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-14' AND EventDate <= '2013-07-15' AND IsRefresh = 0 AND DontCountHits = 0 GROUP BY DATE_TRUNC('minute', ts) ORDER BY DATE_TRUNC('minute', ts) LIMIT 10 OFFSET 10",
  ],
];

// Every query is new to the planner, as in a sequence of different queries, and none is answered
// from the result cache (the coordinator inherits these).
process.env.BERTH_PLAN_CACHE_SIZE = '0';
process.env.BERTH_RESULT_CACHE_BYTES = '0';

const files = await segmentFiles({
  dir: DATA,
  files: FILES,
  rowsPerFile: ROWS_PER_FILE,
  name: (f) => `hits-${String(f).padStart(4, '0')}.parquet`,
  rows: (from, to) =>
    `SELECT ${COLUMNS.map(([name, sql]) => `${sql} AS "${name}"`).join(', ')} FROM range(${from}, ${to}) t(i)`,
});
const bench = await startBenchCluster(path.join(BASE, 'cluster'), NODES, 1024 ** 3);
try {
  await bench.load('hits', files);
  const coordinator = new CoordinatorClient(bench.cluster.endpoints.coordinator);
  const baseline = await DuckDBInstance.create(':memory:');
  const connection = await baseline.connect();
  await connection.run(`CREATE VIEW hits AS SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`);

  // Warm: every column on every owner (they fetch what a query reads), and the OS page cache for DuckDB.
  await coordinator.query(`SELECT ${COLUMNS.map(([name]) => `max("${name}")`).join(', ')} FROM hits`);
  for (const [name, sql] of QUERIES) {
    const differs = answerDifference(await coordinator.query(sql), await readJsonResult(await connection.stream(sql)));
    if (differs) throw new Error(`${name}: Berth and one DuckDB differ: ${differs}`);
  }

  type Sample = { duckdb: number; berth: number; stats: QueryResult['stats'] };
  const samples = new Map<string, Sample[]>(QUERIES.map(([name]) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, sql] of QUERIES) {
      let started = performance.now();
      const { stats } = await coordinator.query(sql);
      const berth = performance.now() - started;
      if (stats.result !== 'computed') throw new Error(`${name} was answered from the result cache`);
      started = performance.now();
      (await connection.runAndReadAll(sql)).getRows();
      samples.get(name)!.push({ berth, duckdb: performance.now() - started, stats });
    }
  }
  connection.closeSync();
  baseline.closeSync();

  const ms = (x: number) => x.toFixed(1);
  const rows = QUERIES.map(([name]) => {
    const s = samples.get(name)!;
    const pick = (f: (x: Sample) => number) => median(s.map(f));
    return {
      name,
      duckdb: pick((x) => x.duckdb),
      berth: pick((x) => x.berth),
      plan: pick((x) => x.stats.timings.planMs),
      queued: pick((x) => x.stats.timings.queuedMs),
      scan: pick((x) => x.stats.timings.scanMs),
      node: pick((x) => Math.max(0, ...x.stats.stages.scan.map((stage) => stage.slowestNodeMs))),
      final: pick((x) => x.stats.timings.finalMs),
      rest: pick((x) => x.berth - Object.values(x.stats.timings).reduce((a, b) => a + b, 0)),
    };
  });
  const total = (key: keyof (typeof rows)[number]) => rows.reduce((sum, r) => sum + (r[key] as number), 0);
  console.log(
    `# bench/sequence — ${QUERIES.length} queries one at a time over ${(FILES * ROWS_PER_FILE).toLocaleString('en-US')} rows × ${COLUMNS.length} columns in ${FILES} segments, ${NODES.length} nodes, ${os.availableParallelism()} cores; medians of ${ROUNDS} interleaved rounds\n`,
  );
  console.log(
    `**Total: Berth ${ms(total('berth'))} ms, one DuckDB ${ms(total('duckdb'))} ms: ${(total('berth') / total('duckdb')).toFixed(2)}×** (goal ≤ 2×)\n`,
  );
  console.log(
    '| query | one DuckDB (ms) | Berth (ms) | × | plan | queued | scan stage | its slowest owner | final stage | rest (HTTP, JSON) |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows)
    console.log(
      `| ${r.name} | ${ms(r.duckdb)} | ${ms(r.berth)} | ${(r.berth / r.duckdb).toFixed(1)} | ${ms(r.plan)} | ${ms(r.queued)} | ${ms(r.scan)} | ${ms(r.node)} | ${ms(r.final)} | ${ms(r.rest)} |`,
    );
  console.log(
    `| all | ${ms(total('duckdb'))} | ${ms(total('berth'))} | ${(total('berth') / total('duckdb')).toFixed(2)} | ${ms(total('plan'))} | ${ms(total('queued'))} | ${ms(total('scan'))} | ${ms(total('node'))} | ${ms(total('final'))} | ${ms(total('rest'))} |`,
  );
} finally {
  await bench.stop();
}
