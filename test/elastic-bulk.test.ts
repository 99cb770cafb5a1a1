/**
 * Elasticsearch's _bulk on the coordinator, through the official client (issue 30, item 3): the
 * handshake its users' shippers make, 100,000 documents from the bulk helper with malformed ones
 * among them (each refused alone, the rest committed once, answers equal to one DuckDB's over the
 * same documents), answers lost after the commit and sent again by the client without a row
 * twice, a batch that fails whole answered 429 item by item and retried by the helper, gzip, the
 * body limit, and the token as a bearer token or the basic-auth password.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { Client, errors } from '@elastic/elasticsearch';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readJsonResult } from '../services/common/final-stage/result-json.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { resultDifference } from './helpers/compare-results.js';
import { startLossyProxy, type LossyProxy } from './helpers/lossy-proxy.js';

const START_MS = Date.parse('2026-11-01T00:00:00Z');
const SERVICES = ['checkout', 'search', 'auth', 'cart'];
const DOCUMENTS = 100_000;
/** Every 97th document is malformed, in one of these ways (what Berth says about it). */
const MALFORMED: { kind: string; type: string; reason: RegExp }[] = [
  { kind: 'duplicate key', type: 'row_does_not_fit', reason: /not valid JSON \(Duplicate key 'seq'/ },
  { kind: 'status as a string', type: 'row_does_not_fit', reason: /field "status"/ },
  { kind: 'no @timestamp', type: 'row_does_not_fit', reason: /has no "@timestamp"/ },
  { kind: 'epoch @timestamp', type: 'row_does_not_fit', reason: /@timestamp.*(epoch numbers|ISO 8601)/ },
  { kind: 'impossible date', type: 'row_does_not_fit', reason: /not a date-time on the calendar/ },
  { kind: 'field differing in case', type: 'row_does_not_fit', reason: /only in case/ },
  { kind: 'update action', type: 'unsupported_action', reason: /update is not supported/ },
  { kind: 'index that is no table name', type: 'invalid_index_name', reason: /send it as "web_logs"/ },
];
const malformedKind = (seq: number) => (seq % 97 === 0 ? MALFORMED[(seq / 97) % MALFORMED.length] : undefined);

/** A well-formed document, as a shipper sends one: ISO time, a nested object, a number with a fraction. */
const documentOf = (seq: number) => ({
  '@timestamp': new Date(START_MS + seq * 1000).toISOString(),
  service: SERVICES[seq % SERVICES.length]!,
  status: [200, 200, 201, 404, 500][seq % 5]!,
  latency_ms: (seq % 1000) + 0.25,
  seq,
  message: `request ${seq}`,
  http: { method: seq % 3 === 0 ? 'POST' : 'GET', path: `/p/${seq % 7}` },
});

/** What the helper's onDocument returns for document `seq`: an action and its document. */
function operationOf(seq: number, index: string): [Record<string, unknown>, unknown] {
  const doc = documentOf(seq);
  const create = { create: { _index: index } };
  switch (malformedKind(seq)?.kind) {
    case undefined:
      return [create, doc];
    case 'duplicate key':
      return [create, `${JSON.stringify(doc).slice(0, -1)},"seq":${seq + 1}}`];
    case 'status as a string':
      return [create, { ...doc, status: String(doc.status) }];
    case 'no @timestamp':
      return [create, Object.fromEntries(Object.entries(doc).filter(([field]) => field !== '@timestamp'))];
    case 'epoch @timestamp':
      return [create, { ...doc, '@timestamp': START_MS + seq * 1000 }];
    case 'impossible date':
      return [create, { ...doc, '@timestamp': '2026-02-30T10:00:00Z' }];
    case 'field differing in case':
      return [create, { ...doc, Service: 'again' }];
    case 'update action':
      return [{ update: { _index: index, _id: String(seq) } }, {}];
    default:
      return [{ index: { _index: 'Web-Logs' } }, doc];
  }
}

describe('Elasticsearch’s _bulk on the coordinator', () => {
  let cluster: TestCluster;
  let proxy: LossyProxy;
  let client: Client;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2], coordinator: { maxShipperBytes: 4 * 1024 * 1024 } });
    // Loses the answers of the 2nd, 5th and 9th bulk requests, after the coordinator committed them.
    proxy = await startLossyProxy(
      cluster.coordinator.url,
      (line, n) => line.startsWith('POST /_bulk') && [2, 5, 9].includes(n),
    );
    client = new Client({ node: proxy.url, auth: { bearer: TOKEN }, maxRetries: 5, requestTimeout: 120_000 });
  });
  afterAll(async () => {
    await client?.close();
    await proxy?.close();
    await cluster?.close();
  });

  const query = async (sql: string) => {
    const { status, body } = await cluster.query(sql);
    expect(status, body.message).toBe(200);
    return body;
  };

  it('answers the handshake shippers make: version, product, license, features, health, templates', async () => {
    const info = await client.info();
    expect(info.version.number).toMatch(/^8\./);
    expect(info.tagline).toBe('You Know, for Search');
    expect(info.version.build_flavor).toBe('default');
    expect((await client.license.get()).license.status).toBe('active');
    // Logstash turns index lifecycle management off when the cluster says it has none.
    expect((await client.xpack.info()).features.ilm).toMatchObject({ available: false, enabled: false });
    expect((await client.cluster.health()).status).toBe('green');
    expect(
      await client.indices.putIndexTemplate({ name: 'logs', index_patterns: ['logs*'], template: {} }),
    ).toMatchObject({ acknowledged: true });
    expect(await client.indices.existsIndexTemplate({ name: 'logs' })).toBe(true);
    expect(await client.indices.exists({ index: 'never_made' })).toBe(false);
    // The token as the basic-auth password, under any user name, as Logstash and Fluent Bit send it.
    const basic = new Client({ node: cluster.coordinator.url, auth: { username: 'shipper', password: TOKEN } });
    try {
      expect((await basic.info()).cluster_name).toBe('berth');
    } finally {
      await basic.close();
    }
    const wrong = new Client({ node: cluster.coordinator.url, auth: { bearer: 'not-the-token' }, maxRetries: 0 });
    try {
      const refused = await wrong.bulk({ operations: [{ index: { _index: 'web' } }, documentOf(1)] }).catch((e) => e);
      expect(refused).toBeInstanceOf(errors.ResponseError);
      expect((refused as errors.ResponseError).statusCode).toBe(401);
      expect((refused as errors.ResponseError).body).toMatchObject({ error: { type: 'security_exception' } });
    } finally {
      await wrong.close();
    }
    expect((await cluster.query('SELECT count(*) FROM web')).status).toBe(400); // nothing was written
  });

  it(
    'commits 100,000 documents from the bulk helper once each, refuses each malformed one alone, and sends lost answers again without a row twice',
    { timeout: 300_000 },
    async () => {
      const dropped: { status: number; error: { type: string; reason: string } | null; seq: number }[] = [];
      const seqs = Array.from({ length: DOCUMENTS }, (_, seq) => seq);
      const stats = await client.helpers.bulk({
        datasource: seqs,
        onDocument: (seq: number) => operationOf(seq, 'web') as never,
        flushBytes: 400_000,
        concurrency: 3,
        retries: 3,
        wait: 100,
        onDrop: (drop) =>
          dropped.push({
            status: drop.status,
            error: drop.error as { type: string; reason: string } | null,
            // An update's document is only {doc}; the others say which they are in their message.
            seq: Number(
              (drop.operation as { update?: { _id: string } }).update?._id ??
                (drop.document as unknown as { message: string }).message.replace('request ', ''),
            ),
          }),
      });
      const malformed = seqs.filter((seq) => malformedKind(seq));
      expect(stats.failed).toBe(malformed.length);
      expect(stats.successful).toBe(DOCUMENTS - malformed.length);
      expect(dropped.map((d) => d.seq).sort((a, b) => a - b)).toEqual(malformed);
      for (const drop of dropped) {
        const expected = malformedKind(drop.seq)!;
        expect(drop.status, expected.kind).toBe(400);
        expect(drop.error?.type, expected.kind).toBe(expected.type);
        expect(drop.error?.reason, expected.kind).toMatch(expected.reason);
      }
      // Three answers were lost after their commits, and the client sent those requests again.
      expect(proxy.lost).toBe(3);
      const bulkRequests = proxy.requests.filter((line) => line.startsWith('POST /_bulk')).length;
      const segments = await cluster.meta.listSegments('web');
      expect(bulkRequests).toBe(segments.length + 3);

      // Every well-formed document once: by count, by distinct seq, and in the manifest.
      const good = seqs.filter((seq) => !malformedKind(seq));
      const counted = await query('SELECT count(*) AS n, count(DISTINCT seq) AS seqs FROM web');
      expect(counted.rows).toEqual([[good.length, good.length]]);
      expect(segments.reduce((sum, s) => sum + s.rows, 0)).toBe(good.length);

      // One DuckDB over the same documents answers the same, values and types.
      const file = path.join(cluster.dir, 'web.ndjson');
      await writeFile(file, good.map((seq) => JSON.stringify(documentOf(seq))).join('\n'));
      const duckdb = await DuckDBInstance.create(':memory:');
      const c = await duckdb.connect();
      try {
        await c.run(`SET TimeZone = 'UTC'`);
        await c.run(
          `CREATE VIEW web AS SELECT * REPLACE (CAST("@timestamp" AS TIMESTAMP) AS "@timestamp") FROM read_json('${file}', format = 'newline_delimited', columns = {'@timestamp': 'TIMESTAMPTZ', service: 'VARCHAR', status: 'BIGINT', latency_ms: 'DOUBLE', seq: 'BIGINT', message: 'VARCHAR', http: 'STRUCT(method VARCHAR, path VARCHAR)'})`,
        );
        for (const sql of [
          'SELECT count(*) AS n, sum(status) AS statuses, min("@timestamp") AS first, max("@timestamp") AS last FROM web',
          'SELECT service, http.method AS method, count(*) AS n, sum(latency_ms) AS latency, max(seq) AS top, min(message) AS m FROM web GROUP BY ALL ORDER BY ALL',
          `SELECT status, count(*) AS n FROM web WHERE "@timestamp" >= TIMESTAMP '2026-11-01 20:00:00' GROUP BY status ORDER BY status`,
        ]) {
          const expected = await readJsonResult(await c.stream(sql));
          expect(resultDifference(await query(sql), expected, true), sql).toBeUndefined();
        }
      } finally {
        c.closeSync();
        duckdb.closeSync();
      }
      // @timestamp is the table's time: a range prunes the segments before it.
      const pruned = await query(`SELECT count(*) FROM web WHERE "@timestamp" >= TIMESTAMP '2026-11-02 00:00:00'`);
      expect(pruned.stats.segments.pruned).toBeGreaterThan(0);
    },
  );

  it('answers each item of a batch that failed whole 429, which the helper sends again until it commits, once', async () => {
    await cluster.stopMeta();
    let metaBack: Promise<void> | undefined;
    const helper = client.helpers.bulk({
      datasource: Array.from({ length: 50 }, (_, i) => ({ ...documentOf(i), seq: 1_000_000 + i })),
      onDocument: () => ({ create: { _index: 'outage' } }),
      retries: 200,
      wait: 50,
    });
    // Meta comes back once the helper has been answered 429 and is sending again.
    const poll = setInterval(() => {
      if (helper.stats.retry > 0 && !metaBack) metaBack = cluster.startMeta();
    }, 20);
    let stats;
    try {
      stats = await helper;
    } finally {
      clearInterval(poll);
      await (metaBack ?? cluster.startMeta());
    }
    expect(stats.retry).toBeGreaterThan(0);
    expect(stats.successful).toBe(50);
    expect((await query('SELECT count(*), count(DISTINCT seq) FROM outage')).rows).toEqual([[50, 50]]);
  });

  it('takes gzip bodies, and refuses a body past the limit, as sent or once decompressed, with 413', async () => {
    const gzipped = new Client({ node: cluster.coordinator.url, auth: { bearer: TOKEN }, compression: true });
    try {
      const answer = await gzipped.bulk({
        operations: [1, 2, 3].flatMap((i) => [{ index: { _index: 'zipped' } }, documentOf(i)]),
      });
      expect(answer.errors).toBe(false);
      expect(answer.items.map((item) => item.index?.status)).toEqual([201, 201, 201]);
    } finally {
      await gzipped.close();
    }
    expect((await query('SELECT count(*) FROM zipped')).rows).toEqual([[3]]);

    // 5 MiB of rows that gzip to a few kilobytes: past the 4 MiB limit only once decompressed.
    const line = `{"index":{}}\n${JSON.stringify(documentOf(7))}\n`;
    const bomb = gzipSync(line.repeat(Math.ceil((5 * 1024 * 1024) / line.length)));
    expect(bomb.length).toBeLessThan(1024 * 1024);
    for (const [body, headers] of [
      [bomb, { 'content-encoding': 'gzip' }],
      [Buffer.alloc(5 * 1024 * 1024, 0x20), {}],
    ] as const) {
      const response = await fetch(`${cluster.coordinator.url}/bomb/_bulk`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${TOKEN}`, ...headers },
        body,
      });
      expect(response.status).toBe(413);
      expect(await response.json()).toMatchObject({ status: 413, error: { type: 'body_too_large' } });
    }
    expect((await cluster.query('SELECT count(*) FROM bomb')).status).toBe(400);
  });

  it('refuses a body that is not bulk NDJSON whole, in Elasticsearch’s shape, and commits nothing of it', async () => {
    const response = await fetch(`${cluster.coordinator.url}/_bulk`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${TOKEN}` },
      body: `{"index":{"_index":"broken"}}\n${JSON.stringify(documentOf(1))}\n{"upsert":{"_index":"broken"}}\n{}\n`,
    });
    expect(response.status).toBe(400);
    expect(response.headers.get('x-elastic-product')).toBe('Elasticsearch');
    const body = (await response.json()) as { error: { type: string; reason: string } };
    expect(body.error.type).toBe('malformed_bulk');
    expect(body.error.reason).toMatch(/^line 3: expected one of the actions index, create, update, delete/);
    expect((await cluster.query('SELECT count(*) FROM broken')).status).toBe(400);
  });
});
