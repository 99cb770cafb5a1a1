/**
 * Signals of cache affinity and warm-up, read where a user reads them: each node's Prometheus
 * counters of reads as a segment's owner and reads that fell to it, which add up to the scans made;
 * after a node joins, `berth nodes` shows its warm fraction rising to 100 % pass by pass of its
 * warmer, and after a node leaves, the warm-up of the share that moved to the others; the
 * coordinator's ingest-to-queryable histogram counts every batch.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Placement } from '../core/ownership.js';
import { QueryNodeClient, type Warmth } from '../services/query-node/client.js';
import { berth, cliDataDir } from './helpers/berth-cli.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';

/** Segments of the test table: enough that a departing node's share reaches the joined one. */
const SEGMENTS = 24;

interface NodeRow {
  id: string;
  alive: boolean;
  warmth?: Warmth;
}

/** A counter's value per label set from a Prometheus text page. */
function samples(page: string, name: string): { labels: string; value: number }[] {
  return page
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .map((line) => ({
      labels: line.slice(name.length, line.lastIndexOf(' ')),
      value: Number(line.slice(line.lastIndexOf(' ') + 1)),
    }));
}

describe('cache affinity and warm-up', () => {
  let cluster: TestCluster;
  let dataDir: string;
  const nodes = async () => JSON.parse((await berth('nodes', '--json', '--data-dir', dataDir)).stdout) as NodeRow[];
  /** One warmer pass, fetching at most `segments`; how many it fetched. */
  const warmOnce = (url: string, segments: number) => new QueryNodeClient(url, TOKEN).warm(segments);
  const metrics = async (url: string) => (await fetch(`${url}/metrics`)).text();

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2] });
    await cluster.ingestEvents('events', SEGMENTS, 100);
    dataDir = await cliDataDir(cluster.dir, { coordinator: cluster.coordinator.url }, TOKEN);
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('times every ingest batch from arrival to queryable', async () => {
    const page = await metrics(cluster.coordinator.url);
    expect(samples(page, 'berth_ingest_to_queryable_seconds_count')).toEqual([{ labels: '', value: SEGMENTS }]);
    expect(samples(page, 'berth_ingest_to_queryable_seconds_sum')[0]!.value).toBeGreaterThan(0);
  });

  it('shows a joining node’s warm fraction rising to 100 % as its warmer runs', { timeout: 120_000 }, async () => {
    // Its warmer runs when asked, one pass at a time, one segment a pass, not on a timer.
    const joined = await cluster.addNode({ vcpus: 2, warmIntervalMs: 3_600_000 });
    await cluster.awaitMembers(cluster.nodes.map((n) => n.id));
    await expect.poll(() => joined.view.members?.length, { timeout: 10_000 }).toBe(3);
    // The coordinator's answer behind `berth nodes --json`, read directly pass by pass.
    const row = async () =>
      ((await (await fetch(`${cluster.coordinator.url}/v1/nodes`)).json()) as { nodes: NodeRow[] }).nodes.find(
        (n) => n.id === joined.id,
      )!;
    expect((await nodes()).find((n) => n.id === joined.id)!.warmth).toEqual({}); // no pass yet: nothing surveyed

    const fractions: number[] = [];
    let passes = 0;
    for (;;) {
      const fetched = await warmOnce(joined.url, 1);
      passes++;
      const { warmth } = await row();
      fractions.push(warmth!.owned!.fraction);
      // A new node's whole share moved to it when it joined.
      expect(warmth!.moved).toMatchObject({ segments: warmth!.owned!.segments, bytes: warmth!.owned!.bytes });
      if (fetched === 0) break;
    }
    const owned = (await row()).warmth!.owned!;
    expect(owned.segments).toBeGreaterThan(1);
    expect(passes).toBe(owned.segments + 1); // one segment a pass, then a pass with nothing left
    expect(fractions.at(-1)).toBe(1);
    expect(fractions[0]).toBeLessThan(1);
    expect(fractions.every((f, i) => i === 0 || f >= fractions[i - 1]!)).toBe(true);
    expect((await berth('nodes', '--data-dir', dataDir)).stdout).toMatch(
      new RegExp(`${joined.id} .* 100\\.0% of [\\d.]+Ki +100\\.0% of [\\d.]+Ki since`),
    );
    const page = await metrics(joined.url);
    expect(samples(page, 'berth_owned_warm_fraction')).toEqual([{ labels: '', value: 1 }]);
    expect(samples(page, 'berth_moved_warm_fraction')).toEqual([{ labels: '', value: 1 }]);
  });

  it('after a node leaves, shows the warm-up of the share that moved to the others', { timeout: 120_000 }, async () => {
    const joined = cluster.nodes.at(-1)!;
    const segments = await cluster.meta.listSegments('events');
    const ownedBy = (placement: Placement, id: string) =>
      new Set(segments.filter((s) => placement.owner(s.id)?.id === id).map((s) => s.id));
    const before = ownedBy(joined.view.placement!, joined.id);
    // The original node whose departure moves the most to the joined one.
    const gainIfGone = (leaving: string) => {
      const rest = joined.view.members!.filter((m) => m.id !== leaving).map((m) => ({ id: m.id, weight: m.weight }));
      return [...ownedBy(new Placement(rest), joined.id)].filter((id) => !before.has(id));
    };
    const leaving = cluster.nodes.slice(0, 2).sort((a, b) => gainIfGone(b.id).length - gainIfGone(a.id).length)[0]!;
    const gained = gainIfGone(leaving.id);
    expect(gained.length).toBeGreaterThan(0);
    await leaving.close();
    cluster.nodes.splice(cluster.nodes.indexOf(leaving), 1);
    await expect.poll(() => joined.view.members?.length, { timeout: 10_000 }).toBe(2);

    // A pass that only surveys: the moved share is known, and cold.
    expect(await warmOnce(joined.url, 0)).toBe(0);
    const bytes = segments.filter((s) => gained.includes(s.id)).reduce((sum, s) => sum + s.bytes, 0);
    expect((await nodes()).find((n) => n.id === joined.id)!.warmth).toMatchObject({
      moved: { segments: gained.length, bytes, warmBytes: 0, fraction: 0 },
    });
    const fetched = await warmOnce(joined.url, 1_000);
    expect(fetched).toBe(gained.length);
    expect((await nodes()).find((n) => n.id === joined.id)!.warmth).toMatchObject({
      owned: { fraction: 1 },
      moved: { segments: gained.length, bytes, warmBytes: bytes, fraction: 1 },
    });
  });
  it(
    'counts reads as the owner and reads that fell to a node, adding up to the segments the scans read',
    { timeout: 60_000 },
    async () => {
      /** A node's reads so far as its segments' owner and as a stand-in for another owner. */
      const reads = async (url: string) => {
        const counts = Object.fromEntries(
          samples(await metrics(url), 'berth_segment_reads_total').map((s) => [s.labels, s.value]),
        );
        const sum = (role: string) =>
          (counts[`{role="${role}",cache="hit"}`] ?? 0) + (counts[`{role="${role}",cache="miss"}`] ?? 0);
        return { owner: sum('owner'), fallback: sum('fallback') };
      };
      const before = new Map(await Promise.all(cluster.nodes.map(async (n) => [n.id, await reads(n.url)] as const)));
      const read: Record<string, number> = {};
      for (const sql of [
        'SELECT count(*) FROM events',
        'SELECT service, count(*) FROM events GROUP BY service',
        'SELECT level, max(ts) FROM events GROUP BY level',
      ]) {
        const { body } = await cluster.query(sql);
        expect(body.stats.fallbacks).toBe(0);
        for (const [node, segments] of Object.entries(body.stats.nodes)) read[node] = (read[node] ?? 0) + segments;
      }
      // Scattered work reads only what each node owns.
      for (const node of cluster.nodes) {
        const now = await reads(node.url);
        expect(now.owner - before.get(node.id)!.owner).toBe(read[node.id] ?? 0);
        expect(now.fallback - before.get(node.id)!.fallback).toBe(0);
      }

      // A crashed owner (meta still lists it): its segments fall to the others, read as a non-owner's.
      const victim = cluster.nodes.reduce((a, b) => ((read[a.id] ?? 0) >= (read[b.id] ?? 0) ? a : b));
      const survivors = cluster.nodes.filter((n) => n !== victim);
      const counted = new Map(await Promise.all(survivors.map(async (n) => [n.id, await reads(n.url)] as const)));
      const segments = await cluster.meta.listSegments('events');
      const ownedBy = (node: typeof victim) =>
        segments.filter((s) => node.view.placement!.owner(s.id)?.id === node.id).length;
      const victimOwned = ownedBy(victim);
      await victim.close({ deregister: false });
      const after = (await cluster.query('SELECT count(*) FROM events')).body.stats;
      expect(after.fallbacks).toBe(victimOwned);
      let fellBack = 0;
      for (const node of survivors) {
        const now = await reads(node.url);
        const scanned = after.nodes[node.id] ?? 0;
        expect(now.owner - counted.get(node.id)!.owner).toBe(ownedBy(node));
        expect(now.owner + now.fallback - counted.get(node.id)!.owner - counted.get(node.id)!.fallback).toBe(scanned);
        fellBack += now.fallback - counted.get(node.id)!.fallback;
      }
      expect(fellBack).toBe(after.fallbacks);
    },
  );
});
