/** MetaClient over several meta replicas (two real metas on one PostgreSQL database): failover and what it never repeats. */
import type { FastifyInstance } from 'fastify';
import Fastify from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { freePort } from '../cli/embedded/free-port.js';
import { ServiceCallError } from '../services/common/http-client.js';
import { buildMetaApp } from '../services/meta/app.js';
import { MetaClient, parseMetaUrls } from '../services/meta/client.js';
import { openMetaStore } from '../services/meta/open-store.js';
import type { MetaStore } from '../services/meta/store.js';
import { createTestDatabase } from './helpers/postgres.js';

const TOKEN = 'client-test-token';

describe('MetaClient with several meta URLs', () => {
  const stores: MetaStore[] = [];
  const apps: FastifyInstance[] = [];
  const replicas: { url: string; requests: string[]; dropNext: number }[] = [];
  let deadUrl: string;
  let failingUrl: string;
  let droppingUrl: string;

  beforeAll(async () => {
    const database = await createTestDatabase();
    for (let i = 0; i < 2; i++) {
      const store = await openMetaStore({ database });
      const app = buildMetaApp({ store, token: TOKEN, logger: false });
      const replica = { url: '', requests: [] as string[], dropNext: 0 };
      app.addHook('onRequest', async (request) => {
        replica.requests.push(`${request.method} ${request.url}`);
        // A replica dying mid-request: the connection closes without an answer, whether or not the call then lands.
        if (replica.dropNext > 0) {
          replica.dropNext--;
          request.raw.socket.destroy();
        }
      });
      replica.url = await app.listen({ host: '127.0.0.1', port: 0 });
      stores.push(store);
      apps.push(app);
      replicas.push(replica);
    }
    deadUrl = `http://127.0.0.1:${await freePort()}`;
    // A replica that is up but has lost its database: it answers 503 to everything.
    const failing = Fastify();
    failing.all('/*', async (_request, reply) =>
      reply.code(503).send({ error: 'unavailable', message: 'no database' }),
    );
    failingUrl = await failing.listen({ host: '127.0.0.1', port: 0 });
    apps.push(failing);
    // A replica dying under every request: the connection drops, after 300 ms for a group named "slow".
    const dropping = Fastify();
    dropping.addHook('onRequest', async (request) => {
      if (request.url.includes('/slow/')) await new Promise((resolve) => setTimeout(resolve, 300));
      request.raw.socket.destroy();
    });
    droppingUrl = await dropping.listen({ host: '127.0.0.1', port: 0 });
    apps.push(dropping);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all(stores.map((s) => s.close()));
  });
  beforeEach(() => {
    for (const r of replicas) r.requests.length = 0;
  });

  it('reads the comma-separated list BERTH_META_URL allows', () => {
    expect(parseMetaUrls('http://meta-1:7400/, http://meta-2:7400')).toEqual([
      'http://meta-1:7400',
      'http://meta-2:7400',
    ]);
    expect(() => parseMetaUrls(' , ')).toThrow(/no meta URL/);
  });

  it('fails over past a replica that does not answer, and then asks the one that did first', async () => {
    const client = new MetaClient(`${deadUrl},${replicas[0]!.url}`, TOKEN);
    await client.registerNode({ id: 'n1', group: 'serving', url: 'http://127.0.0.1:9', vcpus: 4, startedAt: 1 });
    expect(client.url).toBe(replicas[0]!.url);
    expect((await client.members('serving')).map((m) => m.id)).toEqual(['n1']);
    expect(replicas[0]!.requests).toEqual(['POST /v1/nodes', 'GET /v1/groups/serving/members']);
  });

  it('takes a slow failure to the next replica even when a faster call has failed over meanwhile', async () => {
    const client = new MetaClient([droppingUrl, replicas[1]!.url], TOKEN);
    const slow = client.members('slow'); // dropped after 300 ms
    await client.members('fast'); // dropped at once, answered by the live replica, which it now prefers
    expect(client.url).toBe(replicas[1]!.url);
    expect(await slow).toEqual([]);
  });

  it('fails over past a replica that answers 5xx, to one that shares its database', async () => {
    const client = new MetaClient([failingUrl, replicas[1]!.url], TOKEN);
    await client.registerNode({ id: 'n2', group: 'failover', url: 'http://127.0.0.1:9', vcpus: 2, startedAt: 1 });
    expect((await new MetaClient(replicas[0]!.url, TOKEN).members('failover')).map((m) => m.id)).toEqual(['n2']);
  });

  it('repeats a call whose connection dropped on the next replica, where it lands once', async () => {
    const client = new MetaClient([replicas[0]!.url, replicas[1]!.url], TOKEN);
    await client.ensureTable({ name: 'events', timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] });
    // Dropped twice: a call that went out on a kept-alive connection is sent once more on a new one
    // before the client moves on (services/common/http-client.ts).
    replicas[0]!.dropNext = 2;
    const segment = { id: 'seg-1', table: 'events', minTs: 0, maxTs: 1, rows: 1, bytes: 1, level: 0 };
    try {
      expect(await client.commitSegment(segment)).toMatchObject({ id: 'seg-1', state: 'active' });
    } finally {
      replicas[0]!.dropNext = 0;
    }
    expect(replicas[1]!.requests).toContain('POST /v1/segments');
    expect((await client.listSegments('events')).map((s) => s.id)).toEqual(['seg-1']);
  });

  it('tries a single URL twice: behind a load balancer the second try reaches another replica', async () => {
    const client = new MetaClient(replicas[1]!.url, TOKEN);
    replicas[1]!.dropNext = 1;
    expect(await client.backends('nobody')).toEqual([]);
    expect(replicas[1]!.requests).toEqual(['GET /v1/backends?group=nobody', 'GET /v1/backends?group=nobody']);
  });

  it('never repeats a call that got a 4xx answer', async () => {
    const client = new MetaClient([replicas[0]!.url, replicas[1]!.url], TOKEN);
    const error = await client.heartbeat('ghost', 4).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceCallError);
    expect((error as ServiceCallError).status).toBe(404);
    expect([...replicas[0]!.requests, ...replicas[1]!.requests]).toEqual(['POST /v1/nodes/ghost/heartbeat']);
  });

  it('says what failed when no replica answers', async () => {
    const client = new MetaClient([deadUrl, failingUrl], TOKEN);
    await expect(client.listTables()).rejects.toThrow(/answered 503: no database/);
    await expect(new MetaClient(deadUrl, TOKEN).listTables()).rejects.toThrow(/failed/);
  });
});
