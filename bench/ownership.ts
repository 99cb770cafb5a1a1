/**
 * bench/ownership: Berth's weighted rendezvous ownership against the `hashring` package (a
 * weighted ketama ring), measured side by side in one run:
 *   - owner lookups per second at 8, 16 and 128 nodes over 1M segment ids (best of 3 rounds each,
 *     rounds interleaved so both meet the same machine noise): computed lookups (no memo), and
 *     lookups a Placement remembers from an earlier pass in the same membership epoch;
 *   - planning: the coordinator's Scatter grouping 100,000 segments by owner over 128 nodes, warm
 *     (an earlier query in the epoch placed them), cold (the first query after a membership
 *     change) and with the memo off, against grouping by `hashring.get`;
 *   - balance: the most loaded node's share over its weight's share (1.000 is perfect);
 *   - segments moved on add, remove and reweight, and how many of them moved between nodes that
 *     the change did not touch (the minimum is 0).
 * Run: npm run bench:ownership [-- --segments N]; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
 */
import HashRing from 'hashring';
import { Placement, type WeightedNode } from '../core/ownership.js';
import { MemberView } from '../services/common/member-view.js';
import { Scatter } from '../services/coordinator/execution/scatter.js';
import type { Member, MetaClient } from '../services/meta/client.js';
import { sized } from './smoke.js';
import { median } from './stats.js';

const SEGMENTS = Number(process.argv[process.argv.indexOf('--segments') + 1]) || sized(1_000_000, 2_000);
const ROUNDS = sized(3, 1);
/** Segments the planning section groups, and its rounds. */
const PLANNED = sized(100_000, 2_000);
const PLANNING_ROUNDS = sized(7, 2);

interface Router {
  name: string;
  owner(segmentId: string): string;
}

const berth = (nodes: WeightedNode[]): Router => {
  const placement = new Placement(nodes);
  return { name: 'berth', owner: (id) => placement.owner(id)!.id };
};
/** A Placement that remembers owners, as a member view's does, primed by one pass over the ids. */
const berthRemembered = (nodes: WeightedNode[]): Router => {
  const placement = new Placement(nodes, { memoEntries: 2 * SEGMENTS });
  for (const id of ids) placement.owner(id);
  return { name: 'berth, remembered', owner: (id) => placement.owner(id)!.id };
};
const hashring = (nodes: WeightedNode[]): Router => {
  const ring = new HashRing(Object.fromEntries(nodes.map((n) => [n.id, { weight: n.weight }])));
  return { name: 'hashring', owner: (id) => ring.get(id)! };
};
const ROUTERS = [berth, hashring];

const ids = Array.from({ length: SEGMENTS }, (_, i) => `events/p${i % 720}/seg-${i.toString(36).padStart(6, '0')}`);
const cluster = (n: number, weight: (i: number) => number = () => 16): WeightedNode[] =>
  Array.from({ length: n }, (_, i) => ({ id: `node-${String(i).padStart(3, '0')}`, weight: weight(i) }));

function lookupsPerSecond(router: Router): number {
  let sink = 0;
  const start = process.hrtime.bigint();
  for (const id of ids) sink += router.owner(id).length;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (sink === 0) throw new Error('unreachable: keeps the loop from being optimised away');
  return ids.length / seconds;
}

function owners(router: Router): string[] {
  return ids.map((id) => router.owner(id));
}

function balance(nodes: WeightedNode[], assigned: string[]): number {
  const total = nodes.reduce((sum, n) => sum + n.weight, 0);
  const counts = new Map<string, number>();
  for (const o of assigned) counts.set(o, (counts.get(o) ?? 0) + 1);
  return Math.max(...nodes.map((n) => (counts.get(n.id) ?? 0) / assigned.length / (n.weight / total)));
}

/** Fraction of segments that changed owner, and the fraction that moved between untouched nodes. */
function movement(before: string[], after: string[], touched: string): { moved: number; between: number } {
  let moved = 0;
  let between = 0;
  for (let i = 0; i < before.length; i++) {
    if (before[i] === after[i]) continue;
    moved++;
    if (before[i] !== touched && after[i] !== touched) between++;
  }
  return { moved: moved / before.length, between: between / before.length };
}

const fmt = (x: number, digits = 3) => x.toFixed(digits);
const pct = (x: number) => `${(x * 100).toFixed(2)} %`;

console.log(`# bench/ownership — ${SEGMENTS.toLocaleString('en-US')} segment ids, Node ${process.version}\n`);
const rate = (x: number) => Math.round(x).toLocaleString('en-US');
console.log(`## Owner lookups (best of ${ROUNDS} interleaved rounds)\n`);
console.log(
  '| nodes | berth lookups/s (computed) | hashring lookups/s | computed / hashring | berth lookups/s (remembered in the epoch) | remembered / hashring |',
);
console.log('|---:|---:|---:|---:|---:|---:|');
for (const n of [8, 16, 128]) {
  const nodes = cluster(n);
  const routers = [berth(nodes), hashring(nodes), berthRemembered(nodes)];
  const best = routers.map(() => 0);
  for (let round = 0; round < ROUNDS; round++) {
    routers.forEach((router, i) => (best[i] = Math.max(best[i]!, lookupsPerSecond(router))));
  }
  const [computed, ring, remembered] = best as [number, number, number];
  console.log(
    `| ${n} | ${rate(computed)} | ${rate(ring)} | **${fmt(computed / ring, 2)}x** | ${rate(remembered)} | ${fmt(remembered / ring, 2)}x |`,
  );
}

console.log(
  `\n## Planning: ${PLANNED.toLocaleString('en-US')} segments grouped by owner over 128 nodes (median of ${PLANNING_ROUNDS} interleaved rounds)\n`,
);
{
  const members: Member[] = cluster(128).map((n) => ({
    ...n,
    url: `http://127.0.0.1:${20_000 + Number(n.id.slice(5))}`,
  }));
  const viewOf = async (list: Member[], memoEntries?: number) => {
    const view = new MemberView({
      meta: { membersChanged: async () => ({ members: list, etag: undefined }) } as unknown as MetaClient,
      group: 'serving',
      memoEntries,
    });
    await view.refresh();
    return view;
  };
  const scatterOf = (view: MemberView) => new Scatter({ view, seedNodes: [], token: 'bench' });
  const segmentIds = Array.from(
    { length: PLANNED },
    (_, i) =>
      `events-l0-2026${String(1 + (i % 12)).padStart(2, '0')}01-${(i * 2654435761).toString(16).padStart(20, '0').slice(-20)}`,
  );
  // Each query's segment rows arrive as fresh JSON from meta: fresh strings, as in production.
  const rows = () => JSON.parse(JSON.stringify(segmentIds.map((id) => ({ id })))) as { id: string }[];
  const time = (plan: (segments: { id: string }[]) => unknown): number => {
    const segments = rows();
    const start = process.hrtime.bigint();
    plan(segments);
    return Number(process.hrtime.bigint() - start) / 1e6;
  };
  const view = await viewOf(members);
  const memoOff = scatterOf(await viewOf(members, 0));
  const warm = scatterOf(view);
  warm.plan(rows()); // an earlier query of the epoch
  const ring = new HashRing(Object.fromEntries(members.map((n) => [n.id, { weight: n.weight }])));
  const byId = new Map(members.map((m) => [m.id, m]));
  const ringPlan = (segments: { id: string }[]) => {
    const groups = new Map<string, string[]>();
    for (const { id } of segments) {
      const node = byId.get(ring.get(id)!)!;
      const group = groups.get(node.id) ?? [];
      group.push(id);
      groups.set(node.id, group);
    }
    return groups;
  };
  // The floor: one map lookup per segment, and nothing else.
  const floorMap = new Map(segmentIds.map((id, i) => [id, i]));
  const floorPlan = (segments: { id: string }[]) => {
    let sum = 0;
    for (const { id } of segments) sum += floorMap.get(id)!;
    return sum;
  };
  const runs = {
    warm: [] as number[],
    cold: [] as number[],
    off: [] as number[],
    ring: [] as number[],
    floor: [] as number[],
  };
  for (let round = 0; round < PLANNING_ROUNDS; round++) {
    runs.warm.push(time((s) => warm.plan(s)));
    // A membership change (one node's weight) starts a new epoch: its first query computes every owner.
    const changed = members.map((m, i) => (i === round ? { ...m, weight: m.weight + 1 } : m));
    const cold = scatterOf(await viewOf(changed));
    runs.cold.push(time((s) => cold.plan(s)));
    runs.off.push(time((s) => memoOff.plan(s)));
    runs.ring.push(time(ringPlan));
    runs.floor.push(time(floorPlan));
  }
  const ms = (xs: number[]) => median(xs).toFixed(1);
  const vs = (xs: number[]) => `${fmt(median(xs) / median(runs.ring), 2)}x`;
  console.log('| planning | median ms | vs grouping by hashring |');
  console.log('|---|---:|---:|');
  console.log(`| grouping by \`hashring.get\` (baseline) | ${ms(runs.ring)} | 1.00x |`);
  console.log(`| Berth, warm: owners remembered for the epoch | **${ms(runs.warm)}** | ${vs(runs.warm)} |`);
  console.log(
    `| Berth, the first query after a membership change (every owner computed) | ${ms(runs.cold)} | ${vs(runs.cold)} |`,
  );
  console.log(`| Berth, memo off (every query computes every owner, as before) | ${ms(runs.off)} | ${vs(runs.off)} |`);
  console.log(
    `| the floor: one \`Map.get\` per segment over the same fresh ids, nothing else | ${ms(runs.floor)} | ${vs(runs.floor)} |`,
  );
}

console.log('\n## Balance: most loaded node’s share / its weight’s share (1.000 is perfect)\n');
console.log('| members | berth | hashring |');
console.log('|---|---:|---:|');
const balanceCases: [string, WeightedNode[]][] = [
  ['16 equal nodes', cluster(16)],
  ['8 nodes, vCPU 4,4,8,8,16,16,32,32', cluster(8, (i) => 4 * 2 ** Math.floor(i / 2))],
  ['128 equal nodes', cluster(128)],
];
for (const [label, nodes] of balanceCases) {
  const [b, h] = ROUTERS.map((make) => balance(nodes, owners(make(nodes))));
  console.log(`| ${label} | ${fmt(b!)} | ${fmt(h!)} |`);
}

console.log('\n## Segments moved by a membership change (16 nodes of 16 vCPU)\n');
console.log(
  '| change | ideal moved | berth moved | berth moved between untouched nodes | hashring moved | hashring moved between untouched nodes |',
);
console.log('|---|---:|---:|---:|---:|---:|');
const base = cluster(16);
const changes: [string, WeightedNode[], string, number][] = [
  ['add a 17th node (16 vCPU)', [...base, { id: 'node-new', weight: 16 }], 'node-new', 16 / 272],
  ['remove node-007', base.filter((n) => n.id !== 'node-007'), 'node-007', 1 / 16],
  [
    'reweight node-007 from 16 to 32',
    base.map((n) => (n.id === 'node-007' ? { ...n, weight: 32 } : n)),
    'node-007',
    32 / 272 - 1 / 16,
  ],
];
const before = ROUTERS.map((make) => owners(make(base)));
for (const [label, after, touched, ideal] of changes) {
  const cells = ROUTERS.map((make, i) => movement(before[i]!, owners(make(after)), touched));
  console.log(
    `| ${label} | ${pct(ideal)} | ${pct(cells[0]!.moved)} | ${pct(cells[0]!.between)} | ${pct(cells[1]!.moved)} | ${pct(cells[1]!.between)} |`,
  );
}
