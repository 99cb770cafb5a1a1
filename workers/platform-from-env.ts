/**
 * The heavy pool's platform driver, chosen by the environment: BERTH_PLATFORM=kubernetes patches
 * the heavy workload's replicas (or an operator's custom resource); BERTH_PLATFORM=local (the
 * embedded cluster) starts query-node processes on this machine. No BERTH_HEAVY_GROUP, no heavy pool;
 * BERTH_HEAVY_MEMORY_GROUP adds the memory class, a group of its own on the same driver.
 * The same driver scales the serving group when its autoscaler is on (BERTH_SERVING_AUTOSCALE).
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { ComputePlatform } from '../activities/platform/compute-platform.js';
import {
  KubernetesPlatform,
  type KubernetesTarget,
  type WorkloadRef,
} from '../activities/platform/kubernetes-platform.js';
import { LocalPlatform } from '../activities/platform/local-platform.js';
import { localPreflight } from '../activities/platform/local-preflight.js';
import { SERVICE_SCRIPTS, startServiceProcess } from '../activities/platform/service-process.js';
import { ConfigError, memoryGroupOf, servingScalerConfigOf } from '../services/common/config.js';
import type { WorkerConfig } from './config.js';

export async function heavyPoolPlatform(
  config: WorkerConfig,
): Promise<{ platform: ComputePlatform; close(): Promise<void> } | undefined> {
  const heavyGroup = config.BERTH_HEAVY_GROUP;
  const memoryGroup = memoryGroupOf(config);
  const serving = servingScalerConfigOf(config);
  if (!heavyGroup && !serving) return undefined;
  if (config.BERTH_PLATFORM === 'kubernetes') {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
    const namespace = required(config, 'BERTH_K8S_NAMESPACE', 'BERTH_PLATFORM=kubernetes');
    return {
      platform: new KubernetesPlatform({
        kubeConfig,
        namespace,
        target: kubernetesTarget(config, heavyGroup, memoryGroup, serving?.group),
      }),
      close: async () => {},
    };
  }
  const dir = config.BERTH_HEAVY_DIR ?? path.join(config.BERTH_DATA_DIR, 'heavy');
  await mkdir(dir, { recursive: true });
  const vcpus = config.BERTH_HEAVY_VCPUS;
  const platform = new LocalPlatform({
    bootDelayMs: config.BERTH_HEAVY_BOOT_DELAY_MS,
    preflight: (group) =>
      localPreflight({
        script: SERVICE_SCRIPTS['query-node'],
        dir,
        vcpus,
        maxReplicas: group === memoryGroup ? config.BERTH_HEAVY_MEMORY_MAX_REPLICAS : config.BERTH_HEAVY_MAX_REPLICAS,
      }),
    // Each start is a fresh node on a fresh volume, as a scaled-up pod on a new machine would be. A
    // memory-class backend's final stages get the larger memory limit its bigger container would.
    // With no machine of its own, a heavy backend yields this one's cores to the serving tier.
    startBackend: (group, index) =>
      startServiceProcess(
        `${group}-${index}`,
        SERVICE_SCRIPTS['query-node'],
        {
          BERTH_NODE_GROUP: group,
          BERTH_NODE_CACHE_DIR: path.join(dir, `${group}-${Date.now()}-${index}`),
          BERTH_NODE_VCPUS: String(vcpus),
          BERTH_NODE_NICENESS: String(config.BERTH_HEAVY_NICENESS),
          ...(group === memoryGroup ? { BERTH_FINAL_STAGE_MEMORY_LIMIT: config.BERTH_HEAVY_MEMORY_LIMIT } : {}),
        },
        path.join(dir, `${group}-${index}.log`),
      ),
    onError: (error) => console.error(`heavy pool: ${error.message}`),
  });
  return { platform, close: () => platform.close() };
}

/**
 * What the Kubernetes driver patches. BERTH_K8S_TARGET=workload (the default): the group's
 * StatefulSet or Deployment, `BERTH_K8S_WORKLOAD` as kind/name. BERTH_K8S_TARGET=custom-resource: the
 * compute group inside an operator's resource, whose pods carry the labels BERTH_K8S_POD_SELECTOR
 * names ({group} stands for the group): it is required, because no selector can be read from the resource.
 */
function kubernetesTarget(
  config: WorkerConfig,
  heavyGroup: string | undefined,
  memoryGroup: string | undefined,
  servingGroup: string | undefined,
): KubernetesTarget {
  if (config.BERTH_K8S_TARGET === 'workload') {
    const workload = (
      variable: 'BERTH_K8S_WORKLOAD' | 'BERTH_K8S_MEMORY_WORKLOAD' | 'BERTH_K8S_SERVING_WORKLOAD',
      fallback: string,
    ): WorkloadRef => {
      const spec = config[variable] ?? fallback;
      const [workloadKind, name] = spec.split('/');
      if ((workloadKind !== 'statefulset' && workloadKind !== 'deployment') || !name) {
        throw new ConfigError(`${variable} must be statefulset/NAME or deployment/NAME, not "${spec}"`);
      }
      return { kind: workloadKind, name };
    };
    return {
      kind: 'workload',
      workloads: {
        ...(heavyGroup ? { [heavyGroup]: workload('BERTH_K8S_WORKLOAD', `statefulset/berth-${heavyGroup}`) } : {}),
        ...(memoryGroup
          ? { [memoryGroup]: workload('BERTH_K8S_MEMORY_WORKLOAD', `statefulset/berth-${memoryGroup}`) }
          : {}),
        ...(servingGroup
          ? { [servingGroup]: workload('BERTH_K8S_SERVING_WORKLOAD', config.BERTH_K8S_SERVING_WORKLOAD) }
          : {}),
      },
    };
  }
  const selector = required(config, 'BERTH_K8S_POD_SELECTOR', 'BERTH_K8S_TARGET=custom-resource');
  return {
    kind: 'custom-resource',
    name: required(config, 'BERTH_K8S_NAME', 'BERTH_K8S_TARGET=custom-resource'),
    group: config.BERTH_K8S_CR_GROUP,
    version: config.BERTH_K8S_CR_VERSION,
    plural: config.BERTH_K8S_CR_PLURAL,
    podSelector: (computeGroup) => selector.replaceAll('{group}', computeGroup),
  };
}

/** A variable the schema leaves optional because only one platform or target needs it. */
function required(
  config: WorkerConfig,
  variable: 'BERTH_K8S_NAMESPACE' | 'BERTH_K8S_NAME' | 'BERTH_K8S_POD_SELECTOR',
  when: string,
): string {
  const value = config[variable];
  if (!value) throw new ConfigError(`${variable} must be set when ${when}`);
  return value;
}
