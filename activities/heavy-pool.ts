/**
 * Activities of the heavy pool. The only write to the platform is setReplicas, and it writes
 * nothing when the target is already in place, so a retried step never patches twice. Every
 * readiness signal is read separately, because each one can lie on its own; observePool waits for
 * them inside one activity (short polls of meta, heartbeating) instead of one workflow timer per
 * poll, so readiness costs no fixed delay and no history per look.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { S3Client } from '@aws-sdk/client-s3';
import type { DuckDBInstance } from '@duckdb/node-api';
import { CANARY_ROWS } from '../core/identifiers.js';
import type { MetaClient } from '../services/meta/client.js';
import { QueryNodeClient } from '../services/query-node/client.js';
import { poolWorkflowId } from '../workflows/contracts/heavy-pool.js';
import type { ReconcileInput, ReconcileResult } from '../workflows/contracts/pool-reconciler.js';
import { ensureCanaryObject } from './canary-object.js';
import { ComputeGroupNotFoundError, type ComputePlatform } from './platform/compute-platform.js';

export interface HeavyPoolActivityDeps {
  platform: ComputePlatform;
  meta: MetaClient;
  token: string;
  /** Where the canary object is kept, and what writes it the first time. */
  storage: { s3: S3Client; bucket: string; duckdb: DuckDBInstance; workDir: string };
  /** How often observePool reads meta and the platform while it waits. @default 100 */
  observePollMs?: number;
}

export interface Backend {
  id: string;
  url: string;
}

export interface PoolObservation {
  pods: number;
  /** Alive in meta and started after the patch. */
  backends: Backend[];
  /** While pods are missing: why, in the platform's own words (its scheduler's and autoscaler's events). */
  why?: string;
}

/** How often observePool asks the platform why pods are missing (an events read): often enough for a status poll. */
const WHY_EVERY_MS = 1_000;

/** A platform error the pool cannot fix by retrying becomes a non-retryable failure that says what is wrong. */
async function onPlatform<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ComputeGroupNotFoundError) throw ApplicationFailure.nonRetryable(error.message, error.name);
    throw error;
  }
}

export const createHeavyPoolActivities = (deps: HeavyPoolActivityDeps) => {
  const look = async (group: string, startedAfter: number): Promise<PoolObservation> => {
    const [pods, backends] = await Promise.all([
      onPlatform(() => deps.platform.runningPods(group)),
      deps.meta.backends(group),
    ]);
    return {
      pods,
      backends: backends
        .filter((b) => b.alive && Date.parse(b.lastStartTime) >= startedAfter)
        .map((b) => ({ id: b.id, url: b.url })),
    };
  };

  return {
    /** Writes the group's replica target (nothing when it is already set). */
    async setReplicas(input: { group: string; replicas: number }): Promise<{ changed: boolean; previous: number }> {
      return await onPlatform(() => deps.platform.setReplicas(input.group, input.replicas));
    },

    /**
     * Running pods (a count only) and the backends meta sees alive that started after `startedAt`.
     * Returns at once when the pool `saw` nothing yet; otherwise as soon as either count, or what
     * the platform says about missing pods, differs from what it `saw` (so its status follows each
     * step and quotes the platform within a look), or after `waitMs` with what there is (so it
     * keeps its deadline). When the pool has what it `wants`, it looks a second time `confirmMs`
     * later, and says whether that second observation agreed.
     */
    async observePool(input: {
      group: string;
      startedAfter: number;
      wants: { pods: number; backends: number };
      saw?: { pods: number; backends: number; why?: string };
      waitMs: number;
      confirmMs: number;
    }): Promise<PoolObservation & { confirmed: boolean }> {
      const context = Context.current();
      const deadline = Date.now() + input.waitMs;
      const enough = (seen: PoolObservation) =>
        seen.pods >= input.wants.pods && seen.backends.length >= input.wants.backends;
      let why = input.saw?.why;
      let askAt = 0;
      for (;;) {
        const seen = await look(input.group, input.startedAfter);
        // Why is read only while pods are missing, and at most every WHY_EVERY_MS (it lists events).
        if (seen.pods >= input.wants.pods) why = undefined;
        else if (Date.now() >= askAt) {
          why = await deps.platform.why(input.group);
          askAt = Date.now() + WHY_EVERY_MS;
        }
        if (why !== undefined) seen.why = why;
        context.heartbeat({ pods: seen.pods, backends: seen.backends.length });
        if (enough(seen)) {
          await context.sleep(input.confirmMs);
          const again = await look(input.group, input.startedAfter);
          const ids = new Set(again.backends.map((b) => b.id));
          const confirmed = enough(again) && seen.backends.every((b) => ids.has(b.id));
          return { ...again, confirmed };
        }
        const changed =
          !input.saw ||
          seen.pods !== input.saw.pods ||
          seen.backends.length !== input.saw.backends ||
          seen.why !== input.saw.why;
        if (changed || Date.now() >= deadline) return { ...seen, confirmed: false };
        await context.sleep(Math.min(deps.observePollMs ?? 100, Math.max(1, deadline - Date.now())));
      }
    },

    /**
     * Proves each backend can read storage: it fetches Berth's canary object from the bucket and
     * scans it. A query the coordinator could answer alone (SELECT 1) would prove nothing.
     */
    async canaryScan(input: { backends: Backend[] }): Promise<{ id: string; ok: boolean; error?: string }[]> {
      await ensureCanaryObject(deps.storage);
      return await Promise.all(
        input.backends.map(async (backend) => {
          try {
            const { rows } = await new QueryNodeClient(backend.url, deps.token).canary();
            return rows === CANARY_ROWS
              ? { id: backend.id, ok: true }
              : { id: backend.id, ok: false, error: `the canary scan counted ${rows} rows, not ${CANARY_ROWS}` };
          } catch (error) {
            return { id: backend.id, ok: false, error: (error as Error).message };
          }
        }),
      );
    },

    /** Releases the group's leases in meta, so that an idle group never blocks other groups' work. */
    async releaseGroupLeases(input: { group: string }): Promise<string[]> {
      return await deps.meta.releaseLeasesOf(input.group);
    },

    /**
     * The reconciler's one step: every group with replicas above zero and no pool workflow running
     * (terminated, cancelled, failed, or never started) is patched to zero. Paid capacity outlives
     * its workflow by one reconcile interval at most.
     */
    async parkOrphanedGroups(input: ReconcileInput): Promise<ReconcileResult> {
      const { client } = Context.current();
      const parked: ReconcileResult['parked'] = [];
      for (const group of input.groups) {
        const replicas = await onPlatform(() => deps.platform.replicas(group));
        if (replicas === 0) continue;
        const running = await client.workflow
          .getHandle(poolWorkflowId(group))
          .describe()
          .then((d) => d.status.name === 'RUNNING')
          .catch((error: unknown) => {
            if (error instanceof WorkflowNotFoundError) return false;
            throw error;
          });
        if (running) continue;
        await onPlatform(() => deps.platform.setReplicas(group, 0));
        Context.current().log.warn(
          `heavy pool reconciler: group ${group} had ${replicas} replicas and no pool workflow running; patched to 0`,
        );
        parked.push({ group, replicas });
      }
      return { parked };
    },
  };
};

export type HeavyPoolActivities = ReturnType<typeof createHeavyPoolActivities>;
