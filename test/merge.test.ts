/**
 * Merge-then-push and the janitor on a real Temporal dev server, with real query nodes, meta and
 * the S3 API.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  paginateListObjectsV2,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { segmentObjectKey } from '../core/identifiers.js';
import { createJanitorActivities, UNFINISHED_UPLOAD_MIN_AGE_MS } from '../activities/janitor.js';
import { createMergeActivities, mergedSegmentId, type MergeActivities } from '../activities/merge.js';
import { RETIRED_LISTED } from '../services/meta/api.js';
import type { MetaClient } from '../services/meta/client.js';
import { createS3Client } from '../services/common/s3-client.js';
import type { QueryResult } from '../services/coordinator/query-service.js';
import { ensureMergeSchedule } from '../workers/schedules.js';
import { JANITOR_SWEEP_NAMED } from '../workflows/contracts/janitor.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { mergeScheduleId, mergeWorkflowId, type MergeResult } from '../workflows/contracts/segment-merge.js';
import { janitorWorkflow, segmentMergeWorkflow } from '../workflows/index.js';
import { QUERY_CORPUS } from './fixtures/query-corpus.js';
import { expectSameResult } from './helpers/compare-results.js';
import { mergeDeps } from './helpers/merge-deps.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { spawnWorkerProcess, startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';

const PARTITION = '20261101';

const ingest = (cluster: TestCluster, table: string, batches: number) => cluster.ingestEvents(table, batches, 40);

async function query(cluster: TestCluster, sql: string): Promise<QueryResult> {
  const { status, body } = await cluster.query(sql);
  if (status !== 200) throw new Error(body.message);
  return body;
}

const checksum = (cluster: TestCluster, table: string) =>
  query(cluster, `SELECT count(*) AS n, sum(hash(${table})) AS h FROM ${table}`).then((r) => r.rows);

describe('merge-then-push', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  const workerQueue = `merge-${randomUUID()}`;
  const taskQueue = mergeTaskQueueFor(workerQueue); // merges and the janitor run on the merge queue
  const merge = (
    table: string,
    extra: Record<string, unknown> = {},
    workflowId = `${mergeWorkflowId(table, PARTITION)}-${randomUUID()}`,
  ) =>
    client.workflow.execute(segmentMergeWorkflow, {
      taskQueue,
      workflowId,
      args: [{ table, partition: PARTITION, ...extra }],
    });

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2], expiryMs: 2_000 });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
  });
  afterAll(async () => {
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  it('merges 50 level-0 segments into one with the same rows and answers, pushed warm to its owner', async () => {
    await ingest(cluster, 'events', 50);
    expect(await cluster.meta.listSegments('events')).toHaveLength(50);
    const before = await checksum(cluster, 'events');
    const answers = await Promise.all(QUERY_CORPUS.map((q) => query(cluster, q.sql)));

    const result = await merge('events', {}, mergeWorkflowId('events', PARTITION));
    expect(result).toMatchObject({
      outcome: 'merged',
      table: 'events',
      partition: PARTITION,
      push: { accepted: true },
    });
    expect(result.inputs).toHaveLength(50);
    const segments = await cluster.meta.listSegments('events');
    expect(segments).toHaveLength(1);
    expect(segments[0]).toMatchObject({ id: result.merged!.id, level: 1, rows: 2_000 });

    const first = await query(cluster, 'SELECT count(*) FROM events');
    expect(first.stats).toMatchObject({ s3Gets: 0, cacheMisses: 0, cacheHits: 1 });
    expect(await checksum(cluster, 'events')).toEqual(before);
    for (const [i, q] of QUERY_CORPUS.entries()) {
      const answer = await query(cluster, q.sql);
      // Planned before the merge: the manifest moved under the cached plan, and the answer is the same.
      expect(answer.stats.plan, q.name).toBe('cached');
      expectSameResult(answer, answers[i]!, q.ordered, q.name);
    }

    // The same merge again finds nothing left to merge.
    expect((await merge('events')).outcome).toBe('nothing-to-merge');
    expect(await cluster.meta.listSegments('events')).toHaveLength(1);
  });

  it('answers every corpus query right after a merge from the owners’ caches alone, and every cache holds only what its node owns', async () => {
    // Six days of rows, so that the merge leaves one segment per day spread over both nodes.
    const days = 6;
    await cluster.ingestEvents('spread', 24, (days * 2_880) / 24);
    for (let day = 1; day <= days; day++) {
      const partition = `202611${String(day).padStart(2, '0')}`;
      const result = await client.workflow.execute(segmentMergeWorkflow, {
        taskQueue,
        workflowId: `${mergeWorkflowId('spread', partition)}-${randomUUID()}`,
        args: [{ table: 'spread', partition }],
      });
      expect(result).toMatchObject({ outcome: 'merged', push: { accepted: true } });
    }
    const segments = await cluster.meta.listSegments('spread');
    expect(segments).toHaveLength(days);
    const owner = (id: string) => cluster.coordinator.view.placement!.owner(id)!.id;
    for (const q of QUERY_CORPUS) {
      const { status, body } = await cluster.query(q.sql.replaceAll(/\bevents\b/g, 'spread'));
      expect(status, `${q.name}: ${body.message}`).toBe(200);
      expect(body.stats.bytesFromS3, q.name).toBe(0);
      expect(body.stats.s3Gets, q.name).toBe(0);
    }
    for (const node of cluster.nodes) {
      const foreign = node.cache.ids().filter((id) => owner(id) !== node.id);
      expect(foreign, `segments cached by ${node.id} that it does not own`).toEqual([]);
    }
  });

  it('is findable by table and partition', async () => {
    await expect
      .poll(async () => {
        const ids: string[] = [];
        for await (const run of client.workflow.list({
          query: `BerthTable = 'events' AND BerthPartition = '${PARTITION}'`,
        }))
          ids.push(run.workflowId);
        return ids;
      })
      .toContain(mergeWorkflowId('events', PARTITION));
  });

  it('commits even when the owner declines or is down; the segment is then read cold once', async () => {
    await ingest(cluster, 'declined', 6);
    const nodes = [...cluster.nodes];
    for (const node of nodes) await node.close();
    cluster.nodes.length = 0;
    const result = await merge('declined');
    expect(result.outcome).toBe('merged');
    expect(result.push!.accepted).toBe(false);
    expect(await cluster.meta.listSegments('declined')).toHaveLength(1);
    await cluster.addNode({ vcpus: 2 });
    await cluster.awaitMembers(cluster.nodes.map((n) => n.id));
    expect((await query(cluster, 'SELECT count(*) FROM declined')).stats).toMatchObject({ cacheMisses: 1, s3Gets: 1 });
    expect((await query(cluster, 'SELECT count(*) FROM declined')).stats).toMatchObject({
      cacheMisses: 0,
      cacheHits: 1,
    });
  });

  it('lets exactly one of two racing merges commit', async () => {
    await ingest(cluster, 'racing', 8);
    const [a, b] = await Promise.all([merge('racing', { leasePollMs: 200 }), merge('racing', { leasePollMs: 200 })]);
    expect([a.outcome, b.outcome].sort()).toEqual(['merged', 'nothing-to-merge']);
    const segments = await cluster.meta.listSegments('racing');
    expect(segments).toHaveLength(1);
    expect(segments[0]!.rows).toBe(8 * 40);
  });

  it('waits out a lease left by a dead worker for no longer than its TTL', async () => {
    await ingest(cluster, 'stale', 4);
    const ttlMs = 3_000;
    await cluster.meta.acquireLease(`merge:stale:${PARTITION}:l0`, 'a-worker-that-died', ttlMs);
    const started = Date.now();
    const result = await merge('stale', { leaseTtlMs: 60_000 });
    expect(result.outcome).toBe('merged');
    expect(Date.now() - started).toBeLessThan(ttlMs + 5_000);
  });

  it('runs a table’s merges from its Temporal Schedule', async () => {
    await ingest(cluster, 'scheduled', 5);
    expect(
      await ensureMergeSchedule(client, 'scheduled', { taskQueue, mergeMinInputs: 2, mergeEveryMs: 3_600_000 }),
    ).toBe('created');
    expect(
      await ensureMergeSchedule(client, 'scheduled', { taskQueue, mergeMinInputs: 2, mergeEveryMs: 3_600_000 }),
    ).toBe('unchanged');
    const schedule = client.schedule.getHandle(mergeScheduleId('scheduled'));
    try {
      await schedule.trigger();
      await expect
        .poll(async () => (await cluster.meta.listSegments('scheduled')).map((s) => s.level), { timeout: 30_000 })
        .toEqual([1]);
    } finally {
      await schedule.delete();
    }
  });
});

describe('a worker killed between upload and commit', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker | undefined;
  let slowOwner: ReturnType<typeof createServer> | undefined;
  const workerQueue = `merge-kill-${randomUUID()}`;
  const taskQueue = mergeTaskQueueFor(workerQueue); // merges and the janitor run on the merge queue

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [] });
    client = await temporalClient();
  });
  afterEach(async () => {
    await worker?.stop();
    slowOwner?.closeAllConnections();
    slowOwner?.close();
  });
  afterAll(async () => {
    await client?.connection.close();
    await cluster?.close();
  });

  it('completes after a restart with exactly one merged segment and no row lost or doubled', async () => {
    await ingest(cluster, 'events', 5);
    const before = await cluster.meta.listSegments('events');

    // The only serving node holds pushes open until the test lets them go: the merged object is
    // uploaded, the commit has not happened, and the worker can be killed right there.
    const pushes: { response: ServerResponse }[] = [];
    let pushArrived: () => void = () => {};
    const arrived = new Promise<void>((resolve) => (pushArrived = resolve));
    slowOwner = createServer((request: IncomingMessage, response: ServerResponse) => {
      request.resume();
      if (request.method === 'POST' && request.url?.startsWith('/v1/segments/')) {
        pushes.push({ response });
        pushArrived();
      } else response.end('{}');
    });
    await new Promise<void>((resolve) => slowOwner!.listen(0, '127.0.0.1', resolve));
    const ownerUrl = `http://127.0.0.1:${(slowOwner.address() as AddressInfo).port}`;
    await cluster.meta.registerNode({
      id: 'slow-owner',
      group: 'serving',
      url: ownerUrl,
      vcpus: 2,
      startedAt: Date.now(),
    });

    const { child, exited } = spawnWorkerProcess(cluster, workerQueue);
    const handle = await client.workflow.start(segmentMergeWorkflow, {
      taskQueue,
      workflowId: `kill-${randomUUID()}`,
      args: [{ table: 'events', partition: PARTITION, heartbeatTimeoutMs: 2_000 }],
    });
    await arrived;
    // Uploaded (beside the push, which the owner holds), not committed: the merged object is in
    // the bucket, the manifest still lists the inputs.
    const mergedId = mergedSegmentId(
      'events',
      PARTITION,
      1,
      before.map((s) => s.id),
    );
    const s3 = createS3Client(cluster.s3);
    const uploaded = () =>
      s3.send(new HeadObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey('events', mergedId) })).then(
        () => true,
        () => false,
      );
    await expect.poll(uploaded, { timeout: 30_000 }).toBe(true);
    expect((await cluster.meta.listSegments('events')).map((s) => s.id).sort()).toEqual(before.map((s) => s.id).sort());
    child.kill('SIGKILL');
    await exited;

    pushes.length = 0;
    worker = await startWorker(cluster, workerQueue);
    // The push step is retried on the new worker once the dead one misses its heartbeats.
    await expect.poll(() => pushes.length, { timeout: 30_000 }).toBeGreaterThan(0);
    for (const push of pushes) push.response.end(JSON.stringify({ accepted: true, owner: 'slow-owner' }));
    const result: MergeResult = await handle.result();
    expect(result.outcome).toBe('merged');

    const after = await cluster.meta.listSegments('events');
    expect(after.map((s) => s.id)).toEqual([mergedId]);
    expect(after[0]!.rows).toBe(before.reduce((sum, s) => sum + s.rows, 0));
    await s3.send(new HeadObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey('events', after[0]!.id) }));
    s3.destroy();
    const again = await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue,
      workflowId: `kill-again-${randomUUID()}`,
      args: [{ table: 'events', partition: PARTITION }],
    });
    expect(again.outcome).toBe('nothing-to-merge');
  });
});

describe('a retried one-step merge', () => {
  let cluster: TestCluster;
  let deps: Awaited<ReturnType<typeof mergeDeps>>;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    deps = await mergeDeps(cluster);
  });
  afterAll(async () => {
    deps?.close();
    await cluster?.close();
  });

  it('resumes after its upload without merging again, and after its swap without doing anything', async () => {
    await ingest(cluster, 'resumed', 4);
    const inputs = (await cluster.meta.listSegments('resumed')).map((s) => s.id);
    const input = { table: 'resumed', partition: PARTITION, level: 0, inputs };

    // The first attempt merges, uploads and pushes, then its swap fails (meta unreachable, say).
    const unreachable = new Proxy(cluster.meta, {
      get: (meta, key) =>
        key === 'swapSegments'
          ? () => Promise.reject(new Error('meta unreachable'))
          : (Reflect.get(meta, key, meta) as unknown),
    });
    const first = new MockActivityEnvironment({ attempt: 1 });
    let details: unknown;
    first.on('heartbeat', (d: unknown) => (details = d));
    await expect(
      first.run(createMergeActivities({ ...deps, meta: unreachable }).mergePushAndCommit, input),
    ).rejects.toThrow('meta unreachable');
    expect(details).toMatchObject({ step: 'commit', merged: { rows: 4 * 40 }, push: { accepted: true } });
    expect(await cluster.meta.listSegments('resumed')).toHaveLength(4);

    // The retry finds the upload done: with the inputs gone from storage, it can only succeed by not merging again.
    for (const id of inputs)
      await deps.s3.send(new DeleteObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey('resumed', id) }));
    const retry = new MockActivityEnvironment({ attempt: 2, heartbeatDetails: details });
    retry.on('heartbeat', (d: unknown) => (details = d));
    const done: Awaited<ReturnType<MergeActivities['mergePushAndCommit']>> = await retry.run(
      createMergeActivities(deps).mergePushAndCommit,
      input,
    );
    expect(done).toMatchObject({
      merged: { id: mergedSegmentId('resumed', PARTITION, 1, inputs), rows: 4 * 40 },
      push: { accepted: true },
    });
    expect((await cluster.meta.listSegments('resumed')).map((s) => s.id)).toEqual([done.merged.id]);
    expect((await query(cluster, 'SELECT count(*) AS n FROM resumed')).rows).toEqual([[160]]);

    // Retried once more after the swap, it answers from what it did, touching neither meta nor storage.
    const untouchable = new Proxy({} as MetaClient, { get: () => () => Promise.reject(new Error('meta called')) });
    const again = new MockActivityEnvironment({ attempt: 3, heartbeatDetails: details });
    expect(await again.run(createMergeActivities({ ...deps, meta: untouchable }).mergePushAndCommit, input)).toEqual(
      done,
    );
    expect((await cluster.meta.listSegments('resumed')).map((s) => s.id)).toEqual([done.merged.id]);
  });
});

describe('the janitor', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  const workerQueue = `janitor-${randomUUID()}`;
  const taskQueue = mergeTaskQueueFor(workerQueue); // merges and the janitor run on the merge queue

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
  });
  afterAll(async () => {
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  it('deletes retired objects only after the grace period, and uploads never committed', async () => {
    await ingest(cluster, 'events', 3);
    const inputs = await cluster.meta.listSegments('events');
    await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue,
      workflowId: `jm-${randomUUID()}`,
      args: [{ table: 'events', partition: PARTITION }],
    });
    const [merged] = await cluster.meta.listSegments('events');
    const s3 = createS3Client(cluster.s3);
    const exists = (table: string, id: string) =>
      s3.send(new HeadObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey(table, id) })).then(
        () => true,
        () => false,
      );
    await s3.send(
      new PutObjectCommand({
        Bucket: cluster.bucket,
        Key: segmentObjectKey('events', 'events-l0-never-committed'),
        Body: 'PAR1',
      }),
    );
    // A multipart upload a worker began and never finished (killed mid-merge): parts, no object.
    const unfinished = segmentObjectKey('events', 'events-l1-never-finished');
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: cluster.bucket, Key: unfinished }));
    await s3.send(
      new UploadPartCommand({ Bucket: cluster.bucket, Key: unfinished, UploadId, PartNumber: 1, Body: 'PAR1' }),
    );
    const unfinishedUploads = async () =>
      ((await s3.send(new ListMultipartUploadsCommand({ Bucket: cluster.bucket, Prefix: 'tables/' }))).Uploads ?? [])
        .map((u) => u.Key)
        .filter((key) => key === unfinished);
    const janitor = (graceMs: number) =>
      client.workflow.execute(janitorWorkflow, {
        taskQueue,
        workflowId: `janitor-${randomUUID()}`,
        args: [{ graceMs }],
      });

    expect(await janitor(3_600_000)).toEqual({
      retired: { deleted: 0, first: [] },
      orphans: { deleted: 0, first: [] },
    });
    for (const s of inputs) expect(await exists('events', s.id)).toBe(true);
    expect(await unfinishedUploads()).toEqual([unfinished]); // within the grace time: left alone

    const swept = await janitor(0);
    expect(swept.retired).toEqual({ deleted: inputs.length, first: expect.any(Array) });
    expect(swept.retired.first.sort()).toEqual(inputs.map((s) => s.id).sort());
    expect(swept.orphans.first).toContain(segmentObjectKey('events', 'events-l0-never-committed'));
    for (const s of inputs) expect(await exists('events', s.id)).toBe(false);
    expect(await exists('events', 'events-l0-never-committed')).toBe(false);
    // An upload a day old at least: a merge step uploads for 30 minutes at most, so this one is abandoned.
    expect(swept.orphans.first).not.toContain(unfinished);
    expect(await unfinishedUploads()).toEqual([unfinished]);
    const aDayLater = createJanitorActivities({
      s3,
      bucket: cluster.bucket,
      meta: cluster.meta,
      now: () => Date.now() + UNFINISHED_UPLOAD_MIN_AGE_MS + 60_000,
    });
    const later = await new MockActivityEnvironment().run(aDayLater.deleteOrphanObjects, { graceMs: 0 });
    expect(later).toEqual({ deleted: 1, first: [unfinished] });
    expect(await unfinishedUploads()).toEqual([]); // aborted: its parts are gone
    expect(await exists('events', merged!.id)).toBe(true); // nothing committed is ever deleted
    expect((await query(cluster, 'SELECT count(*) AS n FROM events')).rows).toEqual([[120]]);
    s3.destroy();
  });

  it('sweeps more retired segments than a page and a DeleteObjects call, within Temporal’s 2 MiB payload limit', async () => {
    // Three rounds of RETIRED_LISTED: one listing, one forget and one DeleteObjects (S3's 1,000 keys) each.
    const SEGMENTS = 2 * RETIRED_LISTED + 500;
    const s3 = createS3Client(cluster.s3);
    await cluster.meta.ensureTable({
      name: 'swept',
      timestampColumn: 'ts',
      columns: [{ name: 'ts', type: 'TIMESTAMP' }],
    });
    const ids = Array.from({ length: SEGMENTS }, (_, i) => `swept-l0-20261001-${String(i).padStart(6, '0')}`);
    // S3 lists 1,000 keys a page.
    const keys = async () => {
      let count = 0;
      for await (const page of paginateListObjectsV2(
        { client: s3 },
        { Bucket: cluster.bucket, Prefix: 'tables/swept/' },
      ))
        count += page.KeyCount ?? 0;
      return count;
    };
    for (let i = 0; i < SEGMENTS; i += 50)
      await Promise.all(
        ids.slice(i, i + 50).map(async (id) => {
          await s3.send(
            new PutObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey('swept', id), Body: 'PAR1' }),
          );
          await cluster.meta.commitSegment({ id, table: 'swept', minTs: 0, maxTs: 0, rows: 1, bytes: 4, level: 0 });
        }),
      );
    await cluster.meta.retireSegments(ids);
    expect(await keys()).toBe(SEGMENTS);

    const swept = await client.workflow.execute(janitorWorkflow, {
      taskQueue,
      workflowId: `janitor-${randomUUID()}`,
      args: [{ graceMs: 0 }],
    });
    expect(await keys()).toBe(0);
    expect(swept.retired.deleted).toBe(SEGMENTS);
    expect(swept.retired.first).toEqual(ids.slice(0, JANITOR_SWEEP_NAMED)); // oldest retirement first, then by id
    // Naming every id would pass 2 MiB at about 80,000 segments like these: the result stays this size.
    expect(Buffer.byteLength(JSON.stringify(swept))).toBeLessThan(JANITOR_SWEEP_NAMED * 64);
    expect(await cluster.meta.listRetired(Date.now() + 1)).toEqual([]);
    expect(await cluster.meta.knownSegments(ids)).toEqual(ids); // rows kept for meta's dedup window
    s3.destroy();
  }, 180_000);
});
