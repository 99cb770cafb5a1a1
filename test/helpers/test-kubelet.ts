/**
 * A kubelet for tests: the control plane has none, so this plays one node. It registers a Node
 * (test/helpers/test-nodes.ts: ready, with a lease it renews, room for the heavy pods), watches the
 * pods of one workload (by the workload's own selector), and runs each pod the real scheduler
 * placed on its node, and only those: it starts a real Berth query node with the pod's
 * environment, then reports the pod Running and Ready through the status subresource. A pod placed
 * nowhere stays Pending, with the scheduler's own reason. When a pod is deleted it stops the
 * process, then completes the deletion as a kubelet does once its containers are gone.
 *
 * Where a container would differ from a process on this machine, the kubelet stands in: each pod
 * listens on its own loopback port (the pod network), gets a cache directory of its own (its
 * volume), and takes what the ConfigMap and Secret would give it from `env`.
 */
import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AppsV1Api,
  CoreV1Api,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from '@kubernetes/client-node';
import { labelSelectorString } from '../../activities/platform/kubernetes-platform.js';
import { startServiceProcess, type ServiceProcess } from '../../activities/platform/service-process.js';
import type { TestKube } from './kube.js';
import { createTestNodes, type TestNodeSpec } from './test-nodes.js';

const QUERY_NODE = fileURLToPath(new URL('../../dist/services/query-node/main.js', import.meta.url));

export interface TestKubeletOptions {
  namespace: string;
  /** The StatefulSet whose pods this kubelet runs. */
  statefulSet: string;
  /** What the pod's ConfigMap and Secret would give it (meta URL, token, S3...). */
  env: Record<string, string>;
  /** Cache directories and logs of the pods' processes. */
  dir: string;
  /** The kubelet's node. @default 64 CPUs and 512 GiB, room for every heavy pod a test asks for */
  node?: Omit<TestNodeSpec, 'name'>;
}

export interface TestKubelet {
  nodeName: string;
  /** The query-node process of each running pod, by pod name. */
  processes: Map<string, ServiceProcess>;
  /** Pods started since the kubelet began. */
  started: number;
  stop(): Promise<void>;
}

/** Errors of a step the kubelet takes in the background; the informer's next event retries it. */
const report = (what: string) => (error: unknown) =>
  console.error(`test kubelet: ${what}: ${(error as Error).message}`);

export async function startTestKubelet(kube: TestKube, options: TestKubeletOptions): Promise<TestKubelet> {
  const { namespace } = options;
  const core = kube.admin.makeApiClient(CoreV1Api);
  const nodeName = `test-kubelet-${randomUUID().slice(0, 8)}`;
  await mkdir(options.dir, { recursive: true });
  const now = () => new Date();
  const node = await createTestNodes(kube, namespace, [
    { name: nodeName, ...(options.node ?? { capacity: { cpu: '64', memory: '512Gi' } }) },
  ]);

  const workload = await kube.admin
    .makeApiClient(AppsV1Api)
    .readNamespacedStatefulSet({ namespace, name: options.statefulSet });
  const selector = labelSelectorString(workload.spec!.selector);
  const processes = new Map<string, ServiceProcess>();
  const kubelet: TestKubelet = { nodeName, processes, started: 0, stop: async () => {} };
  /** One step at a time per pod, in the order the events came. */
  const queues = new Map<string, Promise<void>>();
  const enqueue = (pod: V1Pod, step: (pod: V1Pod) => Promise<void>) => {
    const name = pod.metadata!.name!;
    const next = (queues.get(name) ?? Promise.resolve()).then(() => step(pod)).catch(report(`pod ${name}`));
    queues.set(name, next);
  };

  const run = async (pod: V1Pod) => {
    const name = pod.metadata!.name!;
    if (pod.metadata!.deletionTimestamp) return await terminate(pod);
    // Only what the scheduler placed here: an unplaced pod waits for it, another node's is not ours.
    if (pod.spec!.nodeName !== nodeName || processes.has(name) || pod.status?.phase === 'Running') return;
    const container = pod.spec!.containers[0]!;
    const literal = Object.fromEntries(
      (container.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]),
    );
    const backend = await startServiceProcess(
      name,
      QUERY_NODE,
      {
        ...literal,
        ...options.env,
        BERTH_NODE_HOST: '127.0.0.1',
        BERTH_NODE_PORT: '0',
        BERTH_NODE_CACHE_DIR: path.join(options.dir, `${name}-${pod.metadata!.uid}`),
      },
      path.join(options.dir, `${name}.log`),
    );
    processes.set(name, backend);
    kubelet.started++;
    // A container that dies on its own leaves the pod not ready (this kubelet does not restart it).
    void backend.exited.then(async (exitCode) => {
      if (processes.get(name) !== backend) return; // stopped by the kubelet itself
      processes.delete(name);
      const at = now();
      await core
        .patchNamespacedPodStatus(
          {
            name,
            namespace,
            body: {
              status: {
                conditions: ['ContainersReady', 'Ready'].map((type) => ({
                  type,
                  status: 'False',
                  reason: 'ContainersNotReady',
                  lastTransitionTime: at,
                })),
                containerStatuses: [
                  {
                    name: container.name,
                    image: container.image,
                    imageID: '',
                    ready: false,
                    started: false,
                    restartCount: 0,
                    state: { terminated: { exitCode: exitCode ?? 137, finishedAt: at } },
                  },
                ],
              },
            },
          },
          setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
        )
        .catch(report(`reporting ${name}'s container gone`));
    });
    const startedAt = now();
    const condition = (type: string) => ({ type, status: 'True', lastTransitionTime: startedAt });
    await core.patchNamespacedPodStatus(
      {
        name,
        namespace,
        body: {
          status: {
            phase: 'Running',
            hostIP: '127.0.0.1',
            podIP: '127.0.0.1',
            startTime: startedAt,
            conditions: ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map(condition),
            containerStatuses: [
              {
                name: container.name,
                image: container.image,
                imageID: '',
                ready: true,
                started: true,
                restartCount: 0,
                state: { running: { startedAt } },
              },
            ],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  };

  /** Stops a pod's process, if it runs. */
  const stopProcess = async (name: string) => {
    const backend = processes.get(name);
    processes.delete(name);
    await backend?.stop();
  };

  const terminate = async (pod: V1Pod) => {
    const name = pod.metadata!.name!;
    await stopProcess(name);
    // The containers are gone: end the graceful deletion now (only this pod, not a successor of the
    // same name). With a body, the server reads the grace period from it, not from the query.
    await core
      .deleteNamespacedPod({
        name,
        namespace,
        body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata!.uid } },
      })
      .catch((error: { code?: number }) => {
        if (error.code !== 404 && error.code !== 409) throw error;
      });
  };

  const informer = makeInformer(
    kube.admin,
    `/api/v1/namespaces/${namespace}/pods`,
    () => core.listNamespacedPod({ namespace, labelSelector: selector }),
    selector,
  );
  informer.on('add', (pod) => enqueue(pod, run));
  informer.on('update', (pod) => enqueue(pod, run));
  informer.on('delete', (pod) => enqueue(pod, (p) => stopProcess(p.metadata!.name!)));
  let stopping = false;
  informer.on('error', (error) => {
    if (stopping) return;
    report('watching pods')(error);
    setTimeout(() => void informer.start().catch(report('restarting the watch')), 1_000);
  });
  await informer.start();

  kubelet.stop = async () => {
    stopping = true;
    await informer.stop();
    await Promise.all(queues.values());
    await Promise.all([...processes.keys()].map(stopProcess));
    await node.stop();
  };
  return kubelet;
}
