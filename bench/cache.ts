/**
 * bench/cache: cache hit rate under owner routing (each segment read on its owner) against
 * any-node routing (each read on a node picked at random), at equal per-node cache budgets, over the
 * same query stream; then a repeated full scan, and the dip when a node joins. Each is run with the
 * query node's policy, S3-FIFO by bytes (core/s3-fifo.ts), and with the plain LRU by bytes it
 * replaced (lru-cache) as the baseline. Ownership is the real core/ownership Placement; only the
 * reads are simulated, so the run is deterministic and takes seconds.
 * Run: npm run bench:cache; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
 */
import { LRUCache } from 'lru-cache';
import { Placement, type WeightedNode } from '../core/ownership.js';
import { S3Fifo } from '../core/s3-fifo.js';
import { sized } from './smoke.js';

const SEGMENTS = sized(4_000, 400);
const NODES = 4;
const QUERIES = sized(3_000, 300);
const WARMUP = sized(500, 50);
/** Each node's budget as a multiple of its 1/N share of the working set. */
const BUDGETS = [1.1, 0.75, 0.5];

/** mulberry32: a small seeded PRNG, so every run draws the same stream. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const random = prng(2026);
const segments = Array.from({ length: SEGMENTS }, (_, i) => ({
  id: `events-l0-${String(i).padStart(6, '0')}`,
  bytes: Math.round(8e6 * (0.5 + random())),
}));
const workingSet = segments.reduce((sum, s) => sum + s.bytes, 0);

/** A query reads a window of consecutive segments (a time range), newer ones far more often. */
const queries: number[][] = Array.from({ length: QUERIES }, () => {
  const length = Math.round(SEGMENTS * (0.02 + 0.1 * random()));
  const ageFromNewest = Math.floor(-Math.log(1 - random()) * SEGMENTS * 0.15);
  const end = Math.max(length, SEGMENTS - ageFromNewest);
  return Array.from({ length }, (_, k) => end - length + k);
});

/** A node's cache as the simulation uses it: a read that hits, or an admission after a miss. */
interface Cache {
  hit(id: string): boolean;
  admit(id: string, bytes: number): void;
}
type Policy = { name: string; make: (budget: number) => Cache };
const POLICIES: Policy[] = [
  {
    name: 'S3-FIFO (Berth)',
    make: (budget) => {
      const cache = new S3Fifo<string>({ maxSize: budget });
      return { hit: (id) => cache.hit(id), admit: (id, bytes) => cache.set(id, bytes) };
    },
  },
  {
    name: 'LRU (baseline)',
    make: (budget) => {
      const cache = new LRUCache<string, { bytes: number }>({ maxSize: budget, sizeCalculation: (v) => v.bytes });
      return { hit: (id) => cache.get(id) !== undefined, admit: (id, bytes) => cache.set(id, { bytes }) };
    },
  },
];

interface Cluster {
  nodes: WeightedNode[];
  caches: Map<string, Cache>;
}

function cluster(n: number, newCache: () => Cache): Cluster {
  const nodes = Array.from({ length: n }, (_, i) => ({ id: `node-${i}`, weight: 4 }));
  return { nodes, caches: new Map(nodes.map((node) => [node.id, newCache()])) };
}

type Router = (segment: string, c: Cluster) => string;
const ownerRouting =
  (placement: () => Placement): Router =>
  (segment) =>
    placement().owner(segment)!.id;
const anyNodeRouting =
  (pick: () => number): Router =>
  (_segment, c) =>
    c.nodes[Math.floor(pick() * c.nodes.length)]!.id;

/** Reads every segment of the queries through the router; returns the hit rate. */
function run(c: Cluster, route: Router, stream: number[][]): { hits: number; reads: number } {
  let hits = 0;
  let reads = 0;
  for (const query of stream) {
    for (const i of query) {
      const segment = segments[i]!;
      const cache = c.caches.get(route(segment.id, c))!;
      reads++;
      if (cache.hit(segment.id)) hits++;
      else cache.admit(segment.id, segment.bytes);
    }
  }
  return { hits, reads };
}

const rate = (r: { hits: number; reads: number }) => r.hits / r.reads;
const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const fullScan = [segments.map((_, i) => i)];

console.log(
  `# bench/cache — ${SEGMENTS} segments (${(workingSet / 1e9).toFixed(1)} GB), ${NODES} nodes, ${QUERIES} queries after ${WARMUP} of warm-up\n`,
);
console.log(
  '| node cache (× its 1/N share) | policy | routing | steady-state hit rate | owner / any node | repeated full scan | first full scan after a 5th node joins | the one after |',
);
console.log('|---:|---|---|---:|---:|---:|---:|---:|');
for (const factor of BUDGETS) {
  const budget = Math.round((factor * workingSet) / NODES);
  for (const policy of POLICIES) {
    const steadyRates: number[] = [];
    for (const [name, makeRouter] of [
      ['owner (Berth)', (placement: () => Placement) => ownerRouting(placement)],
      ['any node', () => anyNodeRouting(prng(7))],
    ] as const) {
      const c = cluster(NODES, () => policy.make(budget));
      let placement = new Placement(c.nodes);
      const router = makeRouter(() => placement);
      run(c, router, queries.slice(0, WARMUP));
      const steady = rate(run(c, router, queries.slice(WARMUP)));
      steadyRates.push(steady);
      run(c, router, fullScan);
      const scan = rate(run(c, router, fullScan));
      // A fifth node joins with the same budget; the others keep theirs.
      const joined = { id: `node-${NODES}`, weight: 4 };
      c.nodes.push(joined);
      c.caches.set(joined.id, policy.make(budget));
      placement = new Placement(c.nodes);
      const dip = rate(run(c, router, fullScan));
      const after = rate(run(c, router, fullScan));
      const ratio = steadyRates.length === 2 ? `**${(steadyRates[0]! / steadyRates[1]!).toFixed(2)}×**` : '';
      console.log(
        `| ${factor} | ${policy.name} | ${name} | ${pct(steady)} | ${ratio} | ${pct(scan)} | ${pct(dip)} | ${pct(after)} |`,
      );
    }
  }
}
console.log(
  `\nWhen the fifth node joins, owner routing misses only on the segments that moved to it: ideally 1/${NODES + 1} = ${pct(1 / (NODES + 1))} of a full scan.`,
);
