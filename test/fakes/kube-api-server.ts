/**
 * A fake Kubernetes API server: no real one can run here. It serves one custom resource and a pod
 * list, and holds to the real protocol where Berth touches it: PATCH must say
 * `application/json-patch+json` (else 415), the patch is applied with RFC 6902 semantics (a failed
 * `test` is a 422 and changes nothing), a missing resource is a 404 Status, and every accepted patch
 * is recorded so tests can count writes.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import jsonpatch, { type Operation } from 'fast-json-patch';

export interface FakeKubeApi {
  url: string;
  /** The custom resources by "namespace/plural/name". */
  resources: Map<string, CustomResource>;
  /** Pods by namespace: name, labels and phase. */
  pods: { namespace: string; name: string; labels: Record<string, string>; phase: string }[];
  /** Every patch the server accepted, in order. */
  patches: Operation[][];
  /** Every request line, for asserting that nothing else was written. */
  requests: string[];
  /** Runs before a patch is applied: a test's stand-in for the operator editing the resource concurrently. */
  beforePatch?: () => void;
  close(): Promise<void>;
}

/** The little of a custom resource the fake needs to know. */
export interface CustomResource {
  spec: { computeGroups: { uniqueId: string; replicas: number; [field: string]: unknown }[] };
  [field: string]: unknown;
}

const status = (code: number, reason: string, message: string) => ({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message });

export async function startFakeKubeApi(): Promise<FakeKubeApi> {
  const api: Omit<FakeKubeApi, 'url' | 'close'> = { resources: new Map(), pods: [], patches: [], requests: [] };
  const send = (response: ServerResponse, code: number, body: unknown) => {
    response.writeHead(code, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  };
  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://fake');
    api.requests.push(`${request.method} ${url.pathname}`);
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const custom = /^\/apis\/([^/]+)\/([^/]+)\/namespaces\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    if (custom) {
      const [, , , namespace, plural, name] = custom;
      const key = `${namespace}/${plural}/${name}`;
      const resource = api.resources.get(key);
      if (!resource) return send(response, 404, status(404, 'NotFound', `${plural} "${name}" not found`));
      if (request.method === 'GET') return send(response, 200, resource);
      if (request.method === 'PATCH') {
        api.beforePatch?.();
        const current = api.resources.get(key)!;
        const type = (request.headers['content-type'] ?? '').split(';')[0];
        if (type !== 'application/json-patch+json') {
          return send(response, 415, status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got "${type}")`));
        }
        let operations: Operation[];
        try {
          operations = JSON.parse(Buffer.concat(chunks).toString()) as Operation[];
          const patched = jsonpatch.applyPatch(structuredClone(current), operations, true, false).newDocument as CustomResource;
          api.resources.set(key, patched);
        } catch (error) {
          return send(response, 422, status(422, 'Invalid', `the server rejected our request due to an error in our request: ${(error as Error).message}`));
        }
        api.patches.push(operations);
        return send(response, 200, api.resources.get(key));
      }
      return send(response, 405, status(405, 'MethodNotAllowed', `${request.method} is not allowed here`));
    }
    const pods = /^\/api\/v1\/namespaces\/([^/]+)\/pods$/.exec(url.pathname);
    if (pods && request.method === 'GET') {
      const selector = Object.fromEntries((url.searchParams.get('labelSelector') ?? '').split(',').filter(Boolean).map((s) => s.split('=')));
      const items = api.pods
        .filter((p) => p.namespace === pods[1] && Object.entries(selector).every(([k, v]) => p.labels[k] === v))
        .map((p) => ({ metadata: { name: p.name, namespace: p.namespace, labels: p.labels }, status: { phase: p.phase } }));
      return send(response, 200, { kind: 'PodList', apiVersion: 'v1', metadata: {}, items });
    }
    return send(response, 404, status(404, 'NotFound', `no route for ${request.method} ${url.pathname}`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // The same object the handler reads, so that tests can set beforePatch on it.
  return Object.assign(api, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}
