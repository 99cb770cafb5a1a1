/**
 * Activities of the heavy pool. The only write to the platform is setReplicas, and it writes
 * nothing when the target is already in place, so a retried step never patches twice. Every
 * readiness signal is read separately, because each one can lie on its own.
 */
import { ApplicationFailure } from '@temporalio/common';
import { callJson } from '../services/common/http-client.js';
import type { MetaClient } from '../services/meta/client.js';
import { scanOnNode } from '../services/query-node/client.js';
import type { HeavyQueryResult } from '../workflows/api.js';
import { withHeartbeats } from './heartbeat.js';
import { ComputeGroupNotFoundError, type ComputePlatform } from './platform/compute-platform.js';

export interface HeavyPoolActivityDeps {
  platform: ComputePlatform;
  meta: MetaClient;
  /** The coordinator runs heavy queries on the pool's backends and counts waiting queries. */
  coordinatorUrl: string;
  token: string;
}

export interface Backend {
  id: string;
  url: string;
}

export const createHeavyPoolActivities = (deps: HeavyPoolActivityDeps) => ({
  /** Writes the group's replica target (nothing when it is already set). */
  async setReplicas(input: { group: string; replicas: number }): Promise<{ changed: boolean; previous: number }> {
    try {
      return await deps.platform.setReplicas(input.group, input.replicas);
    } catch (error) {
      if (error instanceof ComputeGroupNotFoundError) throw ApplicationFailure.nonRetryable(error.message, error.name);
      throw error;
    }
  },

  /** Running pods (a count only) and the backends meta sees alive that started after `startedAfter`. */
  async observePool(input: { group: string; startedAfter: number }): Promise<{ pods: number; backends: Backend[] }> {
    const [pods, backends] = await Promise.all([deps.platform.runningPods(input.group), deps.meta.backends(input.group)]);
    return {
      pods,
      backends: backends.filter((b) => b.alive && Date.parse(b.lastStartTime) >= input.startedAfter).map((b) => ({ id: b.id, url: b.url })),
    };
  },

  /**
   * Proves each backend can read storage: a real scan of a real segment object. A query the
   * coordinator could answer alone (SELECT 1) would prove nothing.
   */
  async canaryScan(input: { backends: Backend[] }): Promise<{ id: string; ok: boolean; error?: string }[]> {
    const tables = await deps.meta.listTables();
    for (const table of tables) {
      const [segment] = await deps.meta.listSegments(table.name);
      if (!segment) continue;
      const sql = `SELECT count(*) AS n FROM "${table.name}"`;
      return await Promise.all(
        input.backends.map(async (backend) => {
          try {
            const { stats } = await scanOnNode(backend.url, { sql, tables: [{ name: table.name, columns: table.columns, segments: [segment.id] }] }, deps.token, 60_000);
            return stats.segments === 1 ? { id: backend.id, ok: true } : { id: backend.id, ok: false, error: 'the canary scan read no segment' };
          } catch (error) {
            return { id: backend.id, ok: false, error: (error as Error).message };
          }
        }),
      );
    }
    throw ApplicationFailure.nonRetryable('no segment in storage to prove the backends with: ingest data first', 'NothingToCanary');
  },

  /** Releases the group's leases in meta, so that an idle group never blocks other groups' work. */
  async releaseGroupLeases(input: { group: string }): Promise<string[]> {
    return await deps.meta.releaseLeasesOf(input.group);
  },

  /** Runs a heavy query on the pool's backends, through the coordinator's planner. */
  async runHeavyQuery(input: { group: string; queryId: string; sql: string }): Promise<HeavyQueryResult> {
    return await withHeartbeats(() =>
      callJson<HeavyQueryResult>(`${deps.coordinatorUrl}/v1/internal/query`, { body: { sql: input.sql, group: input.group, queryId: input.queryId }, token: deps.token, timeoutMs: 3_600_000 }),
    );
  },

  /** The group's waiting queries, as the coordinator counts them (SHOW WORKLOAD GROUPS' waiting_query_num). */
  async waitingQueries(input: { group: string }): Promise<number> {
    const { groups } = await callJson<{ groups: { name: string; waiting: number }[] }>(`${deps.coordinatorUrl}/v1/workload-groups`);
    return groups.find((g) => g.name === input.group)?.waiting ?? 0;
  },
});

export type HeavyPoolActivities = ReturnType<typeof createHeavyPoolActivities>;
