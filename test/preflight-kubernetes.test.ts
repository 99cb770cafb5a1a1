/**
 * The seed's silent traps on a real control plane (apiserver, controller-manager, scheduler), with
 * Node objects created through the API: preflight finds a heavy pod that requests 8 CPU of nodes
 * with capacity 8 and allocatable 7.9 (the arithmetic shown; 7 CPU is clean), a missing label, an
 * untolerated taint, an autoscaler template without the pods' labels, and a missing verb of the
 * worker's Role. Then the same 8-CPU pool is launched anyway: the real scheduler's FailedScheduling
 * ("Insufficient cpu") is quoted by `berth pool status`, and the launch deadline fails the waiting
 * query with it.
 */
import { randomUUID } from 'node:crypto';
import { AppsV1Api, CoreV1Api, PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubernetesPlatform } from '../activities/platform/kubernetes-platform.js';
import type { PreflightReport } from '../core/preflight.js';
import { buildControllerApp } from '../services/controller/app.js';
import { poolWorkflowId, type PoolConfig } from '../workflows/contracts/heavy-pool.js';
import { berth, cliDataDir } from './helpers/berth-cli.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import {
  applyManifests,
  createNamespace,
  heavyPoolManifests,
  kubeConfigFor,
  namespaceNodeLabel,
  serviceAccountToken,
  testKube,
  type TestKube,
} from './helpers/kube.js';
import { createTestNodes, type TestNodes, type TestNodeSpec } from './helpers/test-nodes.js';

/** The pool's group, driving the repo's heavy StatefulSet; a name of its own, as test files share Temporal. */
const GROUP = `heavy-${randomUUID().slice(0, 8)}`;
/** Heavy by the verdict below: an exact median does not decompose, so the final stage runs over the rows. */
const HEAVY_SQL =
  'SELECT service, count(DISTINCT user_id) AS users, median(latency_ms) AS p50 FROM events GROUP BY service ORDER BY service';
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

describe('preflight and the scheduler’s own words, on a real control plane', () => {
  let kube: TestKube;
  let namespace: string;
  let platform: KubernetesPlatform;
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let controller: ReturnType<typeof buildControllerApp>;
  let dataDir: string;
  let nodes: TestNodes | undefined;
  const taskQueue = `preflight-${randomUUID()}`;
  const config: PoolConfig = {
    group: GROUP,
    increment: 2,
    maxReplicas: 2,
    launchDeadlineMs: 45_000,
    readinessConfirmMs: 100,
  };

  /** The nodes of the heavy pool's node group: 8 vCPUs, 0.1 of them reserved by the kubelet. */
  const eightCpuNodes = (extra: Partial<TestNodeSpec> = {}): TestNodeSpec[] =>
    [0, 1].map(() => ({
      capacity: { cpu: '8', memory: '64Gi' },
      allocatable: { cpu: '7.9', memory: '62Gi' },
      ...extra,
      labels: { 'eks.amazonaws.com/nodegroup': 'heavy-8cpu', ...extra.labels },
    }));
  const useNodes = async (specs: TestNodeSpec[]) => {
    await nodes?.stop();
    nodes = await createTestNodes(kube, namespace, specs);
  };
  /** Edits the heavy StatefulSet's pod template as its owner would. */
  const editTemplate = (ops: { op: string; path: string; value?: unknown }[]) =>
    kube.admin
      .makeApiClient(AppsV1Api)
      .patchNamespacedStatefulSet(
        { namespace, name: 'berth-heavy', body: ops.map((o) => ({ ...o, path: `/spec/template/spec${o.path}` })) },
        jsonPatch,
      );
  const requestCpu = (cpu: string) =>
    editTemplate([
      { op: 'replace', path: '/containers/0/resources/requests/cpu', value: cpu },
      { op: 'replace', path: '/containers/0/resources/limits/cpu', value: cpu },
    ]);
  const failing = (report: PreflightReport) => report.checks.filter((c) => !c.ok).map((c) => c.area);

  beforeAll(async () => {
    kube = testKube();
    namespace = await createNamespace(kube, 'preflight');
    const manifests = await heavyPoolManifests();
    const heavy = manifests.find((m) => m.kind === 'StatefulSet')!;
    // The heavy pods are pinned to their node group, which only this test's nodes belong to.
    heavy.spec.template.spec.nodeSelector = { [namespaceNodeLabel]: namespace };
    heavy.spec.template.spec.containers[0].resources = {
      requests: { cpu: '8', memory: '28Gi' },
      limits: { cpu: '8', memory: '28Gi' },
    };
    await applyManifests(kube, namespace, manifests);
    platform = new KubernetesPlatform({
      kubeConfig: kubeConfigFor(kube.server, await serviceAccountToken(kube, namespace, 'berth-worker')),
      namespace,
      target: { kind: 'workload', workloads: { [GROUP]: { kind: 'statefulset', name: 'berth-heavy' } } },
    });
    await useNodes(eightCpuNodes());

    cluster = await startCluster({
      vcpus: [2],
      coordinator: {
        heavyPool: { temporalAddress: inject('temporalAddress'), taskQueue, config },
        verdictThresholds: { scanBytes: 1e12, memoryBytes: 1 },
      },
    });
    await cluster.ingestEvents('events', 2, 200);
    client = await temporalClient();
    worker = await startWorker(cluster, taskQueue, { heavyPool: { platform } });
    controller = buildControllerApp({ client, pools: [config], token: TOKEN, taskQueue, logger: false });
    const controllerUrl = await controller.listen({ host: '127.0.0.1', port: 0 });
    dataDir = await cliDataDir(cluster.dir, { controller: controllerUrl, coordinator: cluster.coordinator.url }, TOKEN);
  });
  afterAll(async () => {
    await client?.workflow
      .getHandle(poolWorkflowId(GROUP))
      .terminate('test over')
      .catch(() => {});
    await controller?.close();
    await worker?.stop();
    await nodes?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  it(
    'finds the seed’s trap: 8 CPU requested of nodes with capacity 8 and allocatable 7.9, with the arithmetic; exits 1',
    { timeout: 120_000 },
    async () => {
      const report = await platform.preflight(GROUP);
      expect(failing(report)).toEqual(['requests']);
      const requests = report.checks.find((c) => c.area === 'requests')!;
      expect(requests.summary).toContain('Insufficient cpu');
      expect(requests.detail).toContain('heavy pods request cpu 8, memory 28Gi');
      expect(requests.detail).toContain(
        '  cpu 8 requested > 7.9 (7900m) allocatable (capacity 8 − 0.1 (100m) reserved): short by 0.1 (100m)',
      );
      expect(requests.fix).toMatch(/^request at most 7\.9 \(7900m\) CPU .*cpu: "7"/);

      // The same through the controller and the CLI, run by the worker with its own token.
      const cli = await berth('preflight', GROUP, '--data-dir', dataDir);
      expect(cli.code).toBe(1);
      expect(cli.stdout).toContain(`preflight of ${GROUP} on kubernetes: 1 finding`);
      expect(cli.stdout).toMatch(/FAIL requests +no node has the allocatable room heavy pods request/);
      expect(cli.stdout).toContain(
        'cpu 8 requested > 7.9 (7900m) allocatable (capacity 8 − 0.1 (100m) reserved): short by 0.1 (100m)',
      );
      const status = JSON.parse((await berth('pool', 'status', GROUP, '--json', '--data-dir', dataDir)).stdout) as {
        links: { preflight: string };
      };
      expect(status.links.preflight).toBe(`/v1/pools/${GROUP}/preflight`);
    },
  );

  it('is clean at 7 CPU, and exits 0', { timeout: 120_000 }, async () => {
    await requestCpu('7');
    const report = await platform.preflight(GROUP);
    expect(report.findings).toBe(0);
    expect(report.checks.find((c) => c.area === 'requests')!.detail).toContain(
      '  cpu 7 requested ≤ 7.9 (7900m) allocatable',
    );
    const cli = await berth('preflight', GROUP, '--json', '--data-dir', dataDir);
    expect(cli.code).toBe(0);
    expect((JSON.parse(cli.stdout) as PreflightReport).findings).toBe(0);
  });

  it('finds a label the pods select that no node group has, and a taint they do not tolerate', async () => {
    await editTemplate([{ op: 'add', path: '/nodeSelector/berth.dev~1pool', value: 'heavy' }]);
    let report = await platform.preflight(GROUP);
    expect(failing(report)).toEqual(['placement']);
    expect(
      report.checks
        .find((c) => c.area === 'placement')!
        .detail.some((l) => l.startsWith('group heavy-8cpu (2 nodes') && l.includes('lacks berth.dev/pool=heavy')),
    ).toBe(true);

    await useNodes(
      eightCpuNodes({
        labels: { 'berth.dev/pool': 'heavy' },
        taints: [{ key: 'dedicated', value: 'heavy', effect: 'NoSchedule' }],
      }),
    );
    report = await platform.preflight(GROUP);
    expect(failing(report)).toEqual(['placement']);
    expect(
      report.checks
        .find((c) => c.area === 'placement')!
        .detail.some(
          (l) => l.includes('group heavy-8cpu') && l.includes('taint dedicated=heavy:NoSchedule not tolerated'),
        ),
    ).toBe(true);

    await editTemplate([
      {
        op: 'add',
        path: '/tolerations',
        value: [{ key: 'dedicated', operator: 'Equal', value: 'heavy', effect: 'NoSchedule' }],
      },
    ]);
    expect((await platform.preflight(GROUP)).findings).toBe(0);
  });

  it('finds a node group whose autoscaler template lacks the pods’ label: at zero it is never scaled up', async () => {
    const template = {
      'capacity.cluster-autoscaler.kubernetes.io/labels': 'eks.amazonaws.com/nodegroup=heavy-8cpu',
      'capacity.cluster-autoscaler.kubernetes.io/taints': 'dedicated=heavy:NoSchedule',
      'capacity.cluster-autoscaler.kubernetes.io/cpu': '8',
    };
    await useNodes(
      eightCpuNodes({
        labels: { 'berth.dev/pool': 'heavy' },
        taints: [{ key: 'dedicated', value: 'heavy', effect: 'NoSchedule' }],
        annotations: template,
      }),
    );
    const report = await platform.preflight(GROUP);
    expect(failing(report)).toEqual(['autoscaler-template']);
    const check = report.checks.find((c) => c.area === 'autoscaler-template')!;
    expect(check.summary).toContain('group heavy-8cpu');
    expect(check.detail).toContain(`lacks ${namespaceNodeLabel}=${namespace}`);
    expect(check.detail).toContain('lacks berth.dev/pool=heavy');
  });

  it('finds a verb missing from the worker’s Role, asked of the apiserver with a SelfSubjectAccessReview', async () => {
    const rbac = kube.admin.makeApiClient(RbacAuthorizationV1Api);
    const role = await rbac.readNamespacedRole({ namespace, name: 'berth-heavy-pool' });
    const rules = role.rules!;
    await rbac.patchNamespacedRole(
      { namespace, name: 'berth-heavy-pool', body: [{ op: 'replace', path: '/rules/0/verbs', value: ['get'] }] },
      jsonPatch,
    );
    try {
      const report = await platform.preflight(GROUP);
      const denied = report.checks.filter((c) => c.area === 'rbac' && !c.ok);
      expect(denied.map((c) => c.summary)).toEqual([
        `the worker may not patch apps/statefulsets/berth-heavy in namespace ${namespace} (the pool’s one write: replicas)`,
      ]);
      expect(denied[0]!.fix).toBe(
        'grant verb "patch" on apps/statefulsets (resourceNames: berth-heavy) to the worker\'s Role (deploy/k8s/rbac.yaml)',
      );
      expect(report.checks.filter((c) => c.area === 'rbac' && c.ok)).toHaveLength(4);
    } finally {
      await rbac.patchNamespacedRole(
        { namespace, name: 'berth-heavy-pool', body: [{ op: 'replace', path: '/rules', value: rules }] },
        jsonPatch,
      );
    }
  });

  it(
    'launched anyway at 8 CPU: pool status quotes the scheduler’s FailedScheduling, and the deadline fails the waiting query with it',
    { timeout: 180_000 },
    async () => {
      await useNodes(eightCpuNodes());
      await editTemplate([
        { op: 'remove', path: '/tolerations' },
        { op: 'remove', path: '/nodeSelector/berth.dev~1pool' },
      ]);
      await requestCpu('8');
      const answer = cluster.query(HEAVY_SQL); // waits for the pool, which launches for it

      // The scheduler's own latest word on a heavy pod, as the API holds it (it retries, and may say it again).
      const core = kube.admin.makeApiClient(CoreV1Api);
      const failedScheduling = async () => {
        const { items } = await core.listNamespacedEvent({
          namespace,
          fieldSelector: 'involvedObject.name=berth-heavy-0,reason=FailedScheduling',
        });
        const at = (e: (typeof items)[number]) =>
          new Date(e.series?.lastObservedTime ?? e.lastTimestamp ?? e.eventTime ?? 0).getTime();
        return items.sort((a, b) => at(a) - at(b)).at(-1)?.message;
      };
      await expect.poll(failedScheduling, { timeout: 60_000 }).toContain('Insufficient cpu');
      const statusText = async () => (await berth('pool', 'status', GROUP, '--data-dir', dataDir)).stdout;
      const quoted = async () => (await statusText()).includes(`FailedScheduling "${await failedScheduling()}"`);
      await expect.poll(quoted, { timeout: 30_000 }).toBe(true);
      expect(await statusText()).toMatch(
        /serve-ready: no \(0 of 2 pods running; the platform says: .*berth-heavy-0.* Pending: FailedScheduling "0\/\d+ nodes are available: .*2 Insufficient cpu/,
      );

      // The autoscaler's verdict is an event too (a Normal one): it is quoted beside the scheduler's.
      const pod = await core.readNamespacedPod({ namespace, name: 'berth-heavy-0' });
      const scaleUp =
        "pod didn't trigger scale-up: 1 node(s) didn't have enough free cpu, 1 max node group size reached";
      await core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name: `berth-heavy-0.${randomUUID().slice(0, 8)}`, namespace },
          involvedObject: { kind: 'Pod', namespace, name: 'berth-heavy-0', uid: pod.metadata!.uid, apiVersion: 'v1' },
          reason: 'NotTriggerScaleUp',
          message: scaleUp,
          type: 'Normal',
          source: { component: 'cluster-autoscaler' },
          firstTimestamp: new Date(),
          lastTimestamp: new Date(),
          count: 1,
        },
      });
      await expect
        .poll(statusText, { timeout: 30_000 })
        .toContain(`berth-heavy-0 Pending: NotTriggerScaleUp "${scaleUp}"`);

      const { status, body } = await answer;
      expect(status).toBe(503);
      expect(body).toMatchObject({ error: 'pool_launch_failed' });
      expect(body.message).toMatch(
        /^the heavy pool did not become serve-ready within 45 s: 0 of 2 pods running; the platform says: /,
      );
      expect(body.message).toMatch(/FailedScheduling "0\/\d+ nodes are available: .*2 Insufficient cpu/);
      expect(await statusText()).toContain(`last failure`);
    },
  );
});
