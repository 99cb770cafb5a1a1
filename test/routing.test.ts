/** Routing and membership through real services: failover, round-robin start, restarts, the warmer. */
import { afterEach, describe, expect, it } from 'vitest';
import { MemberView } from '../services/common/member-view.js';
import { MetaClient } from '../services/meta/client.js';
import { Scatter } from '../services/coordinator/execution/scatter.js';
import { QueryNodeClient } from '../services/query-node/client.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';

async function query(cluster: TestCluster, sql: string) {
  return (await cluster.query(sql)).body;
}

/** The node that scanned the most segments in a query's stats. */
function busiest(cluster: TestCluster, scanned: Record<string, number>) {
  return cluster.nodes.reduce((best, n) => ((scanned[n.id] ?? 0) > (scanned[best.id] ?? 0) ? n : best));
}

describe('routing and membership', () => {
  let cluster: TestCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it('routes a stopped owner’s segments to the next node in their ranking, and still answers', async () => {
    cluster = await startCluster({ vcpus: [2, 2, 2] });
    await cluster.ingestEvents('events', 9, 1_000);
    const before = await query(cluster, 'SELECT count(*), sum(bytes) FROM events');
    // Ownership is random per segment, so stop the node that scanned the most, never a fixed index.
    const victim = busiest(cluster, before.stats.nodes);
    const owned = before.stats.nodes[victim.id] ?? 0;
    expect(owned).toBeGreaterThan(0);
    await victim.close({ deregister: false }); // a crash: meta still lists it until its heartbeats expire
    const after = await query(cluster, 'SELECT count(*), sum(bytes) FROM events');
    expect(after.rows).toEqual(before.rows);
    expect(after.stats.fallbacks).toBe(owned);
    expect(after.stats.nodes[victim.id]).toBeUndefined();
    const placement = cluster.coordinator.view.placement!;
    const victims = new Set<string>();
    for (const segment of await cluster.meta.listSegments('events')) {
      const [first, second] = placement.rank(segment.id);
      if (first!.id === victim.id) {
        victims.add(segment.id);
        expect(after.stats.nodes[second!.id]).toBeGreaterThan(0);
      }
    }
    // The standbys read the stopped owner's segments through, without caching them: their caches stay their own.
    expect(after.stats.s3Gets).toBe(owned);
    for (const node of cluster.nodes.filter((n) => n !== victim))
      expect(node.cache.ids().filter((id) => victims.has(id))).toEqual([]);
    expect((await query(cluster, 'SELECT count(*), sum(bytes) FROM events')).stats.s3Gets).toBe(owned);
  });

  it('spreads work round-robin over its seed nodes before any member list has arrived', async () => {
    cluster = await startCluster({ vcpus: [2, 2] });
    await cluster.ingestEvents('events', 6, 1_000);
    const view = new MemberView({ meta: new MetaClient(cluster.metaUrl, TOKEN), group: 'serving' }); // never polled
    const scatter = new Scatter({ view, seedNodes: cluster.nodes.map((n) => n.url), token: TOKEN });
    const table = (await cluster.meta.findTable('events'))!;
    const segments = await cluster.meta.listSegments('events');
    // A sink that only reads the streams through: this test is about where the work goes.
    const drain = {
      receive: async (body: AsyncIterable<unknown>) => {
        for await (const _ of body); // eslint-disable-line @typescript-eslint/no-unused-vars
        return { part: 'drained', rows: 0 };
      },
      discard: async () => {},
    };
    const outcome = await scatter.toOwners({ sql: 'SELECT count(*) AS n FROM events', table, segments }, drain);
    expect(outcome.placement).toBe('round-robin');
    expect(outcome.scans.map((s) => s.segments).sort()).toEqual([3, 3]);
  });

  it('keeps a restarted node’s id and warm cache when it comes back on the same cache dir', async () => {
    cluster = await startCluster({ vcpus: [2, 2] });
    await cluster.ingestEvents('events', 6, 1_000);
    const first = await query(cluster, 'SELECT count(*) FROM events');
    const node = busiest(cluster, first.stats.nodes);
    const cached = node.cache.ids().sort();
    expect(cached.length).toBeGreaterThan(0);
    await node.close();
    cluster.nodes.splice(cluster.nodes.indexOf(node), 1);
    const again = await cluster.addNode({ cacheDir: node.cacheDir, vcpus: 2 });
    expect(again.id).toBe(node.id);
    expect(again.cache.ids().sort()).toEqual(cached);
    await cluster.awaitMembers(cluster.nodes.map((n) => n.id));
    const result = await query(cluster, 'SELECT count(*) FROM events');
    expect(result.stats.s3Gets).toBe(0);
    expect(result.stats.nodes[again.id]).toBe(cached.length);
    // A fresh cache dir is a new node.
    const fresh = await cluster.addNode({ vcpus: 2 });
    expect(fresh.id).not.toBe(node.id);
  });

  it('warms only the segments a node owns, newest first, within its budget', async () => {
    cluster = await startCluster({ vcpus: [2, 2] });
    // 16 segments: the new node (half the weight) owns none of them with odds of 1 in 65,536.
    await cluster.ingestEvents('events', 16, 1_000);
    const segments = await cluster.meta.listSegments('events'); // newest first
    const node = await cluster.addNode({ vcpus: 4, cacheBytes: 3 * Math.max(...segments.map((s) => s.bytes)) });
    await cluster.awaitMembers(cluster.nodes.map((n) => n.id));
    await node.view.refresh();
    await new QueryNodeClient(node.url, TOKEN).warm();
    const owned = segments.filter((s) => node.view.placement!.owner(s.id)!.id === node.id);
    const warmed = node.cache.ids();
    expect(warmed.length).toBeGreaterThan(0);
    expect(warmed.every((id) => owned.some((s) => s.id === id))).toBe(true);
    // Newest first: what it warmed is a prefix of its owned segments in newest-first order.
    expect(
      owned
        .slice(0, warmed.length)
        .map((s) => s.id)
        .sort(),
    ).toEqual([...warmed].sort());
    expect(node.cache.usedBytes).toBeLessThanOrEqual(node.cache.budgetBytes);
    const metrics = await (await fetch(`${node.url}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`berth_s3_gets_total ${warmed.length}`));
  });
});
