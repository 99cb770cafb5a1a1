/**
 * bench/merge: merge throughput of Berth's merge-then-push workflow (lease, download 50 level-0
 * segments from S3, DuckDB merge sorted by time, upload and push to the owner, swap in the
 * manifest) against a bare DuckDB COPY of the same local files into one Parquet, sorted the same
 * way, in interleaved rounds. Then where the time goes: the workflow's activities as its history
 * records them, and the transfers alone (the inputs' GETs, the merged object's PUT, its push to the
 * owner), timed from this process against the same S3 API and node in the same rounds.
 * Run: npm run bench:merge; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
 */
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { DuckDBInstance } from '@duckdb/node-api';
import pLimit from 'p-limit';
import { s3IdentitiesFile, tokenFile } from '../cli/embedded/cluster.js';
import { readS3Credentials } from '../cli/embedded/s3-server.js';
import { segmentObjectKey } from '../core/identifiers.js';
import { Placement } from '../core/ownership.js';
import { createS3Client } from '../services/common/s3-client.js';
import { QueryNodeClient } from '../services/query-node/client.js';
import { MERGE_TASK_QUEUE } from '../workflows/contracts/shared.js';
import type { segmentMergeWorkflow } from '../workflows/index.js';
import { startBenchCluster } from './bench-cluster.js';
import { sized } from './smoke.js';
import { median } from './stats.js';

const SEGMENTS = sized(50, 4);
const ROWS_PER_SEGMENT = sized(40_000, 2_000);
const ROUNDS = sized(3, 1);
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

/** Milliseconds from each activity's scheduling to its completion, by activity type, in a workflow's history. */
async function activityTimes(handle: WorkflowHandle): Promise<Map<string, number>> {
  const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
    Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;
  const scheduled = new Map<string, { type: string; at: number }>();
  const times = new Map<string, number>();
  for (const event of (await handle.fetchHistory()).events ?? []) {
    const type = event.activityTaskScheduledEventAttributes?.activityType?.name;
    if (type) scheduled.set(String(event.eventId), { type, at: ms(event.eventTime) });
    const completed = event.activityTaskCompletedEventAttributes;
    const from = completed && scheduled.get(String(completed.scheduledEventId));
    if (from) times.set(from.type, (times.get(from.type) ?? 0) + ms(event.eventTime) - from.at);
  }
  return times;
}

const timed = async (work: () => Promise<unknown>): Promise<number> => {
  const started = performance.now();
  await work();
  return performance.now() - started;
};

const clusterDir = path.join(BASE, 'cluster');
const bench = await startBenchCluster(clusterDir, [2, 2], 1024 ** 3);
const connection = await Connection.connect({ address: bench.cluster.endpoints.temporal });
const client = new Client({ connection });
const s3 = createS3Client({
  endpoint: bench.cluster.endpoints.s3,
  credentials: await readS3Credentials(s3IdentitiesFile(clusterDir)),
});
const token = (await readFile(tokenFile(clusterDir), 'utf8')).trim();
try {
  const berthTimes: number[] = [];
  const copyTimes: number[] = [];
  const bareTimes: number[] = [];
  const activities = new Map<string, number[]>();
  const transfers = { get: [] as number[], put: [] as number[], push: [] as number[], putAndPush: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const table = `merge_round_${round}`;
    const columns = await bench.load(table, files);
    let started = performance.now();
    const handle = await client.workflow.start<typeof segmentMergeWorkflow>('segmentMergeWorkflow', {
      taskQueue: MERGE_TASK_QUEUE,
      workflowId: `bench-merge-${Date.now()}-${round}`,
      args: [{ table, partition: '20261101' }],
    });
    const result = await handle.result();
    berthTimes.push(performance.now() - started);
    if (result.outcome !== 'merged' || result.inputs.length !== SEGMENTS)
      throw new Error(`unexpected merge result ${JSON.stringify(result)}`);
    if (!result.push?.accepted)
      throw new Error(`the owner did not take the merged segment: ${JSON.stringify(result.push)}`);
    for (const [type, ms] of await activityTimes(handle)) activities.set(type, [...(activities.get(type) ?? []), ms]);

    const list = files.map((f) => `'${f}'`).join(', ');
    started = performance.now();
    await c.run(
      `COPY (SELECT * FROM read_parquet([${list}]) ORDER BY ${columns.map((col) => col.name).join(', ')}) TO '${BASE}/copy-${round}.parquet' (FORMAT parquet)`,
    );
    copyTimes.push(performance.now() - started);
    started = performance.now();
    await c.run(`COPY (SELECT * FROM read_parquet([${list}])) TO '${BASE}/bare-${round}.parquet' (FORMAT parquet)`);
    bareTimes.push(performance.now() - started);

    // The transfers alone, as the worker makes them: the inputs' GETs 8 at a time, each streamed to a file ...
    const downloads = path.join(BASE, `get-${round}`);
    await mkdir(downloads, { recursive: true });
    const limit = pLimit(8);
    transfers.get.push(
      await timed(() =>
        Promise.all(
          result.inputs.map((id) =>
            limit(async () => {
              const object = await s3.send(
                new GetObjectCommand({ Bucket: 'berth-bench', Key: segmentObjectKey(table, id) }),
              );
              await pipeline(object.Body as Readable, createWriteStream(path.join(downloads, `${id}.parquet`)));
            }),
          ),
        ),
      ),
    );
    await rm(downloads, { recursive: true, force: true });
    // ... the merged bytes' PUT, their push to the owner, and both at once.
    const body = await readFile(`${BASE}/copy-${round}.parquet`);
    const members = await bench.meta.members('serving');
    const owner = members.find((m) => m.id === new Placement(members).owner(result.merged!.id)?.id)!;
    const put = () => s3.send(new PutObjectCommand({ Bucket: 'berth-bench', Key: `bench/put-${round}`, Body: body }));
    const push = async () => {
      if (!(await new QueryNodeClient(owner.url, token).push(table, result.merged!.id, body)).accepted)
        throw new Error('push declined');
    };
    transfers.put.push(await timed(put));
    transfers.push.push(await timed(push));
    transfers.putAndPush.push(await timed(() => Promise.all([put(), push()])));
  }
  const rows = SEGMENTS * ROWS_PER_SEGMENT;
  const rate = (ms: number) => Math.round(rows / (ms / 1000)).toLocaleString('en-US');
  const [b, s, n] = [median(berthTimes), median(copyTimes), median(bareTimes)];
  console.log(
    `# bench/merge — ${SEGMENTS} level-0 segments, ${rows.toLocaleString('en-US')} rows, ${os.availableParallelism()} cores, median of ${ROUNDS}\n`,
  );
  console.log('| run | ms | rows/s | time vs sorted COPY |');
  console.log('|---|---:|---:|---:|');
  console.log(
    `| DuckDB COPY of the local files, sorted as Berth sorts (baseline) | ${s.toFixed(0)} | ${rate(s)} | 1.00× |`,
  );
  console.log(`| DuckDB COPY of the local files, unsorted | ${n.toFixed(0)} | ${rate(n)} | ${(n / s).toFixed(2)}× |`);
  console.log(
    `| Berth merge-then-push workflow, end to end | ${b.toFixed(0)} | ${rate(b)} | **${(b / s).toFixed(2)}×** |`,
  );
  const mb = (await readFile(`${BASE}/copy-0.parquet`)).length / 1e6;
  console.log(`\nWhere Berth's time goes (medians; the merged segment is ${mb.toFixed(1)} MB):\n`);
  console.log('| part | ms | vs sorted COPY |');
  console.log('|---|---:|---:|');
  const row = (part: string, ms: number) => console.log(`| ${part} | ${ms.toFixed(0)} | ${(ms / s).toFixed(2)}× |`);
  for (const [type, times] of activities) row(`activity \`${type}\`, scheduled to completed`, median(times));
  row(
    'the workflow beyond its activities (start, tasks, result)',
    median(berthTimes.map((t, i) => t - [...activities.values()].reduce((sum, times) => sum + (times[i] ?? 0), 0))),
  );
  row(`alone: GET the ${SEGMENTS} inputs, 8 at a time, to files`, median(transfers.get));
  row('alone: PUT the merged object', median(transfers.put));
  row('alone: push the merged object to its owner', median(transfers.push));
  row('alone: PUT and push at once', median(transfers.putAndPush));
} finally {
  c.closeSync();
  duckdb.closeSync();
  s3.destroy();
  await connection.close();
  await bench.stop();
}
