/** Meta's HTTP API: validation, authentication and the answers it gives; the store behind it has its own contract suite. */
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildMetaApp } from '../services/meta/app.js';
import { openMetaStore } from '../services/meta/open-store.js';
import { SqliteMetaStore } from '../services/meta/sqlite-store.js';
import type { MetaStore } from '../services/meta/store.js';
import { segment, table } from './helpers/meta-fixtures.js';
import { createTestDatabase } from './helpers/postgres.js';

const TOKEN = 'test-token';
const auth = { authorization: `Bearer ${TOKEN}` };

describe('meta HTTP API', () => {
  let store: MetaStore;
  let app: ReturnType<typeof buildMetaApp>;
  beforeEach(() => {
    store = new SqliteMetaStore({ file: ':memory:' });
    app = buildMetaApp({ store, token: TOKEN, logger: false });
  });
  afterEach(async () => {
    await app.close();
    await store.close();
  });

  it('registers, heartbeats and lists members over HTTP', async () => {
    const register = await app.inject({
      method: 'POST',
      url: '/v1/nodes',
      headers: auth,
      payload: { id: 'n1', group: 'serving', url: 'http://127.0.0.1:9', vcpus: 4, startedAt: 1 },
    });
    expect(register.statusCode).toBe(200);
    expect(
      (await app.inject({ method: 'POST', url: '/v1/nodes/n1/heartbeat', headers: auth, payload: { vcpus: 3 } }))
        .statusCode,
    ).toBe(200);
    expect((await app.inject('/v1/groups/serving/members')).json()).toEqual({
      group: 'serving',
      members: [{ id: 'n1', url: 'http://127.0.0.1:9', weight: 3 }],
    });
    const unknown = await app.inject({
      method: 'POST',
      url: '/v1/nodes/ghost/heartbeat',
      headers: auth,
      payload: { vcpus: 3 },
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().message).toMatch(/not registered/);
  });

  it('refuses unauthenticated changes with 401 and changes nothing', async () => {
    const response = await app.inject({
      method: 'POST',
      url: '/v1/nodes',
      payload: { id: 'n1', group: 'serving', url: 'http://x', vcpus: 4, startedAt: 1 },
    });
    expect(response.statusCode).toBe(401);
    const wrong = await app.inject({
      method: 'PUT',
      url: '/v1/tables/events',
      headers: { authorization: 'Bearer nope' },
      payload: { timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] },
    });
    expect(wrong.statusCode).toBe(401);
    expect(await store.backends()).toEqual([]);
    expect(await store.listTables()).toEqual([]);
  });

  it('changes a table’s column types only with the token, and only the types', async () => {
    const from = [
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'x', type: 'HUGEINT' },
    ];
    const to = [from[0]!, { name: 'x', type: 'DOUBLE' }];
    await store.ensureTable({ name: 'legacy', timestampColumn: 'ts', columns: from });
    const change = (headers: Record<string, string>, payload: object) =>
      app.inject({ method: 'PUT', url: '/v1/tables/legacy/column-types', headers, payload });
    expect((await change({}, { from, to })).statusCode).toBe(401);
    expect((await change({ authorization: 'Bearer nope' }, { from, to })).statusCode).toBe(401);
    expect((await store.getTable('legacy'))!.columns).toEqual(from);
    const renamed = await change(auth, { from, to: [from[0], { name: 'y', type: 'DOUBLE' }] });
    expect(renamed.statusCode).toBe(400);
    expect(renamed.json()).toMatchObject({ error: 'only_types_change' });
    const changed = await change(auth, { from, to });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toEqual({ name: 'legacy', timestampColumn: 'ts', columns: to, incarnation: 1 });
    const stale = await change(auth, { from, to: [from[0], { name: 'x', type: 'BIGINT' }] });
    expect(stale.statusCode).toBe(409);
    expect(stale.json()).toMatchObject({ error: 'table_changed' });
    expect((await change(auth, { from: to, to })).statusCode).toBe(200);
    expect(
      (await app.inject({ method: 'PUT', url: '/v1/tables/nope/column-types', headers: auth, payload: { from, to } }))
        .statusCode,
    ).toBe(404);
  });

  it('drops a table only with the token, lists the drop, and retires its segments in batches', async () => {
    await store.ensureTable({ name: 'doomed', timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] });
    for (const id of ['doomed-1', 'doomed-2'])
      await store.commitSegment({ id, table: 'doomed', minTs: 0, maxTs: 1, rows: 3, bytes: 30, level: 0 });
    const drop = (headers: Record<string, string>, query = '?incarnation=1') =>
      app.inject({ method: 'DELETE', url: `/v1/tables/doomed${query}`, headers });
    expect((await drop({})).statusCode).toBe(401);
    expect((await drop(auth, '')).statusCode).toBe(400);
    expect((await drop(auth)).statusCode).toBe(200);
    expect((await drop(auth)).statusCode).toBe(200); // a repeat
    expect((await app.inject({ method: 'GET', url: '/v1/tables/doomed' })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/v1/drops' })).json()).toEqual({
      drops: [{ table: 'doomed', incarnation: 1, droppedAt: expect.any(Number) as number }],
    });
    const retire = (headers: Record<string, string>) =>
      app.inject({
        method: 'POST',
        url: '/v1/tables/doomed/drop/retire',
        headers,
        payload: { incarnation: 1, limit: 1 },
      });
    expect((await retire({})).statusCode).toBe(401);
    expect((await retire(auth)).json()).toEqual({ segments: 1, rows: 3, bytes: 30, more: true });
    expect((await retire(auth)).json()).toEqual({ segments: 1, rows: 3, bytes: 30, more: false });
    expect((await app.inject({ method: 'GET', url: '/v1/drops' })).json()).toEqual({ drops: [] });
  });

  it('rejects traversal ids, bad table names and bad weights with 400 and a message', async () => {
    await app.inject({
      method: 'PUT',
      url: '/v1/tables/events',
      headers: auth,
      payload: { timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] },
    });
    const traversal = await app.inject({
      method: 'POST',
      url: '/v1/segments',
      headers: auth,
      payload: segment('../../etc/passwd'),
    });
    expect(traversal.statusCode).toBe(400);
    expect(traversal.json().message).toMatch(/id/);
    expect(
      (await app.inject({ method: 'POST', url: '/v1/segments', headers: auth, payload: segment('..hidden') }))
        .statusCode,
    ).toBe(400);
    expect(
      (
        await app.inject({
          method: 'PUT',
          url: '/v1/tables/x;drop',
          headers: auth,
          payload: { timestampColumn: 'ts', columns: [{ name: 'ts', type: 'T' }] },
        })
      ).statusCode,
    ).toBe(400);
    const weight = await app.inject({
      method: 'POST',
      url: '/v1/nodes',
      headers: auth,
      payload: { id: 'n1', group: 'serving', url: 'http://x', vcpus: 0, startedAt: 1 },
    });
    expect(weight.statusCode).toBe(400);
    expect(await store.listSegments('events')).toEqual([]);
  });

  it('caps a node’s declared vCPUs (1,024 by default): an absurd weight would take every segment', async () => {
    const register = (vcpus: number, id = 'n1') =>
      app.inject({
        method: 'POST',
        url: '/v1/nodes',
        headers: auth,
        payload: { id, group: 'serving', url: 'http://x', vcpus, startedAt: 1 },
      });
    const greedy = await register(100_000);
    expect(greedy.statusCode).toBe(400);
    expect(greedy.json().message).toMatch(/vcpus.*1024/);
    expect(await store.backends()).toEqual([]);
    expect((await register(1_024)).statusCode).toBe(200);
    expect(
      (await app.inject({ method: 'POST', url: '/v1/nodes/n1/heartbeat', headers: auth, payload: { vcpus: 1_025 } }))
        .statusCode,
    ).toBe(400);
    expect(await store.members('serving')).toEqual([{ id: 'n1', url: 'http://x', weight: 1_024 }]);
    const strict = buildMetaApp({ store, token: TOKEN, logger: false, maxVcpus: 64 });
    expect(
      (
        await strict.inject({
          method: 'POST',
          url: '/v1/nodes',
          headers: auth,
          payload: { id: 'n2', group: 'serving', url: 'http://y', vcpus: 65, startedAt: 1 },
        })
      ).statusCode,
    ).toBe(400);
    await strict.close();
  });

  it('answers 413 to an oversize body and keeps serving', async () => {
    const huge = await app.inject({
      method: 'POST',
      url: '/v1/segments/retire',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: JSON.stringify({ ids: Array(200_000).fill('segment-id-xx') }),
    });
    expect(huge.statusCode).toBe(413);
    expect((await app.inject('/healthz')).statusCode).toBe(200);
  });

  it('answers 409 to a racing swap naming the winner, and says who holds a lease', async () => {
    await app.inject({
      method: 'PUT',
      url: '/v1/tables/events',
      headers: auth,
      payload: { timestampColumn: table.timestampColumn, columns: table.columns },
    });
    for (const id of ['a', 'b'])
      await app.inject({ method: 'POST', url: '/v1/segments', headers: auth, payload: segment(id) });
    expect(
      (
        await app.inject({
          method: 'POST',
          url: '/v1/segments/swap',
          headers: auth,
          payload: { retire: ['a', 'b'], add: segment('m1') },
        })
      ).statusCode,
    ).toBe(200);
    const lost = await app.inject({
      method: 'POST',
      url: '/v1/segments/swap',
      headers: auth,
      payload: { retire: ['a'], add: segment('m2') },
    });
    expect(lost.statusCode).toBe(409);
    expect(lost.json().message).toMatch(/retired by "m1"/);
    await app.inject({
      method: 'POST',
      url: '/v1/leases/merge:events/acquire',
      headers: auth,
      payload: { holder: 'w1', ttlMs: 1000 },
    });
    const held = await app.inject({
      method: 'POST',
      url: '/v1/leases/merge:events/acquire',
      headers: auth,
      payload: { holder: 'w2', ttlMs: 1000 },
    });
    expect(held.statusCode).toBe(200);
    expect(held.json()).toMatchObject({ granted: false, lease: { holder: 'w1' } });
  });

  it('answers 409 lease_lost to a swap fenced with a token its lease no longer carries, and 400 to a malformed fence', async () => {
    await app.inject({
      method: 'PUT',
      url: '/v1/tables/events',
      headers: auth,
      payload: { timestampColumn: table.timestampColumn, columns: table.columns },
    });
    for (const id of ['a', 'b'])
      await app.inject({ method: 'POST', url: '/v1/segments', headers: auth, payload: segment(id) });
    const grant = (
      await app.inject({
        method: 'POST',
        url: '/v1/leases/merge:events/acquire',
        headers: auth,
        payload: { holder: 'w1', ttlMs: 60_000 },
      })
    ).json();
    await app.inject({
      method: 'POST',
      url: '/v1/leases/merge:events/release',
      headers: auth,
      payload: { holder: 'w1' },
    });
    await app.inject({
      method: 'POST',
      url: '/v1/leases/merge:events/acquire',
      headers: auth,
      payload: { holder: 'w2', ttlMs: 60_000 },
    });
    const fenced = await app.inject({
      method: 'POST',
      url: '/v1/segments/swap',
      headers: auth,
      payload: { retire: ['a', 'b'], add: segment('m1'), fence: { lease: 'merge:events', token: grant.lease.token } },
    });
    expect(fenced.statusCode).toBe(409);
    expect(fenced.json()).toMatchObject({ error: 'lease_lost' });
    expect(fenced.json().message).toMatch(/held by "w2"/);
    const malformed = await app.inject({
      method: 'POST',
      url: '/v1/segments/swap',
      headers: auth,
      payload: { retire: ['a', 'b'], add: segment('m1'), fence: { lease: 'merge:events' } },
    });
    expect(malformed.statusCode).toBe(400);
    expect((await store.getSegment('a'))?.state).toBe('active');
  });
});

describe('meta on PostgreSQL', () => {
  it('answers /readyz with an error once its database is gone, so a load balancer stops sending it work', async () => {
    const database = await createTestDatabase();
    const store = await openMetaStore({ database });
    const app = buildMetaApp({ store, token: TOKEN, logger: false });
    try {
      expect((await app.inject('/readyz')).statusCode).toBe(200);
      const admin = new pg.Client({ connectionString: database.replace(/\/[^/]+$/, '/postgres') });
      await admin.connect();
      await admin.query(`DROP DATABASE ${new URL(database).pathname.slice(1)} WITH (FORCE)`);
      await admin.end();
      const ready = await app.inject('/readyz');
      expect(ready.statusCode).toBe(500);
      expect(ready.json()).toEqual({ error: 'internal', message: 'internal error; see the service log' });
      expect((await app.inject('/healthz')).statusCode).toBe(200);
    } finally {
      await app.close();
      await store.close().catch(() => {});
    }
  });
});
