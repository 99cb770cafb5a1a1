/**
 * A kubelet for tests: the control plane has none, so this plays one node. It registers a Node
 * (ready, with a lease it renews), watches the pods of one workload (by the workload's own
 * selector), and for each new pod binds it to its node, starts a real Berth query node with the
 * pod's environment, then reports the pod Running and Ready through the status subresource. When a
 * pod is deleted it stops the process, then completes the deletion as a kubelet does once its
 * containers are gone.
 *
 * Where a container would differ from a process on this machine, the kubelet stands in: each pod
 * listens on its own loopback port (the pod network), gets a cache directory of its own (its
 * volume), and takes what the ConfigMap and Secret would give it from `env`.
 */
import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, makeInformer, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { labelSelectorString } from '../../activities/platform/kubernetes-platform.js';
import { startServiceProcess, type ServiceProcess } from '../../cli/embedded/service-process.js';
import type { TestKube } from './kube.js';

const QUERY_NODE = fileURLToPath(new URL('../../dist/services/query-node/main.js', import.meta.url));
const LEASE_RENEW_MS = 10_000;

export interface TestKubeletOptions {
  namespace: string;
  /** The StatefulSet whose pods this kubelet runs. */
  statefulSet: string;
  /** What the pod's ConfigMap and Secret would give it (meta URL, token, S3...). */
  env: Record<string, string>;
  /** Cache directories and logs of the pods' processes. */
  dir: string;
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
const report = (what: string) => (error: unknown) => console.error(`test kubelet: ${what}: ${(error as Error).message}`);

export async function startTestKubelet(kube: TestKube, options: TestKubeletOptions): Promise<TestKubelet> {
  const { namespace } = options;
  const core = kube.admin.makeApiClient(CoreV1Api);
  const leases = kube.admin.makeApiClient(CoordinationV1Api);
  const nodeName = `test-kubelet-${randomUUID().slice(0, 8)}`;
  await mkdir(options.dir, { recursive: true });

  const now = () => new Date();
  await core.createNode({
    body: {
      metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } },
      status: {
        capacity: { cpu: '64', memory: '512Gi', pods: '110' },
        allocatable: { cpu: '64', memory: '512Gi', pods: '110' },
        addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
        conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'test kubelet', lastHeartbeatTime: now(), lastTransitionTime: now() }],
      },
    },
  });
  // The node lifecycle controller reads a node's health from its lease. Its renewTime is a MicroTime
  // (six fractional digits), which the client's Date serializer cannot write: it is patched as text.
  await leases.createNamespacedLease({ namespace: 'kube-node-lease', body: { metadata: { name: nodeName }, spec: { holderIdentity: nodeName, leaseDurationSeconds: 40 } } });
  const renew = () =>
    leases
      .patchNamespacedLease({ namespace: 'kube-node-lease', name: nodeName, body: { spec: { renewTime: now().toISOString().replace(/Z$/, '000Z') } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch))
      .catch(report('renewing the node lease'));
  await renew();
  const renewing = setInterval(() => void renew(), LEASE_RENEW_MS);

  const workload = await kube.admin.makeApiClient(AppsV1Api).readNamespacedStatefulSet({ namespace, name: options.statefulSet });
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
    if (processes.has(name) || pod.status?.phase === 'Running') return;
    if (!pod.spec!.nodeName) await core.createNamespacedPodBinding({ name, namespace, body: { metadata: { name }, target: { kind: 'Node', name: nodeName } } });
    const container = pod.spec!.containers[0]!;
    const literal = Object.fromEntries((container.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
    const backend = await startServiceProcess(name, QUERY_NODE, {
      ...literal,
      ...options.env,
      BERTH_NODE_HOST: '127.0.0.1',
      BERTH_NODE_PORT: '0',
      BERTH_NODE_CACHE_DIR: path.join(options.dir, `${name}-${pod.metadata!.uid}`),
    }, path.join(options.dir, `${name}.log`));
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
                conditions: ['ContainersReady', 'Ready'].map((type) => ({ type, status: 'False', reason: 'ContainersNotReady', lastTransitionTime: at })),
                containerStatuses: [{ name: container.name, image: container.image, imageID: '', ready: false, started: false, restartCount: 0, state: { terminated: { exitCode: exitCode ?? 137, finishedAt: at } } }],
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
            containerStatuses: [{ name: container.name, image: container.image, imageID: '', ready: true, started: true, restartCount: 0, state: { running: { startedAt } } }],
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
    await core.deleteNamespacedPod({ name, namespace, body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata!.uid } } }).catch((error: { code?: number }) => {
      if (error.code !== 404 && error.code !== 409) throw error;
    });
  };

  const informer = makeInformer(kube.admin, `/api/v1/namespaces/${namespace}/pods`, () => core.listNamespacedPod({ namespace, labelSelector: selector }), selector);
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
    clearInterval(renewing);
    await informer.stop();
    await Promise.all(queues.values());
    await Promise.all([...processes.keys()].map(stopProcess));
  };
  return kubelet;
}
