/**
 * bench/ownership: Berth's weighted rendezvous ownership against the `hashring` package (a
 * weighted ketama ring), measured side by side in one run:
 *   - owner lookups per second at 8, 16 and 128 nodes over 1M segment ids (best of 3 rounds each,
 *     rounds interleaved so both meet the same machine noise);
 *   - balance: the most loaded node's share over its weight's share (1.000 is perfect);
 *   - segments moved on add, remove and reweight, and how many of them moved between nodes that
 *     the change did not touch (the minimum is 0).
 * Run: npm run bench:ownership [-- --segments N]
 */
import HashRing from 'hashring';
import { Placement, type WeightedNode } from '../core/ownership.js';

const SEGMENTS = Number(process.argv[process.argv.indexOf('--segments') + 1]) || 1_000_000;
const ROUNDS = 3;

interface Router {
  name: string;
  owner(segmentId: string): string;
}

const berth = (nodes: WeightedNode[]): Router => {
  const placement = new Placement(nodes);
  return { name: 'berth', owner: (id) => placement.owner(id)!.id };
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
console.log('## Owner lookups (best of 3 interleaved rounds)\n');
console.log('| nodes | berth lookups/s | hashring lookups/s | berth / hashring |');
console.log('|---:|---:|---:|---:|');
for (const n of [8, 16, 128]) {
  const nodes = cluster(n);
  const routers = ROUTERS.map((make) => make(nodes));
  const best = routers.map(() => 0);
  for (let round = 0; round < ROUNDS; round++) {
    routers.forEach((router, i) => (best[i] = Math.max(best[i]!, lookupsPerSecond(router))));
  }
  console.log(`| ${n} | ${Math.round(best[0]!).toLocaleString('en-US')} | ${Math.round(best[1]!).toLocaleString('en-US')} | **${fmt(best[0]! / best[1]!, 2)}x** |`);
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
console.log('| change | ideal moved | berth moved | berth moved between untouched nodes | hashring moved | hashring moved between untouched nodes |');
console.log('|---|---:|---:|---:|---:|---:|');
const base = cluster(16);
const changes: [string, WeightedNode[], string, number][] = [
  ['add a 17th node (16 vCPU)', [...base, { id: 'node-new', weight: 16 }], 'node-new', 16 / 272],
  ['remove node-007', base.filter((n) => n.id !== 'node-007'), 'node-007', 1 / 16],
  ['reweight node-007 from 16 to 32', base.map((n) => (n.id === 'node-007' ? { ...n, weight: 32 } : n)), 'node-007', 32 / 272 - 1 / 16],
];
const before = ROUTERS.map((make) => owners(make(base)));
for (const [label, after, touched, ideal] of changes) {
  const cells = ROUTERS.map((make, i) => movement(before[i]!, owners(make(after)), touched));
  console.log(`| ${label} | ${pct(ideal)} | ${pct(cells[0]!.moved)} | ${pct(cells[0]!.between)} | ${pct(cells[1]!.moved)} | ${pct(cells[1]!.between)} |`);
}
