/**
 * docker-compose.yml and deploy/k8s are written for users and cannot run here (no Docker engine,
 * no cluster), so this test holds them to the project: every Berth image is built by the project's
 * Dockerfile, every command runs a script the build produces, every BERTH_* variable is one the
 * code reads, third-party images are pinned, and the worker's RBAC is exactly what the heavy pool
 * needs.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../services/common/config.js';
import { QueryNodeConfig } from '../services/query-node/config.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCE_DIRS = ['core', 'services', 'activities', 'workflows', 'workers', 'cli'];

type Doc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function sourceText(): Promise<string> {
  const texts: string[] = [];
  const walk = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.name.endsWith('.ts')) texts.push(await readFile(full, 'utf8'));
    }
  };
  for (const dir of SOURCE_DIRS) await walk(path.join(ROOT, dir));
  return texts.join('\n');
}

/** The variables a compose service reads from its env_file(s). */
async function envFiles(service: Doc): Promise<Record<string, string>> {
  const vars: Record<string, string> = {};
  for (const file of [service.env_file ?? []].flat() as string[]) {
    for (const line of (await readFile(path.join(ROOT, file), 'utf8')).split('\n')) {
      const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
      if (match) vars[match[1]!] = match[2]!;
    }
  }
  return vars;
}

const load = async (file: string): Promise<Doc[]> =>
  parseAllDocuments(await readFile(path.join(ROOT, file), 'utf8'), { merge: true }).map(
    (d) => d.toJS({ maxAliasCount: -1 }) as Doc,
  );

/** A container as both files describe one: image, command, environment variable names. */
interface Container {
  where: string;
  image: string;
  command: string[];
  env: string[];
}

describe('docker-compose.yml and deploy/k8s', () => {
  let source: string;
  let containers: Container[];
  let k8s: Doc[];

  beforeAll(async () => {
    source = await sourceText();
    const [compose] = await load('docker-compose.yml');
    containers = await Promise.all(
      Object.entries(compose!.services as Record<string, Doc>).map(async ([name, service]) => ({
        where: `compose service ${name}`,
        image: service.image,
        command: service.command ?? [],
        env: [...Object.keys(service.environment ?? {}), ...Object.keys(await envFiles(service))],
      })),
    );
    k8s = [];
    for (const file of await readdir(path.join(ROOT, 'deploy/k8s'))) k8s.push(...(await load(`deploy/k8s/${file}`)));
    const configMapKeys = k8s
      .filter((d) => d.kind === 'ConfigMap' || d.kind === 'Secret')
      .flatMap((d) => Object.keys(d.data ?? d.stringData ?? {}));
    for (const doc of k8s) {
      for (const c of (doc.spec?.template?.spec?.containers ?? []) as Doc[]) {
        containers.push({
          where: `${doc.kind} ${doc.metadata.name}`,
          image: c.image,
          command: c.command ?? [],
          env: [...(c.env ?? []).map((e: Doc) => e.name), ...configMapKeys],
        });
      }
    }
  });

  it('builds every Berth image from the project’s Dockerfile and pins every other image', () => {
    expect(existsSync(path.join(ROOT, 'Dockerfile'))).toBe(true);
    for (const c of containers) {
      expect(c.image, c.where).toMatch(/^[\w./-]+:[\w.-]+$/);
      expect(c.image.endsWith(':latest') && !c.image.startsWith('berth:'), `${c.where} pins its image`).toBe(false);
    }
    expect(containers.filter((c) => c.image.startsWith('berth:')).length).toBeGreaterThanOrEqual(7);
  });

  it('runs only scripts the build produces', () => {
    for (const c of containers.filter((x) => x.image.startsWith('berth:'))) {
      expect(c.command[0], c.where).toBe('node');
      const script = c.command[1]!;
      expect(script, c.where).toMatch(/^dist\/.+\.js$/);
      expect(
        existsSync(path.join(ROOT, script.replace(/^dist\//, '').replace(/\.js$/, '.ts'))),
        `${c.where}: ${script} is built from a source file`,
      ).toBe(true);
    }
  });

  it('sets only BERTH_* variables that the code reads', () => {
    const names = new Set(containers.filter((c) => c.image.startsWith('berth:')).flatMap((c) => c.env));
    expect(names.size).toBeGreaterThan(10);
    for (const name of names) {
      expect(name, 'Berth containers set only BERTH_* variables').toMatch(/^BERTH_/);
      expect(
        source.includes(`'${name}'`) || source.includes(`.${name}`) || source.includes(`${name}:`),
        `${name} is read by the code`,
      ).toBe(true);
    }
  });

  it('has three query nodes with different CPU limits in compose', async () => {
    const [compose] = await load('docker-compose.yml');
    const cpus = Object.entries(compose!.services as Record<string, Doc>)
      .filter(([name]) => name.startsWith('query-node'))
      .map(([, s]) => s.cpus);
    expect(cpus).toHaveLength(3);
    expect(new Set(cpus).size).toBeGreaterThan(1);
  });

  it('runs `berth setup` once before the worker and controller start (compose) and as a Job (Kubernetes)', async () => {
    const [compose] = await load('docker-compose.yml');
    const services = compose!.services as Record<string, Doc>;
    const setup = Object.entries(services).filter(
      ([, s]) => (s.command ?? []).join(' ') === 'node dist/cli/main.js setup',
    );
    expect(setup).toHaveLength(1);
    const [name, service] = setup[0]!;
    expect(service.restart).toBe('no');
    for (const waiting of ['worker', 'controller'])
      expect(services[waiting]!.depends_on[name], waiting).toEqual({ condition: 'service_completed_successfully' });
    const job = k8s.find((d) => d.kind === 'Job')!;
    expect(job.spec.template.spec.containers[0].command).toEqual(['node', 'dist/cli/main.js', 'setup']);
    expect(job.spec.template.spec.restartPolicy).toBe('OnFailure');
  });

  it('runs two meta replicas on PostgreSQL, its connection kept in an env file or a Secret, and gives every service both', async () => {
    const [compose] = await load('docker-compose.yml');
    const services = Object.entries(compose!.services as Record<string, Doc>);
    const metas = services.filter(([, s]) => s.command?.[1] === 'dist/services/meta/main.js');
    expect(metas.length).toBeGreaterThanOrEqual(2);
    for (const [name, meta] of metas) {
      expect(
        meta.environment?.BERTH_META_DATABASE,
        `${name} keeps the connection out of the compose file`,
      ).toBeUndefined();
      expect((await envFiles(meta)).BERTH_META_DATABASE, name).toMatch(/^postgres:\/\/[^@]+@postgres:5432\//);
    }
    for (const [name, service] of services.filter(([, s]) => s.image?.startsWith('berth:'))) {
      expect(service.environment.BERTH_META_URL.split(','), name).toEqual(metas.map(([meta]) => `http://${meta}:7400`));
    }

    const meta = k8s.find((d) => d.kind === 'Deployment' && d.metadata.name === 'berth-meta')!;
    expect(meta.spec.replicas).toBeGreaterThanOrEqual(2);
    const container = meta.spec.template.spec.containers[0];
    const secrets = container.envFrom.filter((e: Doc) => e.secretRef).map((e: Doc) => e.secretRef.name);
    expect(
      k8s.some(
        (d) =>
          d.kind === 'Secret' &&
          secrets.includes(d.metadata.name) &&
          /^postgres:\/\//.test(d.stringData?.BERTH_META_DATABASE ?? ''),
      ),
    ).toBe(true);
    expect(k8s.some((d) => d.kind === 'ConfigMap' && d.data?.BERTH_META_DATABASE)).toBe(false);
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(k8s.find((d) => d.kind === 'PodDisruptionBudget')?.spec).toEqual({
      minAvailable: 1,
      selector: { matchLabels: { app: 'berth-meta' } },
    });
  });

  it('grants the worker get and patch on the heavy workloads, reading pods and events, and listing nodes for preflight, nothing else', () => {
    const role = k8s.find((d) => d.kind === 'Role')!;
    expect(role.rules).toEqual([
      {
        apiGroups: ['apps'],
        resources: ['statefulsets'],
        resourceNames: ['berth-heavy', 'berth-heavy-memory'],
        verbs: ['get', 'patch'],
      },
      { apiGroups: [''], resources: ['pods', 'events'], verbs: ['list', 'watch'] },
    ]);
    const clusterRole = k8s.find((d) => d.kind === 'ClusterRole')!;
    expect(clusterRole.rules).toEqual([{ apiGroups: [''], resources: ['nodes'], verbs: ['list'] }]);
    const binding = k8s.find((d) => d.kind === 'ClusterRoleBinding')!;
    expect(binding).toMatchObject({
      roleRef: { kind: 'ClusterRole', name: clusterRole.metadata.name },
      subjects: [{ kind: 'ServiceAccount', name: 'berth-worker', namespace: role.metadata.namespace }],
    });
    const settings = k8s.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'berth')!.data!;
    const worker = k8s.find((d) => d.kind === 'Deployment' && d.metadata.name === 'berth-worker')!;
    expect(worker.spec.template.spec.serviceAccountName).toBe('berth-worker');
    for (const [name, group, variable] of [
      ['berth-heavy', settings.BERTH_HEAVY_GROUP, 'BERTH_K8S_WORKLOAD'],
      ['berth-heavy-memory', settings.BERTH_HEAVY_MEMORY_GROUP, 'BERTH_K8S_MEMORY_WORKLOAD'],
    ] as const) {
      const workload = k8s.find((d) => d.kind === 'StatefulSet' && d.metadata.name === name)!;
      expect(workload.metadata.namespace).toBe(role.metadata.namespace);
      expect(workload.spec).toMatchObject({
        replicas: 0,
        podManagementPolicy: 'Parallel',
        selector: { matchLabels: { app: name } },
      });
      expect(workload.spec.template.spec.containers[0].env).toContainEqual({ name: 'BERTH_NODE_GROUP', value: group });
      expect(worker.spec.template.spec.containers[0].env).toContainEqual({
        name: variable,
        value: `statefulset/${name}`,
      });
    }
  });

  it('makes the memory class one bigger backend whose DuckDB limits are shares of its own container', () => {
    const container = (name: string) =>
      k8s.find((d) => d.kind === 'StatefulSet' && d.metadata.name === name)!.spec.template.spec.containers[0];
    const gib = (quantity: string) => Number(/^(\d+)Gi$/.exec(quantity)![1]);
    const [scan, memory] = [container('berth-heavy'), container('berth-heavy-memory')];
    expect(gib(memory.resources.limits.memory)).toBeGreaterThanOrEqual(4 * gib(scan.resources.limits.memory));
    expect(memory.resources.requests).toEqual(memory.resources.limits); // Guaranteed: never the first evicted
    const env = Object.fromEntries(
      memory.env
        .filter((e: { value?: string }) => e.value !== undefined)
        .map((e: { name: string; value: string }) => [e.name, e.value]),
    );
    const config = parseConfig(QueryNodeConfig, { BERTH_TOKEN: 't', BERTH_META_URL: 'http://meta:7400', ...env });
    const share = (limit?: string) => Number(/^(\d+)%$/.exec(limit ?? '')?.[1]);
    // Both engines' shares leave room for Node and the memory tier inside the container's limit.
    expect(share(config.BERTH_FINAL_STAGE_MEMORY_LIMIT) + share(config.BERTH_DUCKDB_MEMORY_LIMIT)).toBeLessThanOrEqual(
      85,
    );
    expect(share(config.BERTH_FINAL_STAGE_MEMORY_LIMIT)).toBeGreaterThan(share(config.BERTH_DUCKDB_MEMORY_LIMIT));
    expect(config.BERTH_FINAL_STAGE_TEMP_LIMIT).toBeDefined();
  });
});
