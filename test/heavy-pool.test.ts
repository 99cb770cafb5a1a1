/**
 * The heavy pool's entity workflow on a real Temporal dev server, scaling a compute group through
 * the Kubernetes driver against the fake API server (so that every patch can be counted).
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubernetesPlatform } from '../activities/platform/kubernetes-platform.js';
import { launchPool, poolStatus, type PoolClientOptions } from '../services/controller/pool-client.js';
import { poolWorkflowId } from '../workflows/api.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { spawnWorkerProcess, startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { startFakeKubeApi, type FakeKubeApi } from './fakes/kube-api-server.js';

const KEY = 'doris/dorisdisaggregatedclusters/analytics';

/** Every message along an error's cause chain. */
const causes = (error: unknown): string => {
  const messages: string[] = [];
  for (let e = error as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e) messages.push(e.message ?? '');
  return messages.join(' <- ');
};

describe('the heavy pool on Kubernetes', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let api: FakeKubeApi;
  let platformOf: () => KubernetesPlatform;
  const taskQueue = `pool-${randomUUID()}`;
  /** A pool of its own per test: a fresh group name, so workflow ids never collide. */
  const pool = (group: string): PoolClientOptions => ({ client, taskQueue, config: { group, increment: 2, maxReplicas: 4, readinessConfirmMs: 100, idleTimeoutMs: 600_000 } });
  const addGroup = (uniqueId: string) => api.resources.get(KEY)!.spec.computeGroups.push({ uniqueId, replicas: 0 });

  beforeAll(async () => {
    api = await startFakeKubeApi();
    api.resources.set(KEY, { apiVersion: 'disaggregated.cluster.doris.com/v1', kind: 'DorisDisaggregatedCluster', metadata: { name: 'analytics' }, spec: { computeGroups: [{ uniqueId: 'serving', replicas: 3 }] } });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({ clusters: [{ name: 'fake', server: api.url, skipTLSVerify: true }], users: [{ name: 'berth' }], contexts: [{ name: 'fake', cluster: 'fake', user: 'berth' }], currentContext: 'fake' });
    cluster = await startCluster({ vcpus: [] });
    client = await temporalClient();
    platformOf = () => new KubernetesPlatform({ kubeConfig, namespace: 'doris', name: 'analytics' });
    worker = await startWorker(cluster, taskQueue, { heavyPool: { platform: platformOf()} });
  });
  afterAll(async () => {
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
    await api?.close();
  });

  const terminate = (group: string) => client.workflow.getHandle(poolWorkflowId(group)).terminate('test over');

  it('coalesces 100 concurrent launches onto one execution at the largest target, patching once per distinct raise', async () => {
    addGroup('heavy-a');
    const targets = Array.from({ length: 100 }, (_, i) => 1 + (i % 4));
    const answers = await Promise.all(targets.map((t) => launchPool(pool('heavy-a'), t)));
    expect(new Set(answers.map((a) => a.workflowId))).toEqual(new Set([poolWorkflowId('heavy-a')]));
    expect(answers.every((a) => a.accepted >= 2 && a.accepted <= 4 && a.accepted % 2 === 0)).toBe(true);
    await expect.poll(async () => (await poolStatus({ client, group: 'heavy-a' })).replicasPatched, { timeout: 20_000 }).toBe(4);
    // One pool: a single running execution (continue-as-new may have handed it over to new runs).
    const running: string[] = [];
    for await (const run of client.workflow.list({ query: `WorkflowId = '${poolWorkflowId('heavy-a')}' AND ExecutionStatus = 'Running'` })) running.push(run.runId);
    expect(running).toHaveLength(1);
    const raises = api.patches.filter((p) => p[0]!.path === `/spec/computeGroups/1/uniqueId`);
    expect(raises.length).toBeGreaterThanOrEqual(1);
    expect(raises.length).toBeLessThanOrEqual(2); // 0 → 2 → 4 at most, or straight to 4
    expect(raises.at(-1)).toEqual([
      { op: 'test', path: '/spec/computeGroups/1/uniqueId', value: 'heavy-a' },
      { op: 'replace', path: '/spec/computeGroups/1/replicas', value: 4 },
    ]);
    const status = await poolStatus({ client, group: 'heavy-a' });
    expect(status).toMatchObject({ target: 4, patches: raises.length });
    await terminate('heavy-a');
  });

  it('is not ready with pods running but no backend alive, and says why', async () => {
    addGroup('heavy-b');
    api.pods.push(
      { namespace: 'doris', name: 'b-0', labels: { 'app.doris.computegroup': 'heavy-b' }, phase: 'Running' },
      { namespace: 'doris', name: 'b-1', labels: { 'app.doris.computegroup': 'heavy-b' }, phase: 'Running' },
    );
    await launchPool(pool('heavy-b'), 2);
    await expect.poll(async () => (await poolStatus({ client, group: 'heavy-b' })).layersPassed, { timeout: 20_000 }).toEqual(['pods']);
    const status = await poolStatus({ client, group: 'heavy-b' });
    expect(status).toMatchObject({ phase: 'waiting-for-backends', serveReady: false, podsRunning: 2, aliveBackends: 0 });
    expect(status.notReady).toMatch(/2 of 2 pods running, but 0 of 2 new backends alive in meta/);
    await terminate('heavy-b');
  });

  it.each([
    [{ target: 0 }, /at least 1/],
    [{ target: -1 }, /at least 1/],
    [{ target: 2.5 }, /whole number/],
    [{ target: 1e9 }, /past 10000/],
  ])('rejects launch %j in the validator and stays unharmed', async (request, message) => {
    addGroup('heavy-c');
    await launchPool(pool('heavy-c'), 2);
    const error = await launchPool(pool('heavy-c'), request.target).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(causes(error)).toMatch(message);
    expect((await poolStatus({ client, group: 'heavy-c' })).target).toBe(2);
  });

  it('rejects a launch for another group', async () => {
    const error = await client.workflow
      .getHandle(poolWorkflowId('heavy-c'))
      .executeUpdate('launch', { args: [{ target: 2, group: 'not-this-one' }] })
      .catch((e: unknown) => e);
    expect(causes(error)).toMatch(/unknown group "not-this-one"/);
    await terminate('heavy-c');
  });

  it('resumes a launch on a new worker after its worker went away, without patching twice', async () => {
    addGroup('heavy-d');
    await launchPool(pool('heavy-d'), 2);
    await expect.poll(async () => (await poolStatus({ client, group: 'heavy-d' })).phase, { timeout: 20_000 }).toBe('waiting-for-backends');
    const patchesBefore = api.patches.length;
    await worker.stop();
    worker = await startWorker(cluster, taskQueue, { heavyPool: { platform: platformOf()} });
    // The resumed execution replays its history: the patch already made is not made again.
    await launchPool(pool('heavy-d'), 2);
    await expect.poll(async () => (await poolStatus({ client, group: 'heavy-d' })).notReady ?? '', { timeout: 20_000 }).toMatch(/of 2 pods running/);
    expect(api.patches.length).toBe(patchesBefore);
    expect(await poolStatus({ client, group: 'heavy-d' })).toMatchObject({ target: 2, replicasPatched: 2, patches: 1 });
    await terminate('heavy-d');
  });

  it('carries a launch on after its worker process is killed mid-launch, with no duplicate patch', { timeout: 120_000 }, async () => {
    addGroup('heavy-e');
    const kubeconfig = `${cluster.dir}/kubeconfig.yaml`;
    await writeFile(
      kubeconfig,
      `apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: ${api.url}\n    insecure-skip-tls-verify: true\nusers:\n- name: berth\n  user: {}\ncontexts:\n- name: fake\n  context: {cluster: fake, user: berth}\ncurrent-context: fake\n`,
    );
    const killedQueue = `pool-killed-${randomUUID()}`;
    const { child, exited } = spawnWorkerProcess(cluster, killedQueue, {
      KUBECONFIG: kubeconfig,
      BERTH_PLATFORM: 'kubernetes',
      BERTH_K8S_NAMESPACE: 'doris',
      BERTH_K8S_NAME: 'analytics',
      BERTH_HEAVY_GROUP: 'heavy-e',
    });
    const options = { ...pool('heavy-e'), taskQueue: killedQueue };
    await launchPool(options, 2);
    // Killed right after its patch, while it waits for backends.
    await expect.poll(async () => (await poolStatus({ client, group: 'heavy-e' })).replicasPatched, { timeout: 60_000 }).toBe(2); // the patch's completion is in the history
    child.kill('SIGKILL');
    await exited;

    const replacement = await startWorker(cluster, killedQueue, { heavyPool: { platform: platformOf()} });
    try {
      api.pods.push({ namespace: 'doris', name: 'e-0', labels: { 'app.doris.computegroup': 'heavy-e' }, phase: 'Running' }, { namespace: 'doris', name: 'e-1', labels: { 'app.doris.computegroup': 'heavy-e' }, phase: 'Running' });
      await expect.poll(async () => (await poolStatus({ client, group: 'heavy-e' })).layersPassed, { timeout: 30_000 }).toEqual(['pods']);
      expect(api.patches.filter((p) => JSON.stringify(p).includes('"heavy-e"'))).toHaveLength(1);
      expect(await poolStatus({ client, group: 'heavy-e' })).toMatchObject({ target: 2, replicasPatched: 2, patches: 1 });
    } finally {
      await terminate('heavy-e');
      await replacement.stop();
    }
  });

  it('parks without retrying when the group is missing from the custom resource, and says so in its status', async () => {
    await launchPool(pool('reporting'), 2);
    await expect.poll(async () => (await poolStatus({ client, group: 'reporting' })).lastFailure?.message ?? '', { timeout: 20_000 }).toMatch(
      /compute group "reporting" is not in dorisdisaggregatedclusters\/analytics/,
    );
    expect(await poolStatus({ client, group: 'reporting' })).toMatchObject({ phase: 'parked', serveReady: false, target: 0 });
    expect(api.patches.some((p) => JSON.stringify(p).includes('reporting'))).toBe(false);
    await terminate('reporting');
  });
});
