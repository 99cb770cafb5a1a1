/**
 * Node objects for tests, created through the API as a kubelet registers its node: capacity and
 * allocatable, labels, taints and annotations as given, a Ready condition, and a lease renewed
 * every 10 s so that the node lifecycle controller keeps them ready (it removes the not-ready taint
 * that admission puts on every new node, and would mark a silent node unreachable). The real
 * scheduler places pods on them by their requests, selectors and taints.
 *
 * Every node carries its test namespace's label, which the namespace's node selector requires
 * (test/helpers/kube.ts), so pods of one test file never land on another's nodes.
 */
import { randomUUID } from 'node:crypto';
import { CoordinationV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type V1Taint } from '@kubernetes/client-node';
import { namespaceNodeLabel, type TestKube } from './kube.js';

const LEASE_RENEW_MS = 10_000;

export interface TestNodeSpec {
  /** @default a unique name */
  name?: string;
  capacity: { cpu: string; memory: string; pods?: string };
  /** @default the capacity */
  allocatable?: { cpu: string; memory: string; pods?: string };
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  taints?: V1Taint[];
}

export interface TestNodes {
  names: string[];
  /** Deletes the nodes and their leases. */
  stop(): Promise<void>;
}

/** Errors of the background lease renewal; the next renewal tries again. */
const report = (what: string) => (error: unknown) => console.error(`test nodes: ${what}: ${(error as Error).message}`);

export async function createTestNodes(kube: TestKube, namespace: string, specs: TestNodeSpec[]): Promise<TestNodes> {
  const core = kube.admin.makeApiClient(CoreV1Api);
  const leases = kube.admin.makeApiClient(CoordinationV1Api);
  const now = () => new Date();
  const names: string[] = [];
  for (const spec of specs) {
    const name = spec.name ?? `node-${randomUUID().slice(0, 8)}`;
    const withPods = (r: { cpu: string; memory: string; pods?: string }) => ({ ...r, pods: r.pods ?? '110' });
    await core.createNode({
      body: {
        metadata: {
          name,
          labels: { 'kubernetes.io/hostname': name, ...spec.labels, [namespaceNodeLabel]: namespace },
          annotations: spec.annotations,
        },
        spec: { taints: spec.taints },
        status: {
          capacity: withPods(spec.capacity),
          allocatable: withPods(spec.allocatable ?? spec.capacity),
          addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'KubeletReady',
              message: 'test node',
              lastHeartbeatTime: now(),
              lastTransitionTime: now(),
            },
          ],
        },
      },
    });
    // The node lifecycle controller reads a node's health from its lease. Its renewTime is a
    // MicroTime (six fractional digits), which the client's Date serializer cannot write: it is
    // patched as text.
    await leases.createNamespacedLease({
      namespace: 'kube-node-lease',
      body: { metadata: { name }, spec: { holderIdentity: name, leaseDurationSeconds: 40 } },
    });
    names.push(name);
  }
  const renew = () =>
    Promise.all(
      names.map((name) =>
        leases
          .patchNamespacedLease(
            {
              namespace: 'kube-node-lease',
              name,
              body: { spec: { renewTime: now().toISOString().replace(/Z$/, '000Z') } },
            },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          )
          .catch(report(`renewing the lease of ${name}`)),
      ),
    );
  await renew();
  const renewing = setInterval(() => void renew(), LEASE_RENEW_MS);
  return {
    names,
    stop: async () => {
      clearInterval(renewing);
      const gone = (error: { code?: number }) => {
        if (error.code !== 404) throw error;
      };
      for (const name of names) {
        await core.deleteNode({ name }).catch(gone);
        await leases.deleteNamespacedLease({ namespace: 'kube-node-lease', name }).catch(gone);
      }
    },
  };
}
