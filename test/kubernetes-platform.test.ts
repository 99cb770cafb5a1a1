import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ComputeGroupNotFoundError } from '../activities/platform/compute-platform.js';
import { KubernetesPlatform } from '../activities/platform/kubernetes-platform.js';
import { startFakeKubeApi, type FakeKubeApi } from './fakes/kube-api-server.js';

const KEY = 'doris/dorisdisaggregatedclusters/analytics';

function cluster(groups: { uniqueId: string; replicas: number }[]) {
  return {
    apiVersion: 'disaggregated.cluster.doris.com/v1',
    kind: 'DorisDisaggregatedCluster',
    metadata: { name: 'analytics', namespace: 'doris' },
    spec: { computeGroups: groups.map((g) => ({ ...g, image: 'apache/doris:be-3.0' })) },
  };
}

describe('the Kubernetes platform driver', () => {
  let api: FakeKubeApi;
  let platform: KubernetesPlatform;

  beforeEach(async () => {
    api = await startFakeKubeApi();
    api.resources.set(KEY, cluster([{ uniqueId: 'serving', replicas: 3 }, { uniqueId: 'heavy', replicas: 0 }]));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'fake', server: api.url, skipTLSVerify: true }],
      users: [{ name: 'berth' }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'berth' }],
      currentContext: 'fake',
    });
    platform = new KubernetesPlatform({ kubeConfig, namespace: 'doris', name: 'analytics' });
  });
  afterEach(() => api.close());

  it('sets a group’s replicas with one JSON patch that tests the group’s index first', async () => {
    expect(await platform.setReplicas('heavy', 4)).toEqual({ changed: true, previous: 0 });
    expect(api.patches).toEqual([
      [
        { op: 'test', path: '/spec/computeGroups/1/uniqueId', value: 'heavy' },
        { op: 'replace', path: '/spec/computeGroups/1/replicas', value: 4 },
      ],
    ]);
    const resource = api.resources.get(KEY)!;
    expect(resource.spec.computeGroups.map((g) => g.replicas)).toEqual([3, 4]);
    expect(resource.spec.computeGroups[1]!.image).toBe('apache/doris:be-3.0'); // nothing else changed
    expect(await platform.replicas('heavy')).toBe(4);
  });

  it('writes nothing when the target is already set', async () => {
    await platform.setReplicas('heavy', 2);
    expect(await platform.setReplicas('heavy', 2)).toEqual({ changed: false, previous: 2 });
    expect(api.patches).toHaveLength(1);
    expect(api.requests.filter((r) => !r.startsWith('GET'))).toEqual(['PATCH /apis/disaggregated.cluster.doris.com/v1/namespaces/doris/dorisdisaggregatedclusters/analytics']);
  });

  it('names a group missing from the custom resource', async () => {
    await expect(platform.setReplicas('reporting', 2)).rejects.toThrow(ComputeGroupNotFoundError);
    await expect(platform.setReplicas('reporting', 2)).rejects.toThrow(/compute group "reporting" is not in dorisdisaggregatedclusters\/analytics .* it has: serving, heavy/);
    expect(api.patches).toHaveLength(0);
  });

  it('fails with the API’s 404 when the custom resource does not exist', async () => {
    api.resources.clear();
    await expect(platform.setReplicas('heavy', 1)).rejects.toMatchObject({ code: 404 });
  });

  it('lets a failed test change nothing, then patches the group where it moved to', async () => {
    // The operator reorders the groups between the driver's read and its patch, once.
    api.beforePatch = () => {
      api.resources.set(KEY, cluster([{ uniqueId: 'heavy', replicas: 0 }, { uniqueId: 'serving', replicas: 3 }]));
      api.beforePatch = undefined;
    };
    expect(await platform.setReplicas('heavy', 2)).toMatchObject({ changed: true });
    expect(api.resources.get(KEY)!.spec.computeGroups).toEqual([expect.objectContaining({ uniqueId: 'heavy', replicas: 2 }), expect.objectContaining({ uniqueId: 'serving', replicas: 3 })]);
    expect(api.patches).toHaveLength(1);
  });

  it('counts only running pods of the group', async () => {
    api.pods.push(
      { namespace: 'doris', name: 'heavy-0', labels: { 'app.doris.computegroup': 'heavy' }, phase: 'Running' },
      { namespace: 'doris', name: 'heavy-1', labels: { 'app.doris.computegroup': 'heavy' }, phase: 'Pending' },
      { namespace: 'doris', name: 'serving-0', labels: { 'app.doris.computegroup': 'serving' }, phase: 'Running' },
    );
    expect(await platform.runningPods('heavy')).toBe(1);
  });
});

describe('the fake API server', () => {
  it('holds to the protocol: 415 for a patch that is not a JSON patch', async () => {
    const api = await startFakeKubeApi();
    api.resources.set(KEY, cluster([{ uniqueId: 'heavy', replicas: 0 }]));
    const response = await fetch(`${api.url}/apis/disaggregated.cluster.doris.com/v1/namespaces/doris/dorisdisaggregatedclusters/analytics`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: {} }),
    });
    expect(response.status).toBe(415);
    expect(api.patches).toHaveLength(0);
    await api.close();
  });
});
