/**
 * Preflight's arithmetic and wording without a cluster (core/preflight.ts, the Kubernetes driver's
 * parsing of pods, nodes, templates and events), and the local driver's checks on this machine.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CoreV1Event, V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { nodeGroups, nodeTemplate, podNeeds, whyPodsWait } from '../activities/platform/kubernetes-preflight.js';
import { localPreflight } from '../activities/platform/local-preflight.js';
import { LocalPlatform } from '../activities/platform/local-platform.js';
import {
  formatCpu,
  missingLabels,
  placementChecks,
  untolerated,
  type NodeGroup,
  type PodNeeds,
} from '../core/preflight.js';
import { formatPreflight } from '../cli/commands/preflight.js';

const GiB = 1024 ** 3;
const needs = (over: Partial<PodNeeds> = {}): PodNeeds => ({
  requests: { cpuMilli: 8000, memoryBytes: 28 * GiB },
  nodeSelector: {},
  affinityTerms: [],
  tolerations: [],
  ...over,
});
const group = (name: string, cpu: [number, number], over: Partial<NodeGroup['nodes'][number]> = {}): NodeGroup => ({
  name,
  nodes: [
    {
      name: `${name}-a`,
      labels: {},
      taints: [],
      capacity: { cpuMilli: cpu[0], memoryBytes: 64 * GiB },
      allocatable: { cpuMilli: cpu[1], memoryBytes: 62 * GiB },
      ...over,
    },
  ],
});

describe('preflight arithmetic', () => {
  it('compares requests with allocatable, not capacity, and shows the gap', () => {
    const checks = placementChecks(needs(), [group('heavy-8cpu', [8000, 7900])], 'heavy pods');
    const requests = checks.find((c) => c.area === 'requests')!;
    expect(requests.ok).toBe(false);
    expect(requests.detail).toEqual([
      'heavy pods request cpu 8, memory 28Gi',
      'group heavy-8cpu (1 node, e.g. heavy-8cpu-a), node heavy-8cpu-a:',
      '  cpu 8 requested > 7.9 (7900m) allocatable (capacity 8 − 0.1 (100m) reserved): short by 0.1 (100m)',
      '  memory 28Gi requested ≤ 62Gi allocatable',
    ]);
    expect(requests.fix).toBe(
      'request at most 7.9 (7900m) CPU (allocatable, not the node\'s 8 vCPUs): cpu: "7" leaves room for DaemonSets, or use a node group with more allocatable CPU',
    );
    expect(
      placementChecks(
        needs({ requests: { cpuMilli: 7000, memoryBytes: 28 * GiB } }),
        [group('heavy-8cpu', [8000, 7900])],
        'heavy pods',
      ).every((c) => c.ok),
    ).toBe(true);
  });

  it('needs one group that takes the pods and has the room: a roomy group the pods do not select does not count', () => {
    const pinned = needs({ nodeSelector: { pool: 'heavy' } });
    const groups = [group('heavy', [8000, 7900], { labels: { pool: 'heavy' } }), group('general', [64000, 63800])];
    expect(
      placementChecks(pinned, groups, 'heavy pods')
        .filter((c) => !c.ok)
        .map((c) => c.area),
    ).toEqual(['requests']);
    expect(placementChecks(needs(), groups, 'heavy pods').every((c) => c.ok)).toBe(true);
  });

  it('matches node selectors, every affinity operator, and tolerations as the scheduler does', () => {
    const labels = { zone: 'a', pool: 'heavy', cores: '16' };
    expect(missingLabels(needs({ nodeSelector: { pool: 'heavy' } }), labels)).toEqual([]);
    expect(missingLabels(needs({ nodeSelector: { pool: 'light' } }), labels)).toEqual(['pool=light']);
    const term = (operator: string, values?: string[]) =>
      needs({
        affinityTerms: [
          [
            {
              key: operator === 'DoesNotExist' ? 'spot' : operator === 'Gt' || operator === 'Lt' ? 'cores' : 'zone',
              operator,
              values,
            },
          ],
        ],
      });
    for (const [operator, values] of [
      ['In', ['a', 'b']],
      ['NotIn', ['c']],
      ['Exists'],
      ['DoesNotExist'],
      ['Gt', ['8']],
      ['Lt', ['32']],
    ] as [string, string[]?][]) {
      expect(missingLabels(term(operator, values), labels), operator).toEqual([]);
    }
    expect(missingLabels(term('In', ['c']), labels)).toEqual(['affinity zone in (c)']);
    // Any one term will do; the nearest miss is reported.
    expect(
      missingLabels(
        needs({
          affinityTerms: [
            [
              { key: 'x', operator: 'Exists' },
              { key: 'y', operator: 'Exists' },
            ],
            [{ key: 'zone', operator: 'In', values: ['b'] }],
          ],
        }),
        labels,
      ),
    ).toEqual(['affinity zone in (b)']);

    const taints = [
      { key: 'dedicated', value: 'heavy', effect: 'NoSchedule' },
      { key: 'spot', effect: 'PreferNoSchedule' },
    ];
    expect(untolerated(taints, [])).toEqual([taints[0]]);
    expect(
      untolerated(taints, [{ key: 'dedicated', operator: 'Equal', value: 'heavy', effect: 'NoSchedule' }]),
    ).toEqual([]);
    expect(untolerated(taints, [{ key: 'dedicated', operator: 'Exists' }])).toEqual([]);
    expect(untolerated(taints, [{ key: 'dedicated', value: 'light' }])).toEqual([taints[0]]);
    expect(untolerated(taints, [{ key: 'dedicated', operator: 'Exists', effect: 'NoExecute' }])).toEqual([taints[0]]);
    expect(untolerated(taints, [{ operator: 'Exists' }])).toEqual([]);
  });

  it('says when the nodes take the pods but the autoscaler’s template of their group does not', () => {
    const pinned = needs({ requests: { cpuMilli: 7000, memoryBytes: GiB }, nodeSelector: { pool: 'heavy' } });
    const heavy = {
      ...group('heavy', [8000, 7900], { labels: { pool: 'heavy' } }),
      template: { labels: {}, taints: [{ key: 'gpu', effect: 'NoSchedule' }], capacity: { cpuMilli: 4000 } },
    };
    const template = placementChecks(pinned, [heavy], 'heavy pods').find((c) => c.area === 'autoscaler-template')!;
    expect(template.ok).toBe(false);
    expect(template.detail.slice(1)).toEqual([
      'lacks pool=heavy',
      'taint gpu:NoSchedule not tolerated',
      'cpu 4 < 7 requested',
    ]);
  });

  it('writes CPU as Kubernetes does', () => {
    expect([formatCpu(8000), formatCpu(7900), formatCpu(250)]).toEqual(['8', '7.9 (7900m)', '0.25 (250m)']);
  });
});

describe('what the Kubernetes driver reads', () => {
  it('counts a pod’s requests as the scheduler does: limits stand in for missing requests, the largest init container, overhead', () => {
    const spec = {
      containers: [
        { name: 'a', resources: { requests: { cpu: '7', memory: '28Gi' } } },
        { name: 'b', resources: { limits: { cpu: '500m', memory: '1Gi' } } },
      ],
      initContainers: [{ name: 'i', resources: { requests: { cpu: '8', memory: '1Gi' } } }],
      overhead: { cpu: '100m' },
      nodeSelector: { pool: 'heavy' },
      tolerations: [{ key: 'dedicated', operator: 'Exists' }],
    };
    expect(podNeeds(spec)).toEqual({
      requests: { cpuMilli: 8100, memoryBytes: 29 * GiB },
      nodeSelector: { pool: 'heavy' },
      affinityTerms: [],
      tolerations: [{ key: 'dedicated', operator: 'Exists', value: undefined, effect: undefined }],
    });
  });

  it('groups nodes by their node-group label, leaves out the control plane’s condition taints, and reads the autoscaler template', () => {
    const node = (name: string, labels: Record<string, string>, extra: Partial<V1Node> = {}): V1Node => ({
      metadata: { name, labels, annotations: extra.metadata?.annotations },
      spec: {
        taints: [
          { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' },
          { key: 'dedicated', value: 'heavy', effect: 'NoSchedule' },
        ],
      },
      status: { capacity: { cpu: '8', memory: '64Gi' }, allocatable: { cpu: '7.9', memory: '62Gi' } },
    });
    const groups = nodeGroups(
      [
        node(
          'a',
          { 'eks.amazonaws.com/nodegroup': 'heavy' },
          {
            metadata: {
              annotations: {
                'capacity.cluster-autoscaler.kubernetes.io/labels': 'pool=heavy,tier=x',
                'capacity.cluster-autoscaler.kubernetes.io/taints': 'dedicated=heavy:NoSchedule,gpu:NoExecute',
                'capacity.cluster-autoscaler.kubernetes.io/memory': '64Gi',
              },
            },
          },
        ),
        node('b', { 'eks.amazonaws.com/nodegroup': 'heavy' }),
        node('c', {}),
      ],
      ['eks.amazonaws.com/nodegroup'],
    );
    expect(groups.map((g) => [g.name, g.nodes.map((n) => n.name)])).toEqual([
      ['heavy', ['a', 'b']],
      ['c', ['c']],
    ]);
    expect(groups[0]!.nodes[0]).toMatchObject({
      taints: [{ key: 'dedicated', value: 'heavy', effect: 'NoSchedule' }],
      allocatable: { cpuMilli: 7900, memoryBytes: 62 * GiB },
    });
    expect(groups[0]!.template).toEqual({
      labels: { pool: 'heavy', tier: 'x' },
      taints: [
        { key: 'dedicated', value: 'heavy', effect: 'NoSchedule' },
        { key: 'gpu', effect: 'NoExecute' },
      ],
      capacity: { memoryBytes: 64 * GiB },
    });
    expect(nodeTemplate({ 'other/annotation': 'x' })).toBeUndefined();
  });

  it('quotes the scheduler’s and the autoscaler’s events of the pods that wait, once per message, never a former pod’s', () => {
    const pod = (name: string, uid: string, phase = 'Pending'): V1Pod => ({
      metadata: { name, uid },
      status: { phase },
    });
    const event = (uid: string, reason: string, message: string, at: number, type = 'Warning'): CoreV1Event => ({
      metadata: {},
      involvedObject: { uid, kind: 'Pod' },
      reason,
      message,
      type,
      lastTimestamp: new Date(at),
    });
    const pods = [pod('h-0', 'u0'), pod('h-1', 'u1'), pod('h-2', 'u2', 'Running')];
    const events = [
      event('u0', 'FailedScheduling', '0/2 nodes are available: 2 Insufficient cpu.', 2_000),
      event('u1', 'FailedScheduling', '0/2 nodes are available: 2 Insufficient cpu.', 2_100),
      event('u0', 'FailedScheduling', 'an older word', 1_000),
      event('old', 'FailedScheduling', 'a former h-0 of the same name', 3_000),
      event('u0', 'NotTriggerScaleUp', "pod didn't trigger scale-up: 1 max node group size reached", 1_500, 'Normal'),
      event('u0', 'Scheduled', 'not a reason to quote', 2_500, 'Normal'),
    ];
    expect(whyPodsWait(pods, events)).toBe(
      'h-0, h-1 Pending: FailedScheduling "0/2 nodes are available: 2 Insufficient cpu."; h-0 Pending: NotTriggerScaleUp "pod didn\'t trigger scale-up: 1 max node group size reached"',
    );
    // Without events (not readable), the pod's own PodScheduled condition says the same.
    const unschedulable = {
      ...pod('h-0', 'u0'),
      status: {
        phase: 'Pending',
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: '0/2 nodes are available: 2 Insufficient cpu.',
          },
        ],
      },
    };
    expect(whyPodsWait([unschedulable], [])).toBe(
      'h-0 Pending: Unschedulable "0/2 nodes are available: 2 Insufficient cpu."',
    );
    expect(whyPodsWait([pod('h-2', 'u2', 'Running')], events)).toBeUndefined();
  });
});

describe('preflight on the local driver', () => {
  it('checks the query-node script, the backends’ directory and the vCPUs declared against this machine', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-preflight-'));
    try {
      const good = await localPreflight({
        script: fileURLToPath(new URL('../dist/services/query-node/main.js', import.meta.url)),
        dir,
        vcpus: 2,
        maxReplicas: 2,
      });
      expect(good.every((c) => c.ok)).toBe(true);
      expect(good.map((c) => c.area)).toEqual(['platform', 'platform', 'requests']);
      expect(good[2]!.summary).toMatch(/^2 backends × 2 vCPUs = 4 [≤>] \d+ CPUs here/);

      // A directory under a file takes nothing.
      await writeFile(path.join(dir, 'a-file'), '');
      const platform = new LocalPlatform({
        startBackend: () => Promise.reject(new Error('never')),
        preflight: () =>
          localPreflight({
            script: path.join(dir, 'missing.js'),
            dir: path.join(dir, 'a-file', 'heavy'),
            vcpus: 2,
            maxReplicas: 2,
          }),
      });
      const report = await platform.preflight('heavy');
      expect(report).toMatchObject({ group: 'heavy', platform: 'local', findings: 2 });
      expect(report.checks[0]!.summary).toMatch(/^the query-node script cannot be read: ENOENT/);
      expect(report.checks[1]!.summary).toMatch(/^the backends' directory does not take files: ENOTDIR/);
      expect(formatPreflight(report)).toMatch(
        /^preflight of heavy on local: 2 findings\nFAIL platform {2}the query-node script cannot be read: ENOENT/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('says why backends have not arrived: a start that failed', async () => {
    const platform = new LocalPlatform({
      startBackend: () => Promise.reject(new Error('port in use\nmore')),
      onError: () => {},
    });
    await platform.setReplicas('heavy', 1);
    await expect.poll(() => platform.why('heavy')).toBe('backend heavy-0 failed to start: port in use');
    await platform.close();
  });
});
