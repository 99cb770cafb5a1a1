/**
 * The heavy pool's platform driver, chosen by the environment: BERTH_PLATFORM=kubernetes patches
 * the heavy workload's replicas (or an operator's custom resource); BERTH_PLATFORM=local (the
 * embedded cluster) starts query-node processes on this machine. No BERTH_HEAVY_GROUP, no heavy pool.
 * The same driver scales the serving group when its autoscaler is on (BERTH_SERVING_AUTOSCALE).
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { ComputePlatform } from '../activities/platform/compute-platform.js';
import { KubernetesPlatform, type KubernetesTarget, type WorkloadRef } from '../activities/platform/kubernetes-platform.js';
import { LocalPlatform } from '../activities/platform/local-platform.js';
import { localPreflight } from '../activities/platform/local-preflight.js';
import { SERVICE_SCRIPTS, startServiceProcess } from '../cli/embedded/service-process.js';
import { envNumber, envString } from '../services/common/env.js';
import { servingScalerConfigFromEnv } from '../services/common/serving-scaler-config.js';
import { POOL_DEFAULTS } from '../workflows/api.js';

export async function heavyPoolFromEnv(): Promise<{ platform: ComputePlatform; close(): Promise<void> } | undefined> {
  const heavyGroup = process.env.BERTH_HEAVY_GROUP;
  const serving = servingScalerConfigFromEnv();
  if (!heavyGroup && !serving) return undefined;
  const kind = envString('BERTH_PLATFORM', 'local');
  if (kind === 'kubernetes') {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
    return { platform: new KubernetesPlatform({ kubeConfig, namespace: envString('BERTH_K8S_NAMESPACE'), target: kubernetesTargetFromEnv(heavyGroup, serving?.group) }), close: async () => {} };
  }
  if (kind !== 'local') throw new Error(`BERTH_PLATFORM must be "local" or "kubernetes", not "${kind}"`);
  const dir = envString('BERTH_HEAVY_DIR', path.join(envString('BERTH_DATA_DIR', '.berth'), 'heavy'));
  await mkdir(dir, { recursive: true });
  const vcpus = envString('BERTH_HEAVY_VCPUS', '2');
  const platform = new LocalPlatform({
    bootDelayMs: envNumber('BERTH_HEAVY_BOOT_DELAY_MS', 2_000),
    preflight: () => localPreflight({ script: SERVICE_SCRIPTS['query-node'], dir, vcpus: Number(vcpus), maxReplicas: envNumber('BERTH_HEAVY_MAX_REPLICAS', POOL_DEFAULTS.maxReplicas) }),
    // Each start is a fresh node on a fresh volume, as a scaled-up pod on a new machine would be.
    startBackend: (group, index) =>
      startServiceProcess(
        `${group}-${index}`,
        SERVICE_SCRIPTS['query-node'],
        {
          BERTH_NODE_GROUP: group,
          BERTH_NODE_CACHE_DIR: path.join(dir, `${group}-${Date.now()}-${index}`),
          BERTH_NODE_VCPUS: vcpus,
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
function kubernetesTargetFromEnv(heavyGroup: string | undefined, servingGroup: string | undefined): KubernetesTarget {
  const kind = envString('BERTH_K8S_TARGET', 'workload');
  if (kind === 'workload') {
    const workload = (variable: string, fallback: string): WorkloadRef => {
      const spec = envString(variable, fallback);
      const [workloadKind, name] = spec.split('/');
      if ((workloadKind !== 'statefulset' && workloadKind !== 'deployment') || !name) {
        throw new Error(`${variable} must be statefulset/NAME or deployment/NAME, not "${spec}"`);
      }
      return { kind: workloadKind, name };
    };
    return {
      kind: 'workload',
      workloads: {
        ...(heavyGroup ? { [heavyGroup]: workload('BERTH_K8S_WORKLOAD', `statefulset/berth-${heavyGroup}`) } : {}),
        ...(servingGroup ? { [servingGroup]: workload('BERTH_K8S_SERVING_WORKLOAD', 'statefulset/berth-query') } : {}),
      },
    };
  }
  if (kind !== 'custom-resource') throw new Error(`BERTH_K8S_TARGET must be "workload" or "custom-resource", not "${kind}"`);
  const selector = envString('BERTH_K8S_POD_SELECTOR');
  return {
    kind: 'custom-resource',
    name: envString('BERTH_K8S_NAME'),
    group: envString('BERTH_K8S_CR_GROUP', 'disaggregated.cluster.doris.com'),
    version: envString('BERTH_K8S_CR_VERSION', 'v1'),
    plural: envString('BERTH_K8S_CR_PLURAL', 'dorisdisaggregatedclusters'),
    podSelector: (computeGroup) => selector.replaceAll('{group}', computeGroup),
  };
}
