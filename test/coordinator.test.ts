/**
 * The serving path end to end on loopback: NDJSON ingested through the coordinator into segments in
 * the S3 API, scans routed by weighted ownership to real query nodes over HTTP, DuckDB on both
 * sides, and answers compared with one DuckDB over the same Parquet files.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Placement } from '../core/ownership.js';
import { QUERY_CORPUS } from './fixtures/query-corpus.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { referenceFor, type Reference } from './helpers/reference.js';
import { eventNdjson } from './helpers/event-data.js';
import { streamedQuery } from './helpers/streamed-query.js';

const BATCHES = 8;
const ROWS_PER_BATCH = 2_500;

const waitFor = async (condition: () => Promise<boolean>, what: string, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};

describe('the serving path', () => {
  let cluster: TestCluster;
  let reference: Reference;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [4, 2, 2] });
    for (let b = 0; b < BATCHES; b++) {
      const { status, body } = await cluster.ingest(
        'events',
        await eventNdjson(b * ROWS_PER_BATCH, (b + 1) * ROWS_PER_BATCH),
      );
      expect(status, JSON.stringify(body)).toBe(200);
    }
    reference = await referenceFor(cluster, ['events']);
  });
  afterAll(async () => {
    reference?.close();
    await cluster?.close();
  });

  /** How many of the table's segments each node owns: what a scan over all of them should read where. */
  async function segmentsPerOwner(): Promise<Record<string, number>> {
    const members = cluster.coordinator.view.members!;
    const placement = new Placement(members.map((m) => ({ id: m.id, weight: m.weight })));
    const owned: Record<string, number> = {};
    for (const s of await cluster.meta.listSegments('events')) {
      const owner = placement.owner(s.id)!.id;
      owned[owner] = (owned[owner] ?? 0) + 1;
    }
    return owned;
  }

  it('turns each NDJSON batch into one committed level-0 segment, pushed to its owner', async () => {
    const segments = await cluster.meta.listSegments('events');
    expect(segments).toHaveLength(BATCHES);
    expect(segments.every((s) => s.level === 0 && s.rows === ROWS_PER_BATCH)).toBe(true);
    const placement = cluster.coordinator.view.placement!;
    for (const segment of segments) {
      const owner = cluster.nodes.find((n) => n.id === placement.owner(segment.id)!.id)!;
      expect(owner.cache.has(segment.id), `${segment.id} is in its owner's cache`).toBe(true);
    }
  });

  it('commits nothing new when the same batch is sent again', async () => {
    const again = await cluster.ingest('events', await eventNdjson(0, ROWS_PER_BATCH));
    expect(again.status).toBe(200);
    expect(await cluster.meta.listSegments('events')).toHaveLength(BATCHES);
  });

  it.each(QUERY_CORPUS)('answers "$name" exactly as one DuckDB over the same files', async ({ name, sql, ordered }) => {
    const expected = await reference.run(sql);
    if (!('result' in expected)) throw new Error(expected.error);
    const { status, body } = await cluster.query(sql);
    expect(status, body.message).toBe(200);
    expectSameResult(body, expected.result, ordered, name);
  });

  it.each(QUERY_CORPUS)(
    'answers "$name" again from the plan it made the first time, exactly as one DuckDB',
    async ({ name, sql, ordered }) => {
      const expected = await reference.run(sql);
      if (!('result' in expected)) throw new Error(expected.error);
      const { status, body } = await cluster.query(sql);
      expect(status, body.message).toBe(200);
      expect(body.stats.plan).toBe('cached');
      expectSameResult(body, expected.result, ordered, name);
    },
  );

  it('holds every segment the corpus read over and over in its owner’s memory tier, as a DuckDB table', async () => {
    // The two passes above read every segment many times: each owner loaded its segments on the
    // second read, so most of those answers (all checked against DuckDB) came from the tier.
    const placement = cluster.coordinator.view.placement!;
    const segments = await cluster.meta.listSegments('events');
    await waitFor(async () => {
      return segments.every((segment) => {
        const owner = cluster.nodes.find((n) => n.id === placement.owner(segment.id)!.id)!;
        return owner.memory.ids().includes(segment.id);
      });
    }, 'every segment in its owner’s memory tier');
    for (const node of cluster.nodes) {
      expect(node.memory.usedBytes).toBeLessThanOrEqual(node.memory.budgetBytes);
      expect(node.memory.counters.failedLoads).toBe(0);
    }
  });

  it.each(QUERY_CORPUS)(
    'streams "$name" as NDJSON, exactly as one DuckDB answers it',
    async ({ name, sql, ordered }) => {
      const expected = await reference.run(sql);
      if (!('result' in expected)) throw new Error(expected.error);
      const answer = await streamedQuery(cluster.coordinator.url, sql);
      expect(answer.status, answer.error?.message).toBe(200);
      expect(answer.contentType).toBe('application/x-ndjson');
      expectSameResult({ ...answer.head!, rows: answer.rows }, expected.result, ordered, name);
      expect(answer.end?.stats?.route).toBeDefined();
    },
  );

  it('answers a streamed query that fails before its first row with the error’s status, as JSON', async () => {
    const answer = await streamedQuery(cluster.coordinator.url, 'SELECT nope FROM events');
    expect(answer.status).toBe(400);
    expect(answer.error?.message).toMatch(/nope/);
    const cast = await streamedQuery(cluster.coordinator.url, 'SELECT CAST(service AS INTEGER) FROM events');
    expect(cast.status).toBe(400); // met in the first chunk, before the status went out
  });

  it('ends a streamed answer with the error when the query fails after its first rows', async () => {
    // DuckDB runs no further ahead of the reader than its streaming buffer (about 1 MB): row 900,000 comes late.
    const answer = await streamedQuery(
      cluster.coordinator.url,
      "SELECT CASE WHEN i < 900000 THEN i ELSE error('stopped at row 900000') END AS i FROM (SELECT unnest(range(1000000)) AS i)",
    );
    expect(answer.status, JSON.stringify(answer.error)).toBe(200);
    expect(answer.rows.length).toBeGreaterThan(0);
    expect(answer.end).toMatchObject({ error: 'query_failed', status: 400 });
    expect(answer.end?.message).toMatch(/stopped at row 900000/);
    // Asked as JSON, the same query is refused whole, never answered with the rows before the error.
    const json = await cluster.query(
      "SELECT CASE WHEN i < 900000 THEN i ELSE error('stopped at row 900000') END AS i FROM (SELECT unnest(range(1000000)) AS i)",
    );
    expect(json.status).toBe(400);
    expect(json.body.message).toMatch(/stopped at row 900000/);
  });

  it('fails a query whose scan DuckDB stops part way on a node, with DuckDB’s reason, and the node lives on', async () => {
    // One segment of 20,000 rows: its owner, on one thread, sends chunks of them before the rows of
    // the last day fail. The message is not ASCII, as a trailer's must be.
    expect((await cluster.ingest('late', await eventNdjson(0, 20_000))).status).toBe(200);
    const sql =
      "SELECT *, repeat('x', 100) AS padding, CASE WHEN ts >= TIMESTAMP '2026-11-07' THEN error('☃ a late row') END AS boom FROM late";
    for (const answer of [await cluster.query(sql), await streamedQuery(cluster.coordinator.url, sql)]) {
      const body = 'body' in answer ? answer.body : answer.error;
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(body?.message).toMatch(/☃ a late row/);
    }
    const after = await cluster.query('SELECT count(*) AS n FROM late');
    expect(after.body.rows).toEqual([[20_000]]);
    expect(after.body.stats.fallbacks).toBe(0); // its owner still answers for it
  });

  it('stops a streamed query when its client leaves part way, and frees its slot', async () => {
    const client = new AbortController();
    const response = await fetch(`${cluster.coordinator.url}/v1/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
      body: JSON.stringify({ sql: 'SELECT a.ts, b.ts, c.ts FROM events a, events b, events c' }), // endless
      signal: client.signal,
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    expect((await reader.read()).done).toBe(false); // the first lines came
    const running = async () =>
      (
        (await (await fetch(`${cluster.coordinator.url}/v1/workload-groups`)).json()) as {
          groups: { running: number }[];
        }
      ).groups[0]!.running;
    expect(await running()).toBe(1);
    client.abort();
    await waitFor(async () => (await running()) === 0, 'the streamed query to stop', 10_000);
    expect((await cluster.query('SELECT count(*) FROM events')).body.rows).toEqual([[BATCHES * ROWS_PER_BATCH]]);
  });

  it('answers a query right after an ingest with the new rows, its plan still cached', async () => {
    const sql = 'SELECT count(*) AS n, count(DISTINCT service) AS services, max(ts) AS latest FROM fresh';
    expect((await cluster.ingest('fresh', await eventNdjson(0, 500))).status).toBe(200);
    expect((await cluster.query(sql)).body.stats.plan).toBe('planned');
    const before = await cluster.query(sql);
    expect(before.body).toMatchObject({ rows: [[500, 7, '2026-11-01 04:09:30']], stats: { plan: 'cached' } });
    expect((await cluster.ingest('fresh', await eventNdjson(500, 800))).status).toBe(200);
    const after = await cluster.query(sql);
    expect(after.body).toMatchObject({
      rows: [[800, 7, '2026-11-01 06:39:30']],
      stats: { plan: 'cached', segments: { total: 2 } },
    });
  });

  it('sends each segment’s scan to its owner, weighted by vCPU', async () => {
    const { body } = await cluster.query('SELECT service, count(*) FROM events GROUP BY service');
    expect(body.stats.route).toBe('aggregate');
    expect(body.stats.placement).toBe('owner');
    expect(body.stats.nodes).toEqual(await segmentsPerOwner());
    expect(body.stats.fallbacks).toBe(0);
    expect(body.stats.cacheMisses).toBe(0); // every segment was pushed to its owner at ingest
  });

  it('says where a query’s time went: plan, admission, scan and final stage, within its elapsed time', async () => {
    const { body } = await cluster.query('SELECT service, count(*) FROM events WHERE status >= 500 GROUP BY service');
    const { planMs, queuedMs, scanMs, finalMs } = body.stats.timings;
    for (const ms of [planMs, queuedMs, scanMs, finalMs]) expect(ms).toBeGreaterThanOrEqual(0);
    expect(scanMs).toBeGreaterThan(0); // three owners answered over HTTP
    expect(planMs + queuedMs + scanMs + finalMs).toBeLessThanOrEqual(body.stats.elapsedMs + 1); // each rounded
    const scan = body.stats.stages.scan[0]!;
    // An owner's own time is part of the scan stage's, which adds the requests and the exchange.
    expect(scan.slowestNodeMs).toBeGreaterThan(0);
    expect(scan.slowestNodeMs).toBeLessThanOrEqual(scanMs + 1);
  });

  it('prunes segments outside the WHERE time range', async () => {
    const { body } = await cluster.query(
      "SELECT count(*) FROM events WHERE ts >= '2026-11-03 12:00:00' AND ts < '2026-11-04'",
    );
    expect(body.stats.segments.total).toBe(BATCHES);
    expect(body.stats.segments.pruned).toBeGreaterThan(0);
    expect(body.stats.segments.scanned).toBeLessThan(BATCHES);
  });

  /** Each query in turn, answered 200 and exactly as one DuckDB (in order); the answers. */
  const answerExactly = async (sqls: string[]) => {
    const answers = [];
    for (const sql of sqls) {
      const expected = await reference.run(sql);
      if (!('result' in expected)) throw new Error(expected.error);
      const { status, body } = await cluster.query(sql);
      expect(status, body.message).toBe(200);
      expectSameResult(body, expected.result, true, sql);
      answers.push(body);
    }
    return answers;
  };

  it('plans a shape once: other literals reuse the plan, prune by their own time range and answer exactly', async () => {
    // A dashboard's panel refreshed: the window moves and narrows, the service and threshold change.
    const panel = (from: string, to: string, service: string, status: number) =>
      `SELECT service, count(*) AS n, max(status) AS worst FROM events WHERE ts >= TIMESTAMP '${from}' AND ts < '${to}' AND service <> '${service}' AND status >= ${status} GROUP BY service ORDER BY service`;
    const wide = panel('2026-11-01 06:00:00', '2026-11-06', 'api', 200);
    const narrow = panel('2026-11-03 12:00:00', '2026-11-04', 'web', 450);
    const answers = await answerExactly([wide, narrow]);
    expect(answers.map((a) => a.stats.plan)).toEqual(['planned', 'cached']);
    expect(answers[1]!.rows).not.toEqual(answers[0]!.rows);
    const scanned = answers.map((a) => a.stats.segments.scanned);
    expect(scanned[1]).toBeLessThan(scanned[0]!);
    expect(scanned[1]).toBeGreaterThan(0);
  });

  it('reads a window written as TIMESTAMP ± INTERVAL by both its bounds, one plan for every refresh', async () => {
    // A dashboard's "6 hours either side of a time": its time moves, its INTERVALs stay.
    const panel = (at: string) =>
      `SELECT level, count(*) AS n, min(ts) AS first, max(ts) AS last FROM events WHERE ts >= TIMESTAMP '${at}' - INTERVAL 6 HOUR AND ts < TIMESTAMP '${at}' + INTERVAL '6 hours' GROUP BY level ORDER BY level`;
    const answers = await answerExactly([panel('2026-11-02 12:00:00'), panel('2026-11-05 00:00:00')]);
    expect(answers.map((a) => a.stats.plan)).toEqual(['planned', 'cached']);
    expect(answers[1]!.rows).not.toEqual(answers[0]!.rows);
    // Twelve hours lie within two of the eight segments (about 21 hours each): both ends prune.
    for (const { stats } of answers) {
      expect(stats.segments.scanned).toBeGreaterThan(0);
      expect(stats.segments.scanned).toBeLessThanOrEqual(2);
    }
  });

  it('reports running and waiting queries per workload group', async () => {
    const response = await fetch(`${cluster.coordinator.url}/v1/workload-groups`);
    expect(await response.json()).toEqual({
      groups: [{ name: 'serving', running: 0, waiting: 0, maxConcurrency: 16, maxQueueSize: 1_000 }],
    });
  });

  it('runs a non-decomposable query in two stages: owners send the named columns, filtered, and say why', async () => {
    const { body } = await cluster.query(
      "SELECT service, median(latency_ms) FROM events WHERE level = 'error' GROUP BY service",
    );
    expect(body.stats.verdict).toEqual({ class: 'light' });
    expect(body.stats.route).toBe('rows');
    expect(body.stats.reason).toMatch(/does not decompose/);
    const scan = body.stats.stages.scan[0]!;
    expect(scan).toMatchObject({ table: 'events', split: 'rows', columns: ['service', 'level', 'latency_ms'] });
    // Only error rows moved: the filter ran on the owners.
    const errors = (await cluster.query("SELECT count(*) FROM events WHERE level = 'error'")).body.rows[0]![0];
    expect(scan!.rows).toBe(errors);
    // Each owner scanned its own segments: nothing was gathered on one node.
    expect(body.stats.nodes).toEqual(await segmentsPerOwner());
    expect(body.stats.bytesMoved).toBe(scan!.bytes);
  });

  it.each([
    ['malformed SQL', 'SELEC count(*) FROM events', 400, /syntax error/],
    ['an unknown table', 'SELECT * FROM nowhere', 400, /unknown table "nowhere"/],
    ['an unknown column', 'SELECT missing_column FROM events', 400, /missing_column/],
    ['a table function', "SELECT * FROM read_parquet('/etc/passwd')", 400, /not allowed: table function read_parquet/],
    ['a write', 'DELETE FROM events', 400, /only SELECT/i],
  ])('answers %s with a 400 that says what was wrong', async (_label, sql, status, message) => {
    const { status: got, body } = await cluster.query(sql);
    expect(got).toBe(status);
    expect(body.message).toMatch(message);
    expect((await cluster.query('SELECT count(*) FROM events')).status).toBe(200);
  });

  it('rejects bad ingests with a clear 4xx and commits nothing', async () => {
    const before = (await cluster.meta.listSegments('events')).length;
    expect((await cluster.ingest('events', '{"ts": "2026-11-01 00:00:00"}\n', {})).status).toBe(401);
    const broken = await cluster.ingest('events', '{"ts": "2026-11-01 00:00:00", "service": \n');
    expect(broken.status).toBe(400);
    expect(broken.body.message).toMatch(/line 1: not valid JSON/);
    const noTs = await cluster.ingest('newtable', '{"service": "api"}\n');
    expect(noTs.status).toBe(400);
    expect(noTs.body.message).toMatch(/no "ts" column/);
    expect((await cluster.ingest('events', '')).status).toBe(400);
    expect((await cluster.ingest('Bad-Name', '{"ts": "2026-11-01"}\n')).status).toBe(400);
    const huge = await cluster.ingest('events', Buffer.alloc(9 * 1024 * 1024, 'x'));
    expect(huge.status).toBe(413);
    // Chunked, with no length to refuse up front: still a 413 the client reads, not a reset.
    const chunk = Buffer.alloc(256 * 1024, 'x');
    let sent = 0;
    const chunked = await fetch(`${cluster.coordinator.url}/v1/tables/events/rows`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${TOKEN}` },
      duplex: 'half',
      body: new ReadableStream({
        pull(controller) {
          if ((sent += chunk.length) > 12 * 1024 * 1024) controller.close();
          else controller.enqueue(chunk);
        },
      }),
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(await chunked.json()).toEqual({
      error: 'body_too_large',
      message: `the body exceeds the limit of ${8 * 1024 * 1024} bytes`,
    });
    expect((await cluster.meta.listSegments('events')).length).toBe(before);
  });

  it('takes a pushed segment only on its owner; any other node declines it', async () => {
    const id = 'events-l0-20261101-push-test'; // in no cache yet
    const placement = cluster.coordinator.view.placement!;
    const push = async (nodeUrl: string) => {
      const response = await fetch(`${nodeUrl}/v1/segments/${id}?table=events`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream', authorization: `Bearer ${TOKEN}` },
        body: Buffer.from('PAR1 stand-in bytes'),
      });
      return (await response.json()) as { accepted: boolean; owner: string };
    };
    const owner = cluster.nodes.find((n) => n.id === placement.owner(id)!.id)!;
    const other = cluster.nodes.find((n) => n !== owner)!;
    expect(await push(other.url)).toMatchObject({ accepted: false, owner: owner.id });
    expect(other.cache.has(id)).toBe(false);
    expect(await push(owner.url)).toMatchObject({ accepted: true, owner: owner.id });
    expect(owner.cache.has(id)).toBe(true);
  });

  it('refuses unauthenticated and traversal pushes at a query node', async () => {
    const node = cluster.nodes[0]!;
    const unauthenticated = await fetch(`${node.url}/v1/segments/events-l0-x?table=events`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: 'PAR1',
    });
    expect(unauthenticated.status).toBe(401);
    const traversal = await fetch(`${node.url}/v1/segments/..%2F..%2Fetc%2Fpasswd?table=events`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', authorization: `Bearer ${TOKEN}` },
      body: 'PAR1',
    });
    expect(traversal.status).toBe(400);
    expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
  });
});
