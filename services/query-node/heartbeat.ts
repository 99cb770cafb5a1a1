/**
 * Keeps a query node registered with meta: registers at start, then heartbeats every interval with
 * the node's current vCPUs (a retuned CPU limit propagates by itself), registering again whenever
 * meta has forgotten the node.
 */
import { DEFAULT_HEARTBEAT_MS } from '../common/config.js';
import { ServiceCallError } from '../common/http-client.js';
import type { MetaClient } from '../meta/client.js';

export interface HeartbeatOptions {
  meta: MetaClient;
  node: { id: string; group: string; url: string; startedAt: number };
  /** The weight to declare, read afresh on every beat. */
  vcpus: () => Promise<number>;
  /** @default 5000 */
  intervalMs?: number;
  onError?: (error: Error) => void;
}

export interface Heartbeats {
  /** Resolves once the first registration has succeeded. */
  registered: Promise<void>;
  stop(): void;
}

export function startHeartbeats(options: HeartbeatOptions): Heartbeats {
  const register = async () => options.meta.registerNode({ ...options.node, vcpus: await options.vcpus() });
  const beat = async () => {
    try {
      await options.meta.heartbeat(options.node.id, await options.vcpus());
    } catch (error) {
      if (error instanceof ServiceCallError && error.code === 'unknown_node') await register();
      else throw error;
    }
  };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const schedule = (work: () => Promise<void>) => {
    if (stopped) return;
    timer = setTimeout(() => {
      void work()
        .catch((error: Error) => options.onError?.(error))
        .finally(() => schedule(beat));
    }, options.intervalMs ?? DEFAULT_HEARTBEAT_MS);
    timer.unref();
  };
  const registered = (async () => {
    // Keep trying until meta answers: a node that starts before meta must still join.
    for (;;) {
      try {
        await register();
        return;
      } catch (error) {
        options.onError?.(error as Error);
        if (stopped) throw error;
        await new Promise((resolve) =>
          setTimeout(resolve, Math.min(1_000, options.intervalMs ?? DEFAULT_HEARTBEAT_MS)),
        );
      }
    }
  })();
  void registered.then(
    () => schedule(beat),
    () => {},
  );
  return {
    registered,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
