/**
 * bench/launch: what the heavy pool adds, on the embedded cluster (controller, worker, local driver
 * starting real query-node processes after a boot delay that stands in for node provisioning).
 * - Launch: launch call → serve-ready, split into the platform's part (boot delay, then the
 *   query-node processes starting and registering: until meta lists every new backend alive) and
 *   the pool's orchestration after that (the second observation, the canary, the workflow's turns).
 *   3 rounds, parked in between.
 * - Execution: 100 heavy queries at concurrency 50 on the ready pool (planned by the coordinator,
 *   admitted by the pool workflow, run on its backends) against the same queries sent straight to
 *   the pool's backends (a second coordinator whose serving group is the pool's group: the same
 *   planner and scatter, no admission), in interleaved rounds.
 * - 100 concurrent launch calls on a running pool against 100 calls of the controller's health check.
 * Run: npm run bench:launch; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { SERVICE_SCRIPTS, startServiceProcess } from '../activities/platform/service-process.js';
import { s3IdentitiesFile, tokenFile } from '../cli/embedded/cluster.js';
import { readS3Credentials } from '../cli/embedded/s3-server.js';
import { callJson } from '../services/common/http-client.js';
import { ControllerClient } from '../services/controller/client.js';
import { CoordinatorClient } from '../services/coordinator/client.js';
import { startBenchCluster } from './bench-cluster.js';
import { sized } from './smoke.js';
import { median, percentile } from './stats.js';

const BOOT_DELAY_MS = sized(2_000, 200);
const ROUNDS = sized(3, 1);
const CALLERS = sized(100, 5);
const QUERIES = sized(100, 4);
const CONCURRENCY = sized(50, 2);
const QUERY_ROUNDS = sized(4, 1);
const ROWS_PER_FILE = sized(100_000, 2_000);
/**
 * How long the pool stays up with nothing admitted: longer than a burst straight to its backends
 * (which it does not see) takes, or it parks under that burst. A burst of the median query takes
 * tens of seconds on 2 busy cores; each launch round after the first waits this long for the park.
 */
const IDLE_TIMEOUT_MS = 120_000;
/** The longest wait for the pool or a process to reach a state. */
const UNTIL_MS = IDLE_TIMEOUT_MS + 180_000;
/** Heavy: an exact quantile does not decompose, so the final stage runs the query's own SQL over the owners' rows. */
const QUERY =
  'SELECT service, count(DISTINCT user_id) AS users, median(ts) AS p50, count(*) AS n FROM events GROUP BY service ORDER BY service';
const BASE = path.join(os.tmpdir(), 'berth-bench-launch');

await rm(BASE, { recursive: true, force: true });
await mkdir(BASE, { recursive: true });
const files: string[] = [];
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
for (let f = 0; f < 4; f++) {
  const file = path.join(BASE, `events-${f}.parquet`);
  await c.run(`COPY (SELECT TIMESTAMP '2026-11-01' + to_seconds(i) AS ts, ['api','web','auth','search','billing','mail','cdn'][1 + (hash(i) % 7)::INT] AS service,
      'u' || (hash(i * 7) % 50000)::VARCHAR AS user_id FROM range(${f * ROWS_PER_FILE}, ${(f + 1) * ROWS_PER_FILE}) t(i)) TO '${file}' (FORMAT parquet)`);
  files.push(file);
}
c.closeSync();
db.closeSync();

const dataDir = path.join(BASE, 'cluster');
const bench = await startBenchCluster(
  dataDir,
  [2],
  256 * 1024 * 1024,
  {
    idleTimeoutMs: IDLE_TIMEOUT_MS,
    bootDelayMs: BOOT_DELAY_MS,
    maxReplicas: 2,
    maxConcurrency: CONCURRENCY,
  },
  // Every query that reads a byte is heavy, and scan-bound: this measures the scan class, which
  // launches by its increment of two (a memory-bound verdict would launch the memory class).
  { scanBytes: 1, memoryBytes: Number.MAX_SAFE_INTEGER },
);
const { endpoints } = bench.cluster;
const token = (await readFile(tokenFile(dataDir), 'utf8')).trim();
const s3Credentials = await readS3Credentials(s3IdentitiesFile(dataDir));
const controller = new ControllerClient(endpoints.controller, token);
const status = () => controller.poolStatus('heavy');
const launch = () => controller.launch('heavy', 2);
/** When `test` first holds of what `read` returns; throws after UNTIL_MS, naming what it waited for. */
const until = async <T>(what: string, read: () => Promise<T>, test: (value: T) => boolean): Promise<number> => {
  const deadline = performance.now() + UNTIL_MS;
  let last: T | undefined;
  while (performance.now() < deadline) {
    last = await read();
    if (test(last)) return performance.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`waited ${UNTIL_MS} ms for ${what}; last seen: ${JSON.stringify(last)}`);
};
const query = (url: string) => new CoordinatorClient(url).query(QUERY);
/** Sends QUERIES queries, CONCURRENCY at a time; returns the wall time in ms. */
const burst = async (url: string, group: string) => {
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < QUERIES) {
        const body = await query(url);
        if (body.stats.group !== group) throw new Error(`ran on ${body.stats.group}, not ${group}`);
      }
    }),
  ).catch((error: unknown) => {
    const after = `${(performance.now() - started).toFixed(0)} ms`;
    throw new Error(`a burst to ${url} failed after ${after} (the pool parks after ${IDLE_TIMEOUT_MS} ms idle)`, {
      cause: error,
    });
  });
  const ms = performance.now() - started;
  console.error(`${QUERIES} queries to ${url}: ${ms.toFixed(0)} ms`);
  return ms;
};

/** One launch from parked: the whole time, and the platform's part of it. */
const launchRound = async () => {
  await until('the pool to park', status, (s) => s.phase === 'parked');
  const started = performance.now();
  const startedAt = Date.now();
  await launch();
  const alive = await until(
    'meta to list both new backends alive',
    () => bench.meta.backends('heavy'),
    (b) => b.filter((x) => x.alive && Date.parse(x.lastStartTime) >= startedAt).length >= 2,
  );
  const ready = await until('the pool to be serve-ready', status, (s) => s.serveReady);
  return { total: ready - started, platform: alive - started };
};

try {
  await bench.load('events', files);
  const launches = [await launchRound()];

  // Execution overhead, while the pool is up: the pool path against the same queries straight on its backends.
  const direct = await startServiceProcess(
    'direct-coordinator',
    SERVICE_SCRIPTS.coordinator,
    {
      BERTH_TOKEN: token,
      BERTH_META_URL: endpoints.meta,
      BERTH_SERVING_GROUP: 'heavy',
      BERTH_MAX_CONCURRENT_QUERIES: String(CONCURRENCY),
      BERTH_COORDINATOR_DIR: path.join(BASE, 'direct-coordinator'),
      BERTH_COORDINATOR_PORT: '0',
      BERTH_PG_PORT: '0', // not PostgreSQL's default: another coordinator on this machine may hold it
      BERTH_MEMBER_POLL_MS: '1000',
      BERTH_S3_ENDPOINT: endpoints.s3,
      BERTH_S3_BUCKET: endpoints.bucket,
      // Its /readyz checks S3 with these, as every coordinator's does.
      BERTH_S3_ACCESS_KEY_ID: s3Credentials.accessKeyId,
      BERTH_S3_SECRET_ACCESS_KEY: s3Credentials.secretAccessKey,
      BERTH_HEAVY_SCAN_BYTES: String(1e15),
      BERTH_HEAVY_MEMORY_BYTES: String(1e15),
    },
    path.join(BASE, 'direct-coordinator.log'),
  );
  const pooled: number[] = [];
  const straight: number[] = [];
  try {
    await until(
      'the direct coordinator to be ready',
      async () => (await fetch(`${direct.url}/readyz`)).status,
      (code) => code === 200,
    );
    await burst(endpoints.coordinator, 'heavy'); // warm both paths
    await burst(direct.url, 'heavy');
    for (let round = 0; round < QUERY_ROUNDS; round++) {
      pooled.push(await burst(endpoints.coordinator, 'heavy'));
      straight.push(await burst(direct.url, 'heavy'));
    }
  } finally {
    await direct.stop();
  }
  while (launches.length < ROUNDS) launches.push(await launchRound());
  const totals = launches.map((l) => l.total);
  const platform = launches.map((l) => l.platform);
  const orchestration = launches.map((l) => l.total - l.platform);

  // Both through the same HTTP client, so that only the controller's work differs.
  const timed = async (call: () => Promise<unknown>) => {
    const t = performance.now();
    await call();
    return performance.now() - t;
  };
  const launchLatencies = await Promise.all(Array.from({ length: CALLERS }, () => timed(launch)));
  const healthLatencies = await Promise.all(
    Array.from({ length: CALLERS }, () => timed(() => callJson(`${endpoints.controller}/healthz`))),
  );

  const lines = [
    `# bench/launch — local driver, boot delay ${BOOT_DELAY_MS} ms, 0 → 2 backends, ${os.availableParallelism()} cores\n`,
    `| measure | median of ${totals.length} (ms) |`,
    '|---|---:|',
    `| launch call → serve-ready | ${median(totals).toFixed(0)} |`,
    `| platform: boot delay, then processes start and register (until meta lists both alive) | ${median(platform).toFixed(0)} |`,
    `| **orchestration after that** (second observation, canary, workflow turns) | **${median(orchestration).toFixed(0)}** |`,
    '',
    `| ${QUERIES} heavy queries at concurrency ${CONCURRENCY}, ${QUERY_ROUNDS} interleaved rounds | median wall time (ms) | ratio |`,
    '|---|---:|---:|',
    `| straight to the pool's backends (same planner and scatter, no admission) | ${median(straight).toFixed(0)} | 1.00× |`,
    `| through the pool (admitted by the workflow, run on its proven backends) | ${median(pooled).toFixed(0)} | **${(median(pooled) / median(straight)).toFixed(2)}×** |`,
    '',
    `| ${CALLERS} concurrent calls | p50 (ms) | p95 (ms) | max (ms) | p50 vs health check |`,
    '|---|---:|---:|---:|---:|',
    `| controller health check (the HTTP floor) | ${median(healthLatencies).toFixed(1)} | ${percentile(healthLatencies, 95).toFixed(1)} | ${Math.max(...healthLatencies).toFixed(1)} | 1.00× |`,
    `| launch (update-with-start, coalesced) | ${median(launchLatencies).toFixed(1)} | ${percentile(launchLatencies, 95).toFixed(1)} | ${Math.max(...launchLatencies).toFixed(1)} | ${(median(launchLatencies) / median(healthLatencies)).toFixed(1)}× |`,
  ];
  console.log(lines.join('\n'));
  await writeFile(path.join(BASE, 'result.md'), lines.join('\n'));
} finally {
  await bench.stop();
}
