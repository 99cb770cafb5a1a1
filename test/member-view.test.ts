/** The member view over a real meta service: one Placement per membership epoch, and sub-views kept with it. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Placement } from '../core/ownership.js';
import { MemberView } from '../services/common/member-view.js';
import { buildMetaApp } from '../services/meta/app.js';
import { MetaClient } from '../services/meta/client.js';
import { SqliteMetaStore } from '../services/meta/sqlite-store.js';

const TOKEN = 'member-view-test-token';
const segments = Array.from({ length: 200 }, (_, i) => `events-l0-20261101-${String(i).padStart(20, '0')}`);

describe('the member view', () => {
  let dir: string;
  let store: SqliteMetaStore;
  let app: FastifyInstance;
  let view: MemberView;
  const register = (id: string, vcpus: number, url = `http://127.0.0.1:${9000 + Number(id.slice(1))}`) =>
    store.registerNode({ id, group: 'serving', url, vcpus, startedAt: Date.now() });

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-member-view-'));
    store = new SqliteMetaStore({ file: path.join(dir, 'meta.sqlite') });
    app = buildMetaApp({ store, token: TOKEN, logger: false });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    view = new MemberView({ meta: new MetaClient(url, TOKEN), group: 'serving' });
    for (const [id, vcpus] of [
      ['n1', 4],
      ['n2', 4],
      ['n3', 2],
    ] as const)
      await register(id, vcpus);
  });
  afterEach(async () => {
    await app.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps its Placement, and the owners it remembers, while ids and weights stay the same', async () => {
    await view.refresh();
    const placement = view.placement!;
    const owners = segments.map((id) => placement.owner(id)!.id);
    await view.refresh();
    expect(view.placement).toBe(placement);
    // A weight change is a new epoch: a new Placement, with the owners a fresh one computes.
    await store.heartbeat('n3', 8);
    await view.refresh();
    expect(view.placement).not.toBe(placement);
    const fresh = new Placement([
      { id: 'n1', weight: 4 },
      { id: 'n2', weight: 4 },
      { id: 'n3', weight: 8 },
    ]);
    expect(segments.map((id) => view.placement!.owner(id)!.id)).toEqual(segments.map((id) => fresh.owner(id)!.id));
    expect(segments.map((id) => view.placement!.owner(id)!.id)).not.toEqual(owners);
  });

  it('sees a node’s new URL at once, without a new epoch', async () => {
    await view.refresh();
    const placement = view.placement;
    await register('n2', 4, 'http://127.0.0.1:9999');
    await view.refresh();
    expect(view.placement).toBe(placement);
    expect(view.member('n2')?.url).toBe('http://127.0.0.1:9999');
  });

  it('places over part of the members with a Placement of their own, kept for the epoch', async () => {
    await view.refresh();
    const only = new Set(['n1', 'n3', 'not-a-member']);
    const part = view.subset(only);
    expect(part.members?.map((m) => m.id).sort()).toEqual(['n1', 'n3']);
    expect(part.member('n2')).toBeUndefined();
    const reference = new Placement([
      { id: 'n1', weight: 4 },
      { id: 'n3', weight: 2 },
    ]);
    expect(segments.map((id) => part.placement!.owner(id)!.id)).toEqual(segments.map((id) => reference.owner(id)!.id));
    await view.refresh();
    expect(view.subset(only).placement).toBe(part.placement);
    await store.deregisterNode('n3');
    await view.refresh();
    const after = view.subset(only);
    expect(after.members?.map((m) => m.id)).toEqual(['n1']);
    expect(segments.every((id) => after.placement!.owner(id)!.id === 'n1')).toBe(true);
  });

  it('follows meta by change: a node that joins or leaves is seen at once, a steady list costs a 304 per poll', async () => {
    // Each answer meta gave: a list, or 'unchanged' (its 304).
    const answers: string[] = [];
    const counted = () => {
      const meta = new MetaClient(app.listeningOrigin, TOKEN);
      const ask = meta.membersChanged.bind(meta);
      meta.membersChanged = async (...args) => {
        const answer = await ask(...args);
        answers.push(answer === 'unchanged' ? 'unchanged' : 'list');
        return answer;
      };
      return meta;
    };
    // A poll far longer than the test: what it sees in time, it saw by change.
    const following = new MemberView({
      meta: new MetaClient(app.listeningOrigin, TOKEN),
      group: 'serving',
      pollMs: 60_000,
    });
    following.start();
    try {
      await expect.poll(() => following.members?.length, { timeout: 5_000 }).toBe(3);
      await register('n4', 2);
      await expect
        .poll(() => following.members?.map((m) => m.id).sort(), { timeout: 5_000 })
        .toEqual(['n1', 'n2', 'n3', 'n4']);
      await store.deregisterNode('n2');
      await expect
        .poll(() => following.members?.map((m) => m.id).sort(), { timeout: 5_000 })
        .toEqual(['n1', 'n3', 'n4']);
      expect(answers.every((answer) => answer === 'list')).toBe(true); // each answer was a change
    } finally {
      following.stop();
    }

    // A steady list, polled often: 'unchanged' answers only (304s, without a body).
    answers.length = 0;
    const steady = new MemberView({ meta: counted(), group: 'serving', pollMs: 200 });
    const started = performance.now();
    steady.start();
    try {
      await expect.poll(() => answers.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(4);
      // Each unchanged answer came after meta waited the poll out for a change.
      expect(performance.now() - started).toBeGreaterThanOrEqual(3 * 200);
      expect(answers[0]).toBe('list');
      expect(answers.slice(1).every((answer) => answer === 'unchanged')).toBe(true);
      expect(steady.members?.length).toBe(3);
    } finally {
      steady.stop();
    }
  });

  it('has no members and no placement before its first member list', () => {
    expect(view.members).toBeUndefined();
    expect(view.placement).toBeUndefined();
    expect(view.subset(new Set(['n1'])).placement).toBeUndefined();
  });
});
