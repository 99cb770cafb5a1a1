/**
 * Delete by predicate (issue 29, item 4): the coordinator checks the condition like a query's
 * WHERE and records the delete; its workflow rewrites each segment holding matching rows without
 * them (or retires it when all match); a worker process killed mid-delete, or a merge that takes a
 * segment first, changes nothing of the answer or of the account. Counted against one DuckDB over
 * the same files, on a real cluster and Temporal dev server, with a meta of this file's own (it
 * can hold a removal's request or answer while the test acts).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import type { DeleteRequested } from '../services/coordinator/api.js';
import { buildMetaApp } from '../services/meta/app.js';
import { SqliteMetaStore } from '../services/meta/sqlite-store.js';
import { rowDeleteWorkflowId } from '../workflows/contracts/row-delete.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { rowDeleteWorkflow, segmentMergeWorkflow } from '../workflows/index.js';
import { startRowDelete } from '../workflows/row-delete-client.js';
import { expectSameResult } from './helpers/compare-results.js';
import { FAST, startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { spawnWorkerProcess, startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { referenceFor } from './helpers/reference.js';

const BATCHES = 4;
const ROWS = 300;
/** What a user checks after a delete: every row that is left, summed by service. */
const SUMMARY =
  'SELECT service, count(*) AS n, sum(bytes) AS bytes, count(user_id) AS users, min(ts) AS first, max(ts) AS last FROM events';

/** A request that records one segment's removal for a delete (services/meta/api.ts). */
const isRemoval = (method: string, url: string) => method === 'POST' && /^\/v1\/deletes\/\d+\/segments$/.test(url);

/** Resolves once `hold` has been called `count` times; `release` lets every held request go on. */
class Gate {
  count = 0;
  private opened: () => void = () => {};
  private readonly released = new Promise<void>((resolve) => (this.opened = resolve));
  private reachedResolve: () => void = () => {};
  readonly reached = new Promise<void>((resolve) => (this.reachedResolve = resolve));
  constructor(private readonly at: number) {}
  async hold(): Promise<void> {
    if (++this.count !== this.at) return;
    this.reachedResolve();
    await this.released;
  }
  release(): void {
    this.opened();
  }
}

describe('delete by predicate', () => {
  let dir: string;
  let store: SqliteMetaStore;
  let metaApp: FastifyInstance;
  // Holds the nth removal before meta takes it, or its answer after meta took it.
  let beforeRemoval: Gate | undefined;
  let afterRemoval: Gate | undefined;
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  const workerQueue = `delete-${randomUUID()}`;
  const taskQueue = mergeTaskQueueFor(workerQueue);
  const requestDelete = async (table: string, where: unknown, withToken = true) => {
    const response = await fetch(`${cluster.coordinator.url}/v1/tables/${table}/deletes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(withToken ? { authorization: `Bearer ${TOKEN}` } : {}) },
      body: JSON.stringify({ where }),
    });
    return { status: response.status, body: (await response.json()) as DeleteRequested & { message: string } };
  };
  /** One DuckDB over the table's files now: how many rows `where` matches, and the summary of the rest. */
  const expectedAfter = async (table: string, where: string) => {
    const reference = await referenceFor(cluster, [table]);
    try {
      const removed = await reference.run(`SELECT count(*) FROM ${table} WHERE ${where}`);
      const rest = await reference.run(
        `${SUMMARY.replace('FROM events', `FROM ${table}`)} WHERE (${where}) IS NOT TRUE GROUP BY ALL`,
      );
      if (!('result' in removed) || !('result' in rest)) throw new Error('the reference failed');
      return { removed: Number(removed.result.rows[0]![0]), rest: rest.result };
    } finally {
      reference.close();
    }
  };
  const summary = async (table: string) => {
    const { status, body } = await cluster.query(`${SUMMARY.replace('FROM events', `FROM ${table}`)} GROUP BY ALL`);
    expect(status, body.message).toBe(200);
    return body;
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-delete-'));
    store = new SqliteMetaStore({ file: path.join(dir, 'meta.sqlite'), heartbeatIntervalMs: FAST.heartbeatMs });
    metaApp = buildMetaApp({ store, token: TOKEN, logger: false });
    metaApp.addHook('onRequest', async (request) => {
      if (beforeRemoval && isRemoval(request.method, request.url)) await beforeRemoval.hold();
    });
    metaApp.addHook('onSend', async (request, _reply, payload) => {
      if (afterRemoval && isRemoval(request.method, request.url)) await afterRemoval.hold();
      return payload;
    });
    const metaUrl = await metaApp.listen({ host: '127.0.0.1', port: 0 });
    cluster = await startCluster({ vcpus: [2, 1], metaUrls: [metaUrl] });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
    await cluster.ingestEvents('events', BATCHES, ROWS);
  });
  afterAll(async () => {
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
    await metaApp?.close();
    await store?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('takes a condition only with the token, on a table that exists, as one WHERE on its own columns', async () => {
    expect((await requestDelete('events', "user_id = 'u1'", false)).status).toBe(401);
    expect((await requestDelete('nowhere', "user_id = 'u1'")).status).toBe(404);
    const refusals: [string, RegExp][] = [
      ['nope = 1', /nope/],
      ['user_id', /true or false for each row; this one is VARCHAR/],
      ['1 = 1 UNION ALL SELECT * FROM events WHERE 1 = 1', /one condition on the table’s columns/],
      ['1 = 1) UNION ALL (SELECT * FROM events WHERE 1 = 1', /does not parse/],
      ['1 = 1 GROUP BY ALL', /one condition on the table’s columns/],
      ["user_id = 'u1' LIMIT 1", /one condition on the table’s columns/],
      ['user_id IN (SELECT user_id FROM events)', /no subquery/],
      ['row_number() OVER () = 1', /no window function/],
      ['count(*) > 1', /./],
      ['(', /does not parse/],
    ];
    for (const [where, message] of refusals) {
      const { status, body } = await requestDelete('events', where);
      expect(status, where).toBe(400);
      expect(body.message, where).toMatch(message);
    }
    expect(await cluster.meta.pendingDeletes()).toEqual([]);
  });

  it('removes exactly the matching rows, rewriting or retiring the segments that held them', async () => {
    const where = "user_id = 'u42' OR status = 503 OR (level = 'error' AND latency_ms > 500)";
    const expected = await expectedAfter('events', where);
    expect(expected.removed).toBeGreaterThan(0);
    const segmentsBefore = await cluster.meta.listSegments('events');

    const { status, body: task } = await requestDelete('events', where);
    expect(status, task.message).toBe(202);
    expect(task).toMatchObject({ table: 'events', incarnation: 1, where, from: null, to: null, finishedAt: null });
    expect(task.workflowId).toBe(`delete-events-${task.id}`);
    expect(await cluster.meta.pendingDeletes()).toEqual([expect.objectContaining({ id: task.id })]);

    const run = await startRowDelete(client, task, taskQueue);
    const result = await run.result();
    expect(result.rowsRemoved).toBe(expected.removed);
    expect(result.segmentsRewritten).toBe(BATCHES);
    expect(result.perSegment.map((s) => s.segment).sort()).toEqual(segmentsBefore.map((s) => s.id).sort());
    expect(result.perSegment.reduce((sum, s) => sum + s.removed, 0)).toBe(expected.removed);
    const metadata = await run.query<{ currentDetails: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toContain(`removed ${expected.removed} rows of events`);
    expect(await cluster.meta.pendingDeletes()).toEqual([]);

    // No query returns a matching row; every other row is as one DuckDB over the old files says.
    const { body: left } = await cluster.query(`SELECT count(*) FROM events WHERE ${where}`);
    expect(left.rows).toEqual([[0]]);
    expectSameResult(await summary('events'), expected.rest, false, 'after the delete');
    // The rewritten segments replaced the old ones in the manifest, each for its input.
    const after = await cluster.meta.listSegments('events');
    expect(after).toHaveLength(BATCHES);
    for (const s of result.perSegment)
      expect((await cluster.meta.getSegment(s.segment))!).toMatchObject({ state: 'retired', replacedBy: s.replacedBy });

    // Again: nothing matches any more, and nothing changes.
    const again = await requestDelete('events', where);
    const repeat = await (await startRowDelete(client, again.body, taskQueue)).result();
    expect(repeat).toMatchObject({ rowsRemoved: 0, segmentsRewritten: 0, segmentsRetired: 0 });
    expect((await cluster.meta.listSegments('events')).map((s) => s.id).sort()).toEqual(after.map((s) => s.id).sort());
  });

  it('prunes by the time range its condition bounds and retires a segment all of whose rows match', async () => {
    // The first batch holds the rows from 00:00 to 02:30.
    const where = "ts < TIMESTAMP '2026-11-01 02:30:00'";
    const expected = await expectedAfter('events', where);
    const { status, body: task } = await requestDelete('events', where);
    expect(status, task.message).toBe(202);
    expect(task).toMatchObject({ from: null, to: Date.parse('2026-11-01T02:30:00Z') });
    const result = await (await startRowDelete(client, task, taskQueue)).result();
    expect(result).toMatchObject({ rowsRemoved: expected.removed, segmentsRetired: 1, segmentsRewritten: 0 });
    expect(result.perSegment).toEqual([expect.objectContaining({ replacedBy: null })]);
    expectSameResult(await summary('events'), expected.rest, false, 'after the delete by time');
    expect(await cluster.meta.listSegments('events')).toHaveLength(BATCHES - 1);
  });

  it('finishes after its worker process was killed right after meta took a removal, removing each row once', async () => {
    await cluster.ingestEvents('killed', BATCHES, ROWS);
    const where = "region = 'eu'";
    const expected = await expectedAfter('killed', where);
    const { body: task } = await requestDelete('killed', where);

    // A worker process of its own, killed once meta has taken its second removal and not yet answered.
    const killQueue = `delete-kill-${randomUUID()}`;
    const killed = spawnWorkerProcess(cluster, killQueue);
    onTestFinished(() => void killed.child.kill('SIGKILL'));
    const gate = (afterRemoval = new Gate(2));
    onTestFinished(() => {
      afterRemoval = undefined;
      gate.release();
    });
    const { id, table, incarnation, predicate, from, to } = task;
    const run = await client.workflow.start(rowDeleteWorkflow, {
      taskQueue: mergeTaskQueueFor(killQueue),
      workflowId: rowDeleteWorkflowId(task),
      args: [{ id, table, incarnation, predicate, from, to, heartbeatTimeoutMs: 2_000 }],
    });
    await gate.reached;
    killed.child.kill('SIGKILL');
    await killed.exited;
    afterRemoval = undefined;
    gate.release();
    expect(await cluster.meta.deleteReport(task.id)).toMatchObject({ finishedAt: null, segmentsRewritten: 2 });

    // Another worker takes the delete over once the dead one misses its heartbeats.
    const rescuer = await startWorker(cluster, killQueue);
    onTestFinished(() => rescuer.stop());
    const result = await run.result();
    expect(result).toMatchObject({ rowsRemoved: expected.removed, segmentsRewritten: BATCHES, segmentsRetired: 0 });
    expect(result.perSegment.reduce((sum, s) => sum + s.removed, 0)).toBe(expected.removed);
    expectSameResult(await summary('killed'), expected.rest, false, 'after the delete its worker died in');
    const { body: left } = await cluster.query(`SELECT count(*) FROM killed WHERE ${where}`);
    expect(left.rows).toEqual([[0]]);
    expect(await cluster.meta.pendingDeletes()).toEqual([]);
  });

  it('takes the rows from the merged segment when a merge took a segment first', async () => {
    await cluster.ingestEvents('raced', BATCHES, ROWS);
    const where = "user_id IS NULL AND service = 'billing'";
    const expected = await expectedAfter('raced', where);
    expect(expected.removed).toBeGreaterThan(0);
    const before = await cluster.meta.listSegments('raced');
    const { body: task } = await requestDelete('raced', where);

    // The delete's first removal waits while a merge swaps every segment of the table for one.
    const gate = (beforeRemoval = new Gate(1));
    onTestFinished(() => {
      beforeRemoval = undefined;
      gate.release();
    });
    const run = await startRowDelete(client, task, taskQueue);
    await gate.reached;
    const merged = await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue,
      workflowId: `delete-race-merge-${randomUUID()}`,
      args: [{ table: 'raced', partition: before[0]!.id.split('-')[2]! }],
    });
    expect(merged.outcome).toBe('merged');
    beforeRemoval = undefined;
    gate.release();

    const result = await run.result();
    // The one segment the delete found afterwards is the merged one, rewritten once.
    expect(result).toMatchObject({ rowsRemoved: expected.removed, segmentsRewritten: 1, segmentsRetired: 0 });
    expect(result.perSegment).toEqual([expect.objectContaining({ segment: merged.merged!.id })]);
    expectSameResult(await summary('raced'), expected.rest, false, 'after the delete a merge raced');
    expect(await cluster.meta.listSegments('raced')).toEqual([
      expect.objectContaining({ id: result.perSegment[0]!.replacedBy }),
    ]);
  });
});
