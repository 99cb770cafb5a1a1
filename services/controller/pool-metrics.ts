/**
 * The heavy pools' figures for Prometheus, on the controller's /metrics: phase, replicas (target,
 * written, pods, alive and proven backends) and queries running and waiting over every
 * coordinator. Each scrape reads every pool's status query (no history written); a pool that
 * cannot be read says so in `berth_pool_up` and drops its other series rather than repeat stale ones.
 */
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { Gauge, Registry } from 'prom-client';
import { serveMetrics } from '../common/service-app.js';
import type { PoolConfig, PoolPhase, PoolStatus } from '../../workflows/contracts/heavy-pool.js';
import { poolStatus } from '../../workflows/pool-client.js';

const PHASES = Object.keys({
  parked: 1,
  scaling: 1,
  'waiting-for-backends': 1,
  canary: 1,
  ready: 1,
  draining: 1,
} satisfies Record<PoolPhase, 1>);

export function poolMetricsRegistry(
  client: Client,
  pools: PoolConfig[],
): { registry: Registry; refresh(): Promise<void> } {
  const registry = new Registry();
  const gauge = (name: string, help: string, labelNames: string[] = []) =>
    new Gauge({ name, help, labelNames: ['group', ...labelNames], registers: [registry] });
  const up = gauge('berth_pool_up', 'Whether the pool workflow answered its status query (1) or not (0)');
  const phase = gauge('berth_pool_phase', "The pool's phase: 1 for the current one", ['phase']);
  const perPool: [Gauge, (s: PoolStatus) => number][] = [
    [gauge('berth_pool_target_replicas', 'The replica target the pool works towards'), (s) => s.target],
    [gauge('berth_pool_replicas_patched', 'The replicas last written to the platform'), (s) => s.replicasPatched],
    [gauge('berth_pool_pods_running', 'Pods the platform reports running'), (s) => s.podsRunning],
    [gauge('berth_pool_backends_alive', "The pool's backends alive in meta"), (s) => s.aliveBackends],
    [
      gauge('berth_pool_backends_ready', 'Backends that passed every readiness layer (heavy queries run on these)'),
      (s) => s.backends.length,
    ],
    [
      gauge('berth_pool_serve_ready', 'Whether the pool serves heavy queries (1) or not (0)'),
      (s) => Number(s.serveReady),
    ],
  ];
  const queries = gauge(
    'berth_pool_queries',
    'Heavy queries running on the pool and waiting for it, over every coordinator',
    ['state'],
  );

  const refresh = async () => {
    await Promise.all(
      pools.map(async (config) => {
        const group = config.group;
        // A scrape never hangs on Temporal: a pool that does not answer in time reads as down.
        const status = await client
          .withDeadline(Date.now() + 5_000, () => poolStatus({ client, group, config }))
          .catch(() => undefined);
        up.set({ group }, status ? 1 : 0);
        for (const p of PHASES) {
          if (status) phase.set({ group, phase: p }, Number(status.phase === p));
          else phase.remove({ group, phase: p });
        }
        for (const [g, read] of perPool) {
          if (status) g.set({ group }, read(status));
          else g.remove({ group });
        }
        for (const state of ['running', 'waiting'] as const) {
          if (status) queries.set({ group, state }, status[state]);
          else queries.remove({ group, state });
        }
      }),
    );
  };
  return { registry, refresh };
}

/** GET /metrics on an app: the pools' figures, read at each scrape. */
export function servePoolMetrics(app: FastifyInstance, client: Client, pools: PoolConfig[]): void {
  const { registry, refresh } = poolMetricsRegistry(client, pools);
  serveMetrics(app, registry, refresh);
}
