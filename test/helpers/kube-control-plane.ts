/**
 * A real Kubernetes control plane for the test run: etcd, kube-apiserver (RBAC on, a static token
 * for an admin, ServiceAccount tokens signed by its own key, an audit log of patches),
 * kube-controller-manager (so a StatefulSet's replicas become pods) and kube-scheduler (so pods are
 * placed on nodes by their requests, selectors and taints, and the ones that fit nowhere get the
 * scheduler's own FailedScheduling events), on free loopback ports. No kubelet:
 * test/helpers/test-nodes.ts creates Node objects, and test/helpers/test-kubelet.ts runs the pods the
 * scheduler places on its node.
 *
 * Test files share the control plane but never each other's nodes: the apiserver runs the
 * PodNodeSelector admission plugin, and each test namespace (test/helpers/kube.ts) carries a node
 * selector that only its own nodes' labels match.
 *
 * etcd, the apiserver, controller-manager and scheduler are built by scripts/kube-control-plane.sh
 * into a cache outside the repo (BERTH_ETCD names another etcd). Under CI=true missing binaries
 * fail the run (the CI script builds them first); elsewhere the script builds them once (about 15
 * minutes).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { openSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../cli/embedded/free-port.js';

const BUILD_SCRIPT = fileURLToPath(new URL('../../scripts/kube-control-plane.sh', import.meta.url));

export interface KubeBinaries {
  apiserver: string;
  controllerManager: string;
  scheduler: string;
  etcd: string;
}

export interface KubeControlPlane {
  /** The apiserver's https URL (its serving certificate is self-signed: skip verification). */
  server: string;
  /** A bearer token in system:masters. */
  adminToken: string;
  /** The apiserver's audit log: one JSON event per line, for every patch of a workload or custom resource. */
  auditLog: string;
  stop(): Promise<void>;
}

/**
 * Finds the binaries, building the missing ones first unless `mustExist`
 * (CI, where .ci/run built them and a missing one is a broken setup, not a reason to skip). The
 * script says on stderr when it builds.
 */
export async function resolveKubeBinaries(options: { mustExist: boolean }): Promise<KubeBinaries> {
  const env = { ...process.env, ...(options.mustExist ? { BERTH_KUBE_CHECK_ONLY: '1' } : {}) };
  const dir = await new Promise<string>((resolve, reject) => {
    const child = spawn('bash', [BUILD_SCRIPT], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0
        ? resolve(stdout.trim())
        : reject(
            new Error(`scripts/kube-control-plane.sh exited with ${code}: the Kubernetes control plane is not built`),
          ),
    );
  });
  return {
    apiserver: path.join(dir, 'kube-apiserver'),
    controllerManager: path.join(dir, 'kube-controller-manager'),
    scheduler: path.join(dir, 'kube-scheduler'),
    etcd: process.env.BERTH_ETCD ?? path.join(dir, 'etcd'),
  };
}

/**
 * A child process whose output goes to a log file, stopped with SIGTERM (SIGKILL after a grace
 * period). Started through util-linux's setpriv so that the kernel kills it if the test run dies
 * without tearing down.
 */
function startProcess(
  executable: string,
  args: string[],
  logFile: string,
): { child: ChildProcess; exited: Promise<unknown>; stop(): Promise<void> } {
  const log = openSync(logFile, 'a');
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', executable, ...args], { stdio: ['ignore', log, log] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    child,
    exited,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A kubeconfig file's text for one token (the apiserver's certificate is self-signed: not verified). */
export const kubeConfigYaml = (server: string, token: string) =>
  `apiVersion: v1\nkind: Config\nclusters: [{ name: test, cluster: { server: "${server}", insecure-skip-tls-verify: true } }]\nusers: [{ name: user, user: { token: "${token}" } }]\ncontexts: [{ name: test, context: { cluster: test, user: user } }]\ncurrent-context: test\n`;

/** GET over https (with a bearer token when given), accepting the apiserver's self-signed certificate. */
export function kubeGet(url: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = https.get(
      url,
      { headers: token ? { authorization: `Bearer ${token}` } : {}, rejectUnauthorized: false, timeout: 5_000 },
      (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      },
    );
    request.once('timeout', () => request.destroy(new Error(`GET ${url} timed out`)));
    request.once('error', reject);
  });
}

/** Waits until `probe` answers true, or throws naming what never came up (with the tail of its log). */
async function waitFor(
  what: string,
  logFile: string,
  exited: Promise<unknown>,
  probe: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  let dead = false;
  void exited.then(() => (dead = true));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (dead || Date.now() > deadline) {
      const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-15).join('\n');
      throw new Error(
        `${what} ${dead ? 'exited' : `was not ready within ${timeoutMs} ms`}; the end of ${logFile}:\n${tail}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export async function startKubeControlPlane(options: {
  binaries: KubeBinaries;
  dir: string;
  startTimeoutMs?: number;
}): Promise<KubeControlPlane> {
  const { binaries, dir } = options;
  const timeoutMs = options.startTimeoutMs ?? 120_000;
  await mkdir(dir, { recursive: true });
  const file = (name: string) => path.join(dir, name);
  const adminToken = randomBytes(24).toString('hex');
  const managerToken = randomBytes(24).toString('hex');
  const schedulerToken = randomBytes(24).toString('hex');
  // The key that signs and verifies ServiceAccount tokens (TokenRequest answers with real ones).
  await writeFile(
    file('sa.key'),
    generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
  );
  await writeFile(
    file('tokens.csv'),
    `${adminToken},admin,admin,"system:masters"\n${managerToken},system:kube-controller-manager,kcm,"system:masters"\n${schedulerToken},system:kube-scheduler,scheduler,"system:masters"\n`,
  );
  // Every patch of a workload or custom resource, with who made it and what the server answered.
  await writeFile(
    file('audit-policy.yaml'),
    [
      'apiVersion: audit.k8s.io/v1',
      'kind: Policy',
      'omitStages: [RequestReceived]',
      'rules:',
      '  - level: Metadata',
      '    verbs: [patch]',
      '    resources: [{ group: apps }, { group: disaggregated.cluster.doris.com }]',
      '  - level: None',
      '',
    ].join('\n'),
  );

  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const server = `https://127.0.0.1:${apiPort}`;
  const started: { stop(): Promise<void> }[] = [];
  const stop = async () => {
    for (const p of started.reverse()) await p.stop();
  };
  try {
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const etcd = startProcess(
      binaries.etcd,
      [
        '--name',
        'berth-test',
        '--data-dir',
        file('etcd'),
        '--listen-client-urls',
        etcdUrl,
        '--advertise-client-urls',
        etcdUrl,
        '--listen-peer-urls',
        `http://127.0.0.1:${peerPort}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${peerPort}`,
        '--initial-cluster',
        `berth-test=http://127.0.0.1:${peerPort}`,
        '--logger',
        'zap',
        '--log-level',
        'warn',
        // A test store: no fsync per write on a busy shared disk.
        '--unsafe-no-fsync',
      ],
      file('etcd.log'),
    );
    started.push(etcd);
    await waitFor('etcd', file('etcd.log'), etcd.exited, async () => (await fetch(`${etcdUrl}/health`)).ok, timeoutMs);

    const apiserver = startProcess(
      binaries.apiserver,
      [
        '--etcd-servers',
        etcdUrl,
        '--bind-address',
        '127.0.0.1',
        '--advertise-address',
        '127.0.0.1',
        '--secure-port',
        String(apiPort),
        '--cert-dir',
        file('certs'),
        '--authorization-mode',
        'RBAC',
        '--token-auth-file',
        file('tokens.csv'),
        '--service-account-key-file',
        file('sa.key'),
        '--service-account-signing-key-file',
        file('sa.key'),
        '--service-account-issuer',
        'https://kubernetes.default.svc.cluster.local',
        // No kubelets, so no endpoints for the kubernetes Service to reconcile.
        '--endpoint-reconciler-type',
        'none',
        '--audit-policy-file',
        file('audit-policy.yaml'),
        '--audit-log-path',
        file('audit.log'),
        '--audit-log-format',
        'json',
        // Each test namespace's pods land only on that test's nodes (see the header).
        '--enable-admission-plugins',
        'PodNodeSelector',
        '--profiling=false',
      ],
      file('kube-apiserver.log'),
    );
    started.push(apiserver);
    await waitFor(
      'kube-apiserver',
      file('kube-apiserver.log'),
      apiserver.exited,
      async () => (await kubeGet(`${server}/readyz`, adminToken)).status === 200,
      timeoutMs,
    );

    await writeFile(file('controller-manager.kubeconfig'), kubeConfigYaml(server, managerToken));
    await writeFile(file('scheduler.kubeconfig'), kubeConfigYaml(server, schedulerToken));
    // No --root-ca-file: the apiserver's self-signed serving certificate is not a CA.
    const manager = startProcess(
      binaries.controllerManager,
      [
        '--kubeconfig',
        file('controller-manager.kubeconfig'),
        '--leader-elect=false',
        '--secure-port',
        '0',
        '--service-account-private-key-file',
        file('sa.key'),
        '--profiling=false',
      ],
      file('kube-controller-manager.log'),
    );
    started.push(manager);
    // The scheduler's port is picked as it starts, and picked again if another process took it
    // meanwhile (other servers start beside the control plane on free ports too).
    const startScheduler = async (attempt: number) => {
      const port = await freePort();
      const log = file(attempt === 1 ? 'kube-scheduler.log' : `kube-scheduler-${attempt}.log`);
      const process = startProcess(
        binaries.scheduler,
        [
          '--kubeconfig',
          file('scheduler.kubeconfig'),
          '--leader-elect=false',
          // Served only for its /readyz (always allowed, so no authentication set-up).
          '--bind-address',
          '127.0.0.1',
          '--secure-port',
          String(port),
          '--cert-dir',
          file('scheduler-certs'),
          '--profiling=false',
        ],
        log,
      );
      started.push(process);
      let exited = false;
      void process.exited.then(() => (exited = true));
      // Bound, or gone because its port was taken: its log says which.
      for (const deadline = Date.now() + timeoutMs; Date.now() < deadline && !exited;) {
        const text = await readFile(log, 'utf8').catch(() => '');
        if (text.includes('Serving securely on')) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const taken = exited && (await readFile(log, 'utf8').catch(() => '')).includes('address already in use');
      return { process, port, log, taken };
    };
    let scheduler = await startScheduler(1);
    for (let attempt = 2; scheduler.taken && attempt <= 3; attempt++) scheduler = await startScheduler(attempt);
    // Both start side by side. Running controllers show: the ServiceAccount controller gives every
    // namespace its "default". The scheduler is ready once its informers have synced.
    await Promise.all([
      waitFor(
        'kube-controller-manager',
        file('kube-controller-manager.log'),
        manager.exited,
        async () =>
          (await kubeGet(`${server}/api/v1/namespaces/default/serviceaccounts/default`, adminToken)).status === 200,
        timeoutMs,
      ),
      waitFor(
        'kube-scheduler',
        scheduler.log,
        scheduler.process.exited,
        async () => (await kubeGet(`https://127.0.0.1:${scheduler.port}/readyz`)).status === 200,
        timeoutMs,
      ),
    ]);
  } catch (error) {
    await stop();
    throw error;
  }
  return { server, adminToken, auditLog: file('audit.log'), stop };
}
