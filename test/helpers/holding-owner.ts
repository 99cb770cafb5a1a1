/**
 * A fake query node for merge tests: it holds every merged segment's push open until the test lets it go,
 * so a test can act while a merge is mid-push (kill or stop its worker, cancel it, let its lease's
 * TTL pass), and it notices pushes whose sender gave up on them.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestCluster } from './cluster.js';

export interface HoldingOwner {
  id: string;
  url: string;
  /** Pushes waiting for an answer. */
  held: ServerResponse[];
  /** Pushes whose sender closed the connection before an answer. */
  abandoned: number;
  /** Resolves once `count` pushes have arrived since the owner started. */
  arrived(count?: number): Promise<void>;
  /** Answers every held push with "accepted". */
  releaseAll(): void;
  close(): Promise<void>;
}

/** Starts one and registers it with the cluster's meta as the serving group's only node, heartbeating until closed. */
export async function startHoldingOwner(cluster: TestCluster, id = 'holding-owner'): Promise<HoldingOwner> {
  let arrivals = 0;
  const waiters: { count: number; resolve: () => void }[] = [];
  const server = createServer((request, response) => {
    request.resume();
    if (request.method !== 'POST' || !request.url?.startsWith('/v1/segments/')) {
      response.end('{}');
      return;
    }
    // Ingest pushes level-0 segments too: decline those at once (a cold first read), hold merged ones.
    if (!/^\/v1\/segments\/[^/?]+-l[1-9]\d*-/.test(request.url)) {
      response.end(JSON.stringify({ accepted: false, owner: id, reason: 'this fake node holds merged segments only' }));
      return;
    }
    owner.held.push(response);
    response.once('close', () => {
      if (!response.writableFinished) owner.abandoned++;
      owner.held = owner.held.filter((r) => r !== response);
    });
    arrivals++;
    for (const waiter of waiters.filter((w) => arrivals >= w.count)) waiter.resolve();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const owner: HoldingOwner = {
    id,
    url,
    held: [],
    abandoned: 0,
    arrived: (count = 1) =>
      arrivals >= count ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve })),
    releaseAll: () => {
      for (const response of owner.held) response.end(JSON.stringify({ accepted: true, owner: id }));
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  await cluster.meta.registerNode({ id, group: 'serving', url, vcpus: 2, startedAt: Date.now() });
  // Heartbeats like a real node, or meta drops it from the members after its expiry.
  const heartbeats = setInterval(() => void cluster.meta.heartbeat(id, 2).catch(() => {}), 1_000);
  heartbeats.unref();
  const close = owner.close;
  owner.close = async () => {
    clearInterval(heartbeats);
    await close();
  };
  return owner;
}
