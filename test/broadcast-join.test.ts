/**
 * Broadcast joins (issue 32, item 3): a join of a time-partitioned table to small tables runs on
 * the owners of the big one, each reading the small ones whole, and only partials come back. Every
 * answer equals one DuckDB's over the same segment files, over data with NULL keys, duplicate keys
 * on the small side, keys that match nothing on either side, and outer, semi and anti joins; the
 * joins a broadcast would answer wrongly (the small side kept by an outer join, a self-join) and
 * small tables past the limits run as before. On real query nodes, meta and the S3 API.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueryStats } from '../services/coordinator/api.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { referenceFor, type Reference } from './helpers/reference.js';

/** Rows of the big table per batch, one segment each, an hour apart. */
const BATCHES = 6;
const ROWS = 1_500;
const START = Date.parse('2026-11-02T00:00:00Z');
const CARRIERS = ['AA', 'UA', 'DL', 'B6', 'ZZ', null];
const ORIGINS = ['JFK', 'LGA', 'EWR', 'SFO', null];

/** Deterministic flights: every carrier and origin (NULLs, ones no small table knows), delays negative, zero, NULL. */
function flights(batch: number): object[] {
  return Array.from({ length: ROWS }, (_, i) => {
    const n = batch * ROWS + i;
    return {
      ts: new Date(START + batch * 3_600_000 + i * 1_000).toISOString(),
      carrier: CARRIERS[(n * 7) % CARRIERS.length],
      origin: ORIGINS[(n * 3 + batch) % ORIGINS.length],
      dep_delay: n % 11 === 0 ? null : ((n * 37) % 181) - 30,
      distance: ((n * 13) % 2_500) + 0.25,
    };
  });
}

/**
 * A key twice (DL), a NULL key, a carrier with no flights (WN); in two batches, so two segments.
 * A column named as the owners name their partials' (g0).
 */
const CARRIER_BATCHES = [
  [
    { code: 'AA', name: 'American', g0: 'east' },
    { code: 'UA', name: 'United', g0: 'west' },
    { code: 'DL', name: 'Delta', g0: 'south' },
  ],
  [
    { code: 'DL', name: 'Delta Connection', g0: 'south' },
    { code: null, name: 'No code', g0: null },
    { code: 'WN', name: 'Southwest', g0: 'west' },
  ],
];
/** A struct field named as the owners name their partials' columns (g0). */
const AIRPORTS = [
  { origin: 'JFK', name: 'Kennedy', hub: { g0: 'B6' } },
  { origin: 'LGA', name: 'LaGuardia', hub: { g0: 'DL' } },
  { origin: 'EWR', name: 'Newark', hub: { g0: 'UA' } },
];
/** Past the cluster's row limit (BROADCAST_ROWS): never broadcast. */
const PLANES = Array.from({ length: 12 }, (_, i) => ({ carrier: CARRIERS[i % 5], seats: 50 + i * 10 }));
const BROADCAST_ROWS = 6;

const WINDOW = "f.ts >= TIMESTAMP '2026-11-02 02:00:00' AND f.ts < TIMESTAMP '2026-11-02 03:30:00'";

/** Joins that run broadcast: the tables each owner reads whole, and the query. */
const BROADCAST = [
  {
    whole: ['carriers'],
    sql: 'SELECT c.name, count(*) AS n, sum(f.dep_delay) AS delay, avg(f.distance) AS distance, min(f.ts) FROM flights f JOIN carriers c ON f.carrier = c.code GROUP BY c.name',
  },
  {
    whole: ['carriers'],
    sql: 'SELECT c.name, count(*) AS n, count(c.code) AS matched, count(f.dep_delay) FROM flights f LEFT JOIN carriers c ON f.carrier = c.code GROUP BY ALL',
  },
  {
    whole: ['carriers', 'airports'],
    sql: `SELECT a.name AS airport, c.name AS carrier, count(*) AS n, max(f.dep_delay) AS worst FROM flights f JOIN carriers c ON f.carrier = c.code LEFT JOIN airports a ON a.origin = f.origin WHERE ${WINDOW} GROUP BY ALL HAVING count(*) > 10`,
  },
  {
    whole: ['carriers'],
    sql: "SELECT count(DISTINCT c.name), count(DISTINCT f.origin), sum(f.distance) FILTER (WHERE c.name LIKE 'Delta%') FROM flights f, carriers c WHERE f.carrier = c.code",
  },
  {
    whole: ['carriers'],
    sql: 'SELECT f.ts, c.name, f.dep_delay FROM carriers c JOIN flights f ON f.carrier = c.code ORDER BY f.dep_delay DESC, f.ts, c.name LIMIT 7',
  },
  {
    whole: ['carriers'],
    sql: 'SELECT count(*), sum(dep_delay) FROM flights f SEMI JOIN carriers c ON f.carrier = c.code',
  },
  {
    whole: ['carriers'],
    sql: 'SELECT origin, count(*) FROM flights f ANTI JOIN carriers c ON f.carrier = c.code GROUP BY origin',
  },
  // An output named by a struct field as the owners name a partial's column (g0), and ORDER BY a bare group.
  {
    whole: ['airports'],
    sql: 'SELECT a.hub.g0, carrier, count(*) AS n FROM flights f JOIN airports a ON a.origin = f.origin GROUP BY carrier, a.hub.g0 ORDER BY carrier, n, 1',
  },
  // USING the origin: the bare ts is still the flights' own, so the window prunes them.
  {
    whole: ['airports'],
    sql: `SELECT origin, name, count(*) FROM flights JOIN airports USING (origin) WHERE ${WINDOW.replaceAll('f.', '')} GROUP BY ALL`,
  },
];

/** Joins a broadcast would answer wrongly, or whose small side is past the limits: they run as before. */
const NOT_BROADCAST = [
  // Each owner would send the carriers no flight of its own matches.
  'SELECT c.name, count(*) AS n, count(f.ts) AS flights FROM flights f RIGHT JOIN carriers c ON f.carrier = c.code GROUP BY c.name',
  'SELECT c.name, f.origin, count(*) AS n FROM flights f FULL JOIN carriers c ON f.carrier = c.code GROUP BY ALL',
  // A self-join: the table cannot be both an owner's share and the whole.
  `SELECT count(*) FROM flights f JOIN flights g ON f.ts = g.ts WHERE ${WINDOW}`,
  // A bare name grouped by its qualified column, and named as the owners name a partial's column
  // (g0): the final stage cannot tell it from that column.
  'SELECT g0, count(*) AS n, sum(f.distance) FROM flights f JOIN carriers c ON f.carrier = c.code GROUP BY c.name, c.g0',
  // Twelve planes: past the cluster's row limit.
  'SELECT p.seats, count(*) FROM flights f JOIN planes p ON p.carrier = f.carrier GROUP BY ALL',
];

describe('broadcast joins', () => {
  let cluster: TestCluster;
  let reference: Reference;

  const ingest = async (table: string, rows: object[], query = '?noTimestamp=true') => {
    const response = await fetch(`${cluster.coordinator.url}/v1/tables/${table}/rows${query}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/x-ndjson' },
      body: rows.map((r) => JSON.stringify(r)).join('\n') + '\n',
    });
    expect(response.status, await response.clone().text()).toBe(200);
  };
  const answer = async (sql: string): Promise<QueryStats> => {
    const { status, body } = await cluster.query(sql);
    expect(status, `${sql}: ${body.message}`).toBe(200);
    const expected = await reference.run(sql);
    if (!('result' in expected)) throw new Error(`${sql}: ${expected.error}`);
    expectSameResult(body, expected.result, /ORDER BY/.test(sql), sql);
    return body.stats;
  };

  beforeAll(async () => {
    cluster = await startCluster({
      vcpus: [2, 1, 1],
      coordinator: { broadcastLimits: { bytes: 16 * 1024 ** 2, rows: BROADCAST_ROWS } },
    });
    for (let b = 0; b < BATCHES; b++) await ingest('flights', flights(b), '?timestampColumn=ts');
    for (const rows of CARRIER_BATCHES) await ingest('carriers', rows);
    await ingest('airports', AIRPORTS);
    await ingest('planes', PLANES);
    reference = await referenceFor(cluster, ['flights', 'carriers', 'airports', 'planes']);
  });
  afterAll(async () => {
    reference?.close();
    await cluster?.close();
  });

  it('joins on the owners of the big table, the small ones read whole, exactly as one DuckDB answers', async () => {
    for (const { sql, whole } of BROADCAST) {
      const stats = await answer(sql);
      expect(stats.stages.scan, sql).toHaveLength(1);
      const [scan] = stats.stages.scan;
      expect(scan!.table, sql).toBe('flights');
      expect(scan!.broadcast?.map((b) => b.table).sort(), sql).toEqual([...whole].sort());
      expect(['aggregate', 'select'], sql).toContain(stats.route);
      // Every owner of a flights segment read each small table whole.
      for (const b of scan!.broadcast!) expect(b.bytes, sql).toBeGreaterThan(0);
    }
  });

  it('moves only partials, prunes the big table by time, and keeps the small tables cached on every owner', async () => {
    const [grouped, , windowed] = BROADCAST;
    const using = BROADCAST.find((q) => q.sql.includes('USING'))!;
    const stats = await answer(grouped!.sql);
    const owners = Object.keys(stats.stages.scan[0]!.nodes).length;
    expect(owners).toBeGreaterThan(1);
    // One partial row per carrier name per owner at most: 4 names, however many flights.
    expect(stats.stages.scan[0]!.rows).toBeLessThanOrEqual(4 * owners);
    expect(stats.bytesMoved).toBeLessThan(4 * owners * 1024);
    // Asked again: every segment, the small tables' too, is a cache hit on every owner.
    const again = await answer(grouped!.sql);
    expect(again.cacheMisses).toBe(0);
    expect(again.plan).toBe('cached');

    const pruned = await answer(windowed!.sql);
    expect(pruned.stages.scan[0]!.segments).toBe(2);
    expect(pruned.segments.pruned).toBe(BATCHES - 2);
    // The same shape with another window prunes by its own literals.
    const later = await answer(windowed!.sql.replaceAll('02:00:00', '01:00:00').replaceAll('03:30:00', '06:00:00'));
    expect(later.plan).toBe('cached');
    expect(later.stages.scan[0]!.segments).toBe(5);
    expect((await answer(using.sql)).stages.scan[0]!.segments).toBe(2);
    // A window with no flights at all: the small tables are still read whole rather than every flight sent.
    const none = await answer(windowed!.sql.replaceAll('2026-11-02', '2020-01-01'));
    expect(none.stages.scan.map((s) => s.table)).toEqual(['flights']);
    expect(none.segments.scanned).toBe(CARRIER_BATCHES.length + 1);
  });

  it('runs as before the joins a broadcast would answer wrongly, and small tables past the limits', async () => {
    for (const sql of NOT_BROADCAST) {
      const stats = await answer(sql);
      expect(stats.route, sql).toBe('rows');
      for (const scan of stats.stages.scan) expect(scan.broadcast, sql).toBeUndefined();
    }
  });
});
