/**
 * Ingest's outbound calls are bounded: a frozen owner costs a batch at most the push timeout (the
 * push is best effort, the commit goes ahead), and a frozen SeaweedFS (SIGSTOP: connections are
 * accepted, nothing answers) is a 503 naming S3 within the S3 timeout, with nothing committed; so
 * is an S3 that is down. The coordinator runs as its own process, configured by its environment
 * as in production.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startS3Server, type S3Server } from '../cli/embedded/s3-server.js';
import type { IngestResult } from '../services/coordinator/ingest/ingest.js';
import {
  spawnCoordinatorProcess,
  spawnNodeProcess,
  startCluster,
  TOKEN,
  type NodeProcess,
  type TestCluster,
} from './helpers/cluster.js';
import { signalGroup } from './helpers/process-groups.js';

/**
 * POSTs NDJSON rows to `url`; gives up after `limitMs` (so that a hang fails the test with a
 * message rather than its timeout) and says how long the answer took.
 */
async function ingest(
  url: string,
  table: string,
  ndjson: string,
  limitMs = 45_000,
): Promise<{ status: number; body: IngestResult & { error?: string; message?: string }; ms: number }> {
  const started = Date.now();
  const response = await fetch(`${url}/v1/tables/${table}/rows`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${TOKEN}` },
    body: ndjson,
    signal: AbortSignal.timeout(limitMs),
  }).catch((error: Error) => {
    throw new Error(`ingest got no answer within ${limitMs} ms`, { cause: error });
  });
  const body = (await response.json()) as IngestResult & { error?: string; message?: string };
  return { status: response.status, body, ms: Date.now() - started };
}

const rows = (from: number, count: number) =>
  Array.from(
    { length: count },
    (_, i) => `${JSON.stringify({ ts: `2026-11-01T00:00:${String(i % 60).padStart(2, '0')}Z`, n: from + i })}\n`,
  ).join('');

/** Resolves once the coordinator at `url` lists exactly these members. */
async function awaitCoordinatorMembers(url: string, ids: string[]): Promise<void> {
  const want = [...ids].sort().join(',');
  for (;;) {
    const { nodes } = (await (await fetch(`${url}/v1/nodes`)).json()) as { nodes: { id: string; share: number }[] };
    const members = nodes
      .filter((n) => n.share > 0)
      .map((n) => n.id)
      .sort()
      .join(',');
    if (members === want) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('an owner frozen by SIGSTOP', () => {
  const PUSH_TIMEOUT_MS = 500;
  let cluster: TestCluster;
  let owner: NodeProcess | undefined;
  let coordinator: Awaited<ReturnType<typeof spawnCoordinatorProcess>> | undefined;

  beforeAll(async () => {
    // No node in this process: the node process owns every segment.
    cluster = await startCluster({ vcpus: [] });
    owner = await spawnNodeProcess(cluster);
    coordinator = await spawnCoordinatorProcess(cluster, { BERTH_PUSH_TIMEOUT_MS: String(PUSH_TIMEOUT_MS) });
    await awaitCoordinatorMembers(coordinator.url, [owner.id]);
  });
  afterAll(async () => {
    await coordinator?.stop();
    await owner?.stop();
    await cluster?.close();
  });

  it('delays an ingest commit by at most the push timeout: the batch commits, its push timed out', async () => {
    const warm = await ingest(coordinator!.url, 'frozen_owner', rows(0, 50));
    expect(warm.status, warm.body.message).toBe(200);
    expect(warm.body.push).toEqual({ owner: owner!.id, accepted: true });

    signalGroup(owner!.child, 'SIGSTOP');
    try {
      const frozen = await ingest(coordinator!.url, 'frozen_owner', rows(50, 50));
      expect(frozen.status, frozen.body.message).toBe(200);
      expect(frozen.body.push).toMatchObject({
        owner: owner!.id,
        accepted: false,
        reason: expect.stringMatching(new RegExp(`no answer within ${PUSH_TIMEOUT_MS} ms`)),
      });
      // Generous against a loaded machine, far below the minute an unbounded push waited.
      expect(frozen.ms).toBeLessThan(20_000);
      const committed = await cluster.meta.listSegments('frozen_owner');
      expect(committed.map((s) => s.id).sort()).toEqual([warm.body.segment.id, frozen.body.segment.id].sort());
      expect(committed.reduce((sum, s) => sum + s.rows, 0)).toBe(100);
    } finally {
      signalGroup(owner!.child, 'SIGCONT');
    }
  });
});

describe('a SeaweedFS frozen by SIGSTOP', () => {
  const S3_TIMEOUT_MS = 1_500;
  const BUCKET = 'frozen';
  let dir: string;
  let cluster: TestCluster;
  let weed: S3Server | undefined;
  let coordinator: Awaited<ReturnType<typeof spawnCoordinatorProcess>> | undefined;
  const freeze = (signal: 'SIGSTOP' | 'SIGCONT') => process.kill(-weed!.pid, signal);

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [] });
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-frozen-s3-'));
    // A SeaweedFS of this file's own: the run's shared one must never stop.
    weed = await startS3Server({
      directory: path.join(dir, 'data'),
      identitiesFile: path.join(dir, 'identities.json'),
      buckets: [BUCKET],
    });
    coordinator = await spawnCoordinatorProcess(cluster, {
      BERTH_S3_ENDPOINT: weed.endpoint,
      BERTH_S3_ACCESS_KEY_ID: weed.credentials.accessKeyId,
      BERTH_S3_SECRET_ACCESS_KEY: weed.credentials.secretAccessKey,
      BERTH_S3_BUCKET: BUCKET,
      BERTH_S3_TIMEOUT_MS: String(S3_TIMEOUT_MS),
    });
  });
  afterAll(async () => {
    if (weed) freeze('SIGCONT');
    await coordinator?.stop();
    await weed?.stop();
    await cluster?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('makes ingest answer 503 naming S3 within the S3 timeout, commits nothing, and recovers with it', async () => {
    const table = 'frozen_s3';
    expect((await ingest(coordinator!.url, table, rows(0, 50))).status).toBe(200);
    freeze('SIGSTOP');
    const { status, body, ms } = await ingest(coordinator!.url, table, rows(50, 50));
    freeze('SIGCONT');
    expect(status, body.message).toBe(503);
    expect(body.error).toBe('s3_unavailable');
    expect(body.message).toMatch(/^S3 /);
    expect(body.message).toContain(`${S3_TIMEOUT_MS} ms`);
    // In Berth's words: no scratch path, no SDK wording.
    expect(body.message).not.toMatch(/\/|\.ndjson|\.parquet|smithy|node-http-handler/);
    // Generous against a loaded machine; an unbounded put never answers at all.
    expect(ms).toBeLessThan(20_000);
    expect((await cluster.meta.listSegments(table)).map((s) => s.rows)).toEqual([50]);

    // Thawed, the same batch sent again commits.
    expect((await ingest(coordinator!.url, table, rows(50, 50))).status).toBe(200);
    expect((await cluster.meta.listSegments(table)).map((s) => s.rows)).toEqual([50, 50]);
  });
});

describe('an S3 that is down', () => {
  let cluster: TestCluster;
  let coordinator: Awaited<ReturnType<typeof spawnCoordinatorProcess>> | undefined;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [1] });
    // A port that was free a moment ago: nothing listens there.
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as net.AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    coordinator = await spawnCoordinatorProcess(cluster, { BERTH_S3_ENDPOINT: `http://127.0.0.1:${port}` });
  });
  afterAll(async () => {
    await coordinator?.stop();
    await cluster?.close();
  });

  it('makes ingest answer 503 naming S3 as unreachable, never a 500, and commits nothing', async () => {
    const { status, body, ms } = await ingest(coordinator!.url, 's3_down', rows(0, 50));
    expect(status, body.message).toBe(503);
    expect(body).toEqual({
      error: 's3_unavailable',
      message: 'S3 is unreachable (ECONNREFUSED); the batch is not committed: send it again',
    });
    expect(ms).toBeLessThan(20_000);
    expect(await cluster.meta.listSegments('s3_down')).toEqual([]);
  });

  it('is not ready, and its /readyz says S3 is down', async () => {
    const response = await fetch(`${coordinator!.url}/readyz`);
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({
      ready: false,
      down: { s3: expect.stringMatching(/ECONNREFUSED|connect/) },
    });
    expect((await fetch(`${cluster.coordinator.url}/readyz`)).status, 'with S3 up').toBe(200);
  });
});
