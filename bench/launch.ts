/**
 * bench/launch: the heavy pool's orchestration overhead and its launch call under concurrency, on
 * the embedded cluster (controller, worker, local driver starting real query-node processes).
 * - launch → serve-ready, minus the driver's boot delay (the imitated node provisioning): what the
 *   workflow, process start, registration, two observations and the canary add. 3 rounds, parked
 *   in between.
 * - 100 concurrent launch calls on a running pool (each an update-with-start that coalesces),
 *   against 100 concurrent calls of the controller's health endpoint (the HTTP floor).
 * Run: npm run bench:launch
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type { PoolStatus } from '../workflows/api.js';
import { startBenchCluster } from './bench-cluster.js';
import { median, percentile } from './stats.js';

const BOOT_DELAY_MS = 2_000;
const ROUNDS = 3;
const CALLERS = 100;
const BASE = path.join(os.tmpdir(), 'berth-bench-launch');


await mkdir(BASE, { recursive: true });
const segment = path.join(BASE, 'canary.parquet');
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
await c.run(`COPY (SELECT TIMESTAMP '2026-11-01' + to_seconds(range) AS ts, range AS n FROM range(1000)) TO '${segment}' (FORMAT parquet)`);
c.closeSync();
db.closeSync();

const bench = await startBenchCluster(path.join(BASE, 'cluster'), [2], 256 * 1024 * 1024, { idleTimeoutMs: 1_000, bootDelayMs: BOOT_DELAY_MS, maxReplicas: 2 });
const controller = bench.cluster.endpoints.controller;
const status = async () => (await (await fetch(`${controller}/v1/pools/heavy/status`)).json()) as PoolStatus;
const launch = () => fetch(`${controller}/v1/pools/heavy/launch`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ target: 2 }) });
const until = async (test: (s: PoolStatus) => boolean) => {
  for (;;) {
    const s = await status();
    if (test(s)) return s;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};
try {
  await bench.load('events', [segment]);
  const totals: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    await until((s) => s.phase === 'parked');
    const started = performance.now();
    if (!(await launch()).ok) throw new Error('launch refused');
    await until((s) => s.serveReady);
    totals.push(performance.now() - started);
    if (round === ROUNDS - 1) {
      const timed = async (call: () => Promise<Response>) => {
        const t = performance.now();
        const response = await call();
        await response.text();
        if (!response.ok) throw new Error(`call failed: ${response.status}`);
        return performance.now() - t;
      };
      const launchLatencies = await Promise.all(Array.from({ length: CALLERS }, () => timed(launch)));
      const healthLatencies = await Promise.all(Array.from({ length: CALLERS }, () => timed(() => fetch(`${controller}/healthz`))));
      const lines = [
        `# bench/launch — local driver, boot delay ${BOOT_DELAY_MS} ms, 0 → 2 backends, ${os.availableParallelism()} cores\n`,
        '| measure | median of 3 (ms) |',
        '|---|---:|',
        `| launch call → serve-ready | ${median(totals).toFixed(0)} |`,
        `| of which the driver's boot delay | ${BOOT_DELAY_MS} |`,
        `| **orchestration overhead** (process start, registration, two observations, canary, workflow) | **${(median(totals) - BOOT_DELAY_MS).toFixed(0)}** |`,
        '',
        `| ${CALLERS} concurrent calls | p50 (ms) | p95 (ms) | max (ms) | p50 vs health check |`,
        '|---|---:|---:|---:|---:|',
        `| controller health check (the HTTP floor) | ${median(healthLatencies).toFixed(1)} | ${percentile(healthLatencies, 95).toFixed(1)} | ${Math.max(...healthLatencies).toFixed(1)} | 1.00× |`,
        `| launch (update-with-start, coalesced) | ${median(launchLatencies).toFixed(1)} | ${percentile(launchLatencies, 95).toFixed(1)} | ${Math.max(...launchLatencies).toFixed(1)} | ${(median(launchLatencies) / median(healthLatencies)).toFixed(1)}× |`,
      ];
      console.log(lines.join('\n'));
      await writeFile(path.join(BASE, 'result.md'), lines.join('\n'));
      const final = await status();
      console.log(`\nAfter the calls: target ${final.target}, ${final.patches} patches in all rounds' history of this execution.`);
    }
  }
} finally {
  await bench.stop();
}
