/**
 * The result cache: an answer is served again only while every table it read is at the same
 * manifest and schema version, and it is exactly what running the query again gives. The keys
 * alone (a merge's swap and a schema change move the versions, which cannot be driven through the
 * API here), then a real cluster: the corpus asked twice against one DuckDB, an ingest, a query
 * that reads random numbers, an answer too large to keep.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResultCache } from '../services/coordinator/execution/result-cache.js';
import type { QueryResult } from '../services/coordinator/api.js';
import { QUERY_CORPUS } from './fixtures/query-corpus.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { eventNdjson } from './helpers/event-data.js';
import { referenceFor, type Reference } from './helpers/reference.js';
import { streamedQuery } from './helpers/streamed-query.js';

const at = (manifest: number, schema = 'digest-1') => new Map([['events', { manifest, schema }]]);
const answer = (rows: number[][]) => ({ columns: ['n'], types: ['BIGINT'], rows }) as unknown as QueryResult;

describe('result cache keys', () => {
  it('keys an answer by its statement and every table’s manifest and schema version', () => {
    const cache = new ResultCache(1 << 20);
    const key = cache.key('SELECT count(*) FROM events', at(7), true);
    expect(cache.key('SELECT count(*) FROM events', at(7), true)).toBe(key);
    expect(cache.key('SELECT count(*) FROM events', at(8), true)).not.toBe(key); // a commit, a merge's swap, a retirement
    expect(cache.key('SELECT count(*) FROM events', at(7, 'digest-2'), true)).not.toBe(key); // a schema change
    expect(cache.key("SELECT count(*) FROM events WHERE service = 'a  b'", at(7), true)).not.toBe(
      cache.key("SELECT count(*) FROM events WHERE service = 'a b'", at(7), true),
    );
    cache.set(key, answer([[1]]), 10);
    expect(cache.get(key)?.rows).toEqual([[1]]);
    expect(cache.get(cache.key('SELECT count(*) FROM events', at(8), true))).toBeUndefined();
  });

  it('keeps nothing for a query that is not reusable, nor when it is off', () => {
    expect(new ResultCache(1 << 20).key('SELECT now()', at(1), false)).toBeUndefined();
    const off = new ResultCache(0);
    expect(off.key('SELECT 1', at(1), true)).toBeUndefined();
    off.set('k', answer([[1]]), 10);
    expect(off.size.answers).toBe(0);
  });

  it('stays within its budget and refuses an answer past an eighth of it', () => {
    const cache = new ResultCache(80_000);
    const padded = (i: number) => answer([[i, 'x'.repeat(2_000)]] as unknown as number[][]);
    cache.set(cache.key('SELECT big', at(1), true), answer([['x'.repeat(6_000)]] as unknown as number[][]), 6_010);
    expect(cache.size.answers).toBe(0); // 12,000 bytes as text, past 10,000
    for (let i = 0; i < 40; i++) cache.set(cache.key(`SELECT ${i}`, at(1), true), padded(i), 2_010);
    expect(cache.size.bytes).toBeLessThanOrEqual(80_000);
    expect(cache.size.answers).toBeLessThan(40);
    expect(cache.get(cache.key('SELECT 39', at(1), true))?.rows[0]![0]).toBe(39); // the newest stays
    expect(cache.get(cache.key('SELECT 0', at(1), true))).toBeUndefined(); // the oldest went first
  });

  it('gives each caller a copy: a kept answer cannot be changed from outside', () => {
    const cache = new ResultCache(1 << 20);
    const key = cache.key('SELECT 1', at(1), true);
    cache.set(key, answer([[1]]), 4);
    cache.get(key)!.rows.push([999]);
    expect(cache.get(key)!.rows).toEqual([[1]]);
  });
});

describe('the result cache on a cluster', () => {
  const BUDGET = 16 * 1024 * 1024;
  let cluster: TestCluster;
  let reference: Reference;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2], coordinator: { resultCacheBytes: BUDGET } });
    for (let b = 0; b < 4; b++)
      expect((await cluster.ingest('events', await eventNdjson(b * 2_500, (b + 1) * 2_500))).status).toBe(200);
    reference = await referenceFor(cluster, ['events']);
  });
  afterAll(async () => {
    reference?.close();
    await cluster?.close();
  });

  it.each(QUERY_CORPUS)(
    'answers "$name" exactly as one DuckDB, then again from the cache',
    async ({ name, sql, ordered }) => {
      const expected = await reference.run(sql);
      if (!('result' in expected)) throw new Error(expected.error);
      const first = await cluster.query(sql);
      expect(first.status, first.body.message).toBe(200);
      expectSameResult(first.body, expected.result, ordered, name);
      const again = await cluster.query(sql);
      expect(again.status).toBe(200);
      // Every corpus query reads only consistent functions, and its answer fits an eighth of the budget.
      expect(first.body.stats.result).toBe('computed');
      expect(again.body.stats.result).toBe('cached');
      expectSameResult(again.body, expected.result, ordered, name);
      expect(again.body.stats.cacheHits + again.body.stats.cacheMisses).toBe(
        first.body.stats.cacheHits + first.body.stats.cacheMisses,
      ); // the figures are those of the run that computed it
    },
  );

  it('computes again after an ingest, with the new rows', async () => {
    const sql = 'SELECT count(*) AS n, max(ts) AS latest FROM fresh';
    expect((await cluster.ingest('fresh', await eventNdjson(0, 500))).status).toBe(200);
    expect((await cluster.query(sql)).body.stats.result).toBe('computed');
    expect((await cluster.query(sql)).body).toMatchObject({
      rows: [[500, '2026-11-01 04:09:30']],
      stats: { result: 'cached' },
    });
    expect((await cluster.ingest('fresh', await eventNdjson(500, 800))).status).toBe(200);
    expect((await cluster.query(sql)).body).toMatchObject({
      rows: [[800, '2026-11-01 06:39:30']],
      stats: { result: 'computed' },
    });
  });

  it('never keeps an answer that reads random numbers, the clock or a sample', async () => {
    for (const sql of [
      'SELECT count(*) AS n, random() < 2 AS always FROM events',
      'SELECT count(*) AS n FROM events WHERE ts < now()',
      'SELECT count(*) AS n FROM events WHERE ts < current_localtimestamp()', // CONSISTENT by DuckDB's word
      'SELECT count(*) AS n, current_localtime() IS NOT NULL AS t FROM events',
      'SELECT sum(bytes) AS b FROM events USING SAMPLE 10%',
      'SELECT sum(bytes) AS b FROM events TABLESAMPLE 10%',
    ]) {
      expect((await cluster.query(sql)).body.stats.result).toBe('computed');
      expect((await cluster.query(sql)).body.stats.result).toBe('computed');
    }
  });

  it('streams a kept answer as NDJSON, row for row', async () => {
    const sql = 'SELECT service, count(*) AS n FROM events GROUP BY service ORDER BY service';
    const json = await cluster.query(sql);
    const streamed = await streamedQuery(cluster.coordinator.url, sql);
    expect(streamed.end?.stats?.result).toBe('cached');
    expect(streamed.head).toEqual({ columns: json.body.columns, types: json.body.types });
    expect(streamed.rows).toEqual(json.body.rows);
  });

  it('does not keep an answer past an eighth of its budget', async () => {
    const sql = "SELECT *, repeat('x', 300) AS padding FROM events"; // 10,000 rows of over 300 bytes: past 2 MiB
    const first = await cluster.query(sql);
    expect(first.status).toBe(200);
    expect(JSON.stringify(first.body.rows).length).toBeGreaterThan(BUDGET / 8);
    expect((await cluster.query(sql)).body.stats.result).toBe('computed');
  });

  it('counts computed and cached answers in its metrics', async () => {
    const metrics = await (await fetch(`${cluster.coordinator.url}/metrics`)).text();
    const count = (result: string) =>
      Number(new RegExp(`^berth_query_results_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(metrics)?.[1] ?? 0);
    expect(count('cached')).toBeGreaterThanOrEqual(QUERY_CORPUS.length + 1);
    expect(count('computed')).toBeGreaterThanOrEqual(QUERY_CORPUS.length + 6);
  });
});
