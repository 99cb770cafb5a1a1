/**
 * `berth up --demo`: a newcomer's tour of the running cluster. It ingests a month of log events,
 * merges them, runs a light query on the serving group and a heavy monthly cumulative-window query
 * that launches the heavy pool from zero, shows each readiness layer as it passes, and (with
 * --exit) waits until the pool is parked again.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DuckDBInstance } from '@duckdb/node-api';
import { SingleBar } from 'cli-progress';
import { ControllerClient } from '../services/controller/client.js';
import { CoordinatorClient, type QueryResult } from '../services/coordinator/client.js';
import { MetaClient } from '../services/meta/client.js';
import { MERGE_TASK_QUEUE } from '../workflows/contracts/shared.js';
import type { TableMergeResult } from '../workflows/contracts/segment-merge.js';
import type { tableMergeWorkflow } from '../workflows/index.js';
import type { Endpoints } from './embedded/cluster.js';
import { count } from './format.js';

export interface DemoOptions {
  endpoints: Endpoints;
  token: string;
  /** Rows to generate over 30 days. @default 1_200_000 */
  rows: number;
  /** Wait for the pool to park at the end. */
  waitForPark: boolean;
  say: (line: string) => void;
}

export interface DemoSummary {
  rows: number;
  segments: { ingested: number; afterMerge: number };
  light: {
    sql: string;
    route: string;
    verdict: string;
    group: string;
    placement: string;
    nodes: Record<string, number>;
    cacheHits: number;
    cacheMisses: number;
    elapsedMs: number;
  };
  heavy: {
    sql: string;
    verdict: string;
    bottleneck?: string;
    launchWorkflowId?: string;
    target: number;
    layersPassed: string[];
    rows: number;
    elapsedMs: number;
  };
  poolPhaseAtEnd: string;
  temporalUi: string;
}

const DAYS = 30;
const BATCHES_PER_DAY = 4;

/** One batch of log events as NDJSON: a service mesh's request log, with errors and slow calls. */
const batchSql = (day: number, batch: number, rows: number) => `
  SELECT TIMESTAMP '2026-10-01' + to_days(${day}) + to_milliseconds(((i * ${BATCHES_PER_DAY} + ${batch}) * 86400000 // ${rows * BATCHES_PER_DAY})::BIGINT) AS ts,
    ['checkout','search','auth','payments','catalog','gateway','notifications','inventory'][1 + (hash(i, ${day}, ${batch}) % 8)::INT] AS service,
    CASE WHEN hash(i, 7, ${day}) % 50 = 0 THEN 'error' WHEN hash(i, 7, ${day}) % 10 = 0 THEN 'warn' ELSE 'info' END AS level,
    [200, 200, 200, 200, 201, 204, 304, 400, 404, 500, 503][1 + (hash(i, 3, ${batch}) % 11)::INT] AS status,
    round(5 + (hash(i, 11, ${day}) % 2000) / 10.0 + CASE WHEN hash(i, 13) % 97 = 0 THEN 3000 ELSE 0 END, 1) AS latency_ms,
    (hash(i, 17, ${day}) % 200000)::BIGINT AS response_bytes,
    'user-' || (hash(i, 19, ${day}) % 20000)::VARCHAR AS user_id,
    ['eu-west-1','us-east-1','ap-south-1'][1 + (hash(i, 23) % 3)::INT] AS region,
    md5(concat(${day}, '-', ${batch}, '-', i))[1:16] AS trace_id
  FROM range(${rows}) t(i)`;

export const LIGHT_SQL =
  "SELECT service, count(*) AS requests, avg(latency_ms) AS avg_latency_ms, max(latency_ms) AS worst_ms FROM events WHERE ts >= TIMESTAMP '2026-10-24' GROUP BY service ORDER BY requests DESC";
/** The seed's monthly cumulative-window query: daily error counts per service, summed over the month. */
export const HEAVY_SQL = `SELECT day, service, errors, sum(errors) OVER (PARTITION BY service ORDER BY day ROWS UNBOUNDED PRECEDING) AS month_to_date
  FROM (SELECT date_trunc('day', ts) AS day, service, count(*) FILTER (WHERE level = 'error') AS errors FROM events GROUP BY ALL)
  ORDER BY service, day`;

export async function runDemo(options: DemoOptions): Promise<DemoSummary> {
  const { endpoints, token, say } = options;
  const coordinator = new CoordinatorClient(endpoints.coordinator, token);
  // The tour's heavy query is memory-bound: it launches the memory class, one big backend.
  const poolStatus = () => new ControllerClient(endpoints.controller).poolStatus(endpoints.heavyGroups.memory);

  // 1. A month of events, four batches a day: each batch is one level-0 segment.
  const rowsPerBatch = Math.ceil(options.rows / (DAYS * BATCHES_PER_DAY));
  say(`ingesting ${count(rowsPerBatch * DAYS * BATCHES_PER_DAY)} log events over ${DAYS} days into table "events"`);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-demo-'));
  const duckdb = await DuckDBInstance.create(':memory:');
  const c = await duckdb.connect();
  const bar = process.stderr.isTTY ? new SingleBar({ format: '  ingest [{bar}] {value}/{total} batches' }) : undefined;
  bar?.start(DAYS * BATCHES_PER_DAY, 0);
  try {
    for (let day = 0; day < DAYS; day++) {
      for (let batch = 0; batch < BATCHES_PER_DAY; batch++) {
        const file = path.join(dir, 'batch.ndjson');
        await c.run(`COPY (${batchSql(day, batch, rowsPerBatch)}) TO '${file}' (FORMAT json)`);
        await coordinator.ingest('events', await readFile(file, 'utf8'));
        bar?.increment();
      }
    }
  } finally {
    bar?.stop();
    c.closeSync();
    duckdb.closeSync();
    await rm(dir, { recursive: true, force: true });
  }
  const meta = new MetaClient(endpoints.meta, token);
  const segmentsOf = async () => (await meta.listSegments('events')).length;
  const ingested = await segmentsOf();

  // 2. Merge the small segments now, as the table's schedule would.
  say(`merging ${ingested} level-0 segments (Temporal workflow; watch it in ${endpoints.temporalUi})`);
  const connection = await Connection.connect({ address: endpoints.temporal });
  let merged: TableMergeResult;
  try {
    const client = new Client({ connection, namespace: endpoints.temporalNamespace });
    merged = await client.workflow.execute<typeof tableMergeWorkflow>('tableMergeWorkflow', {
      taskQueue: MERGE_TASK_QUEUE,
      workflowId: `merge-events-demo-${Date.now()}`,
      args: [{ table: 'events', minInputs: 2 }],
    });
  } finally {
    await connection.close();
  }
  const afterMerge = await segmentsOf();
  say(
    `  ${merged.partitions.filter((p) => p.outcome === 'merged').length} partitions merged: ${ingested} → ${afterMerge} segments, each pushed into its owner's cache`,
  );

  // 3. A light query: served by the owners in the serving group, from their caches.
  const light = await coordinator.query(LIGHT_SQL);
  say(
    `light query: verdict ${light.stats.verdict.class}, route ${light.stats.route}, ${light.stats.segments.scanned} segments on ${Object.entries(
      light.stats.nodes,
    )
      .map(([n, k]) => `${n} (${k})`)
      .join(
        ', ',
      )}, ${light.stats.cacheHits} cache hits, ${light.stats.cacheMisses} misses, ${light.stats.elapsedMs} ms`,
  );

  // 4. A heavy query: the verdict launches the pool from zero; show each readiness layer as it passes.
  say('heavy query (monthly cumulative window): pool before it: ' + (await poolStatus()).phase);
  const seen = new Set<string>();
  const showPool = (s: Awaited<ReturnType<typeof poolStatus>>): void => {
    const line = `  pool ${s.phase}: target ${s.target}, pods ${s.podsRunning}, alive backends ${s.aliveBackends}, layers ${s.layersPassed.join(' → ') || 'none'}`;
    if (!seen.has(line)) {
      seen.add(line);
      say(line);
    }
  };
  const watch = setInterval(() => {
    void poolStatus()
      .then(showPool)
      .catch(() => {});
  }, 250);
  let heavy: QueryResult;
  try {
    heavy = await coordinator.query(HEAVY_SQL);
  } finally {
    clearInterval(watch);
  }
  // The last layers can pass between two polls; the state the query left the pool in is always shown.
  const up = await poolStatus();
  showPool(up);
  const verdict = heavy.stats.verdict;
  say(
    `  verdict ${verdict.class}${verdict.class === 'heavy' ? ` (${verdict.bottleneck}: ${verdict.reason})` : ''}; ${heavy.rows.length} rows in ${heavy.stats.elapsedMs} ms on ${heavy.stats.group}; workflow ${endpoints.temporalUi}/namespaces/${endpoints.temporalNamespace}/workflows/${heavy.stats.pool?.workflowId ?? ''}`,
  );

  // 5. The idle reaper returns the pool to zero.
  let phase = up.phase;
  if (options.waitForPark) {
    say(
      `waiting for the idle reaper to park the pool (${up.idleDeadline ? new Date(up.idleDeadline).toISOString() : 'soon'})`,
    );
    while ((phase = (await poolStatus()).phase) !== 'parked') await new Promise((resolve) => setTimeout(resolve, 500));
    say('  pool parked at zero replicas');
  }
  return {
    rows: rowsPerBatch * DAYS * BATCHES_PER_DAY,
    segments: { ingested, afterMerge },
    light: {
      sql: LIGHT_SQL,
      route: light.stats.route,
      verdict: light.stats.verdict.class,
      group: light.stats.group,
      placement: light.stats.placement,
      nodes: light.stats.nodes,
      cacheHits: light.stats.cacheHits,
      cacheMisses: light.stats.cacheMisses,
      elapsedMs: light.stats.elapsedMs,
    },
    heavy: {
      sql: HEAVY_SQL,
      verdict: verdict.class,
      ...(verdict.class === 'heavy' ? { bottleneck: verdict.bottleneck } : {}),
      launchWorkflowId: heavy.stats.pool?.workflowId,
      target: up.target,
      layersPassed: up.layersPassed,
      rows: heavy.rows.length,
      elapsedMs: heavy.stats.elapsedMs,
    },
    poolPhaseAtEnd: phase,
    temporalUi: endpoints.temporalUi,
  };
}
