/**
 * The heavy pool's entity workflow on a real Temporal dev server, scaling through the Kubernetes
 * driver against the run's real apiserver. Each test has a namespace of its own with the repo's
 * heavy StatefulSet and worker RBAC applied, and a worker holding that ServiceAccount's token;
 * patches are counted from the apiserver's audit log and the workload's generation.
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubernetesPlatform, type KubernetesTarget } from '../activities/platform/kubernetes-platform.js';
import { launchPool, poolStatus, type PoolClientOptions } from '../workflows/pool-client.js';
import { poolWorkflowId } from '../workflows/contracts/heavy-pool.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { spawnWorkerProcess, startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import {
  applyManifests,
  auditedPatches,
  COMPUTE_GROUPS_TARGET,
  createComputeGroups,
  createNamespace,
  heavyPoolManifests,
  kubeConfigFor,
  kubeConfigYaml,
  readComputeGroups,
  readStatefulSet,
  serviceAccountToken,
  testKube,
  type TestKube,
} from './helpers/kube.js';

/** Every message along an error's cause chain. */
const causes = (error: unknown): string => {
  const messages: string[] = [];
  for (let e = error as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e)
    messages.push(e.message ?? '');
  return messages.join(' <- ');
};

/** A compute group of its own for one test: a namespace with the repo's heavy pool manifests, and a worker on a task queue of its own. */
interface Pool {
  group: string;
  namespace: string;
  token: string;
  taskQueue: string;
  options: PoolClientOptions;
  worker?: RunningWorker;
  /** Successful patches of the workload, as the apiserver audited them. */
  patches(): Promise<number>;
}

describe('the heavy pool on Kubernetes', () => {
  let kube: TestKube;
  let cluster: TestCluster;
  let client: Client;
  const pools: Pool[] = [];

  const platformFor = (pool: Pick<Pool, 'group' | 'namespace' | 'token'>, target?: KubernetesTarget) =>
    new KubernetesPlatform({
      kubeConfig: kubeConfigFor(kube.server, pool.token),
      namespace: pool.namespace,
      target: target ?? { kind: 'workload', workloads: { [pool.group]: { kind: 'statefulset', name: 'berth-heavy' } } },
    });

  async function newPool(name: string, options: { startWorker?: boolean } = {}): Promise<Pool> {
    const group = `${name}-${randomUUID().slice(0, 8)}`;
    const namespace = await createNamespace(kube, name);
    await applyManifests(kube, namespace, await heavyPoolManifests());
    const token = await serviceAccountToken(kube, namespace, 'berth-worker');
    const taskQueue = `pool-${group}`;
    const pool: Pool = {
      group,
      namespace,
      token,
      taskQueue,
      options: {
        client,
        taskQueue,
        config: { group, increment: 2, maxReplicas: 4, readinessConfirmMs: 100, idleTimeoutMs: 600_000 },
      },
      patches: async () =>
        (await auditedPatches(kube, namespace, 'berth-heavy')).filter((e) => e.responseStatus.code === 200).length,
    };
    if (options.startWorker !== false)
      pool.worker = await startWorker(cluster, taskQueue, { heavyPool: { platform: platformFor(pool) } });
    pools.push(pool);
    return pool;
  }

  /** Plays a kubelet whose containers start but whose query nodes never register: the pods run, no backend is alive. */
  async function runPodsWithoutBackends(namespace: string, count: number) {
    const core = kube.admin.makeApiClient(CoreV1Api);
    await expect
      .poll(async () => (await core.listNamespacedPod({ namespace })).items.length, { timeout: 30_000 })
      .toBe(count);
    for (const pod of (await core.listNamespacedPod({ namespace })).items) {
      await core.patchNamespacedPodStatus(
        { namespace, name: pod.metadata!.name!, body: { status: { phase: 'Running' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    }
  }

  beforeAll(async () => {
    kube = testKube();
    cluster = await startCluster({ vcpus: [] });
    client = await temporalClient();
  });
  afterAll(async () => {
    for (const pool of pools) {
      await client?.workflow
        .getHandle(poolWorkflowId(pool.group))
        .terminate('test over')
        .catch(() => {});
      await pool.worker?.stop();
    }
    await client?.connection.close();
    await cluster?.close();
  });

  it('coalesces 100 concurrent launches onto one execution at the largest target, patching no more than once per distinct raise', async () => {
    const pool = await newPool('coalesce');
    const targets = Array.from({ length: 100 }, (_, i) => 1 + (i % 4));
    const answers = await Promise.all(targets.map((t) => launchPool(pool.options, t)));
    expect(new Set(answers.map((a) => a.workflowId))).toEqual(new Set([poolWorkflowId(pool.group)]));
    expect(answers.every((a) => a.accepted >= 2 && a.accepted <= 4 && a.accepted % 2 === 0)).toBe(true);
    await expect
      .poll(async () => (await poolStatus({ client, group: pool.group })).replicasPatched, { timeout: 30_000 })
      .toBe(4);
    // One pool: a single running execution (continue-as-new may have handed it over to new runs).
    const running: string[] = [];
    for await (const run of client.workflow.list({
      query: `WorkflowId = '${poolWorkflowId(pool.group)}' AND ExecutionStatus = 'Running'`,
    }))
      running.push(run.runId);
    expect(running).toHaveLength(1);
    // Distinct raises: 0 → 2 → 4 at most, or straight to 4. The workload's generation counts every spec change.
    const workload = await readStatefulSet(kube, pool.namespace, 'berth-heavy');
    expect(workload.spec!.replicas).toBe(4);
    const patches = workload.metadata!.generation! - 1;
    expect(patches).toBeGreaterThanOrEqual(1);
    expect(patches).toBeLessThanOrEqual(2);
    await expect.poll(() => pool.patches(), { timeout: 10_000 }).toBe(patches);
    expect(await poolStatus({ client, group: pool.group })).toMatchObject({ target: 4, patches });
  });

  it('is not ready with pods running but no backend alive, and says why', async () => {
    const pool = await newPool('no-backends');
    await launchPool(pool.options, 2);
    await runPodsWithoutBackends(pool.namespace, 2);
    await expect
      .poll(async () => (await poolStatus({ client, group: pool.group })).layersPassed, { timeout: 30_000 })
      .toEqual(['pods']);
    const status = await poolStatus({ client, group: pool.group });
    expect(status).toMatchObject({
      phase: 'waiting-for-backends',
      serveReady: false,
      podsRunning: 2,
      aliveBackends: 0,
    });
    expect(status.notReady).toMatch(/2 of 2 pods running, but 0 of 2 new backends alive in meta/);
  });

  describe('launch validation', () => {
    let pool: Pool;
    beforeAll(async () => {
      pool = await newPool('validation');
      await launchPool(pool.options, 2);
    });

    it.each([
      [{ target: 0 }, /at least 1/],
      [{ target: -1 }, /at least 1/],
      [{ target: 2.5 }, /whole number/],
      [{ target: 1e9 }, /past 10000/],
    ])('rejects launch %j in the validator and stays unharmed', async (request, message) => {
      const error = await launchPool(pool.options, request.target).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkflowUpdateFailedError);
      expect(causes(error)).toMatch(message);
      expect((await poolStatus({ client, group: pool.group })).target).toBe(2);
    });

    it('rejects a launch for another group', async () => {
      const error = await client.workflow
        .getHandle(poolWorkflowId(pool.group))
        .executeUpdate('launch', { args: [{ target: 2, group: 'not-this-one' }] })
        .catch((e: unknown) => e);
      expect(causes(error)).toMatch(/unknown group "not-this-one"/);
      expect((await readStatefulSet(kube, pool.namespace, 'berth-heavy')).spec!.replicas).toBe(2);
    });
  });

  it('resumes a launch on a new worker after its worker went away, without patching twice', async () => {
    const pool = await newPool('resume');
    await launchPool(pool.options, 2);
    await expect
      .poll(async () => (await poolStatus({ client, group: pool.group })).phase, { timeout: 30_000 })
      .toBe('waiting-for-backends');
    await pool.worker!.stop();
    pool.worker = await startWorker(cluster, pool.taskQueue, { heavyPool: { platform: platformFor(pool) } });
    // The resumed execution replays its history: the patch already made is not made again.
    await launchPool(pool.options, 2);
    await expect
      .poll(async () => (await poolStatus({ client, group: pool.group })).notReady ?? '', { timeout: 30_000 })
      .toMatch(/of 2 pods running/);
    expect(await poolStatus({ client, group: pool.group })).toMatchObject({
      target: 2,
      replicasPatched: 2,
      patches: 1,
    });
    expect((await readStatefulSet(kube, pool.namespace, 'berth-heavy')).metadata!.generation).toBe(2);
    expect(await pool.patches()).toBe(1);
  });

  it(
    'carries a launch on after its worker process is killed mid-launch, with no duplicate patch',
    { timeout: 180_000 },
    async () => {
      const pool = await newPool('killed', { startWorker: false });
      const kubeconfig = `${cluster.dir}/kubeconfig-${pool.group}.yaml`;
      await writeFile(kubeconfig, kubeConfigYaml(kube.server, pool.token));
      // The worker as deploy/k8s runs it: the Kubernetes platform from its environment, with the ServiceAccount's token.
      const { child, exited } = spawnWorkerProcess(cluster, pool.taskQueue, {
        KUBECONFIG: kubeconfig,
        BERTH_PLATFORM: 'kubernetes',
        BERTH_K8S_NAMESPACE: pool.namespace,
        BERTH_K8S_WORKLOAD: 'statefulset/berth-heavy',
        BERTH_HEAVY_GROUP: pool.group,
      });
      try {
        await launchPool(pool.options, 2);
        // Killed right after its patch landed, while it waits for backends.
        await expect
          .poll(async () => (await readStatefulSet(kube, pool.namespace, 'berth-heavy')).spec!.replicas, {
            timeout: 90_000,
          })
          .toBe(2);
      } finally {
        child.kill('SIGKILL');
        await exited;
      }

      pool.worker = await startWorker(cluster, pool.taskQueue, { heavyPool: { platform: platformFor(pool) } });
      await runPodsWithoutBackends(pool.namespace, 2);
      await expect
        .poll(async () => (await poolStatus({ client, group: pool.group })).layersPassed, { timeout: 60_000 })
        .toEqual(['pods']);
      expect(await poolStatus({ client, group: pool.group })).toMatchObject({ target: 2, replicasPatched: 2 });
      expect((await readStatefulSet(kube, pool.namespace, 'berth-heavy')).metadata!.generation).toBe(2);
      await expect.poll(() => pool.patches(), { timeout: 10_000 }).toBe(1);
    },
  );

  describe('on an operator’s custom resource', () => {
    let namespace: string;
    let pool: Pick<Pool, 'group' | 'namespace' | 'token'>;
    let worker: RunningWorker;
    const taskQueue = `pool-cr-${randomUUID()}`;
    const group = `heavy-${randomUUID().slice(0, 8)}`;
    const missing = `reporting-${randomUUID().slice(0, 8)}`;
    const read = () => readComputeGroups(kube, namespace);

    beforeAll(async () => {
      namespace = await createNamespace(kube, 'operator-pool');
      await createComputeGroups(kube, namespace, [
        { uniqueId: 'serving', replicas: 3 },
        { uniqueId: group, replicas: 0 },
      ]);
      pool = { group, namespace, token: kube.adminToken };
      worker = await startWorker(cluster, taskQueue, {
        heavyPool: { platform: platformFor(pool, COMPUTE_GROUPS_TARGET) },
      });
    });
    afterAll(async () => {
      for (const g of [group, missing])
        await client?.workflow
          .getHandle(poolWorkflowId(g))
          .terminate('test over')
          .catch(() => {});
      await worker?.stop();
    });

    it('patches the group’s own index in spec.computeGroups', async () => {
      await launchPool(
        { client, taskQueue, config: { group, increment: 2, maxReplicas: 4, readinessConfirmMs: 100 } },
        2,
      );
      await expect
        .poll(async () => (await read()).spec.computeGroups.map((g) => [g.uniqueId, g.replicas]), { timeout: 30_000 })
        .toEqual([
          ['serving', 3],
          [group, 2],
        ]);
      expect(await poolStatus({ client, group })).toMatchObject({ target: 2, replicasPatched: 2, patches: 1 });
    });

    it('parks without retrying when the group is missing from the resource, and names it in its status', async () => {
      const before = await read();
      await launchPool(
        { client, taskQueue, config: { group: missing, increment: 2, maxReplicas: 4, readinessConfirmMs: 100 } },
        2,
      );
      const parked = async () => {
        const s = await poolStatus({ client, group: missing });
        return s.lastFailure !== undefined && s.phase;
      };
      await expect.poll(parked, { timeout: 30_000 }).toBe('parked');
      const status = await poolStatus({ client, group: missing });
      expect(status).toMatchObject({ target: 0, serveReady: false });
      expect(status.lastFailure?.message).toMatch(
        new RegExp(`compute group "${missing}" is not in dorisdisaggregatedclusters/analytics`),
      );
      expect((await read()).metadata.generation).toBe(before.metadata.generation);
      await client.workflow.getHandle(poolWorkflowId(missing)).terminate('test over');
    });
  });
});
