/**
 * Two meta replicas (the built service, as processes) on one PostgreSQL database behind real query
 * nodes, a coordinator and a Temporal worker, all given both URLs. The replica every client
 * prefers is killed with SIGKILL in the middle of a stream of ingests, queries and merges: every
 * acknowledged row must be there exactly once, no query may answer an error, the coordinator's
 * copy of the manifest (moved by meta's change log, through the kill) must end as meta's, and a
 * lease held through the failure must never be granted to anyone else.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../activities/platform/service-process.js';
import { MetaClient } from '../services/meta/client.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import type { MergeResult } from '../workflows/contracts/segment-merge.js';
import { segmentMergeWorkflow } from '../workflows/index.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { FAST, startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { eventNdjson } from './helpers/event-data.js';
import { createTestDatabase } from './helpers/postgres.js';

const META_SCRIPT = fileURLToPath(new URL('../dist/services/meta/main.js', import.meta.url));
const BATCHES = 24;
const ROWS_PER_BATCH = 240; // two hours of events: the stream covers two day partitions
const KILL_AFTER_BATCH = 8;
const PARTITIONS = ['20261101', '20261102'];

describe('two meta replicas on PostgreSQL, one killed with SIGKILL mid-stream', () => {
  let dir: string;
  const metas: ServiceProcess[] = [];
  let cluster: TestCluster;
  let worker: RunningWorker;
  let temporal: Client;
  const taskQueue = `meta-replicas-${randomUUID()}`;
  const mergeQueue = mergeTaskQueueFor(taskQueue); // the worker runs merges on its merge queue

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-meta-replicas-'));
    const database = await createTestDatabase();
    for (const name of ['meta-1', 'meta-2']) {
      const env = {
        BERTH_TOKEN: TOKEN,
        BERTH_META_DATABASE: database,
        BERTH_META_PORT: '0',
        BERTH_HEARTBEAT_MS: String(FAST.heartbeatMs),
        BERTH_LOG_LEVEL: 'warn',
      };
      metas.push(await startServiceProcess(name, META_SCRIPT, env, path.join(dir, `${name}.log`)));
    }
    cluster = await startCluster({ vcpus: [2, 2], metaUrls: metas.map((m) => m.url) });
    worker = await startWorker(cluster, taskQueue);
    temporal = await temporalClient();
  });
  afterAll(async () => {
    await worker?.stop();
    await temporal?.connection.close();
    await cluster?.close();
    await Promise.all(metas.map((m) => m.stop()));
    await rm(dir, { recursive: true, force: true });
  });

  it(
    'keeps every acknowledged row exactly once, answers every query, and never grants a held lease twice',
    { timeout: 180_000 },
    async () => {
      const [first, second] = metas as [ServiceProcess, ServiceProcess];
      expect(cluster.meta.url).toBe(first.url); // every client asks meta-1 first
      // A lease taken before the failure, held through it.
      const held = await new MetaClient(first.url, TOKEN).acquireLease(
        'test:held-through-failure',
        'holder-a',
        600_000,
      );
      expect(held.granted).toBe(true);

      let streaming = true;
      let killedAt = 0;
      const queries: { status: number; n?: number; distinct?: number; message?: string; afterKill: boolean }[] = [];
      const merges: { outcome: MergeResult['outcome']; afterKill: boolean }[] = [];
      const contenders: { granted: boolean; holder: string }[] = [];
      let retries = 0;

      const ingest = async () => {
        for (let b = 0; b < BATCHES; b++) {
          const rows = await eventNdjson(b * ROWS_PER_BATCH, (b + 1) * ROWS_PER_BATCH);
          // Like a real client: send a batch again until it is acknowledged (the same batch commits once).
          for (let attempt = 1; ; attempt++) {
            const { status } = await cluster.ingest('events', rows).catch(() => ({ status: 0 }));
            if (status === 200) break;
            retries++;
            if (attempt >= 20) throw new Error(`batch ${b} was never acknowledged`);
            await new Promise((resolve) => setTimeout(resolve, 250));
          }
          if (b + 1 === KILL_AFTER_BATCH) {
            first.child.kill('SIGKILL');
            killedAt = Date.now();
          }
        }
      };
      const query = async () => {
        while (streaming) {
          const { status, body } = await cluster.query('SELECT count(*) AS n, count(DISTINCT ts) AS d FROM events');
          const [n, d] = (body.rows?.[0] ?? []) as number[];
          queries.push({ status, n: Number(n), distinct: Number(d), message: body.message, afterKill: killedAt > 0 });
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      };
      const merge = async () => {
        while (streaming) {
          for (const partition of PARTITIONS) {
            const result = await temporal.workflow.execute(segmentMergeWorkflow, {
              taskQueue: mergeQueue,
              workflowId: `merge-events-${partition}-${randomUUID()}`,
              args: [{ table: 'events', partition, minInputs: 2, leaseWaitMs: 30_000 }],
            });
            merges.push({ outcome: result.outcome, afterKill: killedAt > 0 });
          }
        }
      };
      const contend = async () => {
        for (let i = 0; streaming; i++) {
          const { granted, lease } = await cluster.meta.acquireLease(
            'test:held-through-failure',
            `holder-b-${i}`,
            60_000,
          );
          contenders.push({ granted, holder: lease.holder });
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      };

      // The first batch creates the table; then everything runs at once (and batch 0 is sent again: it commits once).
      const { status } = await cluster.ingest('events', await eventNdjson(0, ROWS_PER_BATCH));
      expect(status).toBe(200);
      const background = [query(), merge(), contend()];
      try {
        await ingest();
        // Keep the stream going a little past the last batch, so that a merge runs on meta-2 alone.
        const mergesAtEnd = merges.length;
        await expect.poll(() => merges.length, { timeout: 60_000 }).toBeGreaterThan(mergesAtEnd + 1);
      } finally {
        streaming = false;
        await Promise.all(background);
      }

      expect(await first.exited).toBe(null); // killed by the signal
      expect(second.child.exitCode).toBe(null);
      const total = BATCHES * ROWS_PER_BATCH;

      // Queries: none answered an error, before or after the kill, and none ever saw a row twice.
      expect(queries.filter((q) => q.status !== 200)).toEqual([]);
      expect(queries.filter((q) => q.afterKill).length).toBeGreaterThan(5);
      for (const q of queries) expect(q.n).toBe(q.distinct);

      // Every acknowledged row is there exactly once, also after a final merge of each partition.
      for (const partition of PARTITIONS) {
        const result = await temporal.workflow.execute(segmentMergeWorkflow, {
          taskQueue: mergeQueue,
          workflowId: `merge-events-${partition}-final-${randomUUID()}`,
          args: [{ table: 'events', partition, minInputs: 2 }],
        });
        merges.push({ outcome: result.outcome, afterKill: true });
      }
      const final = await cluster.query(
        'SELECT count(*) AS n, count(DISTINCT ts) AS d, min(ts) AS lo, max(ts) AS hi FROM events',
      );
      expect(final.status).toBe(200);
      expect(final.body.rows[0]!.slice(0, 2).map(Number)).toEqual([total, total]);
      expect(final.body.rows[0]!.slice(2)).toEqual(['2026-11-01 00:00:00', '2026-11-02 23:59:30']);
      const segments = await cluster.meta.listSegments('events');
      expect(segments.reduce((sum, s) => sum + s.rows, 0)).toBe(total);
      // The coordinator's copy of the manifest, moved by meta's change log through the kill, is meta's.
      expect(final.body.stats.segments.total).toBe(segments.length);
      expect(final.body.stats.segments.scanned).toBe(segments.length);

      // Merges ran on both sides of the failure and none failed (a lost race is an answer, not a failure).
      expect(merges.filter((m) => m.afterKill && m.outcome === 'merged').length).toBeGreaterThan(0);
      for (const m of merges) expect(['merged', 'nothing-to-merge', 'lost-race']).toContain(m.outcome);

      // The lease held through the failure was never granted to anyone else, and still carries its token.
      expect(contenders.length).toBeGreaterThan(5);
      expect(contenders.filter((c) => c.granted)).toEqual([]);
      expect(new Set(contenders.map((c) => c.holder))).toEqual(new Set(['holder-a']));
      // Its holder renewing it on the surviving replica keeps the same grant (same token).
      const leases = await new MetaClient(second.url, TOKEN).acquireLease(
        'test:held-through-failure',
        'holder-a',
        600_000,
      );
      expect(leases).toEqual({ granted: true, lease: { ...held.lease, expiresAt: leases.lease.expiresAt } });
      console.log(
        `meta replicas: ${queries.length} queries (${queries.filter((q) => q.afterKill).length} after the kill), ${merges.length} merges, ${contenders.length} lease attempts, ${retries} ingest retries`,
      );
    },
  );
});
