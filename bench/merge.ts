/**
 * bench/merge: merge throughput of Berth's merge-then-push workflow (lease, download 50 level-0
 * segments from S3, DuckDB merge sorted by time, upload, push to the owner, swap in the manifest)
 * against a bare DuckDB COPY of the same local files into one Parquet, sorted the same way, in
 * interleaved rounds.
 * Run: npm run bench:merge
 */
import { mkdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DuckDBInstance } from '@duckdb/node-api';
import { MERGE_TASK_QUEUE } from '../workflows/api.js';
import type { segmentMergeWorkflow } from '../workflows/index.js';
import { startBenchCluster } from './bench-cluster.js';
import { median } from './stats.js';

const SEGMENTS = 50;
const ROWS_PER_SEGMENT = 40_000;
const ROUNDS = 3;
const BASE = path.join(os.tmpdir(), 'berth-bench-merge');

await rm(BASE, { recursive: true, force: true });
const dataDir = path.join(BASE, 'data');
await mkdir(dataDir, { recursive: true });
const duckdb = await DuckDBInstance.create(':memory:');
const c = await duckdb.connect();
const files: string[] = [];
for (let f = 0; f < SEGMENTS; f++) {
  const file = path.join(dataDir, `seg-${String(f).padStart(3, '0')}.parquet`);
  const from = f * ROWS_PER_SEGMENT;
  // Interleaved timestamps, as batches from many producers arrive: the merge has real sorting to do.
  await c.run(`COPY (SELECT TIMESTAMP '2026-11-01' + to_milliseconds((i * 7919) % ${SEGMENTS * ROWS_PER_SEGMENT}) AS ts,
      ['api','web','auth','search'][1 + (hash(i) % 4)::INT] AS service, (hash(i * 3) % 600)::INTEGER AS status,
      random() * 1000 AS latency_ms, (hash(i * 5) % 1000000)::BIGINT AS bytes, md5(i::VARCHAR) AS request_id
    FROM range(${from}, ${from + ROWS_PER_SEGMENT}) t(i) ORDER BY ts) TO '${file}' (FORMAT parquet)`);
  files.push(file);
}

const bench = await startBenchCluster(path.join(BASE, 'cluster'), [2, 2], 1024 ** 3);
const connection = await Connection.connect({ address: bench.cluster.endpoints.temporal });
const client = new Client({ connection });
try {
  const berthTimes: number[] = [];
  const copyTimes: number[] = [];
  const bareTimes: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const table = `merge_round_${round}`;
    const columns = await bench.load(table, files);
    let started = performance.now();
    const result = await client.workflow.execute<typeof segmentMergeWorkflow>('segmentMergeWorkflow', {
      taskQueue: MERGE_TASK_QUEUE,
      workflowId: `bench-merge-${Date.now()}-${round}`,
      args: [{ table, partition: '20261101' }],
    });
    berthTimes.push(performance.now() - started);
    if (result.outcome !== 'merged' || result.inputs.length !== SEGMENTS) throw new Error(`unexpected merge result ${JSON.stringify(result)}`);

    const list = files.map((f) => `'${f}'`).join(', ');
    started = performance.now();
    await c.run(`COPY (SELECT * FROM read_parquet([${list}]) ORDER BY ${columns.map((col) => col.name).join(', ')}) TO '${BASE}/copy-${round}.parquet' (FORMAT parquet)`);
    copyTimes.push(performance.now() - started);
    started = performance.now();
    await c.run(`COPY (SELECT * FROM read_parquet([${list}])) TO '${BASE}/bare-${round}.parquet' (FORMAT parquet)`);
    bareTimes.push(performance.now() - started);
  }
  const rows = SEGMENTS * ROWS_PER_SEGMENT;
  const rate = (ms: number) => Math.round(rows / (ms / 1000)).toLocaleString('en-US');
  const [b, s, n] = [median(berthTimes), median(copyTimes), median(bareTimes)];
  console.log(`# bench/merge — ${SEGMENTS} level-0 segments, ${rows.toLocaleString('en-US')} rows, ${os.availableParallelism()} cores, median of ${ROUNDS}\n`);
  console.log('| run | ms | rows/s | time vs sorted COPY |');
  console.log('|---|---:|---:|---:|');
  console.log(`| DuckDB COPY of the local files, sorted as Berth sorts (baseline) | ${s.toFixed(0)} | ${rate(s)} | 1.00× |`);
  console.log(`| DuckDB COPY of the local files, unsorted | ${n.toFixed(0)} | ${rate(n)} | ${(n / s).toFixed(2)}× |`);
  console.log(`| Berth merge-then-push workflow, end to end | ${b.toFixed(0)} | ${rate(b)} | **${(b / s).toFixed(2)}×** |`);
} finally {
  c.closeSync();
  duckdb.closeSync();
  await connection.close();
  await bench.stop();
}
