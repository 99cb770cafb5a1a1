/**
 * bench/meta: registry and manifest operations per second on meta's two stores in the same run,
 * store calls as meta's handlers make them, in interleaved rounds, against SQLite as the baseline:
 * - SQLite as meta runs it: WAL, synchronous=NORMAL (better-sqlite3's default in WAL mode: a commit
 *   survives a crash of meta, the last ones may be lost to a power cut);
 * - PostgreSQL with synchronous_commit=off: the same durability;
 * - PostgreSQL as shipped (synchronous_commit=on: every commit waits for its WAL flush).
 * PostgreSQL is measured with one call in flight (SQLite's calls run one at a time anyway) and
 * with 16 (what several meta replicas, or one busy one, send). A local throwaway cluster
 * (bench/bench-postgres.ts).
 * Run: npm run bench:meta [-- --seconds 1 --rounds 3]; BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openMetaStore } from '../services/meta/open-store.js';
import type { MetaStore, Segment } from '../services/meta/store.js';
import { benchPostgres } from './bench-postgres.js';
import { sized } from './smoke.js';
import { median } from './stats.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: sized('1', '0.05') },
    rounds: { type: 'string', default: sized('3', '1') },
  },
});
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);
const NODES = sized(1_000, 50);
const DAYS = sized(30, 3);
const SEGMENTS_PER_DAY = sized(100, 10);
const DAY = 86_400_000;
const T0 = Date.UTC(2026, 10, 1);

const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-bench-meta-'));
const postgres = await benchPostgres();
const database = await postgres.createDatabase();
const sqlite = await openMetaStore({ database: path.join(dir, 'meta.sqlite') });
const pgAsync = await openMetaStore({
  database: `${database}?options=${encodeURIComponent('-c synchronous_commit=off')}`,
  maxConnections: 16,
});
const pgSync = await openMetaStore({ database, maxConnections: 16 });

/** One operation, repeated; `i` counts its calls. */
interface Operation {
  name: string;
  kind: 'registry' | 'manifest';
  call: (store: MetaStore, i: number) => Promise<unknown>;
}

const seg = (id: string, day: number, level = 0): Segment => ({
  id,
  table: 'events',
  minTs: T0 + day * DAY + 1,
  maxTs: T0 + day * DAY + 3_600_000,
  rows: 100_000,
  bytes: 8_000_000,
  level,
});
let unique = 0; // ids never repeat across rounds and stores
const count = (x: number) => x.toLocaleString('en-US');

// The state every operation runs against: 1,000 nodes in one group, a month of 100 segments a day
// (both PostgreSQL stores share one database).
for (const store of [sqlite, pgAsync]) {
  for (let n = 0; n < NODES; n++)
    await store.registerNode({
      id: `node-${n}`,
      group: 'serving',
      url: `http://10.0.${n >> 8}.${n & 255}:7410`,
      vcpus: 8,
      startedAt: T0,
    });
  await store.ensureTable({ name: 'events', timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] });
  for (let d = 0; d < DAYS; d++)
    for (let s = 0; s < SEGMENTS_PER_DAY; s++) await store.commitSegment(seg(`events-${d}-${s}`, d));
}

const operations: Operation[] = [
  { name: 'heartbeat', kind: 'registry', call: (s, i) => s.heartbeat(`node-${i % NODES}`, 8) },
  {
    name: 'register a node',
    kind: 'registry',
    call: (s) =>
      s.registerNode({ id: `new-${unique++}`, group: 'other', url: 'http://10.1.0.1:7410', vcpus: 4, startedAt: T0 }),
  },
  { name: `members (${count(NODES)} nodes)`, kind: 'registry', call: (s) => s.members('serving') },
  { name: `backends (${count(NODES)} nodes)`, kind: 'registry', call: (s) => s.backends('serving') },
  { name: 'commit a segment', kind: 'manifest', call: (s) => s.commitSegment(seg(`new-${unique++}`, DAYS)) },
  {
    name: `list a day of segments (of ${count(DAYS * SEGMENTS_PER_DAY)})`,
    kind: 'manifest',
    call: (s, i) => s.listSegments('events', { from: T0 + (i % DAYS) * DAY, to: T0 + ((i % DAYS) + 1) * DAY - 1 }),
  },
  {
    name: 'a merge: commit 10 segments, swap them for 1',
    kind: 'manifest',
    call: async (s) => {
      const batch = `swap-${unique++}`;
      const inputs = Array.from({ length: 10 }, (_, k) => seg(`${batch}-${k}`, DAYS + 1));
      for (const input of inputs) await s.commitSegment(input);
      return await s.swapSegments(
        inputs.map((x) => x.id),
        seg(`${batch}-merged`, DAYS + 1, 1),
      );
    },
  },
  {
    name: 'take and release a lease',
    kind: 'manifest',
    call: async (s) => {
      const name = `merge:events:${unique++}`;
      await s.acquireLease(name, 'bench', 60_000);
      return await s.releaseLease(name, 'bench');
    },
  },
];

/** Calls per second over SECONDS, with `inFlight` callers. */
async function rate(store: MetaStore, op: Operation, inFlight: number): Promise<number> {
  let calls = 0;
  const end = performance.now() + SECONDS * 1_000;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) await op.call(store, calls++);
    }),
  );
  return calls / SECONDS;
}

const runs: { label: string; store: MetaStore; inFlight: number }[] = [
  { label: 'SQLite', store: sqlite, inFlight: 1 },
  { label: 'PostgreSQL, same durability, 1 in flight', store: pgAsync, inFlight: 1 },
  { label: 'PostgreSQL, same durability, 16 in flight', store: pgAsync, inFlight: 16 },
  { label: 'PostgreSQL, durable commits, 1 in flight', store: pgSync, inFlight: 1 },
  { label: 'PostgreSQL, durable commits, 16 in flight', store: pgSync, inFlight: 16 },
];
const rates = new Map(operations.map((op) => [op.name, runs.map(() => [] as number[])]));
for (let round = 0; round < ROUNDS; round++) {
  for (const op of operations)
    for (const [k, run] of runs.entries()) rates.get(op.name)![k]!.push(await rate(run.store, op, run.inFlight));
  console.error(`round ${round + 1}/${ROUNDS} done`);
}

const fmt = (x: number) => Math.round(x).toLocaleString('en-US');
console.log(
  `Machine: ${os.cpus().length} vCPU, Node ${process.version}; ${ROUNDS} interleaved rounds of ${SECONDS} s per measurement, medians; ops/s (ratio to SQLite).\n`,
);
console.log(`| operation | ${runs.map((r) => r.label).join(' | ')} |`);
console.log(`|---|${runs.map(() => '---:').join('|')}|`);
for (const op of operations) {
  const [base, ...others] = rates.get(op.name)!.map(median) as [number, ...number[]];
  console.log(
    `| ${op.kind}: ${op.name} | ${fmt(base)} | ${others.map((x) => `${fmt(x)} (${(x / base).toFixed(2)}x)`).join(' | ')} |`,
  );
}

await Promise.all([sqlite, pgAsync, pgSync].map((s) => s.close()));
await postgres.stop();
await rm(dir, { recursive: true, force: true });
