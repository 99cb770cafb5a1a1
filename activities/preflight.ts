/**
 * The preflight activity: what would keep a compute group from ever serving, checked before anyone
 * waits on it. The platform's own checks (requests against allocatable, placement, the worker's
 * rights; or the local equivalents), then meta and storage as this worker reaches them. It runs on
 * a worker because the worker holds the platform's credentials: its rights are the ones checked.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import type { DuckDBInstance } from '@duckdb/node-api';
import { preflightReport, type PreflightCheck, type PreflightReport } from '../core/preflight.js';
import type { MetaClient } from '../services/meta/client.js';
import { ensureCanaryObject } from './canary-object.js';
import type { ComputePlatform } from './platform/compute-platform.js';

export interface PreflightActivityDeps {
  platform: ComputePlatform;
  meta: MetaClient;
  storage: { s3: S3Client; bucket: string; duckdb: DuckDBInstance; workDir: string };
}

export const createPreflightActivities = (deps: PreflightActivityDeps) => ({
  async preflight(input: { group: string }): Promise<PreflightReport> {
    const failed =
      (area: string, what: string, fix: string) =>
      (error: Error): PreflightCheck[] => [
        { area, ok: false, summary: `${what}: ${error.message.split('\n')[0]}`, detail: [], fix },
      ];
    const reach = (area: string, what: string, call: () => Promise<unknown>, fix: string) =>
      call().then(
        (): PreflightCheck[] => [{ area, ok: true, summary: `${what}: reached`, detail: [] }],
        failed(area, what, fix),
      );
    const checks = await Promise.all([
      deps.platform
        .preflight(input.group)
        .then((r) => r.checks, failed('platform', "the platform's checks failed", 'see the worker log')),
      reach(
        'meta',
        'meta, where backends register',
        () => deps.meta.backends(input.group),
        'check BERTH_META_URL and the token where the worker runs',
      ),
      reach(
        'storage',
        "Berth's canary object in the bucket, which the canary scan reads",
        () => ensureCanaryObject(deps.storage),
        'check the S3 endpoint, bucket and credentials where the worker runs',
      ),
    ]);
    return preflightReport(input.group, deps.platform.kind, checks.flat());
  },
});

export type PreflightActivities = ReturnType<typeof createPreflightActivities>;
