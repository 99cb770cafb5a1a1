/**
 * The Kubernetes driver against the run's real apiserver. The workload target runs with the
 * worker's ServiceAccount token, bound by deploy/k8s/rbac.yaml to the heavy StatefulSet of
 * deploy/k8s/berth.yaml, both applied from the repo into a namespace of the test's own.
 */
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ComputeGroupNotFoundError } from '../activities/platform/compute-platform.js';
import {
  KubernetesPlatform,
  labelSelectorString,
  type KubernetesTarget,
} from '../activities/platform/kubernetes-platform.js';
import { parseConfig } from '../services/common/config.js';
import { WorkerConfig } from '../workers/config.js';
import { heavyPoolPlatform } from '../workers/platform-from-env.js';
import { startKubeApiProxy, type KubeApiProxy } from './helpers/kube-api-proxy.js';
import {
  applyManifests,
  auditedPatches,
  COMPUTE_GROUPS_TARGET,
  computeGroupsRef,
  createComputeGroups,
  createNamespace,
  heavyPoolManifests,
  kubeConfigFor,
  loadManifests,
  readComputeGroups,
  readStatefulSet,
  serviceAccountToken,
  testKube,
  type TestKube,
} from './helpers/kube.js';

const HEAVY: KubernetesTarget = {
  kind: 'workload',
  workloads: { heavy: { kind: 'statefulset', name: 'berth-heavy' } },
};
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

/** Sets a pod Running as a kubelet would, through the status subresource. */
const setRunning = (kube: TestKube, namespace: string, name: string) =>
  kube.admin
    .makeApiClient(CoreV1Api)
    .patchNamespacedPodStatus(
      { namespace, name, body: { status: { phase: 'Running' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );

describe('the Kubernetes driver on a heavy workload, with the worker’s token', () => {
  let kube: TestKube;
  let namespace: string;
  let worker: KubeConfig;
  let platform: KubernetesPlatform;
  let workerUser: string;
  const replicasNow = async () => (await readStatefulSet(kube, namespace, 'berth-heavy')).spec!.replicas;
  const adminSetReplicas = (replicas: number) =>
    kube.admin
      .makeApiClient(AppsV1Api)
      .patchNamespacedStatefulSet(
        { namespace, name: 'berth-heavy', body: [{ op: 'replace', path: '/spec/replicas', value: replicas }] },
        jsonPatch,
      );
  const workerPatches = async () =>
    (await auditedPatches(kube, namespace, 'berth-heavy')).filter((e) => e.user.username === workerUser);

  beforeAll(async () => {
    kube = testKube();
    namespace = await createNamespace(kube, 'driver');
    await applyManifests(kube, namespace, await heavyPoolManifests());
    worker = kubeConfigFor(kube.server, await serviceAccountToken(kube, namespace, 'berth-worker'));
    workerUser = `system:serviceaccount:${namespace}:berth-worker`;
    platform = new KubernetesPlatform({ kubeConfig: worker, namespace, target: HEAVY });
  });

  it('starts parked: the repo’s heavy StatefulSet is at zero, with parallel pods and a selector of its own', async () => {
    const workload = await readStatefulSet(kube, namespace, 'berth-heavy');
    expect(workload.spec).toMatchObject({
      replicas: 0,
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: { app: 'berth-heavy' } },
    });
    expect(await platform.replicas('heavy')).toBe(0);
  });

  it('raises the replicas with one JSON patch that tests the value it read, and the controller makes the pods', async () => {
    expect(await platform.setReplicas('heavy', 2)).toEqual({ changed: true, previous: 0 });
    const workload = await readStatefulSet(kube, namespace, 'berth-heavy');
    expect(workload.spec!.replicas).toBe(2);
    expect(workload.metadata!.generation).toBe(2); // created at 1, one spec change
    await expect
      .poll(async () => (await workerPatches()).map((e) => e.responseStatus.code), { timeout: 10_000 })
      .toEqual([200]);
    // The real StatefulSet controller turns the target into pods (Pending: no kubelet here).
    const core = kube.admin.makeApiClient(CoreV1Api);
    await expect
      .poll(async () => (await core.listNamespacedPod({ namespace })).items.map((p) => p.metadata!.name).sort(), {
        timeout: 30_000,
      })
      .toEqual(['berth-heavy-0', 'berth-heavy-1']);
  });

  it('writes nothing when the target is already set', async () => {
    expect(await platform.setReplicas('heavy', 2)).toEqual({ changed: false, previous: 2 });
    expect((await readStatefulSet(kube, namespace, 'berth-heavy')).metadata!.generation).toBe(2);
  });

  it('counts running pods by the workload’s own selector, never by a guessed label', async () => {
    expect(await platform.runningPods('heavy')).toBe(0);
    await setRunning(kube, namespace, 'berth-heavy-0');
    // A running pod that carries every label one might guess for "heavy", but not the workload's selector.
    const core = kube.admin.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: {
          name: 'decoy',
          labels: { app: 'heavy', 'app.doris.computegroup': 'heavy', 'berth.dev/group': 'heavy' },
        },
        spec: { containers: [{ name: 'c', image: 'berth:0.1.0' }] },
      },
    });
    await setRunning(kube, namespace, 'decoy');
    expect(await platform.runningPods('heavy')).toBe(1);
  });

  it('answers 403 for what the Role does not grant: deleting the workload, listing secrets, patching another workload', async () => {
    const denied = (promise: Promise<unknown>) => expect(promise).rejects.toMatchObject({ code: 403 });
    const apps = worker.makeApiClient(AppsV1Api);
    await denied(apps.deleteNamespacedStatefulSet({ namespace, name: 'berth-heavy' }));
    await denied(worker.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace }));
    // Another workload of the namespace: the repo's serving query nodes, parked for the test.
    const serving = (await loadManifests('deploy/k8s/berth.yaml')).find(
      (d) => d.kind === 'StatefulSet' && d.metadata!.name === 'berth-query',
    )!;
    await applyManifests(kube, namespace, [{ ...serving, spec: { ...serving.spec, replicas: 0 } }]);
    await denied(
      apps.patchNamespacedStatefulSet(
        { namespace, name: 'berth-query', body: [{ op: 'replace', path: '/spec/replicas', value: 5 }] },
        jsonPatch,
      ),
    );
    const other = new KubernetesPlatform({
      kubeConfig: worker,
      namespace,
      target: { kind: 'workload', workloads: { heavy: { kind: 'statefulset', name: 'berth-query' } } },
    });
    await denied(other.setReplicas('heavy', 5));
    expect((await readStatefulSet(kube, namespace, 'berth-query')).spec!.replicas).toBe(0);
    expect(await replicasNow()).toBe(2);
  });

  describe('when someone else changes the replicas between the driver’s read and its patch', () => {
    let proxy: KubeApiProxy;
    let meddled: KubernetesPlatform;
    beforeAll(async () => {
      proxy = await startKubeApiProxy(kube.server);
      meddled = new KubernetesPlatform({
        kubeConfig: kubeConfigFor(proxy.url, worker.getCurrentUser()!.token!),
        namespace,
        target: HEAVY,
      });
    });
    afterAll(() => proxy?.close());

    it('fails its test with a 422 that changes nothing, re-reads, and leaves a larger value standing', async () => {
      const before = (await workerPatches()).length;
      proxy.beforePatch = async () => void (await adminSetReplicas(6));
      expect(await meddled.setReplicas('heavy', 4)).toEqual({ changed: false, previous: 6 });
      expect(await replicasNow()).toBe(6);
      await expect
        .poll(async () => (await workerPatches()).slice(before).map((e) => e.responseStatus.code), { timeout: 10_000 })
        .toEqual([422]);
    });

    it('re-reads and raises from the new value when it is still below the target', async () => {
      const before = (await workerPatches()).length;
      proxy.beforePatch = async () => void (await adminSetReplicas(7));
      expect(await meddled.setReplicas('heavy', 8)).toEqual({ changed: true, previous: 7 });
      expect(await replicasNow()).toBe(8);
      await expect
        .poll(async () => (await workerPatches()).slice(before).map((e) => e.responseStatus.code), { timeout: 10_000 })
        .toEqual([422, 200]);
    });

    it('still parks the group when it was raised meanwhile: zero is the pool’s own decision', async () => {
      proxy.beforePatch = async () => void (await adminSetReplicas(9));
      expect(await meddled.setReplicas('heavy', 0)).toEqual({ changed: true, previous: 9 });
      expect(await replicasNow()).toBe(0);
    });
  });
});

describe('the Kubernetes driver on an operator’s custom resource', () => {
  let kube: TestKube;
  let namespace: string;
  let platform: KubernetesPlatform;
  const target = COMPUTE_GROUPS_TARGET;
  const read = () => readComputeGroups(kube, namespace);
  const groups = (list: { uniqueId: string; replicas: number }[]) =>
    list.map((g) => ({ ...g, image: 'apache/doris:be-3.0.3' }));

  beforeAll(async () => {
    kube = testKube();
    namespace = await createNamespace(kube, 'operator');
    await createComputeGroups(
      kube,
      namespace,
      groups([
        { uniqueId: 'serving', replicas: 3 },
        { uniqueId: 'heavy', replicas: 0 },
      ]),
    );
    platform = new KubernetesPlatform({ kubeConfig: kube.admin, namespace, target });
  });

  it('patches the group’s own index, testing its uniqueId and the value read, and nothing else', async () => {
    const before = await read();
    expect(await platform.setReplicas('heavy', 4)).toEqual({ changed: true, previous: 0 });
    const after = await read();
    expect(after.spec.computeGroups).toEqual(
      groups([
        { uniqueId: 'serving', replicas: 3 },
        { uniqueId: 'heavy', replicas: 4 },
      ]),
    );
    expect(after.metadata.generation).toBe(before.metadata.generation + 1);
    expect(await platform.replicas('heavy')).toBe(4);
  });

  it('names a group missing from the resource, and patches nothing', async () => {
    const before = await read();
    await expect(platform.setReplicas('reporting', 2)).rejects.toThrow(ComputeGroupNotFoundError);
    await expect(platform.setReplicas('reporting', 2)).rejects.toThrow(
      /compute group "reporting" is not in dorisdisaggregatedclusters\/analytics .* it has: serving, heavy/,
    );
    expect((await read()).metadata.generation).toBe(before.metadata.generation);
  });

  it('lets a failed test change nothing when the groups move, then patches the group where it went', async () => {
    const proxy = await startKubeApiProxy(kube.server);
    try {
      // The operator reorders the groups between the driver's read and its patch.
      proxy.beforePatch = async () =>
        void (await kube.admin.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
          {
            ...computeGroupsRef(namespace),
            body: [
              {
                op: 'replace',
                path: '/spec/computeGroups',
                value: groups([
                  { uniqueId: 'heavy', replicas: 4 },
                  { uniqueId: 'serving', replicas: 3 },
                ]),
              },
            ],
          },
          jsonPatch,
        ));
      const moved = new KubernetesPlatform({
        kubeConfig: kubeConfigFor(proxy.url, kube.adminToken),
        namespace,
        target,
      });
      expect(await moved.setReplicas('heavy', 6)).toEqual({ changed: true, previous: 4 });
      expect((await read()).spec.computeGroups).toEqual(
        groups([
          { uniqueId: 'heavy', replicas: 6 },
          { uniqueId: 'serving', replicas: 3 },
        ]),
      );
    } finally {
      await proxy.close();
    }
  });

  it('counts running pods by the selector the configuration gives', async () => {
    const core = kube.admin.makeApiClient(CoreV1Api);
    for (const [name, group] of [
      ['heavy-0', 'heavy'],
      ['heavy-1', 'heavy'],
      ['serving-0', 'serving'],
    ]) {
      await core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name, labels: { 'app.doris.computegroup': group! } },
          spec: { containers: [{ name: 'be', image: 'apache/doris:be-3.0.3' }] },
        },
      });
    }
    await setRunning(kube, namespace, 'heavy-0');
    await setRunning(kube, namespace, 'serving-0');
    expect(await platform.runningPods('heavy')).toBe(1);
  });

  it('fails with the API’s 404 when the resource does not exist', async () => {
    const missing = new KubernetesPlatform({
      kubeConfig: kube.admin,
      namespace,
      target: { ...target, name: 'nowhere' },
    });
    await expect(missing.setReplicas('heavy', 1)).rejects.toMatchObject({ code: 404 });
  });
});

describe('labelSelectorString', () => {
  it('spells matchLabels and every matchExpressions operator as the labelSelector parameter does', () => {
    expect(
      labelSelectorString({
        matchLabels: { app: 'berth-heavy', tier: 'query' },
        matchExpressions: [
          { key: 'zone', operator: 'In', values: ['a', 'b'] },
          { key: 'spot', operator: 'NotIn', values: ['true'] },
          { key: 'berth', operator: 'Exists' },
          { key: 'legacy', operator: 'DoesNotExist' },
        ],
      }),
    ).toBe('app=berth-heavy,tier=query,zone in (a,b),spot notin (true),berth,!legacy');
  });
});

describe('the worker’s Kubernetes settings', () => {
  const platformFor = (env: Record<string, string>) =>
    heavyPoolPlatform(
      parseConfig(WorkerConfig, {
        BERTH_TOKEN: 'x'.repeat(32),
        BERTH_META_URL: 'http://127.0.0.1:1',
        BERTH_HEAVY_GROUP: 'heavy',
        BERTH_PLATFORM: 'kubernetes',
        BERTH_K8S_NAMESPACE: 'berth',
        ...env,
      }),
    );

  it('needs the pod selector for a custom resource, since none can be read from it', async () => {
    await expect(platformFor({ BERTH_K8S_TARGET: 'custom-resource', BERTH_K8S_NAME: 'analytics' })).rejects.toThrow(
      'BERTH_K8S_POD_SELECTOR must be set when BERTH_K8S_TARGET=custom-resource',
    );
  });

  it('names a workload as kind/name', async () => {
    await expect(platformFor({ BERTH_K8S_WORKLOAD: 'berth-heavy' })).rejects.toThrow(
      'BERTH_K8S_WORKLOAD must be statefulset/NAME or deployment/NAME, not "berth-heavy"',
    );
    expect(() => platformFor({ BERTH_K8S_TARGET: 'operator' })).toThrow(
      'BERTH_K8S_TARGET must be one of workload, custom-resource, not "operator"',
    );
  });
});
