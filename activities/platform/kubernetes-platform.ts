/**
 * The Kubernetes driver: the operator owns the compute groups, so the pool writes exactly one field
 * of its custom resource, `spec.computeGroups[i].replicas`, with a JSON patch that first tests that
 * index i still holds the group (by `uniqueId`). Nothing else is created, changed or deleted; pods
 * are only counted, by label selector.
 */
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { ComputeGroupNotFoundError, type ComputePlatform } from './compute-platform.js';

export interface KubernetesPlatformConfig {
  kubeConfig: KubeConfig;
  namespace: string;
  /** The custom resource's name. */
  name: string;
  /** @default 'disaggregated.cluster.doris.com' */
  group?: string;
  /** @default 'v1' */
  version?: string;
  /** @default 'dorisdisaggregatedclusters' */
  plural?: string;
  /** The label selector of a compute group's pods. @default `app.doris.computegroup=<group>` */
  podSelector?: (computeGroup: string) => string;
}

interface ComputeGroupSpec {
  uniqueId?: string;
  replicas?: number;
}

/** How often a patch whose `test` lost to a concurrent edit is tried again from a fresh read. */
const CONFLICT_RETRIES = 3;

export class KubernetesPlatform implements ComputePlatform {
  private readonly customObjects: CustomObjectsApi;
  private readonly core: CoreV1Api;

  constructor(private readonly config: KubernetesPlatformConfig) {
    this.customObjects = config.kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = config.kubeConfig.makeApiClient(CoreV1Api);
  }

  private get resource() {
    return {
      group: this.config.group ?? 'disaggregated.cluster.doris.com',
      version: this.config.version ?? 'v1',
      plural: this.config.plural ?? 'dorisdisaggregatedclusters',
      namespace: this.config.namespace,
      name: this.config.name,
    };
  }

  /** The group's index in spec.computeGroups and its current replicas. */
  private async locate(computeGroup: string): Promise<{ index: number; replicas: number }> {
    const resource = (await this.customObjects.getNamespacedCustomObject(this.resource)) as { spec?: { computeGroups?: ComputeGroupSpec[] } };
    const groups = resource.spec?.computeGroups ?? [];
    const index = groups.findIndex((g) => g.uniqueId === computeGroup);
    if (index < 0) {
      throw new ComputeGroupNotFoundError(
        `compute group "${computeGroup}" is not in ${this.resource.plural}/${this.resource.name} (namespace ${this.resource.namespace}); it has: ${groups.map((g) => g.uniqueId).join(', ') || 'none'}`,
      );
    }
    return { index, replicas: groups[index]!.replicas ?? 0 };
  }

  async replicas(computeGroup: string): Promise<number> {
    return (await this.locate(computeGroup)).replicas;
  }

  async setReplicas(computeGroup: string, replicas: number): Promise<{ changed: boolean; previous: number }> {
    for (let attempt = 0; ; attempt++) {
      const { index, replicas: previous } = await this.locate(computeGroup);
      if (previous === replicas) return { changed: false, previous };
      try {
        await this.customObjects.patchNamespacedCustomObject(
          {
            ...this.resource,
            body: [
              { op: 'test', path: `/spec/computeGroups/${index}/uniqueId`, value: computeGroup },
              { op: 'replace', path: `/spec/computeGroups/${index}/replicas`, value: replicas },
            ],
          },
          setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
        );
        return { changed: true, previous };
      } catch (error) {
        // The group moved in the list between our read and our patch: read again.
        const code = (error as { code?: number }).code;
        if ((code === 409 || code === 422) && attempt < CONFLICT_RETRIES) continue;
        throw error;
      }
    }
  }

  async runningPods(computeGroup: string): Promise<number> {
    const selector = this.config.podSelector?.(computeGroup) ?? `app.doris.computegroup=${computeGroup}`;
    const pods = await this.core.listNamespacedPod({ namespace: this.config.namespace, labelSelector: selector });
    return pods.items.filter((pod) => pod.status?.phase === 'Running').length;
  }
}
