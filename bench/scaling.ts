/**
 * bench/scaling: meta at 1,000 query nodes and 10 million segments, simulated on this machine for
 * each store (SQLite; PostgreSQL as shipped, fsync and synchronous commit on). Meta runs as its
 * built service, one process per store, and everything goes over HTTP as in a cluster:
 * 1. registry: 1,000 nodes heartbeating every 5 s, then every node and 2 coordinators reading the
 *    member list every 10 s whole (as a reader without a version does), then the same readers
 *    following it by change (a long poll answered 304 while nothing changes), each load alone for a
 *    window: the rate reached, latencies, traffic, and what it costs meta and the database;
 * 2. manifest: 10 million segments (10 tables × 365 days) loaded straight into the store's schema;
 *    its size on disk; a month of one table read from the store with the range pushed down; and
 *    the coordinator's catalog (services/coordinator/planning/table-catalog.ts) over one table:
 *    its first read of the whole manifest, the memory it holds, then queries over one month planned
 *    while a commit lands in the table every second (each moves its manifest version), p50/p99.
 * Figures go to SCALING.md. Run: npm run bench:scaling [-- --nodes 1000 --segments 10000000 --seconds 20];
 * BERTH_BENCH_SMOKE=1 runs it small (bench/smoke.ts), and fails on any call's error.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Placement } from '../core/ownership.js';
import { startServiceProcess, type ServiceProcess } from '../activities/platform/service-process.js';
import { openSqlite } from '../services/common/sqlite.js';
import { TableCatalog } from '../services/coordinator/planning/table-catalog.js';
import { MetaClient } from '../services/meta/client.js';
import { openMetaStore } from '../services/meta/open-store.js';
import type { MetaStore } from '../services/meta/store.js';
import { benchPostgres } from './bench-postgres.js';
import { failInSmoke, sized } from './smoke.js';
import { median, percentile } from './stats.js';

const { values: args } = parseArgs({
  options: {
    nodes: { type: 'string', default: sized('1000', '100') },
    segments: { type: 'string', default: sized('10000000', '7300') },
    tables: { type: 'string', default: sized('10', '2') },
    days: { type: 'string', default: '365' },
    seconds: { type: 'string', default: sized('20', '1') },
  },
});
const NODES = Number(args.nodes);
const READERS = NODES + 2; // every node's member view, and two coordinators
const TABLES = Number(args.tables);
const DAYS = Number(args.days);
const PER_TABLE = Math.floor(Number(args.segments) / TABLES);
const PER_DAY = Math.ceil(PER_TABLE / DAYS);
const SECONDS = Number(args.seconds);
const HEARTBEAT_MS = 5_000;
const POLL_MS = 10_000;
const DAY = 86_400_000;
const T0 = Date.UTC(2026, 0, 1);
const TOKEN = randomBytes(32).toString('hex');
const META_SCRIPT = fileURLToPath(new URL('../services/meta/main.js', import.meta.url));
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

const log = (line: string) => console.error(`[scaling] ${line}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const fmt = (x: number, digits = 0) =>
  x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

// ── what a process tree spends ───────────────────────────────────────────────────────────────

/** The pid and its descendants. */
function processTree(root: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const all = [root];
  for (let i = 0; i < all.length; i++) all.push(...(parents.get(all[i]!) ?? []));
  return all;
}

/** CPU seconds and bytes written to storage so far by a process tree. */
function usage(root: number): { cpu: number; written: number } {
  let cpu = 0;
  let written = 0;
  for (const pid of processTree(root)) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      cpu += (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime, stime
      written += Number(/write_bytes: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? 0);
    } catch {
      // gone meanwhile
    }
  }
  return { cpu, written };
}

// ── the registry under 1,000 nodes ──────────────────────────────────────────────────────────

interface Window {
  calls: number;
  errors: number;
  latencies: number[];
  bytesIn: number;
  /** From the first call to the last answer: a long poll outlasts the window it began in. */
  elapsedS: number;
}

/** `loops` callers, each calling every `everyMs` from a random phase, for SECONDS. */
async function drive(loops: number, everyMs: number, call: (i: number) => Promise<number>): Promise<Window> {
  const window: Window = { calls: 0, errors: 0, latencies: [], bytesIn: 0, elapsedS: 0 };
  const start = performance.now();
  const end = start + SECONDS * 1_000;
  await Promise.all(
    Array.from({ length: loops }, async (_, i) => {
      for (let at = start + Math.random() * everyMs; at < end; at += everyMs) {
        await sleep(at - performance.now());
        const t = performance.now();
        try {
          const bytes = await call(i); // not `+= await`: that would read the total before the await
          window.bytesIn += bytes;
          window.calls++;
          window.latencies.push(performance.now() - t);
        } catch {
          window.errors++;
        }
      }
    }),
  );
  window.elapsedS = (performance.now() - start) / 1000;
  return window;
}

interface RegistryFigures {
  heartbeat: Window & { cpuMeta: number; cpuDb: number; written: number; wal?: WalStats };
  poll: Window & { cpuMeta: number; cpuDb: number; responseBytes: number };
  /** The same readers following the list by change: one long poll after another. */
  follow: Window & { cpuMeta: number; cpuDb: number };
}

interface WalStats {
  bytes: number;
  /** WAL flushes (fdatasync), each of a whole 8 KiB WAL page. */
  syncs: number;
}

async function registry(
  meta: ServiceProcess,
  db: { pid?: number; wal?: () => Promise<WalStats> },
): Promise<RegistryFigures> {
  const nodeUrl = (i: number) => `http://10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:7410`;
  const client = new MetaClient(meta.url, TOKEN);
  for (let i = 0; i < NODES; i++)
    await client.registerNode({ id: `node-${i}`, group: 'serving', url: nodeUrl(i), vcpus: 8, startedAt: T0 });
  const post = (i: number) =>
    fetch(`${meta.url}/v1/nodes/node-${i}/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: '{"vcpus":8}',
    }).then(async (r) => {
      if (!r.ok) throw new Error(String(r.status));
      return (await r.arrayBuffer()).byteLength;
    });
  // What crosses the wire: the status line and headers, then the body.
  const wireBytes = async (r: Response) =>
    [...r.headers].reduce((n, [k, v]) => n + k.length + v.length + 4, 17) + (await r.arrayBuffer()).byteLength;
  const poll = () =>
    fetch(`${meta.url}/v1/groups/serving/members`).then(async (r) => {
      if (!r.ok) throw new Error(String(r.status));
      return await wireBytes(r);
    });

  const measure = async <T>(work: () => Promise<T>) => {
    const [m0, d0, w0] = [usage(meta.child.pid!), db.pid ? usage(db.pid) : undefined, await db.wal?.()];
    const result = await work();
    const [m1, d1, w1] = [usage(meta.child.pid!), db.pid ? usage(db.pid) : undefined, await db.wal?.()];
    return {
      result,
      cpuMeta: m1.cpu - m0.cpu,
      cpuDb: d1 && d0 ? d1.cpu - d0.cpu : 0,
      // What SQLite writes, from meta's own process (PostgreSQL's writes are read from pg_stat_wal).
      written: m1.written - m0.written,
      wal: w0 && w1 ? { bytes: w1.bytes - w0.bytes, syncs: w1.syncs - w0.syncs } : undefined,
    };
  };
  log(`  heartbeats: ${NODES} nodes every ${HEARTBEAT_MS / 1000} s for ${SECONDS} s`);
  const hb = await measure(() => drive(NODES, HEARTBEAT_MS, post));
  log(`  member polls: ${READERS} readers every ${POLL_MS / 1000} s for ${SECONDS} s`);
  const polls = await measure(() => drive(READERS, POLL_MS, poll));
  const listBytes = await poll(); // now, while every node is live: by the end of the window below some have expired
  // Each reader holds the version it has and waits for the next one, as the member view does.
  // One heartbeat round first: no node expires within the window, so the list holds still.
  await Promise.all(Array.from({ length: NODES }, (_, i) => post(i)));
  const versions: (string | null)[] = Array.from({ length: READERS }, () => null);
  const longPoll = (reader: number) =>
    fetch(`${meta.url}/v1/groups/serving/members?wait=${POLL_MS}`, {
      headers: versions[reader] ? { 'if-none-match': versions[reader] } : {},
    }).then(async (r) => {
      if (r.status !== 304 && !r.ok) throw new Error(String(r.status));
      versions[reader] = r.headers.get('etag');
      return await wireBytes(r);
    });
  log(`  member long polls: ${READERS} readers following the list by change for ${SECONDS} s`);
  await Promise.all(Array.from({ length: READERS }, (_, i) => longPoll(i))); // each reader's first, whole list
  const follows = await measure(() => drive(READERS, POLL_MS, longPoll));
  return {
    heartbeat: { ...hb.result, cpuMeta: hb.cpuMeta, cpuDb: hb.cpuDb, written: hb.written, wal: hb.wal },
    poll: { ...polls.result, cpuMeta: polls.cpuMeta, cpuDb: polls.cpuDb, responseBytes: listBytes },
    follow: { ...follows.result, cpuMeta: follows.cpuMeta, cpuDb: follows.cpuDb },
  };
}

// ── the manifest at 10 million segments ─────────────────────────────────────────────────────

const SLICE = Math.floor(DAY / PER_DAY);
const tableName = (t: number) => `events_${t}`;

async function loadSqlite(file: string): Promise<void> {
  const db = openSqlite(file);
  db.pragma('journal_mode = WAL');
  db.transaction(() => {
    for (let t = 0; t < TABLES; t++) {
      db.prepare('INSERT INTO tables (name, timestamp_column, columns) VALUES (?, ?, ?)').run(
        tableName(t),
        'ts',
        '[{"name":"ts","type":"TIMESTAMP"}]',
      );
      db.prepare(
        `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ${PER_TABLE})
         INSERT INTO segments (id, tbl, min_ts, max_ts, rows, bytes, level, state, created_at)
         SELECT printf('%s-%08d', @t, i), @t, ${T0} + (i / ${PER_DAY}) * ${DAY} + (i % ${PER_DAY}) * ${SLICE},
                ${T0} + (i / ${PER_DAY}) * ${DAY} + (i % ${PER_DAY}) * ${SLICE} + ${SLICE - 1}, 1000000, 100000000, 1, 'active', ${T0}
         FROM n`,
      ).run({ t: tableName(t) });
    }
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

async function loadPostgres(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (let t = 0; t < TABLES; t++) {
      await client.query('INSERT INTO tables (name, timestamp_column, columns) VALUES ($1, $2, $3)', [
        tableName(t),
        'ts',
        '[{"name":"ts","type":"TIMESTAMP"}]',
      ]);
      // Without the per-row triggers that stamp versions (a million updates of one row): one version for the lot.
      await client.query('ALTER TABLE segments DISABLE TRIGGER segments_added');
      await client.query(
        `INSERT INTO segments (id, tbl, min_ts, max_ts, rows, bytes, level, state, created_at, added_version)
         SELECT $1 || '-' || lpad(i::text, 8, '0'), $1, ${T0} + (i / ${PER_DAY}) * ${DAY}::bigint + (i % ${PER_DAY}) * ${SLICE}::bigint,
                ${T0} + (i / ${PER_DAY}) * ${DAY}::bigint + (i % ${PER_DAY}) * ${SLICE}::bigint + ${SLICE - 1}, 1000000, 100000000, 1, 'active', ${T0}, 1
         FROM generate_series(0, ${PER_TABLE - 1}) AS i`,
        [tableName(t)],
      );
      await client.query('ALTER TABLE segments ENABLE TRIGGER segments_added');
      await client.query('UPDATE tables SET manifest_version = 1 WHERE name = $1', [tableName(t)]);
    }
    await client.query('VACUUM ANALYZE segments');
    return Number(
      (await client.query<{ size: string }>(`SELECT pg_total_relation_size('segments') AS size`)).rows[0]!.size,
    );
  } finally {
    await client.end();
  }
}

interface PlanFigures {
  segments: number;
  /** The manifest read as the coordinator makes it (MetaClient, its 10 s timeout, one failover try), or why it failed. */
  readMs: number;
  failed?: string;
  bytes: number;
  storeMs: number;
  ownersMs: number;
}

/**
 * Plans a query over one month of one table the way the coordinator does: read the manifest with
 * MetaClient, keep the month, find each segment's owner. `pushdown` passes the month to the store.
 */
async function planMonth(
  meta: ServiceProcess,
  store: MetaStore,
  pushdown: boolean,
  runs: number,
): Promise<PlanFigures> {
  const from = T0 + 300 * DAY;
  const to = from + 30 * DAY - 1;
  const range = pushdown ? { from, to } : {};
  const client = new MetaClient(meta.url, TOKEN);
  const placement = new Placement(Array.from({ length: NODES }, (_, i) => ({ id: `node-${i}`, weight: 8 })));
  const figures: PlanFigures[] = [];
  for (let r = 0; r < runs; r++) {
    // The store alone first: a read the client gives up on keeps meta busy for a while after.
    let t = performance.now();
    const all = await store.listSegments(tableName(0), range);
    const storeMs = performance.now() - t;
    t = performance.now();
    let failed: string | undefined;
    await client
      .listSegments(tableName(0), range)
      .catch((error: Error) => (failed = error.message.replace(/^call \S+ failed: /, '')));
    const readMs = performance.now() - t;
    const month = all.filter((s) => s.maxTs >= from && s.minTs <= to);
    t = performance.now();
    const perNode = new Map<string, number>();
    for (const s of month) {
      const owner = placement.owner(s.id)!.id;
      perNode.set(owner, (perNode.get(owner) ?? 0) + 1);
    }
    const ownersMs = performance.now() - t;
    figures.push({
      segments: month.length,
      readMs,
      failed,
      bytes: Buffer.byteLength(JSON.stringify({ segments: all })),
      storeMs,
      ownersMs,
    });
  }
  const pick = (k: 'readMs' | 'storeMs' | 'ownersMs') => median(figures.map((f) => f[k]));
  return { ...figures[0]!, readMs: pick('readMs'), storeMs: pick('storeMs'), ownersMs: pick('ownersMs') };
}

interface CatalogFigures {
  /** A cold catalog's first query over the month: a range read from meta while the index loads. */
  firstQueryMs: number;
  /** The catalog's first read of the table: the whole manifest, a page at a time. */
  firstReadMs: number;
  /** What the catalog holds per segment of the table (heap, after a collection). */
  bytesPerSegment: number;
  /** Planning a month (version check, the month's segments, their owners), while commits land. */
  planMs: number[];
  commits: number;
  segments: number;
}

/** The heap after a full collection (the flag set at run time: the bench runs as plain `node`). */
const heapUsed = (() => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  return () => {
    gc();
    return process.memoryUsage().heapUsed;
  };
})();

/**
 * The coordinator's catalog over one table: its first read, what it holds, then a query over one
 * month planned every 100 ms for SECONDS while a segment is committed into the table every second.
 */
async function catalogMonth(meta: ServiceProcess): Promise<CatalogFigures> {
  const name = tableName(0);
  const from = T0 + 300 * DAY;
  const window = { from, to: from + 30 * DAY - 1 };
  const client = new MetaClient(meta.url, TOKEN);
  const placement = new Placement(
    Array.from({ length: NODES }, (_, i) => ({ id: `node-${i}`, weight: 8 })),
    { memoEntries: 1_000_000 },
  );
  const before = heapUsed();
  const catalog = new TableCatalog(client);
  let t = performance.now();
  const table = (await catalog.table(name))!;
  await catalog.segments(name, table, window);
  const firstQueryMs = performance.now() - t;
  // No bound: waits for the index the first query set loading.
  const { total } = await catalog.segments(name, table);
  const firstReadMs = performance.now() - t;
  const bytesPerSegment = (heapUsed() - before) / total;

  let committing = true;
  let commits = 0;
  const committer = (async () => {
    for (let i = 0; committing; i++) {
      const minTs = window.from + (i % 30) * DAY + 1_000 * i;
      await client.commitSegment({
        id: `live-${i}`,
        table: name,
        minTs,
        maxTs: minTs + 1_000,
        rows: 1,
        bytes: 1,
        level: 0,
      });
      commits++;
      await sleep(1_000);
    }
  })();
  const planMs: number[] = [];
  let segments = 0;
  const end = performance.now() + SECONDS * 1_000;
  while (performance.now() < end) {
    t = performance.now();
    const { segments: month } = await catalog.segments(name, (await catalog.table(name))!, window);
    for (const s of month) placement.owner(s.id);
    planMs.push(performance.now() - t);
    segments = month.length;
    await sleep(100);
  }
  committing = false;
  await committer;
  return { firstQueryMs, firstReadMs, bytesPerSegment, planMs, commits, segments };
}

async function commitLatency(store: MetaStore): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t = performance.now();
    await store.commitSegment({
      id: `late-${i}`,
      table: tableName(0),
      minTs: T0 + 364 * DAY,
      maxTs: T0 + 364 * DAY + 1000,
      rows: 1,
      bytes: 1,
      level: 0,
    });
    times.push(performance.now() - t);
  }
  return median(times);
}

// ── the run ──────────────────────────────────────────────────────────────────────────────────

const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-bench-scaling-'));
const postgres = await benchPostgres();
const pgUrl = await postgres.createDatabase();
const sqliteDir = path.join(dir, 'sqlite-meta');
const sqliteFile = path.join(sqliteDir, 'meta.sqlite');
const env = {
  BERTH_TOKEN: TOKEN,
  BERTH_META_PORT: '0',
  BERTH_LOG_LEVEL: 'warn',
  BERTH_HEARTBEAT_MS: String(HEARTBEAT_MS),
};
const metas = {
  SQLite: await startServiceProcess(
    'meta-sqlite',
    META_SCRIPT,
    { ...env, BERTH_META_DIR: sqliteDir, BERTH_META_DATABASE: '' },
    path.join(dir, 'meta-sqlite.log'),
  ),
  PostgreSQL: await startServiceProcess(
    'meta-postgres',
    META_SCRIPT,
    { ...env, BERTH_META_DATABASE: pgUrl },
    path.join(dir, 'meta-postgres.log'),
  ),
};
const pgAdmin = new pg.Client({ connectionString: pgUrl });
await pgAdmin.connect();
const wal = async (): Promise<WalStats> => {
  const row = (
    await pgAdmin.query<{ bytes: string; syncs: string }>(
      'SELECT wal_bytes AS bytes, wal_sync AS syncs FROM pg_stat_wal',
    )
  ).rows[0]!;
  return { bytes: Number(row.bytes), syncs: Number(row.syncs) };
};

try {
  const figures: Record<
    string,
    {
      registry: RegistryFigures;
      loadS: number;
      sizeBytes: number;
      catalog: CatalogFigures;
      pushed: PlanFigures;
      commitMs: number;
    }
  > = {};
  for (const [name, meta] of Object.entries(metas)) {
    log(`${name}: registry`);
    const reg = await registry(meta, name === 'PostgreSQL' ? { pid: postgres.pid, wal } : {});
    log(`${name}: loading ${fmt(PER_TABLE * TABLES)} segments`);
    const t = performance.now();
    const sizeBytes =
      name === 'PostgreSQL' ? await loadPostgres(pgUrl) : (await loadSqlite(sqliteFile), statSync(sqliteFile).size);
    const loadS = (performance.now() - t) / 1000;
    const store = await openMetaStore({ database: name === 'PostgreSQL' ? pgUrl : sqliteFile });
    try {
      log(`${name}: planning a month`);
      const pushed = await planMonth(meta, store, true, 3);
      const commitMs = await commitLatency(store);
      log(`${name}: the coordinator's catalog`);
      const catalog = await catalogMonth(meta);
      figures[name] = { registry: reg, loadS, sizeBytes, catalog, pushed, commitMs };
      failInSmoke(`${name}: heartbeats`, reg.heartbeat.errors);
      failInSmoke(`${name}: member polls`, reg.poll.errors + reg.follow.errors);
      failInSmoke(`${name}: manifest reads`, pushed.failed ? 1 : 0, pushed.failed);
    } finally {
      await store.close();
    }
  }

  const perSecond = (w: Window) => w.calls / SECONDS;
  const row = (label: string, f: (name: string) => string) =>
    `| ${label} | ${Object.keys(figures).map(f).join(' | ')} |`;
  const lines = [
    `Machine: ${os.cpus().length} vCPU, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; PostgreSQL ${(await pgAdmin.query('SHOW server_version')).rows[0].server_version} (fsync and synchronous commit on), SQLite as meta runs it (WAL, synchronous=NORMAL). Load generator, meta and the database share the machine.`,
    '',
    `### Registry: ${fmt(NODES)} nodes, heartbeats every ${HEARTBEAT_MS / 1000} s, ${fmt(READERS)} readers polling members every ${POLL_MS / 1000} s (${SECONDS} s windows, each load alone)`,
    '',
    `| | ${Object.keys(figures).join(' | ')} |`,
    `|---|${Object.keys(figures)
      .map(() => '---:')
      .join('|')}|`,
    row('heartbeats/s reached (offered: ' + fmt(NODES / (HEARTBEAT_MS / 1000)) + ')', (n) =>
      fmt(perSecond(figures[n]!.registry.heartbeat), 1),
    ),
    row(
      'heartbeat latency p50 / p99',
      (n) =>
        `${fmt(median(figures[n]!.registry.heartbeat.latencies), 1)} / ${fmt(percentile(figures[n]!.registry.heartbeat.latencies, 99), 1)} ms`,
    ),
    row('heartbeat errors', (n) => String(figures[n]!.registry.heartbeat.errors)),
    row('CPU per heartbeat: meta + database', (n) => {
      const h = figures[n]!.registry.heartbeat;
      return `${fmt((h.cpuMeta * 1000) / h.calls, 3)} + ${fmt((h.cpuDb * 1000) / h.calls, 3)} ms`;
    }),
    row('CPU for all heartbeats (of one core)', (n) => {
      const h = figures[n]!.registry.heartbeat;
      return `${fmt(((h.cpuMeta + h.cpuDb) / SECONDS) * 100, 1)} %`;
    }),
    row('written per heartbeat', (n) => {
      const h = figures[n]!.registry.heartbeat;
      return h.wal
        ? `${fmt(h.wal.bytes / h.calls)} B of WAL; ${fmt(h.wal.syncs / h.calls, 2)} flushes of an 8 KiB WAL page`
        : `${fmt(h.written / h.calls / 1024, 1)} KiB to its WAL, no flush`;
    }),
    row('member polls/s reached (offered: ' + fmt(READERS / (POLL_MS / 1000)) + ')', (n) =>
      fmt(perSecond(figures[n]!.registry.poll), 1),
    ),
    row('member list size', (n) => `${fmt(figures[n]!.registry.poll.responseBytes / 1024, 1)} KiB`),
    row('member poll traffic', (n) => `${fmt(figures[n]!.registry.poll.bytesIn / SECONDS / 2 ** 20, 2)} MiB/s`),
    row(
      'member poll latency p50 / p99',
      (n) =>
        `${fmt(median(figures[n]!.registry.poll.latencies), 1)} / ${fmt(percentile(figures[n]!.registry.poll.latencies, 99), 1)} ms`,
    ),
    row('CPU per member poll: meta + database', (n) => {
      const p = figures[n]!.registry.poll;
      return `${fmt((p.cpuMeta * 1000) / p.calls, 2)} + ${fmt((p.cpuDb * 1000) / p.calls, 2)} ms`;
    }),
    row('CPU for all member polls (of one core)', (n) => {
      const p = figures[n]!.registry.poll;
      return `${fmt(((p.cpuMeta + p.cpuDb) / SECONDS) * 100, 1)} %`;
    }),
    row('followed by change (long polls, nothing changing): answers/s', (n) =>
      fmt(figures[n]!.registry.follow.calls / figures[n]!.registry.follow.elapsedS, 1),
    ),
    row('followed by change: traffic, and of the whole polls’', (n) => {
      const f = figures[n]!.registry.follow;
      const p = figures[n]!.registry.poll;
      const rate = f.bytesIn / f.elapsedS;
      return `${fmt(rate / 1024, 1)} KiB/s (${fmt((100 * rate) / (p.bytesIn / SECONDS), 2)} %)`;
    }),
    row('followed by change: CPU (of one core)', (n) => {
      const f = figures[n]!.registry.follow;
      return `${fmt(((f.cpuMeta + f.cpuDb) / f.elapsedS) * 100, 1)} %`;
    }),
    '',
    `### Manifest: ${fmt(PER_TABLE * TABLES)} segments (${TABLES} tables × ${DAYS} days × ${fmt(PER_DAY)} a day); a query over one month of one table (${fmt(PER_TABLE)} segments)`,
    '',
    `| | ${Object.keys(figures).join(' | ')} |`,
    `|---|${Object.keys(figures)
      .map(() => '---:')
      .join('|')}|`,
    row('bulk load (straight into the schema)', (n) => `${fmt(figures[n]!.loadS, 0)} s`),
    row('manifest size on disk (table and indexes)', (n) => mib(figures[n]!.sizeBytes)),
    row(`segments in the month`, (n) => fmt(figures[n]!.pushed.segments)),
    row('range pushed down to the store: bytes', (n) => mib(figures[n]!.pushed.bytes)),
    row(
      'range pushed down: manifest read (of which the store)',
      (n) => `${fmt(figures[n]!.pushed.readMs)} ms (${fmt(figures[n]!.pushed.storeMs)} ms)`,
    ),
    row(`owners of the month's segments over ${fmt(NODES)} nodes`, (n) => `${fmt(figures[n]!.pushed.ownersMs)} ms`),
    row(
      'time to plan the month with the range pushed down',
      (n) => `${fmt(figures[n]!.pushed.readMs + figures[n]!.pushed.ownersMs)} ms`,
    ),
    row('commit latency at this size (median of 200)', (n) => `${fmt(figures[n]!.commitMs, 2)} ms`),
    row(
      "the coordinator's catalog: a cold coordinator's first month (a range read while the index loads)",
      (n) => `${fmt(figures[n]!.catalog.firstQueryMs)} ms`,
    ),
    row(
      "the coordinator's catalog: first read of the table (whole, in pages)",
      (n) => `${fmt(figures[n]!.catalog.firstReadMs)} ms`,
    ),
    row(
      "the coordinator's catalog: memory per segment of the table",
      (n) =>
        `${fmt(figures[n]!.catalog.bytesPerSegment)} B (${mib(figures[n]!.catalog.bytesPerSegment * PER_TABLE)} for the table)`,
    ),
    row(
      `then planning the month (${SECONDS} s, a commit a second): p50 / p99`,
      (n) =>
        `${fmt(median(figures[n]!.catalog.planMs), 1)} / ${fmt(percentile(figures[n]!.catalog.planMs, 99), 1)} ms over ${fmt(figures[n]!.catalog.planMs.length)} plans, ${fmt(figures[n]!.catalog.commits)} commits`,
    ),
  ];
  console.log(lines.join('\n'));
} catch (error) {
  for (const [name, meta] of Object.entries(metas)) {
    const tail = readFileSync(path.join(dir, `meta-${name === 'SQLite' ? 'sqlite' : 'postgres'}.log`), 'utf8')
      .split('\n')
      .slice(-15)
      .join('\n');
    log(`${name} meta (exit code ${meta.child.exitCode}, signal ${meta.child.signalCode}), its log's end:\n${tail}`);
  }
  throw error;
} finally {
  await pgAdmin.end();
  await Promise.all(Object.values(metas).map((m) => m.stop()));
  await postgres.stop();
  await rm(dir, { recursive: true, force: true });
}
