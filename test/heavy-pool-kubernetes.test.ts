/**
 * 0 → N → 0 on a real Kubernetes control plane, from the repo's own manifests, for each heavy
 * class: a heavy query on a parked pool makes the worker (holding the ServiceAccount token
 * deploy/k8s/rbac.yaml binds) patch the class's StatefulSet of deploy/k8s/berth.yaml; the
 * StatefulSet controller makes the pods; the test kubelet runs a real Berth query node for each,
 * with its pod template's settings, and reports it Running and Ready; every readiness layer passes,
 * the query is answered right on the pool, and the idle reaper returns the workload, and so the
 * pods and their processes, to zero. The test kubelet also reports a backend that dies as its pod
 * no longer ready.
 */
import { randomUUID } from 'node:crypto';
import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubernetesPlatform } from '../activities/platform/kubernetes-platform.js';
import { poolStatus } from '../workflows/pool-client.js';
import { poolWorkflowId } from '../workflows/contracts/heavy-pool.js';
import { FAST, startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import {
  applyManifests,
  auditedPatches,
  createNamespace,
  heavyPoolManifests,
  kubeConfigFor,
  readStatefulSet,
  serviceAccountToken,
  testKube,
  type TestKube,
} from './helpers/kube.js';
import { startTestKubelet, type TestKubelet } from './helpers/test-kubelet.js';

const HEAVY_SQL =
  'SELECT service, count(DISTINCT user_id) AS users, median(latency_ms) AS p50, count(*) AS n FROM events GROUP BY service ORDER BY service';
const POOL = { idleTimeoutMs: 3_000, readinessConfirmMs: 100 };
/**
 * The heavy classes of deploy/k8s/berth.yaml: the scan class alone (memory-bound verdicts then run
 * on it), and the memory class beside it, which a memory-bound verdict launches one pod of.
 */
const CLASSES = [
  { name: 'scan class', group: 'heavy', workload: 'berth-heavy', pods: 2, memory: undefined },
  {
    name: 'memory class',
    group: 'heavy-memory',
    workload: 'berth-heavy-memory',
    pods: 1,
    memory: { group: 'heavy-memory', increment: 1, maxReplicas: 1, ...POOL },
  },
];

describe.each(CLASSES)('the heavy pool’s $name from zero and back on Kubernetes', (heavyClass) => {
  const GROUP = heavyClass.group;
  const WORKLOAD = heavyClass.workload;
  const PODS = heavyClass.pods;
  let kube: TestKube;
  let namespace: string;
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let kubelet: TestKubelet;
  const taskQueue = `pool-k8s-${randomUUID()}`;

  beforeAll(async () => {
    kube = testKube();
    namespace = await createNamespace(kube, 'berth');
    await applyManifests(kube, namespace, await heavyPoolManifests(WORKLOAD));
    cluster = await startCluster({
      vcpus: [2, 2],
      coordinator: {
        heavyPool: {
          temporalAddress: inject('temporalAddress'),
          taskQueue,
          config: { group: 'heavy', increment: 2, maxReplicas: 2, ...POOL },
          memory: heavyClass.memory,
        },
        verdictThresholds: { scanBytes: 1e12, memoryBytes: 1 }, // every shape that runs its own SQL in the final stage is heavy here
      },
    });
    await cluster.ingestEvents('events', 4, 500);
    kubelet = await startTestKubelet(kube, {
      namespace,
      statefulSet: WORKLOAD,
      dir: `${cluster.dir}/kubelet`,
      // What the berth ConfigMap and Secret give the pods, pointed at this test's cluster.
      env: {
        BERTH_TOKEN: TOKEN,
        BERTH_META_URL: cluster.metaUrl,
        BERTH_S3_ENDPOINT: cluster.s3.endpoint,
        BERTH_S3_ACCESS_KEY_ID: cluster.s3.credentials.accessKeyId,
        BERTH_S3_SECRET_ACCESS_KEY: cluster.s3.credentials.secretAccessKey,
        BERTH_S3_BUCKET: cluster.bucket,
        BERTH_NODE_VCPUS: '2',
        BERTH_DUCKDB_THREADS: '1',
        BERTH_HEARTBEAT_MS: String(FAST.heartbeatMs),
        BERTH_MEMBER_POLL_MS: String(FAST.memberPollMs),
        BERTH_LOG_LEVEL: 'warn',
      },
    });
    client = await temporalClient();
    const workerToken = await serviceAccountToken(kube, namespace, 'berth-worker');
    const platform = new KubernetesPlatform({
      kubeConfig: kubeConfigFor(kube.server, workerToken),
      namespace,
      target: { kind: 'workload', workloads: { [GROUP]: { kind: 'statefulset', name: WORKLOAD } } },
    });
    worker = await startWorker(cluster, taskQueue, { heavyPool: { platform } });
  });
  afterAll(async () => {
    await client?.workflow
      .getHandle(poolWorkflowId(GROUP))
      .terminate('test over')
      .catch(() => {});
    await worker?.stop();
    await kubelet?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  it(
    'launches the parked workload for a heavy query, answers right on its pods, then reaps it to zero pods',
    { timeout: 240_000 },
    async () => {
      const core = kube.admin.makeApiClient(CoreV1Api);
      const pods = async () => (await core.listNamespacedPod({ namespace, labelSelector: `app=${WORKLOAD}` })).items;
      expect((await poolStatus({ client, group: GROUP })).phase).toBe('parked');
      expect(await pods()).toEqual([]);
      const light = await cluster.coordinator.queries.queryOnGroup(HEAVY_SQL, 'serving');

      const { status: code, body: heavy } = await cluster.query(HEAVY_SQL);
      expect(code).toBe(200);
      expect(heavy.stats.verdict).toMatchObject({ class: 'heavy', bottleneck: 'memory' });
      expect(heavy.stats.group).toBe(GROUP);
      expect(heavy.rows).toEqual(light.rows);
      // It ran on a query node the test kubelet started for one of the workload's pods.
      const heavyNodes = new Set((await cluster.meta.members(GROUP)).map((m) => m.id));
      expect(Object.keys(heavy.stats.nodes).every((id) => heavyNodes.has(id))).toBe(true);

      expect(await poolStatus({ client, group: GROUP })).toMatchObject({
        phase: 'ready',
        serveReady: true,
        target: PODS,
        podsRunning: PODS,
        aliveBackends: PODS,
        patches: 1,
        layersPassed: ['pods', 'backends', 'canary'],
      });
      const up = await pods();
      expect(up.map((p) => p.metadata!.name).sort()).toEqual(
        Array.from({ length: PODS }, (_, i) => `${WORKLOAD}-${i}`),
      );
      expect(
        up.every(
          (p) =>
            p.status!.phase === 'Running' &&
            p.status!.conditions!.some((c) => c.type === 'Ready' && c.status === 'True'),
        ),
      ).toBe(true);
      expect(kubelet.processes.size).toBe(PODS);
      // The StatefulSet controller sees them ready too.
      await expect
        .poll(async () => (await readStatefulSet(kube, namespace, WORKLOAD)).status?.readyReplicas, {
          timeout: 30_000,
        })
        .toBe(PODS);

      // Idle for the timeout: replicas to zero, the controller deletes the pods, the kubelet stops their processes.
      await expect
        .poll(async () => (await poolStatus({ client, group: GROUP })).phase, { timeout: 30_000 })
        .toBe('parked');
      expect((await readStatefulSet(kube, namespace, WORKLOAD)).spec!.replicas).toBe(0);
      await expect.poll(async () => (await pods()).length, { timeout: 60_000 }).toBe(0);
      await expect.poll(() => kubelet.processes.size, { timeout: 30_000 }).toBe(0);
      expect(kubelet.started).toBe(PODS);
      // Both writes were the worker's, as its ServiceAccount, and nothing else was patched.
      await expect
        .poll(
          async () =>
            (await auditedPatches(kube, namespace, WORKLOAD)).map((e) => [e.user.username, e.responseStatus.code]),
          { timeout: 10_000 },
        )
        .toEqual([
          [`system:serviceaccount:${namespace}:berth-worker`, 200],
          [`system:serviceaccount:${namespace}:berth-worker`, 200],
        ]);
    },
  );

  it(
    'shows a backend that dies as a pod that is no longer ready, as a kubelet would',
    { timeout: 120_000 },
    async () => {
      const apps = kube.admin.makeApiClient(AppsV1Api);
      const scale = (replicas: number) =>
        apps.patchNamespacedStatefulSet(
          { namespace, name: WORKLOAD, body: [{ op: 'replace', path: '/spec/replicas', value: replicas }] },
          setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
        );
      const ready = async () =>
        (
          await kube.admin.makeApiClient(CoreV1Api).readNamespacedPod({ namespace, name: `${WORKLOAD}-0` })
        ).status?.conditions?.find((c) => c.type === 'Ready')?.status;
      await scale(1);
      await expect.poll(() => kubelet.processes.get(`${WORKLOAD}-0`)?.url, { timeout: 60_000 }).toBeDefined();
      await expect.poll(ready, { timeout: 30_000 }).toBe('True');
      kubelet.processes.get(`${WORKLOAD}-0`)!.child.kill('SIGKILL');
      await expect.poll(ready, { timeout: 30_000 }).toBe('False');
      await expect
        .poll(async () => (await readStatefulSet(kube, namespace, WORKLOAD)).status?.readyReplicas ?? 0, {
          timeout: 30_000,
        })
        .toBe(0);
      await scale(0);
      await expect
        .poll(async () => (await kube.admin.makeApiClient(CoreV1Api).listNamespacedPod({ namespace })).items.length, {
          timeout: 60_000,
        })
        .toBe(0);
    },
  );
});
