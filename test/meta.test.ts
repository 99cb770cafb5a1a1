import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildMetaApp } from '../services/meta/app.js';
import { MetaStore, type Segment } from '../services/meta/store.js';

const TOKEN = 'test-token';
const auth = { authorization: `Bearer ${TOKEN}` };
const table = { name: 'events', timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] };
const segment = (id: string, extra: Partial<Segment> = {}): Segment => ({ id, table: 'events', minTs: 0, maxTs: 1000, rows: 10, bytes: 100, level: 0, ...extra });

describe('meta store', () => {
  let dir: string;
  let clock: number;
  let store: MetaStore;
  const open = () => new MetaStore({ file: path.join(dir, 'meta.sqlite'), now: () => clock });

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-meta-'));
    clock = 1_000_000;
    store = open();
    store.ensureTable(table);
  });
  afterEach(async () => {
    store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('drops a node from its group’s members after 30 s of silence, and shows it dead in the backends view', () => {
    store.registerNode({ id: 'n1', group: 'serving', url: 'http://127.0.0.1:1', vcpus: 4, startedAt: clock });
    store.registerNode({ id: 'n2', group: 'serving', url: 'http://127.0.0.1:2', vcpus: 2, startedAt: clock });
    store.registerNode({ id: 'h1', group: 'heavy', url: 'http://127.0.0.1:3', vcpus: 8, startedAt: clock });
    clock += 25_000;
    store.heartbeat('n1', 6);
    clock += 10_000;
    expect(store.members('serving')).toEqual([{ id: 'n1', url: 'http://127.0.0.1:1', weight: 6 }]);
    const n2 = store.backends('serving').find((b) => b.id === 'n2')!;
    expect(n2).toMatchObject({ alive: false, cpuCores: 2, heartbeatFailures: 6 });
    expect(store.backends().map((b) => b.id)).toEqual(['h1', 'n1', 'n2']);
  });

  it('drops a node that leaves on purpose at once', () => {
    store.registerNode({ id: 'n1', group: 'serving', url: 'http://127.0.0.1:1', vcpus: 4, startedAt: clock });
    expect(store.deregisterNode('n1')).toBe(true);
    expect(store.members('serving')).toEqual([]);
    expect(store.deregisterNode('n1')).toBe(false);
  });

  it('refuses a heartbeat from a node it does not know', () => {
    expect(store.heartbeat('ghost', 4)).toBe(false);
  });

  it('keeps nodes, tables, segments and leases across a restart', () => {
    store.registerNode({ id: 'n1', group: 'serving', url: 'http://127.0.0.1:1', vcpus: 4, startedAt: clock });
    store.commitSegment(segment('s1'));
    store.acquireLease('merge:events:2026-11-30', 'worker-1', 60_000);
    store.close();
    store = open();
    expect(store.members('serving').map((m) => m.id)).toEqual(['n1']);
    expect(store.listSegments('events').map((s) => s.id)).toEqual(['s1']);
    expect(store.getLease('merge:events:2026-11-30')?.holder).toBe('worker-1');
  });

  it('lists segments whose time range overlaps the asked range', () => {
    store.commitSegment(segment('early', { minTs: 0, maxTs: 99 }));
    store.commitSegment(segment('late', { minTs: 200, maxTs: 299 }));
    expect(store.listSegments('events', { from: 100, to: 250 }).map((s) => s.id)).toEqual(['late']);
    expect(store.listSegments('events', { to: 99 }).map((s) => s.id)).toEqual(['early']);
    expect(store.listSegments('events').map((s) => s.id)).toEqual(['late', 'early']);
  });

  it('commits a segment once: the same commit again is a no-op, a different one under its id a conflict', () => {
    store.commitSegment(segment('s1'));
    store.commitSegment(segment('s1'));
    expect(store.listSegments('events')).toHaveLength(1);
    expect(() => store.commitSegment(segment('s1', { rows: 11 }))).toThrow(/already committed with different contents/);
  });

  it('swaps inputs for a merged segment atomically, once, and lets only one of two racing swaps win', () => {
    for (const id of ['a', 'b', 'c']) store.commitSegment(segment(id));
    store.swapSegments(['a', 'b'], segment('m1', { level: 1, rows: 20 }));
    expect(store.listSegments('events').map((s) => s.id).sort()).toEqual(['c', 'm1']);
    // Repeating the same swap (a retried activity) changes nothing.
    store.swapSegments(['a', 'b'], segment('m1', { level: 1, rows: 20 }));
    expect(store.listSegments('events').map((s) => s.id).sort()).toEqual(['c', 'm1']);
    // A second merge over an input already merged loses, and leaves nothing behind.
    expect(() => store.swapSegments(['b', 'c'], segment('m2', { level: 1 }))).toThrow(/already retired by "m1"/);
    expect(store.getSegment('m2')).toBeUndefined();
    expect(store.getSegment('c')?.state).toBe('active');
  });

  it('grants a lease to one holder at a time until it expires or is released', () => {
    expect(store.acquireLease('merge:events:p1', 'w1', 10_000).granted).toBe(true);
    expect(store.acquireLease('merge:events:p1', 'w2', 10_000).granted).toBe(false);
    expect(store.acquireLease('merge:events:p1', 'w1', 10_000).granted).toBe(true);
    clock += 10_001;
    expect(store.acquireLease('merge:events:p1', 'w2', 10_000).granted).toBe(true);
    expect(store.releaseLease('merge:events:p1', 'w1')).toBe(false);
    expect(store.releaseLease('merge:events:p1', 'w2')).toBe(true);
    store.acquireLease('compaction:x', 'heavy', 60_000);
    store.acquireLease('compaction:y', 'heavy', 60_000);
    expect(store.releaseLeasesOf('heavy')).toEqual(['compaction:x', 'compaction:y']);
    expect(store.listLeases()).toEqual([]);
  });
});

describe('meta HTTP API', () => {
  let store: MetaStore;
  let app: ReturnType<typeof buildMetaApp>;
  beforeEach(() => {
    store = new MetaStore({ file: ':memory:' });
    app = buildMetaApp({ store, token: TOKEN, logger: false });
  });
  afterEach(async () => {
    await app.close();
    store.close();
  });

  it('registers, heartbeats and lists members over HTTP', async () => {
    const register = await app.inject({ method: 'POST', url: '/v1/nodes', headers: auth, payload: { id: 'n1', group: 'serving', url: 'http://127.0.0.1:9', vcpus: 4, startedAt: 1 } });
    expect(register.statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/v1/nodes/n1/heartbeat', headers: auth, payload: { vcpus: 3 } })).statusCode).toBe(200);
    expect((await app.inject('/v1/groups/serving/members')).json()).toEqual({ group: 'serving', members: [{ id: 'n1', url: 'http://127.0.0.1:9', weight: 3 }] });
    const unknown = await app.inject({ method: 'POST', url: '/v1/nodes/ghost/heartbeat', headers: auth, payload: { vcpus: 3 } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().message).toMatch(/not registered/);
  });

  it('refuses unauthenticated changes with 401 and changes nothing', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/nodes', payload: { id: 'n1', group: 'serving', url: 'http://x', vcpus: 4, startedAt: 1 } });
    expect(response.statusCode).toBe(401);
    const wrong = await app.inject({ method: 'PUT', url: '/v1/tables/events', headers: { authorization: 'Bearer nope' }, payload: { timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] } });
    expect(wrong.statusCode).toBe(401);
    expect(store.backends()).toEqual([]);
    expect(store.listTables()).toEqual([]);
  });

  it('rejects traversal ids, bad table names and bad weights with 400 and a message', async () => {
    await app.inject({ method: 'PUT', url: '/v1/tables/events', headers: auth, payload: { timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] } });
    const traversal = await app.inject({ method: 'POST', url: '/v1/segments', headers: auth, payload: segment('../../etc/passwd') });
    expect(traversal.statusCode).toBe(400);
    expect(traversal.json().message).toMatch(/id/);
    expect((await app.inject({ method: 'POST', url: '/v1/segments', headers: auth, payload: segment('..hidden') })).statusCode).toBe(400);
    expect((await app.inject({ method: 'PUT', url: '/v1/tables/x;drop', headers: auth, payload: { timestampColumn: 'ts', columns: [{ name: 'ts', type: 'T' }] } })).statusCode).toBe(400);
    const weight = await app.inject({ method: 'POST', url: '/v1/nodes', headers: auth, payload: { id: 'n1', group: 'serving', url: 'http://x', vcpus: 0, startedAt: 1 } });
    expect(weight.statusCode).toBe(400);
    expect(store.listSegments('events')).toEqual([]);
  });

  it('caps a node’s declared vCPUs (1,024 by default): an absurd weight would take every segment', async () => {
    const register = (vcpus: number, id = 'n1') => app.inject({ method: 'POST', url: '/v1/nodes', headers: auth, payload: { id, group: 'serving', url: 'http://x', vcpus, startedAt: 1 } });
    const greedy = await register(100_000);
    expect(greedy.statusCode).toBe(400);
    expect(greedy.json().message).toMatch(/vcpus.*1024/);
    expect(store.backends()).toEqual([]);
    expect((await register(1_024)).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/v1/nodes/n1/heartbeat', headers: auth, payload: { vcpus: 1_025 } })).statusCode).toBe(400);
    expect(store.members('serving')).toEqual([{ id: 'n1', url: 'http://x', weight: 1_024 }]);
    const strict = buildMetaApp({ store, token: TOKEN, logger: false, maxVcpus: 64 });
    expect((await strict.inject({ method: 'POST', url: '/v1/nodes', headers: auth, payload: { id: 'n2', group: 'serving', url: 'http://y', vcpus: 65, startedAt: 1 } })).statusCode).toBe(400);
    await strict.close();
  });

  it('answers 413 to an oversize body and keeps serving', async () => {
    const huge = await app.inject({ method: 'POST', url: '/v1/segments/retire', headers: { ...auth, 'content-type': 'application/json' }, payload: JSON.stringify({ ids: Array(200_000).fill('segment-id-xx') }) });
    expect(huge.statusCode).toBe(413);
    expect((await app.inject('/healthz')).statusCode).toBe(200);
  });

  it('answers 409 to a racing swap naming the winner, and says who holds a lease', async () => {
    await app.inject({ method: "PUT", url: "/v1/tables/events", headers: auth, payload: { timestampColumn: table.timestampColumn, columns: table.columns } });
    for (const id of ['a', 'b']) await app.inject({ method: 'POST', url: '/v1/segments', headers: auth, payload: segment(id) });
    expect((await app.inject({ method: 'POST', url: '/v1/segments/swap', headers: auth, payload: { retire: ['a', 'b'], add: segment('m1') } })).statusCode).toBe(200);
    const lost = await app.inject({ method: 'POST', url: '/v1/segments/swap', headers: auth, payload: { retire: ['a'], add: segment('m2') } });
    expect(lost.statusCode).toBe(409);
    expect(lost.json().message).toMatch(/retired by "m1"/);
    await app.inject({ method: 'POST', url: '/v1/leases/merge:events/acquire', headers: auth, payload: { holder: 'w1', ttlMs: 1000 } });
    const held = await app.inject({ method: 'POST', url: '/v1/leases/merge:events/acquire', headers: auth, payload: { holder: 'w2', ttlMs: 1000 } });
    expect(held.statusCode).toBe(200);
    expect(held.json()).toMatchObject({ granted: false, lease: { holder: 'w1' } });
  });
});
