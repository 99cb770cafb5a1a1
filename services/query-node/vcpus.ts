/**
 * How many vCPUs this node declares to meta as its ownership weight: the container's CPU quota
 * (cgroup v2 `cpu.max`, else v1 `cpu.cfs_quota_us / cpu.cfs_period_us`), never more than the
 * machine's parallelism and never less than 1. Under Kubernetes that is the pod's CPU limit, not
 * the host's core count. Fractional quotas stay fractional: weights may be fractions.
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface DetectVcpusOptions {
  /** Where the cgroup filesystem is mounted. @default '/sys/fs/cgroup' */
  cgroupRoot?: string;
  /** The machine's parallelism. @default os.availableParallelism() */
  parallelism?: number;
}

export type VcpuSource = 'cgroup v2' | 'cgroup v1' | 'parallelism';

export interface DetectedVcpus {
  vcpus: number;
  source: VcpuSource;
}

// cgroup v1 mounts the cpu controller under one of these names.
const V1_CPU_DIRS = ['cpu', 'cpu,cpuacct', 'cpuacct,cpu', '.'];

export async function detectVcpus(options: DetectVcpusOptions = {}): Promise<DetectedVcpus> {
  const root = options.cgroupRoot ?? '/sys/fs/cgroup';
  const parallelism = options.parallelism ?? os.availableParallelism();
  const quota = (await readV2Quota(root)) ?? (await readV1Quota(root));
  if (quota === undefined || quota.cpus >= parallelism) {
    return { vcpus: Math.max(1, parallelism), source: 'parallelism' };
  }
  return { vcpus: Math.max(1, quota.cpus), source: quota.source };
}

/** `cpu.max` holds "<quota> <period>" in microseconds, or "max <period>" when unlimited. */
async function readV2Quota(root: string): Promise<{ cpus: number; source: VcpuSource } | undefined> {
  const text = await readOptional(path.join(root, 'cpu.max'));
  if (text === undefined) return undefined;
  const [quota, period] = text.trim().split(/\s+/);
  const cpus = ratio(quota, period);
  return cpus === undefined ? undefined : { cpus, source: 'cgroup v2' };
}

/** v1 keeps quota and period in two files; a quota of -1 means unlimited. */
async function readV1Quota(root: string): Promise<{ cpus: number; source: VcpuSource } | undefined> {
  for (const dir of V1_CPU_DIRS) {
    const quota = await readOptional(path.join(root, dir, 'cpu.cfs_quota_us'));
    const period = await readOptional(path.join(root, dir, 'cpu.cfs_period_us'));
    if (quota === undefined || period === undefined) continue;
    const cpus = ratio(quota.trim(), period.trim());
    return cpus === undefined ? undefined : { cpus, source: 'cgroup v1' };
  }
  return undefined;
}

function ratio(quota: string | undefined, period: string | undefined): number | undefined {
  const q = Number(quota);
  const p = Number(period);
  if (!Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return undefined;
  return q / p;
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
}
