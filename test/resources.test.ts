/**
 * Bounded work: a query stops on its node when its client leaves or its deadline passes, a result
 * past the cap is refused, a hung node is passed over and never holds every slot, and an
 * unreachable meta is a 503 that says so. CPU is read from this process, where the in-process
 * nodes' DuckDB threads run.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { availableMemoryBytes, openSandboxedDuckDB } from '../services/common/duckdb.js';
import { startCluster, spawnNodeProcess, type NodeProcess, type TestCluster } from './helpers/cluster.js';
import { signalGroup } from './helpers/process-groups.js';
import { streamedQuery } from './helpers/streamed-query.js';

/** Minutes of work on one node: a three-way self join that no optimizer can shortcut. */
const ENDLESS = 'SELECT count(*) FROM events a, events b, events c WHERE a.bytes + b.bytes + c.bytes = 17';

/** Scans the in-process nodes have ended, by outcome (their berth_scans_total counters). */
async function scansEnded(cluster: TestCluster): Promise<number> {
  let total = 0;
  for (const node of cluster.nodes) {
    const metrics = await (await fetch(`${node.url}/metrics`)).text();
    for (const match of metrics.matchAll(/^berth_scans_total\{[^}]*\} (\d+)$/gm)) total += Number(match[1]);
  }
  return total;
}

/** CPU seconds this process spends per second of wall time, over `ms`. */
async function cpuLoad(ms = 1_000): Promise<number> {
  const before = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1e6 / (ms / 1_000);
}

const waitFor = async (condition: () => Promise<boolean>, what: string, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};

describe('deadlines, cancellation and caps', () => {
  let cluster: TestCluster;
  const DEADLINE_MS = 4_000;

  beforeAll(async () => {
    cluster = await startCluster({
      vcpus: [2],
      coordinator: { queryDeadlineMs: DEADLINE_MS, scanTimeoutMs: 60_000, maxResultBytes: 64 * 1024 },
    });
    await cluster.ingestEvents('events', 2, 1_000);
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('stops the node’s DuckDB within 2 s of the client leaving', async () => {
    const idle = await cpuLoad();
    const ended = await scansEnded(cluster);
    const client = new AbortController();
    const answer = fetch(`${cluster.coordinator.url}/v1/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sql: ENDLESS }),
      signal: client.signal,
    }).catch(() => undefined);
    let busy = 0;
    await waitFor(async () => (busy = await cpuLoad(500)) > idle + 0.1, 'the node to get busy');
    client.abort();
    await answer;
    // The node's scan ends (interrupted), and its CPU falls back towards idle.
    await waitFor(async () => (await scansEnded(cluster)) > ended, 'the node’s scan to end', 2_000);
    expect(await cpuLoad()).toBeLessThan(idle + (busy - idle) / 3);
    expect((await cluster.query('SELECT count(*) FROM events')).body.rows).toEqual([[2_000]]);
  });

  it('stops a query at its deadline with a 504 that says so, on the node too', async () => {
    const idle = await cpuLoad();
    const started = Date.now();
    const { status, body } = await cluster.query(ENDLESS);
    expect(status).toBe(504);
    expect(body.message).toBe(`the query ran past its deadline of ${DEADLINE_MS} ms (BERTH_QUERY_DEADLINE_MS)`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS - 100);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await cpuLoad()).toBeLessThan(idle + 0.1);
  });

  it('holds table-less SQL to the same deadline', async () => {
    const endless = await cluster.query(
      'WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r',
    );
    expect(endless.status).toBe(504);
    expect(endless.body.error).toBe('deadline_exceeded');
  });

  it('refuses a result past the cap with a 413 that says how to shrink it, on every route', async () => {
    for (const sql of [
      'SELECT * FROM events',
      'SELECT DISTINCT * FROM events',
      'SELECT service, ts, bytes FROM events ORDER BY ts LIMIT 1900',
    ]) {
      const { status, body } = await cluster.query(sql);
      expect(status, `${sql}: ${JSON.stringify(body)}`).toBe(413);
      expect(body.message).toMatch(
        /larger than the limit of 65536 bytes \(BERTH_MAX_RESULT_BYTES\): aggregate, filter or add a LIMIT/,
      );
    }
    expect((await cluster.query('SELECT * FROM events ORDER BY ts LIMIT 10')).status).toBe(200);
  });

  it('streams an answer past the cap whole to a client that asks for NDJSON', async () => {
    const answer = await streamedQuery(cluster.coordinator.url, 'SELECT * FROM events ORDER BY ts, service, bytes');
    expect(answer.status).toBe(200);
    expect(answer.rows).toHaveLength(2_000);
    expect(JSON.stringify(answer.rows).length).toBeGreaterThan(64 * 1024);
    const first = await cluster.query('SELECT * FROM events ORDER BY ts, service, bytes LIMIT 10');
    expect(answer.rows.slice(0, 10)).toEqual(first.body.rows);
    expect(answer.end?.stats?.segments.scanned).toBe(2);
  });

  it('cuts off a streamed answer whose client stopped reading, at the deadline, and frees its slot', async () => {
    const response = await fetch(`${cluster.coordinator.url}/v1/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
      body: JSON.stringify({ sql: 'SELECT a.*, b.*, c.ts FROM events a, events b, events c' }), // endless, and wide
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    expect((await reader.read()).done).toBe(false); // then reads no more: the coordinator's writes back up
    const running = async () =>
      (
        (await (await fetch(`${cluster.coordinator.url}/v1/workload-groups`)).json()) as {
          groups: { running: number }[];
        }
      ).groups[0]!.running;
    await waitFor(async () => (await running()) === 0, 'the stalled query to be cut off', DEADLINE_MS + 20_000);
    // What the client finds when it reads on: the connection cut while the coordinator waited on it,
    // or (when DuckDB was still filling the buffers at the deadline) a last line saying so. Never stats.
    const decoder = new TextDecoder();
    let tail = '';
    const ending = await (async () => {
      try {
        for (let read = await reader.read(); !read.done; read = await reader.read())
          tail = (tail + decoder.decode(read.value)).slice(-4_096);
        return 'ended';
      } catch {
        return 'cut off';
      }
    })();
    if (ending === 'ended') expect(tail.trim().split('\n').at(-1)).toMatch(/"error":"deadline_exceeded"/);
  });

  it('gives DuckDB a memory limit of a quarter of the memory available, not 80 % of the machine', async () => {
    const instance = await openSandboxedDuckDB({ allowedDirectories: [cluster.dir], tempDirectory: cluster.dir });
    const c = await instance.connect();
    const text = String((await c.runAndReadAll("SELECT current_setting('memory_limit')")).getRows()[0]![0]);
    c.closeSync();
    instance.closeSync();
    const [, amount, unit] = /^([\d.]+) (KiB|MiB|GiB|TiB)$/.exec(text) ?? [];
    const bytes = Number(amount) * 1024 ** (['KiB', 'MiB', 'GiB', 'TiB'].indexOf(unit!) + 1);
    const quarter = availableMemoryBytes() / 4;
    expect(Math.abs(bytes - quarter) / quarter, `memory_limit is ${text}`).toBeLessThan(0.05);
  });
});

describe('a hung node', () => {
  let cluster: TestCluster;
  let hung: NodeProcess | undefined;
  const NODE_TIMEOUT_MS = 1_500;

  beforeAll(async () => {
    cluster = await startCluster({
      vcpus: [1],
      coordinator: { scanTimeoutMs: NODE_TIMEOUT_MS, queryDeadlineMs: 60_000 },
    });
  });
  afterEach(async () => {
    await hung?.stop();
    hung = undefined;
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('is passed over by the next-ranked node after its timeout, and never holds every slot', async () => {
    // The process node declares most of the weight, so it owns most segments.
    hung = await spawnNodeProcess(cluster, { BERTH_NODE_VCPUS: '8' });
    await cluster.awaitMembers([...cluster.nodes.map((n) => n.id), hung.id]);
    await cluster.ingestEvents('events', 6, 300);
    const healthy = await cluster.query('SELECT count(*), sum(bytes) FROM events');
    expect(healthy.body.stats.nodes[hung.id]).toBeGreaterThan(0);

    signalGroup(hung.child, 'SIGSTOP');
    const started = Date.now();
    let stuckAnswered = 0;
    const stuck = Array.from({ length: 20 }, () =>
      cluster.query('SELECT count(*), sum(bytes) FROM events').then((result) => {
        stuckAnswered++;
        return { ...result, ms: Date.now() - started };
      }),
    );
    // Queries that read no segment never wait for slots that queries on the hung node hold.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const select42 = await cluster.query('SELECT 42');
    expect(select42.body.rows).toEqual([[42]]);
    expect(stuckAnswered, 'SELECT 42 was answered while the queries on the hung node still waited').toBe(0);

    for (const { status, body } of await Promise.all(stuck)) {
      expect(status, body.message).toBe(200);
      expect(body.rows).toEqual(healthy.body.rows);
      expect(body.stats.nodes[hung.id]).toBeUndefined();
    }
    // The hung node is now passed over at once: the next query does not wait for its timeout.
    const after = await cluster.query('SELECT count(*), sum(bytes) FROM events');
    expect(after.body.rows).toEqual(healthy.body.rows);
    expect(after.body.stats.elapsedMs).toBeLessThan(NODE_TIMEOUT_MS);
  });
});

describe('meta down', () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [1] });
    await cluster.ingestEvents('events', 2, 200);
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('answers 503 with the reason, readyz follows, and nothing is lost when meta returns', async () => {
    const before = (await cluster.query('SELECT count(*), sum(bytes) FROM events')).body.rows;
    expect((await fetch(`${cluster.coordinator.url}/readyz`)).status).toBe(200);
    await cluster.stopMeta();
    try {
      const query = await cluster.query('SELECT count(*) FROM events');
      expect(query.status).toBe(503);
      expect(query.body).toMatchObject({
        error: 'meta_unavailable',
        message: expect.stringMatching(/^the meta service is unavailable: .*ECONNREFUSED/),
      });
      const ingest = await cluster.ingest('events', '{"ts": "2026-11-01 00:00:00", "bytes": 1}\n');
      expect(ingest.status).toBe(503);
      const ready = await fetch(`${cluster.coordinator.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({
        ready: false,
        reason: expect.stringMatching(/meta service is unavailable/),
      });
    } finally {
      await cluster.startMeta();
    }
    expect((await fetch(`${cluster.coordinator.url}/readyz`)).status).toBe(200);
    expect((await cluster.query('SELECT count(*), sum(bytes) FROM events')).body.rows).toEqual(before);
  });
});
