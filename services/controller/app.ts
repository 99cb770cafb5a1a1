/**
 * The controller: the heavy pool's front door. Clients ask it to launch a pool, read its status
 * (which links to the pool's preflight and its node-hours ledger) and run a preflight; they never
 * probe backends themselves.
 */
import type { FastifyInstance } from 'fastify';
import { WorkflowFailedError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { answers } from '../common/schemas.js';
import { createServiceApp } from '../common/service-app.js';
import type { LaunchAccepted, PoolConfig } from '../../workflows/contracts/heavy-pool.js';
import type { ServingScalerConfig } from '../../workflows/contracts/serving-scaler.js';
import {
  GroupParams as Group,
  LaunchAnswer,
  LaunchRequest,
  PoolStatusAnswer,
  PoolUsage,
  Preflight,
  ServingAutoscaler,
} from './api.js';
import { requireToken } from '../common/auth.js';
import { badRequest, DomainError, notFound } from '../common/errors.js';
import { launchPool, poolStatus, poolUsage, runPreflight } from '../../workflows/pool-client.js';
import { servePoolMetrics } from './pool-metrics.js';
import { servingScalerStatus } from '../../workflows/serving-scaler-client.js';

export interface ControllerAppOptions {
  client: Client;
  /** The pools this controller knows, by group. */
  pools: PoolConfig[];
  /** The serving autoscaler, when it is on (opt-in). */
  servingScaler?: ServingScalerConfig;
  /** Launching a pool starts paid capacity: it needs the cluster's token. */
  token: string;
  /** @default 'berth' */
  taskQueue?: string;
  /** @default true */
  logger?: boolean;
}

export function buildControllerApp(options: ControllerAppOptions): FastifyInstance {
  // Strict bodies: "2" or true is not a target, and an unknown field is an error, not dropped.
  const app = createServiceApp('controller', {
    bodyLimit: 64 * 1024,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false } },
    logger: options.logger,
  });
  const pools = new Map(options.pools.map((p) => [p.group, p]));
  // Launches are raise-only, so a call asking for no more than one already in flight can share its
  // answer: a burst of callers costs the workflow one update instead of one each.
  const inflight = new Map<string, { target: number; answer: Promise<LaunchAccepted> }>();
  const launch = (config: PoolConfig, target: number): Promise<LaunchAccepted> => {
    const current = inflight.get(config.group);
    if (current && current.target >= target) return current.answer;
    const answer = launchPool({ client: options.client, config, taskQueue: options.taskQueue }, target).finally(() => {
      if (inflight.get(config.group)?.answer === answer) inflight.delete(config.group);
    });
    inflight.set(config.group, { target, answer });
    return answer;
  };
  const known = (group: string) => {
    const config = pools.get(group);
    if (!config)
      throw notFound(
        'unknown_group',
        `unknown group "${group}": this controller scales ${[...pools.keys()].map((g) => `"${g}"`).join(', ') || 'no group'}`,
      );
    return config;
  };

  servePoolMetrics(app, options.client, options.pools);

  app.post(
    '/v1/pools/:group/launch',
    {
      onRequest: requireToken(options.token),
      schema: { params: Group, body: LaunchRequest, response: answers(LaunchAnswer) },
    },
    async (request) => {
      const config = known(request.params.group);
      try {
        return await launch(config, request.body.target);
      } catch (error) {
        if (error instanceof WorkflowUpdateFailedError)
          throw badRequest('launch_rejected', error.cause?.message ?? error.message);
        throw error;
      }
    },
  );

  const links = (group: string) => ({ preflight: `/v1/pools/${group}/preflight`, usage: `/v1/pools/${group}/usage` });

  app.get(
    '/v1/pools/:group/status',
    { schema: { params: Group, response: answers(PoolStatusAnswer) } },
    async (request) => {
      const config = known(request.params.group);
      return {
        ...(await poolStatus({ client: options.client, group: config.group, config })),
        links: links(config.group),
      };
    },
  );

  app.get('/v1/pools/:group/usage', { schema: { params: Group, response: answers(PoolUsage) } }, async (request) => {
    const config = known(request.params.group);
    return await poolUsage({ client: options.client, group: config.group });
  });

  app.get(
    '/v1/serving/:group/autoscaler',
    { schema: { params: Group, response: answers(ServingAutoscaler) } },
    async (request) => {
      const config = options.servingScaler;
      if (!config || config.group !== request.params.group) {
        throw notFound(
          'unknown_group',
          `no serving autoscaler for "${request.params.group}": ${config ? `this controller's scales "${config.group}"` : 'it is off (BERTH_SERVING_AUTOSCALE=1 turns it on)'}`,
        );
      }
      return await servingScalerStatus({ client: options.client, config });
    },
  );

  // Runs on a worker, whose credentials are the ones checked; findings are an answer, not an error.
  // Token-guarded like a launch: each call starts a workflow, and the report names install details.
  app.get(
    '/v1/pools/:group/preflight',
    { onRequest: requireToken(options.token), schema: { params: Group, response: answers(Preflight) } },
    async (request) => {
      const config = known(request.params.group);
      try {
        return await runPreflight({ client: options.client, group: config.group, taskQueue: options.taskQueue });
      } catch (error) {
        if (error instanceof WorkflowFailedError) {
          throw new DomainError(
            'upstream_failed',
            'preflight_failed',
            `the preflight of "${config.group}" did not finish: ${error.cause?.message ?? error.message} (is a worker with the heavy pool running?)`,
          );
        }
        throw error;
      }
    },
  );

  return app;
}
