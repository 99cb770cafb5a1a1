/**
 * Preflight arithmetic: whether a compute group's pods can ever be placed, as pure functions over
 * plain figures a platform driver read. It exists because scale-from-zero fails silently: a pod that
 * requests a node's whole CPU (8 against an allocatable 7.9) is "Insufficient cpu" forever, and a
 * node group whose autoscaler template lacks the labels or tolerations the pods need is never scaled
 * up, with no error anywhere. Every check says what it compared, with the numbers, and how to fix it.
 */
import { formatBytes } from './bytes.js';

export interface PreflightCheck {
  /** What was checked: requests, placement, autoscaler-template, rbac, nodes, platform, meta, storage. */
  area: string;
  ok: boolean;
  /** One line: what holds, or what is wrong. */
  summary: string;
  /** The arithmetic and the evidence, one line each. */
  detail: string[];
  /** What to change, when it is not ok. */
  fix?: string;
}

export interface PreflightReport {
  group: string;
  platform: 'kubernetes' | 'local';
  checks: PreflightCheck[];
  /** Checks that failed: any is a finding. */
  findings: number;
}

export const preflightReport = (
  group: string,
  platform: PreflightReport['platform'],
  checks: PreflightCheck[],
): PreflightReport => ({
  group,
  platform,
  checks,
  findings: checks.filter((c) => !c.ok).length,
});

export interface Resources {
  /** CPU in thousandths of a core (Kubernetes' "m"). */
  cpuMilli: number;
  memoryBytes: number;
}

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

export interface Toleration {
  key?: string;
  /** @default 'Equal' */
  operator?: string;
  value?: string;
  /** Empty: every effect. */
  effect?: string;
}

export interface SelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

/** What a group's pod asks of a node. */
export interface PodNeeds {
  requests: Resources;
  nodeSelector: Record<string, string>;
  /** Required node affinity: any one term will do, each term needs all of its requirements. */
  affinityTerms: SelectorRequirement[][];
  tolerations: Toleration[];
}

export interface NodeShape {
  name: string;
  labels: Record<string, string>;
  taints: Taint[];
  capacity: Resources;
  allocatable: Resources;
  unschedulable?: boolean;
}

/** What the cluster autoscaler builds a node of a group from when the group is at zero. */
export interface NodeTemplate {
  labels: Record<string, string>;
  taints: Taint[];
  capacity: Partial<Resources>;
}

export interface NodeGroup {
  name: string;
  nodes: NodeShape[];
  /** Present when the group's nodes carry the autoscaler's node-template annotations. */
  template?: NodeTemplate;
}

// ── wording ──────────────────────────────────────────────────────────────────────────────────

/** CPU as Kubernetes writes it: whole cores plainly, fractions with their millicores ("7.9 (7900m)"). */
export function formatCpu(milli: number): string {
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli / 1000} (${milli}m)`;
}

const taintText = (t: Taint) => `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`;
const requirementText = (r: SelectorRequirement) =>
  r.operator === 'In'
    ? `${r.key} in (${(r.values ?? []).join(',')})`
    : r.operator === 'NotIn'
      ? `${r.key} notin (${(r.values ?? []).join(',')})`
      : r.operator === 'Exists'
        ? r.key
        : r.operator === 'DoesNotExist'
          ? `!${r.key}`
          : `${r.key} ${r.operator} ${(r.values ?? []).join(',')}`;

// ── matching ─────────────────────────────────────────────────────────────────────────────────

/** A taint the scheduler respects when placing (NoSchedule, NoExecute) that no toleration covers. */
export function untolerated(taints: Taint[], tolerations: Toleration[]): Taint[] {
  const tolerates = (tol: Toleration, taint: Taint) => {
    if (tol.effect && tol.effect !== taint.effect) return false;
    if (!tol.key) return tol.operator === 'Exists';
    if (tol.key !== taint.key) return false;
    return tol.operator === 'Exists' || (tol.value ?? '') === (taint.value ?? '');
  };
  return taints.filter((t) => t.effect !== 'PreferNoSchedule' && !tolerations.some((tol) => tolerates(tol, t)));
}

function requirementHolds(r: SelectorRequirement, labels: Record<string, string>): boolean {
  const value = labels[r.key];
  switch (r.operator) {
    case 'In':
      return value !== undefined && (r.values ?? []).includes(value);
    case 'NotIn':
      return value === undefined || !(r.values ?? []).includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Gt':
      return value !== undefined && Number(value) > Number(r.values?.[0]);
    case 'Lt':
      return value !== undefined && Number(value) < Number(r.values?.[0]);
    default:
      return false;
  }
}

/** The pod's label requirements a node's labels miss, in words (empty when it matches). */
export function missingLabels(needs: PodNeeds, labels: Record<string, string>): string[] {
  const missing = Object.entries(needs.nodeSelector)
    .filter(([key, value]) => labels[key] !== value)
    .map(([key, value]) => `${key}=${value}`);
  if (needs.affinityTerms.length > 0) {
    const unmet = needs.affinityTerms.map((term) => term.filter((r) => !requirementHolds(r, labels)));
    if (unmet.every((u) => u.length > 0)) {
      // Report the term that misses least: the nearest way to match.
      const nearest = unmet.reduce((a, b) => (b.length < a.length ? b : a));
      missing.push(...nearest.map((r) => `affinity ${requirementText(r)}`));
    }
  }
  return missing;
}

// ── the checks ───────────────────────────────────────────────────────────────────────────────

interface NodeFit {
  node: NodeShape;
  missing: string[];
  taints: Taint[];
  cpuShort: number;
  memoryShort: number;
}

const fitOf = (needs: PodNeeds, node: NodeShape): NodeFit => ({
  node,
  missing: missingLabels(needs, node.labels),
  taints: untolerated(node.taints, needs.tolerations),
  cpuShort: Math.max(0, needs.requests.cpuMilli - node.allocatable.cpuMilli),
  memoryShort: Math.max(0, needs.requests.memoryBytes - node.allocatable.memoryBytes),
});

const placeable = (f: NodeFit) => f.missing.length === 0 && f.taints.length === 0 && !f.node.unschedulable;
const roomy = (f: NodeFit) => f.cpuShort === 0 && f.memoryShort === 0;

/** The node of a group nearest to fitting: placeable first, then the most room. */
function bestFit(needs: PodNeeds, group: NodeGroup): NodeFit {
  const fits = group.nodes.map((n) => fitOf(needs, n));
  const score = (f: NodeFit) => (placeable(f) ? 0 : 1e15) + f.cpuShort * 1e6 + f.memoryShort / 1e6;
  return fits.reduce((a, b) => (score(b) < score(a) ? b : a));
}

function resourceLines(needs: PodNeeds, fit: NodeFit): string[] {
  const { node } = fit;
  const cpuReserved = node.capacity.cpuMilli - node.allocatable.cpuMilli;
  const memoryReserved = node.capacity.memoryBytes - node.allocatable.memoryBytes;
  const cpu =
    fit.cpuShort > 0
      ? `cpu ${formatCpu(needs.requests.cpuMilli)} requested > ${formatCpu(node.allocatable.cpuMilli)} allocatable (capacity ${formatCpu(node.capacity.cpuMilli)} − ${formatCpu(cpuReserved)} reserved): short by ${formatCpu(fit.cpuShort)}`
      : `cpu ${formatCpu(needs.requests.cpuMilli)} requested ≤ ${formatCpu(node.allocatable.cpuMilli)} allocatable`;
  const memory =
    fit.memoryShort > 0
      ? `memory ${formatBytes(needs.requests.memoryBytes)} requested > ${formatBytes(node.allocatable.memoryBytes)} allocatable (capacity ${formatBytes(node.capacity.memoryBytes)} − ${formatBytes(memoryReserved)} reserved): short by ${formatBytes(fit.memoryShort)}`
      : `memory ${formatBytes(needs.requests.memoryBytes)} requested ≤ ${formatBytes(node.allocatable.memoryBytes)} allocatable`;
  return [cpu, memory];
}

function placementLine(fit: NodeFit): string {
  const problems = [
    ...fit.missing.map((m) => `lacks ${m}`),
    ...fit.taints.map((t) => `taint ${taintText(t)} not tolerated`),
    ...(fit.node.unschedulable ? ['cordoned (unschedulable)'] : []),
  ];
  return problems.length > 0 ? problems.join('; ') : 'labels and taints match';
}

const groupTitle = (g: NodeGroup) =>
  `group ${g.name} (${g.nodes.length} node${g.nodes.length === 1 ? '' : 's'}, e.g. ${g.nodes[0]!.name})`;

/** The most groups a check lists one by one; the rest are counted. */
const LISTED_GROUPS = 8;

function listGroups<T>(items: T[], line: (item: T) => string[]): string[] {
  const lines = items.slice(0, LISTED_GROUPS).flatMap(line);
  if (items.length > LISTED_GROUPS) lines.push(`… and ${items.length - LISTED_GROUPS} more node groups`);
  return lines;
}

/**
 * Requests against allocatable and the pod's selector and tolerations against each node group
 * (and its autoscaler template). A group fits when one of its nodes both takes the pod (labels,
 * taints) and has the room (allocatable, never capacity: the kubelet reserves the difference).
 */
export function placementChecks(needs: PodNeeds, groups: NodeGroup[], subject: string): PreflightCheck[] {
  const asked = [
    `${subject} request cpu ${formatCpu(needs.requests.cpuMilli)}, memory ${formatBytes(needs.requests.memoryBytes)}`,
    `${subject} select ${[...Object.entries(needs.nodeSelector).map(([k, v]) => `${k}=${v}`), ...needs.affinityTerms.map((t) => t.map(requirementText).join(' and '))].join('; ') || 'any node'}; tolerate ${needs.tolerations.map((t) => (t.key ? `${t.key}${t.value ? `=${t.value}` : ''}${t.effect ? `:${t.effect}` : ''}` : 'every taint')).join(', ') || 'no taint'}`,
  ];
  const withNodes = groups.filter((g) => g.nodes.length > 0);
  if (withNodes.length === 0) {
    return [
      {
        area: 'placement',
        ok: false,
        summary: 'the cluster has no nodes to check against',
        detail: asked,
        fix: 'run preflight where the nodes can be listed, with at least one node of the group the pods should use',
      },
    ];
  }
  const fits = withNodes.map((g) => ({ group: g, fit: bestFit(needs, g) }));
  const placed = fits.filter((f) => placeable(f.fit));
  const checks: PreflightCheck[] = [];

  if (placed.length === 0) {
    checks.push({
      area: 'placement',
      ok: false,
      summary: `no node group has the labels and tolerations ${subject} need`,
      detail: [...asked, ...listGroups(fits, (f) => [`${groupTitle(f.group)}: ${placementLine(f.fit)}`])],
      fix: `label the intended node group to match the pods' nodeSelector/affinity (and give its autoscaler template the same labels) or tolerate its taints in the pod template`,
    });
  } else {
    checks.push({
      area: 'placement',
      ok: true,
      summary: `${placed.length} node group${placed.length === 1 ? '' : 's'} take ${subject}: ${placed.map((f) => f.group.name).join(', ')}`,
      detail: asked,
    });
  }

  // Room is judged on the groups that take the pods; with none, placement is the finding.
  if (placed.length === 0) return checks;
  const candidates = placed;
  const roomyGroups = candidates.filter((f) => roomy(f.fit));
  if (roomyGroups.length === 0) {
    const cpuShort = candidates.filter((f) => f.fit.cpuShort > 0);
    const largest = Math.max(...candidates.map((f) => f.fit.node.allocatable.cpuMilli));
    const cpuFix =
      cpuShort.length > 0
        ? `request at most ${formatCpu(largest)} CPU (allocatable, not the node's ${formatCpu(candidates.find((f) => f.fit.node.allocatable.cpuMilli === largest)!.fit.node.capacity.cpuMilli)} vCPUs): cpu: "${Math.max(1, Math.ceil(largest / 1000) - 1)}" leaves room for DaemonSets, or use a node group with more allocatable CPU`
        : undefined;
    const memoryFix = candidates.some((f) => f.fit.memoryShort > 0)
      ? `request at most ${formatBytes(Math.max(...candidates.map((f) => f.fit.node.allocatable.memoryBytes)))} memory`
      : undefined;
    checks.push({
      area: 'requests',
      ok: false,
      summary: `no node has the allocatable room ${subject} request: the scheduler reports "Insufficient ${cpuShort.length > 0 ? 'cpu' : 'memory'}" and scale-from-zero never happens`,
      detail: [
        asked[0]!,
        ...listGroups(candidates, (f) => [
          `${groupTitle(f.group)}, node ${f.fit.node.name}:`,
          ...resourceLines(needs, f.fit).map((l) => `  ${l}`),
        ]),
      ],
      fix: [cpuFix, memoryFix].filter(Boolean).join('; '),
    });
  } else {
    const best = roomyGroups[0]!;
    checks.push({
      area: 'requests',
      ok: true,
      summary: `${subject} fit the allocatable room of ${roomyGroups.map((f) => f.group.name).join(', ')}`,
      detail: [
        asked[0]!,
        `${groupTitle(best.group)}, node ${best.fit.node.name}:`,
        ...resourceLines(needs, best.fit).map((l) => `  ${l}`),
      ],
    });
  }

  // Groups the autoscaler describes with a template: at zero nodes the template is all it sees.
  const templated = candidates.filter((f) => f.group.template);
  for (const { group } of templated) {
    const template = group.template!;
    const problems = [
      ...missingLabels(needs, template.labels).map((m) => `lacks ${m}`),
      ...untolerated(template.taints, needs.tolerations).map((t) => `taint ${taintText(t)} not tolerated`),
      ...(template.capacity.cpuMilli !== undefined && template.capacity.cpuMilli < needs.requests.cpuMilli
        ? [`cpu ${formatCpu(template.capacity.cpuMilli)} < ${formatCpu(needs.requests.cpuMilli)} requested`]
        : []),
      ...(template.capacity.memoryBytes !== undefined && template.capacity.memoryBytes < needs.requests.memoryBytes
        ? [
            `memory ${formatBytes(template.capacity.memoryBytes)} < ${formatBytes(needs.requests.memoryBytes)} requested`,
          ]
        : []),
    ];
    checks.push({
      area: 'autoscaler-template',
      ok: problems.length === 0,
      summary:
        problems.length === 0
          ? `group ${group.name}'s autoscaler template takes ${subject}, so it scales from zero`
          : `group ${group.name}'s autoscaler template does not take ${subject}: at zero nodes the autoscaler builds its node from the template alone and never scales it up`,
      detail: [
        `template labels: ${
          Object.entries(template.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(', ') || 'none'
        }; taints: ${template.taints.map(taintText).join(', ') || 'none'}; cpu ${template.capacity.cpuMilli === undefined ? '?' : formatCpu(template.capacity.cpuMilli)}, memory ${template.capacity.memoryBytes === undefined ? '?' : formatBytes(template.capacity.memoryBytes)}`,
        ...problems,
      ],
      ...(problems.length > 0
        ? {
            fix: `give group ${group.name}'s template the pods' labels and taints (the node group's cluster-autoscaler node-template tags / capacity.cluster-autoscaler.kubernetes.io annotations)`,
          }
        : {}),
    });
  }
  return checks;
}
