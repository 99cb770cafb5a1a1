/**
 * What the Kubernetes driver reads for a preflight and for "why": the group's pod template (or a
 * pod of the group, where an operator owns the template), the nodes with their allocatable room,
 * labels, taints and autoscaler node-template annotations, the worker's own rights
 * (SelfSubjectAccessReview, one per verb it needs), and the platform's own words about pods that do
 * not run (the scheduler's and the autoscaler's events). The arithmetic is core/preflight.ts.
 */
import {
  AuthorizationV1Api,
  CoreV1Api,
  type CoreV1Event,
  type KubeConfig,
  type V1Node,
  type V1Pod,
  type V1PodSpec,
} from '@kubernetes/client-node';
// The client's own quantity parser ("7.9", "7900m", "56Gi"); its package root does not export it.
import { quantityToScalar } from '@kubernetes/client-node/dist/util.js';
import {
  placementChecks,
  type NodeGroup,
  type NodeShape,
  type NodeTemplate,
  type PodNeeds,
  type PreflightCheck,
  type Resources,
  type Taint,
} from '../../core/preflight.js';

/** Labels that name a node's group on the common platforms; a node with none is a group of its own. */
export const DEFAULT_NODE_GROUP_LABELS = [
  'eks.amazonaws.com/nodegroup',
  'alpha.eksctl.io/nodegroup-name',
  'cloud.google.com/gke-nodepool',
  'karpenter.sh/nodepool',
  'kubernetes.azure.com/agentpool',
];

/** The cluster autoscaler's node-template annotations (its clusterapi convention, mirrored on nodes). */
const TEMPLATE = 'capacity.cluster-autoscaler.kubernetes.io/';

/** One right the worker needs, checked with a SelfSubjectAccessReview. */
export interface NeededAccess {
  verb: string;
  /** API group; '' for the core group. */
  group: string;
  resource: string;
  name?: string;
  /** Omitted for cluster-scoped resources (nodes). */
  namespace?: string;
  /** Why the worker needs it, for the finding. */
  purpose: string;
}

function number(quantity: string | undefined): number {
  if (!quantity) return 0;
  try {
    return Number(quantityToScalar(quantity));
  } catch {
    return 0;
  }
}
const cpuMilli = (quantity: string | undefined) => Math.round(number(quantity) * 1000);

const resourcesOf = (list: Record<string, string> | undefined): Resources => ({
  cpuMilli: cpuMilli(list?.cpu),
  memoryBytes: number(list?.memory),
});

/** A pod's effective requests as the scheduler counts them: app containers summed, the largest init container, overhead. */
export function podNeeds(spec: V1PodSpec): PodNeeds {
  const request = (c: V1PodSpec['containers'][number]) => {
    // A limit without a request is the request (Kubernetes defaults it so).
    const requests = { ...c.resources?.limits, ...c.resources?.requests };
    return resourcesOf(requests);
  };
  const sum = spec.containers
    .map(request)
    .reduce((a, b) => ({ cpuMilli: a.cpuMilli + b.cpuMilli, memoryBytes: a.memoryBytes + b.memoryBytes }), {
      cpuMilli: 0,
      memoryBytes: 0,
    });
  const init = (spec.initContainers ?? []).map(request);
  const overhead = resourcesOf(spec.overhead);
  const requests = {
    cpuMilli: Math.max(sum.cpuMilli, ...init.map((r) => r.cpuMilli)) + overhead.cpuMilli,
    memoryBytes: Math.max(sum.memoryBytes, ...init.map((r) => r.memoryBytes)) + overhead.memoryBytes,
  };
  const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
  return {
    requests,
    nodeSelector: spec.nodeSelector ?? {},
    affinityTerms: terms.map((t) =>
      (t.matchExpressions ?? []).map((e) => ({ key: e.key, operator: e.operator, values: e.values })),
    ),
    tolerations: (spec.tolerations ?? []).map((t) => ({
      key: t.key,
      operator: t.operator,
      value: t.value,
      effect: t.effect,
    })),
  };
}

function parseList(text: string | undefined): string[] {
  return (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The autoscaler's template of a node's group, from the node's annotations; undefined without them. */
export function nodeTemplate(annotations: Record<string, string> | undefined): NodeTemplate | undefined {
  const keys = Object.keys(annotations ?? {}).filter((k) => k.startsWith(TEMPLATE));
  if (keys.length === 0) return undefined;
  const a = annotations!;
  const labels = Object.fromEntries(
    parseList(a[`${TEMPLATE}labels`]).map((pair) => [pair.split('=')[0]!, pair.split('=').slice(1).join('=')]),
  );
  const taints = parseList(a[`${TEMPLATE}taints`]).map((text): Taint => {
    const [keyValue, effect = 'NoSchedule'] = text.split(':');
    const [key, value] = keyValue!.split('=');
    return { key: key!, ...(value ? { value } : {}), effect };
  });
  const capacity: NodeTemplate['capacity'] = {};
  if (a[`${TEMPLATE}cpu`]) capacity.cpuMilli = cpuMilli(a[`${TEMPLATE}cpu`]);
  if (a[`${TEMPLATE}memory`]) capacity.memoryBytes = number(a[`${TEMPLATE}memory`]);
  return { labels, taints, capacity };
}

/**
 * Taints the control plane puts on and takes off a node as its conditions change (not ready yet,
 * unreachable, cordoned): they say how a node is now, not what its group accepts.
 */
const conditionTaint = (key: string) =>
  key.startsWith('node.kubernetes.io/') || key === 'node.cloudprovider.kubernetes.io/uninitialized';

/** Nodes grouped by the first group label each carries; each group's autoscaler template, when its nodes are annotated with one. */
export function nodeGroups(nodes: V1Node[], groupLabels: string[]): NodeGroup[] {
  const groups = new Map<string, NodeGroup>();
  for (const node of nodes) {
    const labels = node.metadata?.labels ?? {};
    const label = groupLabels.find((l) => labels[l]);
    const name = label ? labels[label]! : node.metadata!.name!;
    const shape: NodeShape = {
      name: node.metadata!.name!,
      labels,
      taints: (node.spec?.taints ?? [])
        .filter((t) => !conditionTaint(t.key))
        .map((t) => ({ key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect })),
      capacity: resourcesOf(node.status?.capacity),
      allocatable: resourcesOf(node.status?.allocatable ?? node.status?.capacity),
      unschedulable: node.spec?.unschedulable ?? false,
    };
    const group = groups.get(name) ?? { name, nodes: [] };
    group.nodes.push(shape);
    group.template ??= nodeTemplate(node.metadata?.annotations);
    groups.set(name, group);
  }
  return [...groups.values()];
}

const accessText = (a: NeededAccess) =>
  `${a.verb} ${a.group ? `${a.group}/` : ''}${a.resource}${a.name ? `/${a.name}` : ''}${a.namespace ? ` in namespace ${a.namespace}` : ' (cluster-wide)'}`;

/** One SelfSubjectAccessReview per right: the answer is the apiserver's own authorizer's. */
export async function accessChecks(kubeConfig: KubeConfig, needed: NeededAccess[]): Promise<PreflightCheck[]> {
  const api = kubeConfig.makeApiClient(AuthorizationV1Api);
  return await Promise.all(
    needed.map(async (access): Promise<PreflightCheck> => {
      const review = await api.createSelfSubjectAccessReview({
        body: {
          spec: {
            resourceAttributes: {
              verb: access.verb,
              group: access.group,
              resource: access.resource,
              name: access.name,
              namespace: access.namespace,
            },
          },
        },
      });
      const allowed = review.status?.allowed ?? false;
      return {
        area: 'rbac',
        ok: allowed,
        summary: `the worker ${allowed ? 'may' : 'may not'} ${accessText(access)} (${access.purpose})`,
        detail: [
          `SelfSubjectAccessReview: ${allowed ? 'allowed' : review.status?.denied ? 'denied' : 'not allowed'}${review.status?.reason ? ` (${review.status.reason})` : ''}`,
        ],
        ...(allowed
          ? {}
          : {
              fix: `grant verb "${access.verb}" on ${access.group ? `${access.group}/` : ''}${access.resource}${access.name ? ` (resourceNames: ${access.name})` : ''} to the worker's ${access.namespace ? 'Role' : 'ClusterRole'} (deploy/k8s/rbac.yaml)`,
            }),
      };
    }),
  );
}

/** Requests, labels and taints of the group's pods against the cluster's node groups. */
export async function nodeChecks(
  kubeConfig: KubeConfig,
  spec: V1PodSpec,
  groupLabels: string[],
): Promise<PreflightCheck[]> {
  let nodes: V1Node[];
  try {
    nodes = (await kubeConfig.makeApiClient(CoreV1Api).listNode()).items;
  } catch (error) {
    const code = (error as { code?: number }).code;
    return [
      {
        area: 'nodes',
        ok: false,
        summary: `the nodes cannot be listed (${code ?? (error as Error).message}): requests, labels and taints are unchecked`,
        detail: [],
        fix: 'grant "list" on nodes to the worker (the ClusterRole berth-preflight in deploy/k8s/rbac.yaml), or run preflight with credentials that may',
      },
    ];
  }
  return placementChecks(podNeeds(spec), nodeGroups(nodes, groupLabels), 'heavy pods');
}

// ── why pods do not run ──────────────────────────────────────────────────────────────────────

/** Reasons worth quoting besides every warning: the autoscaler's verdicts are Normal events. */
const AUTOSCALER_REASONS = new Set(['NotTriggerScaleUp', 'TriggeredScaleUp', 'FailedScaleUp']);
/** The longest quote the pool's status carries. */
const MAX_WHY = 800;

const eventTime = (e: CoreV1Event) =>
  new Date(e.series?.lastObservedTime ?? e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? 0).getTime();

/**
 * The platform's own words on pods that are not running: per pod, its latest warning and its
 * latest autoscaler event (matched by uid, so a former pod of the same name says nothing), or,
 * without events, its PodScheduled condition. Pods that say the same are quoted once, named together.
 */
export function whyPodsWait(pods: V1Pod[], events: CoreV1Event[]): string | undefined {
  const waiting = pods.filter((p) => p.status?.phase !== 'Running' && !p.metadata?.deletionTimestamp);
  if (waiting.length === 0) return undefined;
  const byUid = new Map(waiting.map((p) => [p.metadata!.uid!, p]));
  const quotes = new Map<string, { pods: Set<string>; at: number }>();
  const quote = (pod: V1Pod, reason: string, message: string, at: number) => {
    const key = `${reason} "${message.trim()}"`;
    const entry = quotes.get(key) ?? { pods: new Set<string>(), at };
    entry.pods.add(pod.metadata!.name!);
    entry.at = Math.max(entry.at, at);
    quotes.set(key, entry);
  };
  for (const pod of waiting) {
    const own = events.filter((e) => e.involvedObject.uid && byUid.get(e.involvedObject.uid) === pod);
    const latest = (pick: (e: CoreV1Event) => boolean) =>
      own.filter(pick).sort((a, b) => eventTime(b) - eventTime(a))[0];
    const chosen = [latest((e) => e.type === 'Warning'), latest((e) => AUTOSCALER_REASONS.has(e.reason ?? ''))].filter(
      (e): e is CoreV1Event => e !== undefined,
    );
    for (const e of chosen) quote(pod, e.reason ?? 'Event', e.message ?? '', eventTime(e));
    if (chosen.length === 0) {
      const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False');
      if (scheduled?.message) quote(pod, scheduled.reason ?? 'Unschedulable', scheduled.message, 0);
    }
  }
  if (quotes.size === 0) return undefined;
  const text = [...quotes.entries()]
    .sort((a, b) => b[1].at - a[1].at)
    .map(
      ([key, { pods: names }]) =>
        `${[...names].sort().join(', ')} ${waiting.some((p) => names.has(p.metadata!.name!) && p.status?.phase === 'Pending') ? 'Pending' : 'not running'}: ${key}`,
    )
    .join('; ');
  return text.length > MAX_WHY ? `${text.slice(0, MAX_WHY - 1)}…` : text;
}
