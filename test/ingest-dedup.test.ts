/**
 * Idempotent ingest outlives merges and the janitor (issue 27, item 1): a batch sent again after a
 * merge retired its segment and the janitor deleted its object commits nothing while meta's dedup
 * window lasts, and commits again once it has passed. On a real Temporal dev server, with a meta of
 * this file's own (its dedup window and clock are the test's), real query nodes and the S3 API.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { segmentObjectKey } from '../core/identifiers.js';
import { createS3Client } from '../services/common/s3-client.js';
import { ALREADY_COMMITTED } from '../services/coordinator/ingest/ingest.js';
import { buildMetaApp } from '../services/meta/app.js';
import { SqliteMetaStore } from '../services/meta/sqlite-store.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { janitorWorkflow, segmentMergeWorkflow } from '../workflows/index.js';
import { FAST, startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { spawnWorkerProcess, startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { eventNdjson } from './helpers/event-data.js';

const PARTITION = '20261101';
// Long enough that a loaded machine's slow test never outlasts it; the test moves the clock past it.
const DEDUP_WINDOW_MS = 600_000;

describe('a batch sent again after a merge and the janitor', () => {
  let dir: string;
  let store: SqliteMetaStore;
  let metaApp: FastifyInstance;
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let s3: S3Client;
  // Meta's clock runs this far ahead of the real one: the test moves it past the dedup window.
  let skewMs = 0;
  let holdForgets: Promise<void> | undefined;
  let forgetsHeld = 0;
  const workerQueue = `dedup-${randomUUID()}`;
  const taskQueue = mergeTaskQueueFor(workerQueue);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-dedup-'));
    store = new SqliteMetaStore({
      file: path.join(dir, 'meta.sqlite'),
      heartbeatIntervalMs: FAST.heartbeatMs,
      now: () => Date.now() + skewMs,
      dedupWindowMs: DEDUP_WINDOW_MS,
      // Moving the clock past the window must not also expire the query nodes' heartbeats.
      expiryMs: 10 * DEDUP_WINDOW_MS,
    });
    metaApp = buildMetaApp({ store, token: TOKEN, logger: false });
    // While `holdForgets` is set, meta takes no "object gone" record: a sweep stops right after an
    // S3 delete, where a killed worker leaves it.
    metaApp.addHook('onRequest', async (request, reply) => {
      if (!holdForgets || request.method !== 'POST' || request.url !== '/v1/segments/forget') return;
      forgetsHeld += 1;
      await holdForgets;
      return reply.code(503).send({ error: 'held', message: 'held by the test' });
    });
    const metaUrl = await metaApp.listen({ host: '127.0.0.1', port: 0 });
    cluster = await startCluster({ vcpus: [2], metaUrls: [metaUrl] });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
    s3 = createS3Client(cluster.s3);
  });
  afterAll(async () => {
    s3?.destroy();
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
    await metaApp?.close();
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const count = async () => {
    const { status, body } = await cluster.query('SELECT count(*) AS n FROM events');
    if (status !== 200) throw new Error(body.message);
    return body.rows;
  };
  const exists = (id: string, table = 'events') =>
    s3.send(new HeadObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey(table, id) })).then(
      () => true,
      () => false,
    );
  const janitor = (graceMs: number) =>
    client.workflow.execute(janitorWorkflow, {
      taskQueue,
      workflowId: `janitor-${randomUUID()}`,
      args: [{ graceMs }],
    });

  it('commits nothing after a sweep whose worker was killed between an S3 delete and meta’s record', async () => {
    const table = 'swept';
    const batches = await Promise.all([0, 1, 2].map((b) => eventNdjson(b * 30, (b + 1) * 30)));
    const ids = [];
    for (const batch of batches) ids.push((await cluster.ingest(table, batch)).body.segment.id as string);
    await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue,
      workflowId: `dedup-merge-${randomUUID()}`,
      args: [{ table, partition: PARTITION }],
    });

    let release: () => void = () => {};
    holdForgets = new Promise<void>((resolve) => (release = resolve));
    onTestFinished(() => {
      holdForgets = undefined;
      release();
    });
    const killed = spawnWorkerProcess(cluster, workerQueue);
    onTestFinished(() => void killed.child.kill('SIGKILL'));
    await worker.stop(); // the sweep starts on the process the test kills
    const sweep = client.workflow.execute(janitorWorkflow, {
      taskQueue,
      workflowId: `janitor-killed-${randomUUID()}`,
      args: [{ graceMs: 0, heartbeatTimeoutMs: 2_000 }],
    });
    await expect.poll(() => forgetsHeld, { timeout: 60_000 }).toBeGreaterThan(0);
    const objectsLeft = (await Promise.all(ids.map((id) => exists(id, table)))).filter(Boolean).length;
    expect(objectsLeft).toBe(0); // the round's objects deleted, their rows not yet told so
    killed.child.kill('SIGKILL');
    await killed.exited;
    holdForgets = undefined;
    release();
    // Another worker takes the sweep over once the dead one misses its heartbeats.
    worker = await startWorker(cluster, workerQueue);
    const swept = await sweep;
    expect(swept.retired.first.sort()).toEqual(ids.sort()); // the round's deletes again, too
    expect(await Promise.all(ids.map((id) => exists(id, table)))).toEqual(ids.map(() => false));
    expect(await cluster.meta.knownSegments(ids)).toEqual(ids);

    for (const batch of batches) {
      const again = await cluster.ingest(table, batch);
      expect(again.status).toBe(200);
      expect(again.body.push).toEqual({ owner: null, accepted: false, reason: ALREADY_COMMITTED });
    }
    const { body } = await cluster.query(`SELECT count(*) AS n FROM ${table}`);
    expect(body.rows).toEqual([[90]]);
  });

  it('commits nothing inside meta’s dedup window, and commits again once it has passed', async () => {
    const batches = await Promise.all([0, 1, 2].map((b) => eventNdjson(b * 40, (b + 1) * 40)));
    const first = [];
    for (const batch of batches) {
      const { status, body } = await cluster.ingest('events', batch);
      expect(status).toBe(200);
      first.push(body.segment);
    }
    const sent = first[0]!;
    expect(sent.state).toBe('active');
    await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue,
      workflowId: `dedup-merge-${randomUUID()}`,
      args: [{ table: 'events', partition: PARTITION }],
    });
    expect((await cluster.meta.getSegment(sent.id))?.state).toBe('retired');
    const swept = await janitor(0);
    expect(swept.retired.first.sort()).toEqual(first.map((s) => s.id).sort());
    expect(await exists(sent.id)).toBe(false);
    expect(await count()).toEqual([[120]]);

    // A shipper's retry after all that: answered as a duplicate commit is, with the row committed first.
    const again = await cluster.ingest('events', batches[0]!);
    expect(again.status).toBe(200);
    expect(again.body.segment).toMatchObject({
      id: sent.id,
      createdAt: sent.createdAt,
      state: 'retired',
      replacedBy: expect.any(String),
    });
    expect(again.body.push).toEqual({ owner: null, accepted: false, reason: ALREADY_COMMITTED });
    expect(await count()).toEqual([[120]]);
    expect((await cluster.meta.listSegments('events')).map((s) => s.id)).not.toContain(sent.id);
    // Nothing was uploaded for the retry: no object for the janitor to find again.
    expect(await exists(sent.id)).toBe(false);
    expect(await janitor(0)).toEqual({ retired: { deleted: 0, first: [] }, orphans: { deleted: 0, first: [] } });
    expect(await cluster.meta.knownSegments(first.map((s) => s.id))).toEqual(first.map((s) => s.id));

    // Past the dedup window the janitor forgets the retired rows, and the same batch is new again.
    skewMs = DEDUP_WINDOW_MS + 60_000;
    await janitor(0);
    expect(await cluster.meta.knownSegments(first.map((s) => s.id))).toEqual([]);
    const late = await cluster.ingest('events', batches[0]!);
    expect(late.status).toBe(200);
    expect(late.body.segment).toMatchObject({ id: sent.id, state: 'active', retiredAt: null });
    expect(await count()).toEqual([[160]]);
  });
});
