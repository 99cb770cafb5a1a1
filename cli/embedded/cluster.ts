/**
 * The embedded cluster that `berth up` runs on one machine: the Temporal dev server and the S3
 * API, then meta, the coordinator, the serving group's query nodes and the Temporal worker as
 * child processes, with
 * every piece of state under one data dir. Starting again on the same dir resumes: the same node
 * identities and caches, manifest, objects and workflow history.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  SERVICE_SCRIPTS,
  startServiceProcess,
  type ServiceProcess,
} from '../../activities/platform/service-process.js';
import { supervise } from '../../activities/platform/supervise.js';
import { MetaClient } from '../../services/meta/client.js';
import { freePort } from './free-port.js';
import { startS3Server, type SeaweedPorts } from './s3-server.js';
import { resolveTemporalCli } from './temporal-cli.js';
import { startTemporalDevServer } from './temporal-server.js';

export interface Endpoints {
  coordinator: string;
  /** The coordinator's PostgreSQL protocol: postgres://HOST:PORT/berth, the token as the password. */
  postgres: string;
  controller: string;
  meta: string;
  s3: string;
  bucket: string;
  temporal: string;
  temporalNamespace: string;
  temporalUi: string;
  /** The console in the browser, served by the coordinator (log in with the token). */
  console: string;
  /** The worker's Temporal SDK metrics, for Prometheus. */
  workerMetrics: string;
  /** The heavy groups: `scan` scales out by its increment, `memory` is one big backend per launch. */
  heavyGroups: { scan: string; memory: string };
  nodes: { id: string; url: string; vcpus: number }[];
}

export interface EmbeddedClusterOptions {
  dataDir: string;
  /** @default '127.0.0.1' */
  bind?: string;
  /** vCPUs each serving node declares; their count is the number of nodes. */
  vcpus: number[];
  /** Ports; 0 means any free port. */
  temporalPort: number;
  temporalUiPort: number;
  s3Port: number;
  /** SeaweedFS's other ports (master, volume, filer, admin, gRPC); missing or 0: free ones. */
  seaweedPorts?: Partial<Omit<SeaweedPorts, 's3'>>;
  metaPort: number;
  /** Meta's PostgreSQL URL. @default SQLite under dataDir/meta */
  metaDatabase?: string;
  coordinatorPort: number;
  /** The coordinator's PostgreSQL port; 0 means any free port (chosen once, kept across restarts). */
  postgresPort: number;
  bucket: string;
  controllerPort: number;
  /** Each node's cache budget in bytes. @default 1 GiB */
  cacheBytes?: number;
  /** The heavy pool on the local driver: its groups, steps, cap, idle timeout and boot delay. */
  heavy?: {
    /** @default 'heavy' */
    group?: string;
    /** The memory class's group. @default 'heavy-memory' */
    memoryGroup?: string;
    increment?: number;
    maxReplicas?: number;
    idleTimeoutMs?: number;
    bootDelayMs?: number;
    vcpus?: number;
    maxConcurrency?: number;
  };
  /** The routing verdict's thresholds, in bytes. @default the coordinator's */
  verdict?: { scanBytes?: number; memoryBytes?: number };
  log?: (line: string) => void;
}

export interface EmbeddedCluster {
  endpoints: Endpoints;
  /** Rejects when a service kept dying and was given up on: `berth up` then stops everything. */
  failed: Promise<never>;
  stop(): Promise<void>;
}

export const endpointsFile = (dataDir: string) => path.join(dataDir, 'endpoints.json');
export const tokenFile = (dataDir: string) => path.join(dataDir, 'token');
/** The embedded S3 API's credentials (a SeaweedFS identities file, 0600). */
export const s3IdentitiesFile = (dataDir: string) => path.join(dataDir, 's3-identities.json');

/** The cluster's shared token, made once per data dir. */
async function loadOrCreateToken(dataDir: string): Promise<string> {
  try {
    return (await readFile(tokenFile(dataDir), 'utf8')).trim();
  } catch {
    const token = randomBytes(24).toString('hex');
    await writeFile(tokenFile(dataDir), `${token}\n`, { mode: 0o600 });
    return token;
  }
}

export async function startEmbeddedCluster(options: EmbeddedClusterOptions): Promise<EmbeddedCluster> {
  const log = options.log ?? (() => {});
  const bind = options.bind ?? '127.0.0.1';
  const dataDir = path.resolve(options.dataDir);
  await mkdir(path.join(dataDir, 'logs'), { recursive: true });
  const token = await loadOrCreateToken(dataDir);
  const started: { stop(): Promise<void> }[] = [];
  let giveUp: (error: Error) => void = () => {};
  const failed = new Promise<never>((_, reject) => (giveUp = reject));
  failed.catch(() => {});
  const stop = async () => {
    for (const part of started.reverse()) await part.stop().catch(() => {});
  };

  try {
    const executable = await resolveTemporalCli({ log });
    const temporalOptions = {
      executable,
      ip: bind,
      port: options.temporalPort, // 0: free ports, picked again if taken before the server binds them
      uiPort: options.temporalUiPort,
      dbFilename: path.join(dataDir, 'temporal.sqlite'),
    };
    const s3Options = {
      directory: path.join(dataDir, 'seaweedfs'),
      identitiesFile: s3IdentitiesFile(dataDir),
      buckets: [options.bucket],
      address: bind,
      ports: { ...options.seaweedPorts, s3: options.s3Port } as Partial<SeaweedPorts>,
      logFile: path.join(dataDir, 'logs', 'seaweedfs.log'),
      log,
    };
    const [temporal, s3] = await Promise.all([startTemporalDevServer(temporalOptions), startS3Server(s3Options)]);
    // Restarts listen where the first run did: the services keep their addresses.
    const supervision = { log, giveUp };
    started.push(
      supervise(
        'temporal',
        temporal,
        () => startTemporalDevServer({ ...temporalOptions, port: temporal.port, uiPort: temporal.uiPort }),
        supervision,
      ),
      supervise('s3', s3, () => startS3Server({ ...s3Options, ports: s3.ports }), supervision),
    );
    log(`temporal ${temporal.address} (Web UI ${temporal.uiUrl}), s3 ${s3.endpoint}`);

    const heavy = options.heavy ?? {};
    const heavyGroups = { scan: heavy.group ?? 'heavy', memory: heavy.memoryGroup ?? 'heavy-memory' };
    const common = {
      BERTH_TOKEN: token,
      BERTH_TEMPORAL_ADDRESS: temporal.address,
      BERTH_TEMPORAL_NAMESPACE: temporal.namespace,
      BERTH_HEAVY_GROUP: heavyGroups.scan,
      BERTH_HEAVY_MEMORY_GROUP: heavyGroups.memory,
      BERTH_HEAVY_INCREMENT: String(heavy.increment ?? 2),
      BERTH_HEAVY_MAX_REPLICAS: String(heavy.maxReplicas ?? 2),
      BERTH_HEAVY_IDLE_TIMEOUT_MS: String(heavy.idleTimeoutMs ?? 300_000),
      ...(heavy.maxConcurrency ? { BERTH_HEAVY_MAX_CONCURRENCY: String(heavy.maxConcurrency) } : {}),
      BERTH_S3_ENDPOINT: s3.endpoint,
      BERTH_S3_BUCKET: options.bucket,
      BERTH_S3_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      BERTH_S3_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    };
    const service = async (
      name: string,
      script: string,
      env: Record<string, string>,
      portVariable?: string,
    ): Promise<ServiceProcess> => {
      const proc = await startServiceProcess(
        name,
        script,
        { ...common, ...env },
        path.join(dataDir, 'logs', `${name}.log`),
        { portVariable, log, giveUp },
      );
      started.push(proc);
      log(`${name} ${proc.url}`);
      return proc;
    };

    const meta = await service(
      'meta',
      SERVICE_SCRIPTS.meta,
      {
        BERTH_META_DIR: path.join(dataDir, 'meta'),
        BERTH_META_HOST: bind,
        BERTH_META_PORT: String(options.metaPort),
        // Set even when empty: a BERTH_META_DATABASE in the caller's environment must not move berth up off SQLite.
        BERTH_META_DATABASE: options.metaDatabase ?? '',
      },
      'BERTH_META_PORT',
    );
    // The nodes and the coordinator share this machine: each DuckDB gets its share of the cores,
    // not all of them (nor, for a node, the vCPUs it declares as its ownership weight). Measured on
    // 2 cores under bench/load: a node's CPU per query fell by a quarter from 2 threads to 1.
    const duckdbThreads =
      process.env.BERTH_DUCKDB_THREADS ||
      String(Math.max(1, Math.floor(os.availableParallelism() / (options.vcpus.length + 1))));
    const nodes = await Promise.all(
      options.vcpus.map((vcpus, i) =>
        service(
          `query-node-${i}`,
          SERVICE_SCRIPTS['query-node'],
          {
            BERTH_META_URL: meta.url,
            BERTH_NODE_CACHE_DIR: path.join(dataDir, 'nodes', `node-${i}`),
            BERTH_NODE_HOST: bind,
            BERTH_NODE_VCPUS: String(vcpus),
            BERTH_DUCKDB_THREADS: duckdbThreads,
            BERTH_NODE_CACHE_BYTES: String(options.cacheBytes ?? 1024 ** 3),
          },
          'BERTH_NODE_PORT',
        ),
      ),
    );
    // A port chosen now, not by the coordinator: a restarted coordinator keeps the URL endpoints.json gives.
    const postgresPort = options.postgresPort || (await freePort(bind));
    // Chosen now too: the coordinator's console reads the pools' status from the controller, started later.
    const controllerPort = options.controllerPort || (await freePort(bind));
    const coordinator = await service(
      'coordinator',
      SERVICE_SCRIPTS.coordinator,
      {
        BERTH_META_URL: meta.url,
        BERTH_COORDINATOR_DIR: path.join(dataDir, 'coordinator'),
        BERTH_COORDINATOR_HOST: bind,
        BERTH_COORDINATOR_PORT: String(options.coordinatorPort),
        BERTH_PG_PORT: String(postgresPort),
        BERTH_DUCKDB_THREADS: duckdbThreads,
        BERTH_SEED_NODES: nodes.map((n) => n.url).join(','),
        BERTH_CONTROLLER_URL: `http://${bind}:${controllerPort}`,
        BERTH_TEMPORAL_UI_URL: temporal.uiUrl!,
        ...(options.verdict?.scanBytes ? { BERTH_HEAVY_SCAN_BYTES: String(options.verdict.scanBytes) } : {}),
        ...(options.verdict?.memoryBytes ? { BERTH_HEAVY_MEMORY_BYTES: String(options.verdict.memoryBytes) } : {}),
      },
      'BERTH_COORDINATOR_PORT',
    );
    const workerMetrics = `${bind}:${await freePort(bind)}`;
    await service('worker', SERVICE_SCRIPTS.worker, {
      BERTH_META_URL: meta.url,
      BERTH_WORKER_METRICS_ADDRESS: workerMetrics,
      BERTH_WORKER_DIR: path.join(dataDir, 'worker'),
      BERTH_PLATFORM: 'local',
      BERTH_HEAVY_DIR: path.join(dataDir, 'heavy'),
      BERTH_HEAVY_BOOT_DELAY_MS: String(heavy.bootDelayMs ?? 2_000),
      BERTH_HEAVY_VCPUS: String(heavy.vcpus ?? 2),
      BERTH_NODE_CACHE_BYTES: String(options.cacheBytes ?? 1024 ** 3),
    });
    const controller = await service(
      'controller',
      SERVICE_SCRIPTS.controller,
      {
        BERTH_CONTROLLER_HOST: bind,
        BERTH_CONTROLLER_PORT: String(controllerPort),
      },
      'BERTH_CONTROLLER_PORT',
    );
    await awaitMembers(
      new MetaClient(meta.url, token),
      nodes.map((n) => String(n.announced.id)),
    );

    const endpoints: Endpoints = {
      coordinator: coordinator.url,
      postgres: `postgres://${bind}:${postgresPort}/berth`,
      controller: controller.url,
      meta: meta.url,
      s3: s3.endpoint,
      bucket: options.bucket,
      temporal: temporal.address,
      temporalNamespace: temporal.namespace,
      temporalUi: temporal.uiUrl!,
      console: `${coordinator.url}/console/`,
      workerMetrics: `http://${workerMetrics}/metrics`,
      heavyGroups,
      nodes: nodes.map((n, i) => ({ id: String(n.announced.id), url: n.url, vcpus: options.vcpus[i]! })),
    };
    await writeFile(endpointsFile(dataDir), `${JSON.stringify(endpoints, null, 2)}\n`);
    return { endpoints, failed, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Waits until meta lists every node as a live member of the serving group. */
async function awaitMembers(meta: MetaClient, ids: string[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const live = new Set((await meta.members('serving')).map((m) => m.id));
    if (ids.every((id) => live.has(id))) return;
    if (Date.now() > deadline)
      throw new Error(
        `query nodes ${ids.filter((id) => !live.has(id)).join(', ')} did not register within ${timeoutMs} ms`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
