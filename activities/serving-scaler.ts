/**
 * Activities of the serving-group autoscaler: read the replicas the platform has, plan a step (what
 * it will move, from the group's members and the manifest's bytes) and take it with the platform's
 * one write. The plan is made and logged before the write, so the cost of a step is said first.
 */
import { Context } from '@temporalio/activity';
import { planServingChange, type ServingPlan } from '../core/serving-scale.js';
import type { MetaClient } from '../services/meta/client.js';
import type { ComputePlatform } from './platform/compute-platform.js';

export interface ServingScalerActivityDeps {
  platform: ComputePlatform;
  meta: MetaClient;
}

export const createServingScalerActivities = (deps: ServingScalerActivityDeps) => ({
  async servingReplicas(input: { group: string }): Promise<number> {
    return await deps.platform.replicas(input.group);
  },

  async planServingStep(input: { group: string; from: number; to: number; reason: string }): Promise<ServingPlan> {
    const members = await deps.meta.members(input.group);
    let totalBytes = 0;
    for (const table of await deps.meta.listTables())
      for (const segment of await deps.meta.listSegments(table.name)) totalBytes += segment.bytes;
    const plan = planServingChange({
      weights: members.map((m) => m.weight),
      from: input.from,
      to: input.to,
      totalBytes,
      reason: input.reason,
      at: Date.now(),
    });
    Context.current().log.info(
      `serving autoscaler: ${input.group} ${input.from} → ${input.to} (${input.reason}): about ${(plan.movedShare * 100).toFixed(1)}% of segments (${plan.movedBytes} bytes) change owner; expect the cache-hit rate to dip by about ${(plan.expectedHitRateDip * 100).toFixed(1)} points until they are warm`,
    );
    return plan;
  },

  async scaleServing(input: { group: string; replicas: number }): Promise<{ changed: boolean; previous: number }> {
    return await deps.platform.setReplicas(input.group, input.replicas);
  },
});

export type ServingScalerActivities = ReturnType<typeof createServingScalerActivities>;
