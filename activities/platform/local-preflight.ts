/**
 * The local driver's preflight: the checks this machine can make before it starts backend
 * processes, the equivalents of a cluster's requests, placement and rights: the query-node script
 * is built, the backends' directory takes files, and what the backends declare against the CPUs
 * there are.
 */
import { constants } from 'node:fs';
import { access, mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { PreflightCheck } from '../../core/preflight.js';

export interface LocalPreflightOptions {
  /** The query-node entry point each backend runs. */
  script: string;
  /** Where backends keep their caches and logs. */
  dir: string;
  /** vCPUs each backend declares. */
  vcpus: number;
  /** The most backends the pool runs at once. */
  maxReplicas: number;
}

export async function localPreflight(options: LocalPreflightOptions): Promise<PreflightCheck[]> {
  const checks: PreflightCheck[] = [];
  const script = await access(options.script, constants.R_OK).then(
    () => undefined,
    (error: Error) => error.message,
  );
  checks.push(
    script
      ? {
          area: 'platform',
          ok: false,
          summary: `the query-node script cannot be read: ${script}`,
          detail: [options.script],
          fix: 'build Berth (npm run build) where the worker runs',
        }
      : { area: 'platform', ok: true, summary: 'the query-node script is built', detail: [options.script] },
  );
  const probe = path.join(options.dir, `.preflight-${process.pid}`);
  const writable = await mkdir(options.dir, { recursive: true })
    .then(() => writeFile(probe, ''))
    .then(() => rm(probe, { force: true }))
    .then(
      () => undefined,
      (error: Error) => error.message,
    );
  checks.push(
    writable
      ? {
          area: 'platform',
          ok: false,
          summary: `the backends' directory does not take files: ${writable}`,
          detail: [options.dir],
          fix: 'point BERTH_HEAVY_DIR at a writable directory',
        }
      : { area: 'platform', ok: true, summary: "the backends' directory takes files", detail: [options.dir] },
  );
  const cpus = os.availableParallelism();
  const declared = options.vcpus * options.maxReplicas;
  checks.push({
    area: 'requests',
    ok: true,
    summary:
      declared <= cpus
        ? `${options.maxReplicas} backends × ${options.vcpus} vCPUs = ${declared} ≤ ${cpus} CPUs here`
        : `${options.maxReplicas} backends × ${options.vcpus} vCPUs = ${declared} > ${cpus} CPUs here: the backends share them (a declared weight, not a reservation)`,
    detail: [
      `each backend declares ${options.vcpus} vCPUs (BERTH_HEAVY_VCPUS) as its ownership weight; this machine has ${cpus}`,
    ],
  });
  return checks;
}
