/**
 * The Kubernetes driver. Its one write is a JSON patch of one replicas field, guarded by a `test`
 * of the value it read, so a concurrent edit fails the patch (422) instead of being overwritten.
 * Two targets:
 * - `workload` (the default deployment): the group is a StatefulSet or Deployment of Berth query
 *   nodes; the patch is its /spec/replicas, and pods are counted by the workload's own spec.selector,
 *   read from the object.
 * - `custom-resource`: an operator owns the compute groups (the seed's model: the Doris operator's
 *   `spec.computeGroups[i].replicas`, located by `uniqueId`, whose index is tested too); pods are
 *   counted by the label selector the configuration gives, as no selector can be read from it.
 * Nothing else is created, changed or deleted.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Event,
  type KubeConfig,
  type V1LabelSelector,
  type V1PodSpec,
} from '@kubernetes/client-node';
import { preflightReport, type PreflightCheck, type PreflightReport } from '../../core/preflight.js';
import { ComputeGroupNotFoundError, type ComputePlatform } from './compute-platform.js';
import {
  accessChecks,
  DEFAULT_NODE_GROUP_LABELS,
  nodeChecks,
  whyPodsWait,
  type NeededAccess,
} from './kubernetes-preflight.js';

export interface WorkloadRef {
  kind: 'statefulset' | 'deployment';
  name: string;
}

export type KubernetesTarget =
  | {
      kind: 'workload';
      /** The workload of each compute group the platform drives. */
      workloads: Record<string, WorkloadRef>;
    }
  | {
      kind: 'custom-resource';
      /** The custom resource's name. */
      name: string;
      /** @default 'disaggregated.cluster.doris.com' */
      group?: string;
      /** @default 'v1' */
      version?: string;
      /** @default 'dorisdisaggregatedclusters' */
      plural?: string;
      /** The label selector of a compute group's pods, as the operator labels them. */
      podSelector: (computeGroup: string) => string;
    };

export interface KubernetesPlatformConfig {
  kubeConfig: KubeConfig;
  namespace: string;
  target: KubernetesTarget;
  /** Node labels that name a node's group, first match wins. @default DEFAULT_NODE_GROUP_LABELS */
  nodeGroupLabels?: string[];
}

/** An object's address for the generic object API (built-in workloads included). */
interface ObjectRef {
  group: string;
  version: string;
  plural: string;
  namespace: string;
  name: string;
}

/** Where a group's replicas live in its object, as read just now. */
interface ReplicaField {
  object: ObjectRef;
  path: string;
  /** The value read; undefined when the field is absent. */
  value: number | undefined;
  /** Tests that must still hold when the patch lands (the group's index in a list). */
  guards: { op: 'test'; path: string; value: unknown }[];
  /** The group's pods. */
  podSelector: string;
  /** The pod template, where the object has one (a workload; not an operator's resource). */
  podSpec?: V1PodSpec;
}

/** How often a patch whose `test` lost to a concurrent edit is tried again from a fresh read. */
const CONFLICT_RETRIES = 5;

const WORKLOAD_PLURALS = { statefulset: 'statefulsets', deployment: 'deployments' } as const;

/** A LabelSelector object as the `labelSelector` query parameter spells it. */
export function labelSelectorString(selector: V1LabelSelector | undefined): string {
  const terms = Object.entries(selector?.matchLabels ?? {}).map(([key, value]) => `${key}=${value}`);
  for (const { key, operator, values = [] } of selector?.matchExpressions ?? []) {
    if (operator === 'In') terms.push(`${key} in (${values.join(',')})`);
    else if (operator === 'NotIn') terms.push(`${key} notin (${values.join(',')})`);
    else if (operator === 'Exists') terms.push(key);
    else if (operator === 'DoesNotExist') terms.push(`!${key}`);
    else throw new Error(`unknown label selector operator "${operator}"`);
  }
  return terms.join(',');
}

export class KubernetesPlatform implements ComputePlatform {
  readonly kind = 'kubernetes';
  private readonly objects: CustomObjectsApi;
  private readonly core: CoreV1Api;

  constructor(private readonly config: KubernetesPlatformConfig) {
    this.objects = config.kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = config.kubeConfig.makeApiClient(CoreV1Api);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  private async read(object: ObjectRef): Promise<Record<string, any>> {
    return (await this.objects.getNamespacedCustomObject(object)) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  }

  /** Reads the group's object and finds its replicas field. */
  private async locate(computeGroup: string): Promise<ReplicaField> {
    const { namespace, target } = this.config;
    if (target.kind === 'workload') {
      const workload = target.workloads[computeGroup];
      if (!workload) {
        throw new ComputeGroupNotFoundError(
          `compute group "${computeGroup}" has no workload configured; this worker drives: ${Object.keys(target.workloads).join(', ') || 'none'}`,
        );
      }
      const object = {
        group: 'apps',
        version: 'v1',
        plural: WORKLOAD_PLURALS[workload.kind],
        namespace,
        name: workload.name,
      };
      const { spec } = await this.read(object);
      const podSelector = labelSelectorString(spec?.selector);
      // An empty selector would count every pod in the namespace.
      if (!podSelector) throw new Error(`${workload.kind} ${namespace}/${workload.name} has no pod selector`);
      return {
        object,
        path: '/spec/replicas',
        value: spec?.replicas,
        guards: [],
        podSelector,
        podSpec: spec?.template?.spec,
      };
    }
    const object = {
      group: target.group ?? 'disaggregated.cluster.doris.com',
      version: target.version ?? 'v1',
      plural: target.plural ?? 'dorisdisaggregatedclusters',
      namespace,
      name: target.name,
    };
    const groups = ((await this.read(object)).spec?.computeGroups ?? []) as { uniqueId?: string; replicas?: number }[];
    const index = groups.findIndex((g) => g.uniqueId === computeGroup);
    if (index < 0) {
      throw new ComputeGroupNotFoundError(
        `compute group "${computeGroup}" is not in ${object.plural}/${object.name} (namespace ${namespace}); it has: ${groups.map((g) => g.uniqueId).join(', ') || 'none'}`,
      );
    }
    return {
      object,
      path: `/spec/computeGroups/${index}/replicas`,
      value: groups[index]!.replicas,
      guards: [{ op: 'test', path: `/spec/computeGroups/${index}/uniqueId`, value: computeGroup }],
      podSelector: target.podSelector(computeGroup),
    };
  }

  async replicas(computeGroup: string): Promise<number> {
    return (await this.locate(computeGroup)).value ?? 0;
  }

  /**
   * Patches the group's replicas, guarded by a test of the value read. When the test fails (someone
   * else changed the field meanwhile) it reads again; a raise that finds the field already at or
   * past its target leaves it there rather than lowering someone else's larger value.
   */
  async setReplicas(computeGroup: string, replicas: number): Promise<{ changed: boolean; previous: number }> {
    let raise: boolean | undefined;
    for (let attempt = 0; ; attempt++) {
      const field = await this.locate(computeGroup);
      const previous = field.value ?? 0;
      raise ??= replicas > previous;
      if (previous === replicas || (raise && previous > replicas)) return { changed: false, previous };
      const guard = field.value === undefined ? [] : [{ op: 'test', path: field.path, value: field.value }];
      try {
        await this.objects.patchNamespacedCustomObject(
          {
            ...field.object,
            body: [
              ...field.guards,
              ...guard,
              { op: field.value === undefined ? 'add' : 'replace', path: field.path, value: replicas },
            ],
          },
          setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
        );
        return { changed: true, previous };
      } catch (error) {
        // A failed test is a 422 that changed nothing: read again.
        if ((error as { code?: number }).code === 422 && attempt < CONFLICT_RETRIES) continue;
        throw error;
      }
    }
  }

  /** Running pods of the group that are not on their way out. */
  async runningPods(computeGroup: string): Promise<number> {
    const { podSelector } = await this.locate(computeGroup);
    const pods = await this.core.listNamespacedPod({ namespace: this.config.namespace, labelSelector: podSelector });
    return pods.items.filter((pod) => pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp).length;
  }

  /**
   * The scheduler's and the autoscaler's own words about the group's pods that do not run (their
   * events, or the pods' PodScheduled condition where events cannot be read).
   */
  async why(computeGroup: string): Promise<string | undefined> {
    try {
      const { podSelector } = await this.locate(computeGroup);
      const { namespace } = this.config;
      const pods = (await this.core.listNamespacedPod({ namespace, labelSelector: podSelector })).items;
      if (pods.every((p) => p.status?.phase === 'Running')) return undefined;
      const events: CoreV1Event[] = await this.core
        .listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.kind=Pod' })
        .then(
          (list) => list.items,
          () => [],
        );
      return whyPodsWait(pods, events);
    } catch {
      return undefined; // advisory: the readiness layers say what is missing anyway
    }
  }

  /**
   * Whether the group's pods can ever run here: their requests against every node group's
   * allocatable room, their selector and tolerations against its labels and taints (and the
   * autoscaler's template of it), and each right the worker needs, asked of the apiserver itself.
   */
  async preflight(computeGroup: string): Promise<PreflightReport> {
    const { namespace, target, kubeConfig } = this.config;
    const checks: PreflightCheck[] = [];
    let field: ReplicaField | undefined;
    try {
      field = await this.locate(computeGroup);
    } catch (error) {
      const code = (error as { code?: number }).code;
      checks.push({
        area: 'platform',
        ok: false,
        summary: `the group's ${target.kind === 'workload' ? 'workload' : 'custom resource'} cannot be read: ${code === 404 ? 'it does not exist' : code === 403 ? 'the worker may not read it' : (error as Error).message}`,
        detail: [],
        fix:
          target.kind === 'workload'
            ? `apply the heavy workload (deploy/k8s/berth.yaml) in namespace ${namespace}, or point BERTH_K8S_WORKLOAD at it`
            : `create the resource, or point BERTH_K8S_NAME at it`,
      });
    }
    if (field) {
      checks.push({
        area: 'platform',
        ok: true,
        summary: `${field.object.plural}/${field.object.name} in namespace ${namespace}: replicas ${field.value ?? 0}, pods selected by ${field.podSelector}`,
        detail: [],
      });
      let spec = field.podSpec;
      let from = `the pod template of ${field.object.plural}/${field.object.name}`;
      if (!spec) {
        // An operator's resource has no pod template Berth can read: a pod of the group shows it.
        const pod = (
          await this.core
            .listNamespacedPod({ namespace, labelSelector: field.podSelector })
            .catch(() => ({ items: [] }))
        ).items[0];
        spec = pod?.spec;
        from = pod ? `pod ${pod.metadata!.name} of the group` : '';
      }
      if (spec) {
        const nodes = await nodeChecks(kubeConfig, spec, this.config.nodeGroupLabels ?? DEFAULT_NODE_GROUP_LABELS);
        for (const check of nodes) check.detail.unshift(`from ${from}`);
        checks.push(...nodes);
      } else {
        checks.push({
          area: 'requests',
          ok: true,
          summary:
            'no pod of the group exists to read its requests and placement from (an operator owns its template): unchecked',
          detail: [],
        });
      }
    }
    checks.push(...(await accessChecks(kubeConfig, this.neededAccess(computeGroup))));
    return preflightReport(computeGroup, 'kubernetes', checks);
  }

  /** Every right the worker uses on this target, and the one preflight itself needs. */
  private neededAccess(computeGroup: string): NeededAccess[] {
    const { namespace, target } = this.config;
    const object =
      target.kind === 'workload'
        ? {
            group: 'apps',
            resource: WORKLOAD_PLURALS[target.workloads[computeGroup]?.kind ?? 'statefulset'],
            name: target.workloads[computeGroup]?.name,
          }
        : {
            group: target.group ?? 'disaggregated.cluster.doris.com',
            resource: target.plural ?? 'dorisdisaggregatedclusters',
            name: target.name,
          };
    return [
      { verb: 'get', ...object, namespace, purpose: 'to read the replicas and the pod selector' },
      { verb: 'patch', ...object, namespace, purpose: 'the pool’s one write: replicas' },
      { verb: 'list', group: '', resource: 'pods', namespace, purpose: 'to count running pods' },
      { verb: 'list', group: '', resource: 'events', namespace, purpose: 'to quote why pods do not run' },
      { verb: 'list', group: '', resource: 'nodes', purpose: 'for preflight: allocatable, labels and taints' },
    ];
  }
}
