/**
 * deploy/k8s's meta, applied as it is to the run's real Kubernetes control plane: the apiserver
 * accepts its Secret, Deployment, PodDisruptionBudget and Service, and the Deployment controller
 * makes two meta pods that read the database's connection from the Secret.
 */
import { CoreV1Api, PolicyV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { applyManifests, createNamespace, loadManifests, testKube } from './helpers/kube.js';

describe('meta on Kubernetes (deploy/k8s)', () => {
  it(
    'runs two meta pods whose database connection comes from a Secret, kept available by a disruption budget',
    { timeout: 120_000 },
    async () => {
      const kube = testKube();
      const namespace = await createNamespace(kube, 'meta');
      const manifests = (await loadManifests('deploy/k8s/berth.yaml')).filter(
        (d) =>
          ['berth', 'berth-meta', 'berth-meta-database'].includes(d.metadata?.name ?? '') && d.kind !== 'Namespace',
      );
      expect(manifests.map((d) => `${d.kind}/${d.metadata!.name}`).sort()).toEqual([
        'ConfigMap/berth',
        'Deployment/berth-meta',
        'PodDisruptionBudget/berth-meta',
        'Secret/berth',
        'Secret/berth-meta-database',
        'Service/berth-meta',
      ]);
      await applyManifests(kube, namespace, manifests);

      const core = kube.admin.makeApiClient(CoreV1Api);
      // No node serves this namespace, so the pods stay pending: what counts is that the controller made two from the template.
      await expect
        .poll(async () => (await core.listNamespacedPod({ namespace, labelSelector: 'app=berth-meta' })).items.length, {
          timeout: 60_000,
        })
        .toBe(2);
      const [pod] = (await core.listNamespacedPod({ namespace, labelSelector: 'app=berth-meta' })).items;
      expect(pod!.spec!.containers[0]!.envFrom).toContainEqual({ secretRef: { name: 'berth-meta-database' } });
      const secret = await core.readNamespacedSecret({ name: 'berth-meta-database', namespace });
      expect(Buffer.from(secret.data!.BERTH_META_DATABASE!, 'base64').toString()).toMatch(/^postgres:\/\//);
      const budget = await kube.admin
        .makeApiClient(PolicyV1Api)
        .readNamespacedPodDisruptionBudget({ name: 'berth-meta', namespace });
      expect(budget.spec!.minAvailable).toBe(1);
    },
  );
});
