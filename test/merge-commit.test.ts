/**
 * The merge's commit against a real meta service: which of meta's refusals is a lost race (an
 * answer the workflow returns), and which is a bug that must fail the merge loudly and for good.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { ApplicationFailure } from '@temporalio/common';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMergeActivities } from '../activities/merge.js';
import { createS3Client } from '../services/common/s3-client.js';
import { buildMetaApp } from '../services/meta/app.js';
import { MetaClient, type Segment } from '../services/meta/client.js';
import { openMetaStore } from '../services/meta/open-store.js';
import { LEASE_LOST, LOST_MERGE_RACE, MERGE_REFUSED } from '../workflows/contracts/segment-merge.js';

const TOKEN = 'merge-commit-test-token-0123456789';
const DAY = Date.UTC(2026, 10, 30);
const segment = (id: string, rows = 10, level = 0): Segment => ({
  id,
  table: 'events',
  minTs: DAY,
  maxTs: DAY + 1_000,
  rows,
  bytes: rows * 100,
  level,
});

describe('committing a merge', () => {
  let dir: string;
  let app: FastifyInstance;
  let meta: MetaClient;
  let duckdb: DuckDBInstance;
  let activities: ReturnType<typeof createMergeActivities>;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-merge-commit-'));
    const store = await openMetaStore({ database: path.join(dir, 'meta.sqlite') });
    app = buildMetaApp({ store, token: TOKEN, logger: false });
    app.addHook('onClose', async () => store.close());
    meta = new MetaClient(await app.listen({ host: '127.0.0.1', port: 0 }), TOKEN);
    duckdb = await DuckDBInstance.create(':memory:');
    activities = createMergeActivities({
      s3: createS3Client({}),
      bucket: 'unused',
      meta,
      token: TOKEN,
      duckdb,
      workDir: dir,
    });
    await meta.ensureTable({ name: 'events', timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] });
    for (const id of ['a', 'b', 'c', 'd']) await meta.commitSegment(segment(id));
  });
  afterAll(async () => {
    duckdb?.closeSync();
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** The failure commitMerge ends with. */
  const failureOf = (inputs: string[], merged: Segment, fence?: { lease: string; token: number }) =>
    activities.commitMerge({ inputs, merged, fence }).then(
      () => expect.unreachable('the commit succeeded'),
      (error: unknown) => error as ApplicationFailure,
    );

  it('treats inputs another merge already retired as a lost race, never retried', async () => {
    await activities.commitMerge({ inputs: ['a', 'b'], merged: segment('events-l1-first', 20, 1) });
    const failure = await failureOf(['a', 'b'], segment('events-l1-second', 20, 1));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({
      type: LOST_MERGE_RACE,
      nonRetryable: true,
      message: expect.stringContaining('already retired'),
    });
  });

  it('fails loudly, never retried, when the merged id is already committed with other contents: the merge is not deterministic', async () => {
    // The merged id of c and d's merge already holds 20 rows; this run of the same merge made 19.
    await meta.commitSegment(segment('events-l1-cd', 20, 1));
    const failure = await failureOf(['c', 'd'], segment('events-l1-cd', 19, 1));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: MERGE_REFUSED, nonRetryable: true });
    expect(failure.message).toMatch(/events-l1-cd is already committed with different contents.*not deterministic/);
    // Nothing was swapped: the inputs are still active.
    expect((await meta.listSegments('events')).map((s) => s.id).sort()).toEqual([
      'c',
      'd',
      'events-l1-cd',
      'events-l1-first',
    ]);
  });

  it('reports a fenced-off swap as a lost lease, and commits a swap it already made once more without complaint', async () => {
    const { lease } = await meta.acquireLease('merge:events', 'holder-a', 60_000);
    const failure = await failureOf(['c', 'd'], segment('events-l1-cd2', 20, 1), {
      lease: 'merge:events',
      token: lease.token + 1,
    });
    expect(failure).toMatchObject({ type: LEASE_LOST, nonRetryable: true });
    await activities.commitMerge({ inputs: ['a', 'b'], merged: segment('events-l1-first', 20, 1) });
  });
});
