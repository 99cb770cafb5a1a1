/**
 * kill -9 of the coordinator during a bulk stream (issue 30, item 3): the official Elasticsearch
 * client's bulk helper streams documents to a coordinator process, which is killed mid-stream, the
 * moment it has committed a request whose answer is then lost, with the next request in flight;
 * it is started again behind the same address. Every document the helper was told is committed is
 * there exactly once, and nothing else is: the batch committed but never acknowledged, sent again,
 * commits nothing twice; one cut short is not half there.
 */
import { Client } from '@elastic/elasticsearch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  spawnCoordinatorProcess,
  startCluster,
  TOKEN,
  type CoordinatorProcess,
  type TestCluster,
} from './helpers/cluster.js';
import { startLossyProxy, type LossyProxy } from './helpers/lossy-proxy.js';

const DOCUMENTS = 30_000;
const START_MS = Date.parse('2026-11-01T00:00:00Z');

describe('a coordinator killed during a bulk stream', () => {
  let cluster: TestCluster;
  let proxy: LossyProxy;
  const coordinators: CoordinatorProcess[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    coordinators.push(await spawnCoordinatorProcess(cluster));
    // The 20th bulk request's answer is lost, and the coordinator that committed it is killed at that moment.
    proxy = await startLossyProxy(
      coordinators[0]!.url,
      (line, n) => line.startsWith('POST /_bulk') && n === 20,
      () => (crashed = crash()),
    );
  });
  let crashed: Promise<void> | undefined;
  const crash = async () => {
    await coordinators[0]!.stop(); // SIGKILL
    proxy.target = undefined;
    const restarted = await spawnCoordinatorProcess(cluster);
    coordinators.push(restarted);
    proxy.target = restarted.url;
  };
  afterAll(async () => {
    await proxy?.close();
    for (const coordinator of coordinators) await coordinator.stop();
    await cluster?.close();
  });

  it('keeps every acknowledged row exactly once, and no row it did not acknowledge', { timeout: 240_000 }, async () => {
    // Retries enough to outlast a coordinator's restart; the proxy refuses connections meanwhile.
    const client = new Client({ node: proxy.url, auth: { bearer: TOKEN }, maxRetries: 60, requestTimeout: 60_000 });
    const acknowledged = new Set<number>();
    async function* documents() {
      for (let seq = 0; seq < DOCUMENTS; seq++)
        yield {
          '@timestamp': new Date(START_MS + seq * 1000).toISOString(),
          seq,
          service: ['checkout', 'search', 'auth'][seq % 3]!,
          message: `request ${seq}`,
        };
    }
    try {
      const stats = await client.helpers.bulk({
        datasource: documents(),
        onDocument: () => ({ create: { _index: 'stream' } }),
        flushBytes: 50_000,
        concurrency: 2,
        retries: 20,
        wait: 200,
        onSuccess: ({ document }) => acknowledged.add((document as { seq: number }).seq),
      });
      await crashed;
      expect(proxy.lost).toBe(1);
      expect(coordinators).toHaveLength(2);
      expect(stats.failed).toBe(0);
      expect(stats.successful).toBe(DOCUMENTS);
    } finally {
      await client.close();
    }
    expect(acknowledged.size).toBe(DOCUMENTS);

    // The crash cut requests in flight: the client sent them again.
    const segments = await cluster.meta.listSegments('stream');
    const bulkRequests = proxy.requests.filter((line) => line.startsWith('POST /_bulk')).length;
    expect(bulkRequests).toBeGreaterThan(segments.length);
    // Each acknowledged row once, no other row, and the manifest agrees with the rows.
    const { status, body } = await cluster.query(
      'SELECT count(*) AS n, count(DISTINCT seq) AS seqs, min(seq) AS first, max(seq) AS last FROM stream',
    );
    expect(status, body.message).toBe(200);
    expect(body.rows).toEqual([[DOCUMENTS, DOCUMENTS, 0, DOCUMENTS - 1]]);
    expect(segments.reduce((sum, s) => sum + s.rows, 0)).toBe(DOCUMENTS);
  });
});
