/**
 * The retention activity: retires every segment whose newest row is older than its table's
 * retention period. Only the manifest changes here, so queries in flight finish on the objects
 * they hold; the janitor deletes the objects after its grace time. A segment that straddles the
 * cutoff is kept until all of it is past (a merged one spans at most its day). Retiring is
 * idempotent: a run repeated, or retried after its worker died, finds only what is left to retire.
 */
import type { MetaClient } from '../services/meta/client.js';
import type { RetentionResult } from '../workflows/contracts/retention.js';
import { runLongStep } from './heartbeat.js';

export interface RetentionActivityDeps {
  meta: Pick<MetaClient, 'retentions' | 'listSegments' | 'retireSegments'>;
  /** @default Date.now */
  now?: () => number;
}

/** Segments one retire call takes: one short write on meta's store each. */
const RETIRE_BATCH = 1_000;

export const createRetentionActivities = (deps: RetentionActivityDeps) => {
  const now = deps.now ?? Date.now;
  return {
    async retireExpiredSegments(): Promise<RetentionResult> {
      return await runLongStep(async ({ signal, progress }) => {
        const retired: RetentionResult = { tables: 0, segments: 0, bytes: 0, rows: 0 };
        const started = now();
        for (const { table, retentionMs } of await deps.meta.retentions()) {
          const cutoff = started - retentionMs;
          // Newest row before the cutoff: listSegments takes those that start at or before it, and they must end before it too.
          const expired = (await deps.meta.listSegments(table, { to: cutoff })).filter((s) => s.maxTs < cutoff);
          for (let i = 0; i < expired.length; i += RETIRE_BATCH) {
            signal.throwIfAborted();
            const batch = expired.slice(i, i + RETIRE_BATCH);
            await deps.meta.retireSegments(batch.map((s) => s.id));
            retired.segments += batch.length;
            retired.bytes += batch.reduce((sum, s) => sum + s.bytes, 0);
            retired.rows += batch.reduce((sum, s) => sum + s.rows, 0);
            progress({ table, ...retired });
          }
          retired.tables++;
        }
        return retired;
      });
    },
  };
};

export type RetentionActivities = ReturnType<typeof createRetentionActivities>;
