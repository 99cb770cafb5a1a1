/**
 * Tables without a timestamp (issue 29, item 5): a dimension table is ingested with
 * `noTimestamp`, never pruned by time, merged by count instead of by day, outside retention, and
 * joined to a time-partitioned table exactly as one DuckDB over the same files answers. On real
 * query nodes, meta, the S3 API and a Temporal dev server for the merge.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TIMELESS } from '../core/time-bounds.js';
import type { IngestResult } from '../services/coordinator/api.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { tableMergeWorkflow } from '../workflows/index.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { referenceFor } from './helpers/reference.js';

/** Who owns which service, in three batches; 'cdn' has no owner and 'legacy' no events. */
const OWNER_BATCHES = [
  [
    { service: 'api', owner: 'platform', tier: 1 },
    { service: 'web', owner: 'frontend', tier: 1 },
  ],
  [
    { service: 'auth', owner: 'identity', tier: 1 },
    { service: 'search', owner: 'discovery', tier: 2 },
    { service: 'legacy', owner: 'nobody', tier: null },
  ],
  [
    { service: 'billing', owner: 'payments', tier: 1, pager: 'payments-oncall' },
    { service: 'mail', owner: 'platform', tier: 3, pager: null },
  ],
];

const QUERIES = [
  { sql: 'SELECT * FROM owners ORDER BY service', ordered: true },
  {
    sql: 'SELECT o.owner, count(*) AS events, sum(e.bytes) AS bytes FROM events e JOIN owners o ON e.service = o.service GROUP BY ALL',
    ordered: false,
  },
  {
    sql: "SELECT e.service, o.tier, count(*) AS n FROM events e LEFT JOIN owners o USING (service) WHERE e.ts >= TIMESTAMP '2026-11-01 02:00:00' GROUP BY ALL",
    ordered: false,
  },
  {
    sql: 'SELECT o.service FROM owners o WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.service = o.service) ORDER BY 1',
    ordered: true,
  },
  {
    sql: "SELECT o.pager, avg(e.latency_ms) AS latency FROM owners o JOIN events e ON e.service = o.service WHERE e.level = 'error' GROUP BY ALL",
    ordered: false,
  },
];

describe('tables without a timestamp', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  const workerQueue = `dimension-${randomUUID()}`;
  const ingest = async (table: string, rows: object[], query = '?noTimestamp=true') => {
    const response = await fetch(`${cluster.coordinator.url}/v1/tables/${table}/rows${query}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/x-ndjson' },
      body: rows.map((r) => JSON.stringify(r)).join('\n') + '\n',
    });
    return { status: response.status, body: (await response.json()) as IngestResult & { message?: string } };
  };
  const expectAnswersAsDuckDB = async (when: string) => {
    const reference = await referenceFor(cluster, ['events', 'owners']);
    try {
      for (const q of QUERIES) {
        const { status, body } = await cluster.query(q.sql);
        expect(status, `${when}: ${q.sql}: ${body.message}`).toBe(200);
        const expected = await reference.run(q.sql);
        if (!('result' in expected)) throw new Error(`${q.sql}: ${expected.error}`);
        expectSameResult(body, expected.result, q.ordered, `${when}: ${q.sql}`);
      }
    } finally {
      reference.close();
    }
  };

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 1] });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
    await cluster.ingestEvents('events', 3, 400);
    for (const rows of OWNER_BATCHES) {
      const { status, body } = await ingest('owners', rows);
      expect(status, body.message).toBe(200);
    }
  });
  afterAll(async () => {
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  it('keeps a table without a timestamp column whose segments span all of time', async () => {
    const owners = (await cluster.meta.findTable('owners'))!;
    expect(owners.timestampColumn).toBeNull();
    expect(owners.columns.map((c) => c.name)).toEqual(['service', 'owner', 'tier', 'pager']);
    const segments = await cluster.meta.listSegments('owners');
    expect(segments).toHaveLength(OWNER_BATCHES.length);
    for (const s of segments) expect(s).toMatchObject(TIMELESS);
    // Shown without a time range, and no retention period applies to it.
    const details = (await (await fetch(`${cluster.coordinator.url}/v1/tables/owners`)).json()) as object;
    expect(details).toMatchObject({ timestampColumn: null, segments: 3, rows: 7, oldest: null, newest: null });
    const retention = await fetch(`${cluster.coordinator.url}/v1/tables/owners/retention`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ retentionMs: 86_400_000 }),
    });
    expect(retention.status).toBe(400);
    expect(((await retention.json()) as { message: string }).message).toMatch(/has no timestamp column/);
  });

  it('refuses a batch that disagrees with its table about the timestamp', async () => {
    const timed = await ingest('owners', [{ service: 'x', ts: '2026-11-01T00:00:00Z' }], '?timestampColumn=ts');
    expect(timed.status).toBe(400);
    expect(timed.body.message).toMatch(/table "owners" has no timestamp column, not "ts"/);
    const timeless = await ingest('events', [{ ts: '2026-11-01T00:00:00Z', service: 'x' }]);
    expect(timeless.status).toBe(400);
    expect(timeless.body.message).toMatch(/keeps its timestamps in "ts": it is not a table without one/);
    const both = await ingest('owners', [{ service: 'x' }], '?noTimestamp=true&timestampColumn=ts');
    expect(both.status).toBe(400);
    expect((await cluster.meta.listSegments('owners')).length).toBe(OWNER_BATCHES.length);
  });

  it('joins to a time-partitioned table exactly as one DuckDB answers, before and after a merge by count', async () => {
    await expectAnswersAsDuckDB('ingested');
    // A time range on the events prunes their segments, never the owners'.
    const { body } = await cluster.query(
      "SELECT count(*) FROM (SELECT * FROM events WHERE ts < TIMESTAMP '2026-11-01 01:00:00') e JOIN owners o USING (service)",
    );
    expect(body.stats.segments).toMatchObject({ total: 6, scanned: 4, pruned: 2 });

    const merged = await client.workflow.execute(tableMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(workerQueue),
      workflowId: `merge-owners-${randomUUID()}`,
      args: [{ table: 'owners', minInputs: 2 }],
    });
    expect(merged.partitions.map((p) => p.outcome)).toEqual(['merged']);
    const segments = await cluster.meta.listSegments('owners');
    expect(segments).toHaveLength(1);
    expect(segments[0]).toMatchObject({ ...TIMELESS, level: 1, rows: 7 });
    await expectAnswersAsDuckDB('merged');
  });
});
