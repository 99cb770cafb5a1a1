/**
 * bench/load: interactive throughput. A fixed mix of small dashboard queries (a time-filtered
 * GROUP BY, a top-10 select, a count(DISTINCT), a filtered GROUP BY; each in a few variants, as a
 * dashboard's panels repeat them) sent at concurrency 1, 8, 32 and 128 to the embedded cluster
 * (coordinator plus 3 query nodes as processes on this machine, caches warm) and, in the same
 * run, to one DuckDB in this process over the same files, one connection per client. A fixed
 * number of queries per level, closed loop: each client sends its next query when its last one is
 * answered. A 429 is counted as refused, and its client waits the Retry-After it was given before
 * its next query, as a well-behaved client would. Every Berth answer of the mix is first checked
 * against DuckDB's. Each level is then sent again through the coordinator's PostgreSQL protocol
 * (node-postgres, one connection per client; a 53300 counted as refused like a 429), and its
 * throughput and p99 are given as ratios to the HTTP API's in the same run.
 * Before the levels, both sides answer --warmup queries (2,000 by default) at concurrency 32,
 * untimed: V8 compiles the services' hot paths after some thousands of calls, so a first level
 * measured cold pays for that, as no long-running serving tier does (DuckDB's C++ has nothing to
 * warm). --warmup 0 measures cold.
 * With --mix moving, every query has literals of its own, as a dashboard's refreshes send them
 * (dashboard-load.ts's movingMix: windows that move, other services and thresholds), drawn afresh
 * for the warm-up and for each level; the answers of its first queries are checked the same way.
 * Run: npm run bench:load [-- --mix fixed|moving --queries N --levels 1,8,32,128 --warmup N --profile DIR --result-cache BYTES]
 * With --result-cache, the coordinator keeps answers (result-cache.ts): the mix repeats its 16
 * texts over unchanged tables, so after the check below every timed query is answered from it.
 * With --profile, the coordinator and the query nodes are CPU-profiled (bench/load-profiler.ts)
 * and write their profiles into DIR when the cluster stops. BERTH_BENCH_SMOKE=1 runs it small
 * (bench/smoke.ts), and fails on any Berth error.
 */
import { mkdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import pg from 'pg';
import { tokenFile } from '../cli/embedded/cluster.js';
import { readJsonResult } from '../services/common/final-stage/result-json.js';
import { startBenchCluster } from './bench-cluster.js';
import { cpuMs, DASHBOARD_MIX, eventRows, movingMix, runLevel, servicePids, type Level } from './dashboard-load.js';
import { segmentFiles } from './segment-files.js';
import { failInSmoke, sized } from './smoke.js';
import { percentile } from './stats.js';

const option = (name: string): string | undefined =>
  process.argv.includes(`--${name}`) ? process.argv[process.argv.indexOf(`--${name}`) + 1] : undefined;
const QUERIES = Number(option('queries')) || sized(400, 16);
const LEVELS = (option('levels') ?? sized('1,8,32,128', '1,4')).split(',').map(Number);
const WARMUP = Number(option('warmup') ?? sized(2000, 16));
if (!Number.isInteger(WARMUP) || WARMUP < 0)
  throw new Error(`--warmup takes a count of queries, not ${option('warmup')}`);
const WARMUP_CONCURRENCY = sized(32, 4);
const PROFILE = option('profile');
const MIX = option('mix') ?? 'fixed';
if (MIX !== 'fixed' && MIX !== 'moving') throw new Error(`--mix takes fixed or moving, not ${MIX}`);
/** The queries a run of `count` sends: the fixed mix in turn, or `count` of their own (a seed per run). */
const queries = (count: number, seed: number): string[] =>
  MIX === 'moving'
    ? movingMix(count, seed)
    : Array.from({ length: count }, (_, i) => DASHBOARD_MIX[i % DASHBOARD_MIX.length]!);
/** The coordinator's result cache budget in bytes (BERTH_RESULT_CACHE_BYTES): off unless given. */
const RESULT_CACHE = option('result-cache');
const FILES = sized(8, 2);
const ROWS_PER_FILE = sized(25_000, 2_000);
/** The query nodes, by the vCPUs each declares. */
const NODES = sized([1, 1, 1], [1, 1]);
const DATA = path.join(os.tmpdir(), 'berth-bench-load', `data-${FILES}x${ROWS_PER_FILE}-v2`);

/** Segment files (made once and kept for reruns): 50 ms apart, so the table spans about 2.8 hours. */
function makeData(): Promise<string[]> {
  return segmentFiles({
    dir: DATA,
    files: FILES,
    rowsPerFile: ROWS_PER_FILE,
    name: (f) => `events-load-${f}.parquet`,
    rows: eventRows,
  });
}

const files = await makeData();
if (PROFILE) {
  await rm(PROFILE, { recursive: true, force: true });
  await mkdir(PROFILE, { recursive: true });
  // The services inherit this process's environment.
  process.env.BERTH_PROFILE_DIR = path.resolve(PROFILE);
  process.env.NODE_OPTIONS =
    `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('./load-profiler.js', import.meta.url).href}`.trim();
}
if (RESULT_CACHE) process.env.BERTH_RESULT_CACHE_BYTES = RESULT_CACHE;
const clusterDir = path.join(os.tmpdir(), 'berth-bench-load', 'cluster');
const bench = await startBenchCluster(clusterDir, NODES, 1024 ** 3);
delete process.env.NODE_OPTIONS;
const results: { berth: Level; duckdb: Level; postgres: Level; cpu: Map<string, number> }[] = [];
try {
  await bench.load('events', files);
  const coordinator = bench.cluster.endpoints.coordinator;

  const baseline = await DuckDBInstance.create(':memory:');
  const connections: DuckDBConnection[] = [];
  for (let i = 0; i < Math.max(WARMUP_CONCURRENCY, ...LEVELS); i++) connections.push(await baseline.connect());
  await connections[0]!.run(
    `CREATE VIEW events AS SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`,
  );
  const duckdb = async (client: number, sql: string) => readJsonResult(await connections[client]!.stream(sql));

  const berth = async (sql: string): Promise<{ refusedForMs?: number; rows?: unknown }> => {
    const response = await fetch(`${coordinator}/v1/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sql }),
    });
    const body = (await response.json()) as { rows: unknown; message?: string };
    if (response.status === 429) return { refusedForMs: 1000 * Number(response.headers.get('retry-after') ?? 1) };
    if (!response.ok) throw new Error(`${response.status}: ${body.message}`);
    return { rows: body.rows };
  };

  // The PostgreSQL leg: the same mix through the coordinator's PostgreSQL protocol, one connection
  // per closed-loop client (node-postgres: Parse/Bind/Describe/Execute/Sync per query).
  const token = (await readFile(tokenFile(clusterDir), 'utf8')).trim();
  const pgClients: pg.Client[] = [];
  for (let i = 0; i < Math.max(...LEVELS); i++) {
    // node-postgres lets a connection string's missing password override the one given beside it.
    const { hostname, port } = new URL(bench.cluster.endpoints.postgres);
    const client = new pg.Client({
      host: hostname,
      port: Number(port),
      database: 'berth',
      user: 'berth',
      password: token,
    });
    await client.connect();
    pgClients.push(client);
  }
  const viaPostgres = async (client: number, sql: string): Promise<{ refusedForMs?: number; rows?: unknown[] }> => {
    try {
      return { rows: (await pgClients[client]!.query({ text: sql, rowMode: 'array' })).rows };
    } catch (error) {
      // Admission's 429 is 53300 here, its Retry-After in the hint.
      const { code, hint } = error as { code?: string; hint?: string };
      if (code === '53300') return { refusedForMs: 1000 * Number(/(\d+) s/.exec(hint ?? '')?.[1] ?? 1) };
      throw error;
    }
  };

  // Same answers (this also warms every node's cache and the page cache for DuckDB).
  for (const sql of queries(DASHBOARD_MIX.length, 1)) {
    const [b, d] = [await berth(sql), await duckdb(0, sql)];
    if (JSON.stringify(b.rows) !== JSON.stringify(d.rows)) throw new Error(`Berth and DuckDB disagree on ${sql}`);
    // The protocols' exactness is the tests' (test/postgres-wire.test.ts); here the same row count.
    const p = await viaPostgres(0, sql);
    if (p.rows?.length !== d.rows.length) throw new Error(`Berth over PostgreSQL gives another row count on ${sql}`);
  }

  if (WARMUP > 0) {
    const warm = [
      await runLevel(WARMUP_CONCURRENCY, WARMUP, (_, sql) => berth(sql), queries(WARMUP, 2)),
      await runLevel(
        WARMUP_CONCURRENCY,
        WARMUP,
        async (client, sql) => {
          await duckdb(client, sql);
          return {};
        },
        queries(WARMUP, 2),
      ),
    ];
    const failed = warm.find((level) => level.errors.length > 0);
    if (failed) throw new Error(`the warm-up failed: ${failed.errors[0]}`);
  }

  const pids = await servicePids(clusterDir);
  for (const concurrency of LEVELS) {
    // Fewer queries one at a time: the level measures latency, not a queue.
    const count = concurrency === 1 ? Math.ceil(QUERIES / 4) : QUERIES;
    // Each side its own literals of the same kinds: none is answered from a text the other sent.
    const d = await runLevel(
      concurrency,
      count,
      async (client, sql) => {
        await duckdb(client, sql);
        return {};
      },
      queries(count, 10 + concurrency),
    );
    const before = await cpuMs(pids);
    const b = await runLevel(concurrency, count, (_, sql) => berth(sql), queries(count, 20 + concurrency));
    const after = await cpuMs(pids);
    const p = await runLevel(concurrency, count, viaPostgres, queries(count, 30 + concurrency));
    const cpu = new Map([...after].map(([service, ms]) => [service, ms - (before.get(service) ?? 0)]));
    console.error(
      `concurrency ${concurrency}: berth ${((1000 * b.latencies.length) / b.wallMs).toFixed(1)} q/s, duckdb ${((1000 * d.latencies.length) / d.wallMs).toFixed(1)} q/s`,
    );
    results.push({ berth: b, duckdb: d, postgres: p, cpu });
    failInSmoke(`Berth's queries over PostgreSQL at concurrency ${concurrency}`, p.errors.length, p.errors[0]);
    failInSmoke(`Berth's queries at concurrency ${concurrency}`, b.errors.length, b.errors[0]);
    failInSmoke(`DuckDB's queries at concurrency ${concurrency}`, d.errors.length, d.errors[0]);
  }
  for (const c of connections) c.closeSync();
  await Promise.all(pgClients.map((c) => c.end()));
  baseline.closeSync();
} finally {
  await bench.stop();
}

const qps = (l: Level) => (1000 * l.latencies.length) / l.wallMs;
const ms = (x: number) => x.toFixed(1);
console.log(
  `# bench/load — ${FILES * ROWS_PER_FILE} rows in ${FILES} segments, ${NODES.length} query nodes, ${os.availableParallelism()} cores, ${MIX === 'moving' ? 'moving mix (literals of their own)' : `fixed mix of ${DASHBOARD_MIX.length} queries`}, ${WARMUP} untimed first, result cache ${RESULT_CACHE ? `${RESULT_CACHE} bytes` : 'off'}\n`,
);
console.log(
  '| concurrency | queries | DuckDB q/s | DuckDB p50 / p99 ms | Berth q/s | Berth p50 / p99 ms (answered) | Berth 429s | Berth errors | throughput vs DuckDB | p99 vs DuckDB |',
);
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const { berth: b, duckdb: d } of results) {
  console.log(
    `| ${b.concurrency} | ${b.queries} | ${qps(d).toFixed(1)} | ${ms(percentile(d.latencies, 50))} / ${ms(percentile(d.latencies, 99))} | ${qps(b).toFixed(1)} | ${ms(percentile(b.latencies, 50))} / ${ms(percentile(b.latencies, 99))} | ${b.refused} | ${b.errors.length} | **${(qps(b) / qps(d)).toFixed(2)}×** | **${(percentile(b.latencies, 99) / percentile(d.latencies, 99)).toFixed(2)}×** |`,
  );
}
console.log(
  '\nThe same mix over the PostgreSQL protocol (node-postgres, one connection per client), against the HTTP API in the same run:\n',
);
console.log(
  '| concurrency | PostgreSQL q/s | PostgreSQL p50 / p99 ms | 53300s | errors | throughput vs HTTP | p99 vs HTTP |',
);
console.log('|---:|---:|---:|---:|---:|---:|---:|');
for (const { berth: b, postgres: p } of results) {
  console.log(
    `| ${p.concurrency} | ${qps(p).toFixed(1)} | ${ms(percentile(p.latencies, 50))} / ${ms(percentile(p.latencies, 99))} | ${p.refused} | ${p.errors.length} | **${(qps(p) / qps(b)).toFixed(2)}×** | **${(percentile(p.latencies, 99) / percentile(b.latencies, 99)).toFixed(2)}×** |`,
  );
}
const services = ['coordinator', 'query nodes', 'meta', 'worker'];
console.log(
  `\nCPU time per answered Berth query, by service (ms, every thread; the machine has ${os.availableParallelism()} cores):\n`,
);
console.log(`| concurrency | ${services.join(' | ')} | all |`);
console.log(`|---:|${services.map(() => '---:|').join('')}---:|`);
for (const { berth: b, cpu } of results) {
  const per = (ms: number) => (ms / Math.max(1, b.latencies.length)).toFixed(1);
  console.log(
    `| ${b.concurrency} | ${services.map((s) => per(cpu.get(s) ?? 0)).join(' | ')} | ${per([...cpu.values()].reduce((x, y) => x + y, 0))} |`,
  );
}
for (const { berth: b } of results)
  if (b.errors.length > 0) console.log(`\nErrors at concurrency ${b.concurrency} (first): ${b.errors[0]}`);
