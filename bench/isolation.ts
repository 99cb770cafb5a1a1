/**
 * bench/isolation: does a memory-bound heavy query leave the serving tier alone? The embedded
 * cluster (coordinator, two serving nodes, the heavy pool's memory class on the local driver)
 * answers the dashboard mix of bench/load at concurrency 32, first alone, then while memory-bound
 * heavy queries run one after another: an exact distinct and median over every row, a window over
 * every row, and a join that multiplies rows, each with literals that change from one to the next.
 * Reported, as ratios of the two light runs in this one run: light throughput and p99, and the
 * coordinator's peak RSS; and for the heavy queries, where their final stage ran, the memory
 * backend's peak RSS and how much it spilled. Every answer, light and heavy, is first checked
 * against one DuckDB over the same files, and every heavy one again as it arrives.
 *
 * Every engine has BERTH_DUCKDB_MEMORY_LIMIT (128 MiB) and the memory backend's final stages
 * BERTH_HEAVY_MEMORY_LIMIT (128 MiB). At the default size a heavy query's input (the rows its scans
 * send, in Arrow) is about the coordinator's limit, and its join's or window's state more: the
 * backend spills; `--rows-per-file 1000000` makes the input several times the limit. "Peak spill"
 * is the most the heavy backends' DuckDB spill directories held at once (files on disk, any left
 * from earlier queries included), not the bytes written. On one machine the heavy backend shares
 * the cores with the serving tier, so the light figures also measure CPU contention that separate
 * machines would not have; the coordinator's RSS measures the isolation itself.
 * Run: npm run bench:isolation [-- --queries N] [-- --rows-per-file N]; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { readJsonResult } from '../services/common/final-stage/result-json.js';
import { startBenchCluster } from './bench-cluster.js';
import { DASHBOARD_MIX, eventRows, runLevel, servicePids, type Level } from './dashboard-load.js';
import { segmentFiles } from './segment-files.js';
import { failInSmoke, sized } from './smoke.js';
import { percentile } from './stats.js';

const option = (name: string): string | undefined =>
  process.argv.includes(`--${name}`) ? process.argv[process.argv.indexOf(`--${name}`) + 1] : undefined;
const QUERIES = Number(option('queries')) || sized(2000, 24);
const CONCURRENCY = sized(32, 4);
const WARMUP = sized(1000, 8);
const FILES = sized(8, 2);
const ROWS_PER_FILE = Number(option('rows-per-file')) || sized(250_000, 2_000);
const MEMORY_LIMIT_MIB = 128;
const MEMORY_LIMIT = `${MEMORY_LIMIT_MIB}MiB`;
const MEMORY_GROUP = 'heavy-memory';

/** The memory-bound shapes, each in variants whose literals change (`v` 0–3). Each routes `rows`. */
const HEAVY = (v: number): string[] => [
  `SELECT count(DISTINCT user_id || ts::VARCHAR) AS keys, median(latency_ms) AS p50 FROM events WHERE status >= ${v * 7}`,
  `SELECT max(r) AS r, count(*) AS n, sum(latency_ms) AS latency FROM (SELECT row_number() OVER (ORDER BY latency_ms, ts) AS r, latency_ms FROM events WHERE status <> ${100 + v})`,
  `SELECT count(*) AS pairs, count(DISTINCT a.user_id) AS users FROM events a JOIN events b ON a.user_id = b.user_id WHERE b.service = 'api' AND b.status >= ${590 - v}`,
];
const HEAVY_QUERIES = [0, 1, 2, 3].flatMap(HEAVY);

const DATA = path.join(os.tmpdir(), 'berth-bench-isolation', `data-${FILES}x${ROWS_PER_FILE}`);
const files = await segmentFiles({
  dir: DATA,
  files: FILES,
  rowsPerFile: ROWS_PER_FILE,
  name: (f) => `events-isolation-${f}.parquet`,
  rows: eventRows,
});

// The services read these from the environment they inherit.
process.env.BERTH_DUCKDB_MEMORY_LIMIT = MEMORY_LIMIT;
process.env.BERTH_HEAVY_MEMORY_LIMIT = MEMORY_LIMIT;
const clusterDir = path.join(os.tmpdir(), 'berth-bench-isolation', 'cluster');
const bench = await startBenchCluster(
  clusterDir,
  [1, 1],
  1024 ** 3,
  { idleTimeoutMs: 3_600_000, bootDelayMs: 0 },
  // Every shape whose final stage takes rows is heavy here, and memory-bound; the mix stays light.
  { memoryBytes: 1, scanBytes: Number.MAX_SAFE_INTEGER },
);

interface Answer {
  rows: unknown[][];
  stats: { verdict: { class: string }; group: string; stages: { final: string; scan: { bytes: number }[] } };
}
async function ask(sql: string): Promise<Answer> {
  const response = await fetch(`${bench.cluster.endpoints.coordinator}/v1/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sql }),
  });
  const body = (await response.json()) as Answer & { message?: string };
  if (!response.ok) throw new Error(`${response.status}: ${body.message}`);
  return body;
}

/** A light query as a well-behaved client sends it: a 429 is counted as refused, with the wait it was given. */
async function sendLight(sql: string): Promise<{ refusedForMs?: number }> {
  try {
    await ask(sql);
    return {};
  } catch (error) {
    const refused = /^429: /.test((error as Error).message);
    if (refused) return { refusedForMs: 1000 };
    throw error;
  }
}

/** Resident memory of a process now, in bytes (0 once it is gone). */
async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return 1024 * Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
}

/** Bytes DuckDB has spilled under `dir`: the files of its temp directories (named `spill`), at every depth. */
async function spilledUnder(dir: string): Promise<number> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  let total = 0;
  for (const e of entries)
    if (e.isFile() && e.parentPath.split(path.sep).includes('spill'))
      total += (await stat(path.join(e.parentPath, e.name)).catch(() => ({ size: 0 }))).size;
  return total;
}

/** The memory backend's process: the query node started with its group. */
async function memoryBackendPid(): Promise<number | undefined> {
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const environ = (await readFile(`/proc/${entry}/environ`, 'utf8').catch(() => '')).split('\0');
    if (
      environ.includes(`BERTH_NODE_GROUP=${MEMORY_GROUP}`) &&
      environ.some((v) => v.startsWith('BERTH_NODE_CACHE_DIR='))
    )
      return Number(entry);
  }
  return undefined;
}

/** Peaks of the coordinator's RSS, the memory backend's RSS and its final stages' spill, sampled every 100 ms. */
function sampler(coordinator: number, backend: number) {
  const peak = { coordinator: 0, backend: 0, spill: 0 };
  const spillDir = path.join(clusterDir, 'heavy');
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void Promise.all([rssBytes(coordinator), rssBytes(backend), spilledUnder(spillDir)])
      .then(([c, b, s]) => {
        peak.coordinator = Math.max(peak.coordinator, c);
        peak.backend = Math.max(peak.backend, b);
        peak.spill = Math.max(peak.spill, s);
      })
      .finally(() => (busy = false));
  }, 100);
  return { peak, stop: () => clearInterval(timer) };
}

interface Phase {
  name: string;
  light: Level;
  peak: { coordinator: number; backend: number; spill: number };
  heavy: { answered: number; wrong: string[]; finals: Set<string>; latencies: number[]; stateBytes: number };
}
const phases: Phase[] = [];
try {
  await bench.load('events', files);
  const baseline = await DuckDBInstance.create(':memory:');
  const duckdb = await baseline.connect();
  await duckdb.run(`CREATE VIEW events AS SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`);
  const expected = new Map<string, string>();
  for (const sql of [...DASHBOARD_MIX, ...HEAVY_QUERIES])
    expected.set(sql, JSON.stringify((await readJsonResult(await duckdb.stream(sql))).rows));
  duckdb.closeSync();
  baseline.closeSync();

  // The same answers and the verdicts this bench is about; the first heavy query launches the memory class.
  for (const sql of [...DASHBOARD_MIX, ...HEAVY(0)]) {
    const answer = await ask(sql);
    if (JSON.stringify(answer.rows) !== expected.get(sql)) throw new Error(`Berth and DuckDB disagree on ${sql}`);
    const heavy = !DASHBOARD_MIX.includes(sql);
    if ((answer.stats.verdict.class === 'heavy') !== heavy)
      throw new Error(`${sql} is ${answer.stats.verdict.class} here, not ${heavy ? 'heavy' : 'light'}`);
    if (heavy && (answer.stats.group !== MEMORY_GROUP || answer.stats.stages.final === 'coordinator'))
      throw new Error(`${sql} ran on ${answer.stats.group}, its final stage on ${answer.stats.stages.final}`);
  }
  const warm = await runLevel(CONCURRENCY, WARMUP, (_, sql) => sendLight(sql));
  if (warm.errors.length > 0) throw new Error(`the warm-up failed: ${warm.errors[0]}`);

  const coordinator = (await servicePids(clusterDir)).get('coordinator')?.[0];
  const backend = await memoryBackendPid();
  if (!coordinator || !backend) throw new Error('the coordinator or the memory backend has no process to measure');
  for (const name of ['light alone', 'light beside memory-bound heavy queries']) {
    const sampling = sampler(coordinator, backend);
    const heavy: Phase['heavy'] = { answered: 0, wrong: [], finals: new Set(), latencies: [], stateBytes: 0 };
    let lightDone = false;
    // One heavy query after another for as long as the light run lasts (at least one).
    const heavyLoop =
      name === 'light alone'
        ? Promise.resolve()
        : (async () => {
            for (let i = 0; heavy.answered === 0 || !lightDone; i++) {
              const sql = HEAVY_QUERIES[i % HEAVY_QUERIES.length]!;
              const t0 = performance.now();
              try {
                const answer = await ask(sql);
                heavy.latencies.push(performance.now() - t0);
                heavy.answered++;
                heavy.finals.add(answer.stats.stages.final);
                const received = answer.stats.stages.scan.reduce((sum, scan) => sum + scan.bytes, 0);
                heavy.stateBytes = Math.max(heavy.stateBytes, received);
                if (JSON.stringify(answer.rows) !== expected.get(sql)) heavy.wrong.push(sql);
              } catch (error) {
                heavy.wrong.push(`${sql}: ${(error as Error).message.slice(0, 200)}`);
                if (heavy.wrong.length > 3) return;
              }
            }
          })();
    const light = await runLevel(CONCURRENCY, QUERIES, (_, sql) => sendLight(sql));
    lightDone = true;
    await heavyLoop;
    sampling.stop();
    phases.push({ name, light, peak: sampling.peak, heavy });
    console.error(
      `${name}: ${((1000 * light.latencies.length) / light.wallMs).toFixed(1)} q/s, ${heavy.answered} heavy`,
    );
    failInSmoke(`light queries (${name})`, light.errors.length, light.errors[0]);
    failInSmoke(`heavy queries (${name})`, heavy.wrong.length, heavy.wrong[0]);
  }
} finally {
  await bench.stop();
}

const qps = (l: Level) => (1000 * l.latencies.length) / l.wallMs;
const mib = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(0)} MiB`;
const [alone, beside] = phases as [Phase, Phase];
console.log(
  `# bench/isolation — ${FILES * ROWS_PER_FILE} rows in ${FILES} segments, 2 serving nodes and one memory-class backend, ${os.availableParallelism()} cores; ${QUERIES} light queries at concurrency ${CONCURRENCY} per run after ${WARMUP} untimed; every engine's memory limit ${MEMORY_LIMIT}\n`,
);
console.log(
  '| run | light q/s | light p50 / p99 ms | light errors | coordinator peak RSS | heavy answered (wrong) | heavy p50 ms | largest heavy input | their final stages ran on | memory backend peak RSS | peak spill |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|');
for (const p of phases) {
  const l = p.light;
  console.log(
    `| ${p.name} | ${qps(l).toFixed(1)} | ${percentile(l.latencies, 50).toFixed(1)} / ${percentile(l.latencies, 99).toFixed(1)} | ${l.errors.length} | ${mib(p.peak.coordinator)} | ${p.heavy.answered} (${p.heavy.wrong.length}) | ${p.heavy.latencies.length > 0 ? percentile(p.heavy.latencies, 50).toFixed(0) : '—'} | ${mib(p.heavy.stateBytes)} | ${[...p.heavy.finals].join(', ') || '—'} | ${mib(p.peak.backend)} | ${mib(p.peak.spill)} |`,
  );
}
console.log(
  `\nWith heavy queries beside them: light throughput **${(qps(beside.light) / qps(alone.light)).toFixed(2)}×**, light p99 **${(percentile(beside.light.latencies, 99) / percentile(alone.light.latencies, 99)).toFixed(2)}×**, coordinator peak RSS **${(beside.peak.coordinator / alone.peak.coordinator).toFixed(2)}×** the light-only run's.`,
);
console.log(
  `The largest heavy input was **${(beside.heavy.stateBytes / (MEMORY_LIMIT_MIB * 1024 ** 2)).toFixed(1)}×** the coordinator's memory limit.`,
);
for (const p of phases)
  if (p.heavy.wrong.length > 0) console.log(`\nWrong or failed heavy answers (${p.name}): ${p.heavy.wrong[0]}`);
