/**
 * Data nobody here wrote, ingested as a user would and answered through the whole path (NDJSON →
 * Parquet → the owners' caches → the Arrow exchange → JSON), before and after a merge: the
 * cases of issue 24, each the way it first went wrong.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EARLIEST_MS, LATEST_MS } from '../core/time-bounds.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { segmentMergeWorkflow } from '../workflows/index.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';

const rows = (...lines: object[]) => lines.map((line) => JSON.stringify(line)).join('\n') + '\n';

describe('values keep their types from the NDJSON line to the answer', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  const workerQueue = `types-${randomUUID()}`;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2] });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
  });
  afterAll(async () => {
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  async function answer(sql: string) {
    const { status, body } = await cluster.query(sql);
    expect(status, body.message).toBe(200);
    return { rows: body.rows, types: body.types };
  }

  async function ingest(table: string, ndjson: string) {
    const { status, body } = await cluster.ingest(table, ndjson);
    expect(status, body.message).toBe(200);
  }

  it('answers integers of both signs as BIGINT, before and after a merge', async () => {
    await ingest('signed', '{"ts":"2026-11-01 00:00:00","x":3}\n{"ts":"2026-11-01 00:00:00","x":-1}\n');
    await ingest('signed', rows({ ts: '2026-11-01 01:00:00', x: 5 }));
    const expected = { rows: [[-1], [3], [5]], types: ['BIGINT'] };
    expect(await answer('SELECT x FROM signed ORDER BY x')).toEqual(expected);
    expect(await answer('SELECT min(x), max(x), sum(x) FROM signed')).toEqual({
      rows: [[-1, 5, 7]],
      types: ['BIGINT', 'BIGINT', 'HUGEINT'],
    });

    const merged = await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(workerQueue),
      workflowId: `merge-signed-${randomUUID()}`,
      args: [{ table: 'signed', partition: '20261101' }],
    });
    expect(merged.outcome).toBe('merged');
    expect(await cluster.meta.listSegments('signed')).toHaveLength(1);
    expect(await answer('SELECT x FROM signed ORDER BY x')).toEqual(expected);
  });

  it('takes a UTC offset as the instant it names, in the answer, the manifest and every time filter', async () => {
    await ingest(
      'zoned',
      rows(
        { ts: '2026-11-01T05:30:00+05:30', seen: '2026-11-01T05:30:00+05:30' },
        { ts: '2026-11-01T01:00:00-05:00', seen: '2026-11-01T00:00:00Z' },
      ),
    );
    expect(await answer('SELECT ts, seen FROM zoned ORDER BY ts')).toEqual({
      rows: [
        ['2026-11-01 00:00:00', '2026-11-01 00:00:00'],
        ['2026-11-01 06:00:00', '2026-11-01 00:00:00'],
      ],
      types: ['TIMESTAMP', 'TIMESTAMP'],
    });
    const [segment] = await cluster.meta.listSegments('zoned');
    expect([segment!.minTs, segment!.maxTs]).toEqual([Date.UTC(2026, 10, 1, 0), Date.UTC(2026, 10, 1, 6)]);
    // The hour before 01:00 UTC holds one row; the wall-clock reading would have put none there.
    expect((await answer("SELECT count(*) FROM zoned WHERE ts < '2026-11-01 01:00:00'")).rows).toEqual([[1]]);
    expect((await answer("SELECT count(*) FROM zoned WHERE ts >= '2026-11-01 05:00:00'")).rows).toEqual([[1]]);
    expect((await answer("SELECT count(*) FROM zoned WHERE seen = TIMESTAMP '2026-11-01 00:00:00'")).rows).toEqual([
      [2],
    ]);
  });

  it('keeps infinite timestamps in the manifest at either end, so no time filter prunes them', async () => {
    await ingest(
      'endless',
      rows({ ts: 'infinity', n: 1 }, { ts: '-infinity', n: 2 }, { ts: '2026-11-01T00:00:00Z', n: 3 }),
    );
    const [segment] = await cluster.meta.listSegments('endless');
    expect([segment!.minTs, segment!.maxTs]).toEqual([EARLIEST_MS, LATEST_MS]);
    expect(segment!.id).toMatch(/-00000101-/);
    const count = async (where: string) => (await answer(`SELECT count(*) FROM endless WHERE ${where}`)).rows;
    expect(await count("ts > '2026-01-01'")).toEqual([[2]]);
    expect(await count("ts < '2000-01-01'")).toEqual([[1]]);
    expect(await count("ts < 'infinity'")).toEqual([[2]]);
    expect(await count("ts = '-infinity'")).toEqual([[1]]);
    expect((await answer('SELECT ts, n FROM endless ORDER BY ts')).rows).toEqual([
      ['-infinity', 2],
      ['2026-11-01 00:00:00', 3],
      ['infinity', 1],
    ]);
  });

  it('answers every digit of 2^63 and 2^100, nested as at top level', async () => {
    await ingest(
      'wide',
      '{"ts":"2026-11-01T00:00:00Z","u":9223372036854775808,"d":1267650600228229401496703205376,"o":{"id":-1},"l":[-1,2]}\n' +
        '{"ts":"2026-11-01T00:00:00Z","u":0,"d":-1,"o":{"id":2},"l":[]}\n',
    );
    expect(await answer('SELECT u, d, o, l FROM wide ORDER BY u')).toEqual({
      rows: [
        [0, -1, { id: 2 }, []],
        ['9223372036854775808', '1267650600228229401496703205376', { id: -1 }, [-1, 2]],
      ],
      types: ['UBIGINT', 'DECIMAL(38,0)', 'STRUCT("id" BIGINT)', 'BIGINT[]'],
    });
  });

  it('refuses what no exact type holds, naming the field, and commits nothing of it', async () => {
    const refused = await cluster.ingest(
      'refused',
      '{"ts":"2026-11-01T00:00:00Z","x":1}\n{"ts":"2026-11-01T00:00:00Z","x":123456789012345678901234567890123456789}\n',
    );
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/field "x": 123456789012345678901234567890123456789 has more than 38 digits/);
    expect(await cluster.meta.findTable('refused')).toBeUndefined();

    await ingest('later', rows({ ts: '2026-11-01T00:00:00Z', x: 1 }));
    const late = await cluster.ingest('later', '{"ts":"2026-11-01T00:00:00Z","x":9223372036854775808}\n');
    expect(late.status).toBe(400);
    expect(late.body.message).toMatch(/line 1: field "x": 9223372036854775808 is out of BIGINT's range/);
    const epoch = await cluster.ingest('later', rows({ ts: 1730419200000, x: 2 }));
    expect(epoch.status).toBe(400);
    expect(epoch.body.message).toMatch(/field "ts": expected TIMESTAMP as an ISO 8601 string/);
    const twin = await cluster.ingest('later', rows({ ts: '2026-11-01T00:00:00Z', X: 2 }));
    expect(twin.body.message).toMatch(/field "X" differs from the table's column "x" only in case/);
    expect(await cluster.meta.listSegments('later')).toHaveLength(1);
  });
});
