/**
 * Test access to the run's Kubernetes control plane (started once by the global setup): client
 * configs for the admin and for ServiceAccount tokens, a namespace per test with the repo's own
 * manifests applied into it, and the apiserver's audit log of patches.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import {
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { inject } from 'vitest';
import type { KubernetesTarget } from '../../activities/platform/kubernetes-platform.js';

export { kubeConfigYaml } from './kube-control-plane.js';

export interface TestKube {
  server: string;
  adminToken: string;
  auditLog: string;
  admin: KubeConfig;
}

export function kubeConfigFor(server: string, token: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'test', server, skipTLSVerify: true }],
    users: [{ name: 'user', token }],
    contexts: [{ name: 'test', cluster: 'test', user: 'user' }],
    currentContext: 'test',
  });
  return kubeConfig;
}

export function testKube(): TestKube {
  const server = inject('kubeServer');
  const adminToken = inject('kubeAdminToken');
  return { server, adminToken, auditLog: inject('kubeAuditLog'), admin: kubeConfigFor(server, adminToken) };
}

/** The label a test's nodes carry: its namespace's pods go only to nodes with its namespace here. */
export const namespaceNodeLabel = 'berth.test/namespace';

/**
 * A fresh namespace, ready for pods (its default ServiceAccount exists). Its node selector (the
 * PodNodeSelector admission plugin adds it to every pod) keeps its pods on its own test's nodes.
 */
export async function createNamespace(kube: TestKube, prefix: string): Promise<string> {
  const name = `${prefix}-${randomUUID().slice(0, 8)}`;
  const core = kube.admin.makeApiClient(CoreV1Api);
  await core.createNamespace({
    body: {
      metadata: {
        name,
        annotations: { 'scheduler.alpha.kubernetes.io/node-selector': `${namespaceNodeLabel}=${name}` },
      },
    },
  });
  for (;;) {
    try {
      await core.readNamespacedServiceAccount({ name: 'default', namespace: name });
      return name;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

type Manifest = KubernetesObject & Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export async function loadManifests(relativePath: string): Promise<Manifest[]> {
  const text = await readFile(fileURLToPath(new URL(`../../${relativePath}`, import.meta.url)), 'utf8');
  return parseAllDocuments(text)
    .map((d) => d.toJS() as Manifest)
    .filter(Boolean);
}

/** What deploy/k8s gives the heavy pool: the worker's RBAC, and a heavy workload (the scan class's unless named) with its Service. */
export async function heavyPoolManifests(workload = 'berth-heavy'): Promise<Manifest[]> {
  return [
    ...(await loadManifests('deploy/k8s/rbac.yaml')),
    ...(await loadManifests('deploy/k8s/berth.yaml')).filter((d) => d.metadata?.name === workload),
  ];
}

const CLUSTER_SCOPED = new Set(['ClusterRole', 'ClusterRoleBinding']);

/**
 * Creates the manifests in `namespace`, as `kubectl apply -n` would with their namespace changed:
 * namespaced objects and the bindings' ServiceAccount subjects move to it. Cluster-scoped objects
 * (the ClusterRole and its binding) are named after the namespace, as test files share the cluster.
 */
export async function applyManifests(kube: TestKube, namespace: string, manifests: Manifest[]): Promise<void> {
  const objects = KubernetesObjectApi.makeApiClient(kube.admin);
  for (const manifest of manifests) {
    const copy = structuredClone(manifest);
    if (copy.metadata?.namespace) copy.metadata.namespace = namespace;
    if (CLUSTER_SCOPED.has(copy.kind!)) copy.metadata!.name = `${copy.metadata!.name}-${namespace}`;
    if (copy.roleRef?.kind === 'ClusterRole') copy.roleRef.name = `${copy.roleRef.name}-${namespace}`;
    for (const subject of copy.subjects ?? []) if (subject.kind === 'ServiceAccount') subject.namespace = namespace;
    await objects.create(copy);
  }
}

/** Creates the CRDs in a manifest file (once per run: test files share them) and waits until they serve. */
export async function applyCustomResourceDefinitions(kube: TestKube, relativePath: string): Promise<void> {
  const api = kube.admin.makeApiClient(ApiextensionsV1Api);
  for (const crd of await loadManifests(relativePath)) {
    await KubernetesObjectApi.makeApiClient(kube.admin)
      .create(crd)
      .catch((error: { code?: number }) => {
        if (error.code !== 409) throw error;
      });
    for (;;) {
      const { status } = await api.readCustomResourceDefinition({ name: crd.metadata!.name! });
      if (status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** The operator resource of the custom-resource tests: a DorisDisaggregatedCluster "analytics" whose CRD is a test fixture. */
export const computeGroupsRef = (namespace: string) => ({
  group: 'disaggregated.cluster.doris.com',
  version: 'v1',
  plural: 'dorisdisaggregatedclusters',
  namespace,
  name: 'analytics',
});

/** The driver's target for it; the operator is taken to label a group's pods `app.doris.computegroup=GROUP`. */
export const COMPUTE_GROUPS_TARGET: Extract<KubernetesTarget, { kind: 'custom-resource' }> = {
  kind: 'custom-resource',
  name: 'analytics',
  podSelector: (group) => `app.doris.computegroup=${group}`,
};

export interface ComputeGroupsResource {
  metadata: { generation: number };
  spec: { computeGroups: { uniqueId: string; replicas: number; [field: string]: unknown }[] };
}

/** Creates the resource (and its CRD, once per run) in `namespace`. */
export async function createComputeGroups(
  kube: TestKube,
  namespace: string,
  computeGroups: ComputeGroupsResource['spec']['computeGroups'],
): Promise<void> {
  await applyCustomResourceDefinitions(kube, 'test/fixtures/compute-groups-crd.yaml');
  await KubernetesObjectApi.makeApiClient(kube.admin).create({
    apiVersion: 'disaggregated.cluster.doris.com/v1',
    kind: 'DorisDisaggregatedCluster',
    metadata: { name: 'analytics', namespace },
    spec: { computeGroups },
  });
}

export const readComputeGroups = async (kube: TestKube, namespace: string) =>
  (await kube.admin
    .makeApiClient(CustomObjectsApi)
    .getNamespacedCustomObject(computeGroupsRef(namespace))) as ComputeGroupsResource;

/** A real ServiceAccount token (TokenRequest), as a pod of that ServiceAccount would mount. */
export async function serviceAccountToken(kube: TestKube, namespace: string, name: string): Promise<string> {
  const core = kube.admin.makeApiClient(CoreV1Api);
  const request = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  return request.status!.token;
}

/** The StatefulSet as the server holds it. */
export const readStatefulSet = (kube: TestKube, namespace: string, name: string) =>
  kube.admin.makeApiClient(AppsV1Api).readNamespacedStatefulSet({ namespace, name });

export interface AuditEvent {
  verb: string;
  user: { username: string };
  objectRef: { resource: string; namespace: string; name: string; apiGroup?: string };
  responseStatus: { code: number };
}

/** The patches the apiserver audited on one object, in order. */
export async function auditedPatches(kube: TestKube, namespace: string, name: string): Promise<AuditEvent[]> {
  const text = await readFile(kube.auditLog, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as AuditEvent)
    .filter(
      (e) =>
        e.verb === 'patch' &&
        e.objectRef.namespace === namespace &&
        e.objectRef.name === name &&
        !('subresource' in e.objectRef),
    );
}
