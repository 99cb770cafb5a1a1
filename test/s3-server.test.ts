/**
 * The embedded S3 API (SeaweedFS) as an attacker on this machine would meet it: no anonymous
 * reads or writes, wrong keys refused, the malformed multipart request that crashed s3rver
 * (CVE-2022-24434) answered with an error, every other port (gRPC for `weed shell`, the filer's,
 * master's and volume servers' HTTP) closed to anyone without SeaweedFS's own keys; and as an operator would: credentials kept 0600 across restarts with the
 * objects, the ports asked for, and nothing left running when its parent dies.
 */
import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../cli/embedded/free-port.js';
import {
  launchWeed,
  pickSeaweedPorts,
  resolveWeed,
  seaweedPortFlags,
  startS3Server,
  type S3Server,
  type SeaweedPorts,
} from '../cli/embedded/s3-server.js';
import { createS3Client } from '../services/common/s3-client.js';

const BOUNDARY = '----WebKitFormBoundaryoo6vortfDzBsDiro';
// A part header that starts with a space: dicer (under busboy, under s3rver) threw on it and took the process down.
const MALFORMED_MULTIPART = `--${BOUNDARY}\r\n Content-Disposition: form-data; name="bildbeschreibung"\r\n\r\n\r\n--${BOUNDARY}--`;

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** `weed shell` run in `cwd`: it reads security.toml from there, so elsewhere it has no keys. */
async function weedShell(ports: SeaweedPorts, commands: string, cwd: string): Promise<string> {
  const weed = await resolveWeed();
  const args = [
    'shell',
    `-master=127.0.0.1:${ports.master}.${ports.masterGrpc}`,
    `-filer=127.0.0.1:${ports.filer}.${ports.filerGrpc}`,
  ];
  return new Promise<string>((resolve) => {
    // Without keys it retries the handshake until killed.
    const child = execFile(weed, args, { cwd, timeout: 8_000 }, (_error, stdout, stderr) =>
      resolve(`${stdout}${stderr}`),
    );
    child.stdin!.end(`${commands}\nexit\n`);
  });
}

describe('the embedded S3 API on the run’s server', () => {
  const endpoint = inject('s3Endpoint');
  const bucket = inject('s3Bucket');
  const s3 = createS3Client({ endpoint, credentials: inject('s3Credentials') });
  const key = `tables/probe/${randomUUID()}.parquet`;

  beforeAll(async () => {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'PAR1 not for strangers' }));
  });
  afterAll(() => s3.destroy());

  it('refuses anonymous GET and PUT, and keeps nothing an anonymous PUT sent', async () => {
    expect((await fetch(`${endpoint}/${bucket}/${key}`)).status).toBe(403);
    expect((await fetch(`${endpoint}/${bucket}?list-type=2`)).status).toBe(403);
    const planted = `tables/probe/planted-${randomUUID()}.parquet`;
    expect((await fetch(`${endpoint}/${bucket}/${planted}`, { method: 'PUT', body: 'evil' })).status).toBe(403);
    await expect(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: planted }))).rejects.toMatchObject({
      name: 'NotFound',
    });
  });

  it('refuses a key it does not know', async () => {
    const stranger = createS3Client({ endpoint, credentials: { accessKeyId: 'NOT-A-KEY', secretAccessKey: 'nope' } });
    await expect(stranger.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).rejects.toMatchObject({
      name: 'InvalidAccessKeyId',
    });
    stranger.destroy();
  });

  it('answers the malformed multipart POST that crashed s3rver with an error, and keeps serving', async () => {
    expect(Buffer.byteLength(MALFORMED_MULTIPART)).toBeLessThan(160);
    const response = await fetch(`${endpoint}/${bucket}`, {
      method: 'POST',
      headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
      body: MALFORMED_MULTIPART,
    });
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('<Code>MalformedPOSTRequest</Code>');
    const object = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    expect(await object.Body!.transformToString()).toBe('PAR1 not for strangers');
  });
});

describe('an embedded S3 API of its own', () => {
  let dir: string;
  let server: S3Server | undefined;
  const identitiesFile = () => path.join(dir, 'identities.json');
  const start = (ports = {}) =>
    startS3Server({
      directory: path.join(dir, 'data'),
      identitiesFile: identitiesFile(),
      buckets: ['own-bucket'],
      ports,
    });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-s3-'));
  });
  afterAll(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('listens on the ports it is given and on free ones for the rest', async () => {
    const s3Port = await freePort();
    server = await start({ s3: s3Port });
    expect(server.endpoint).toBe(`http://127.0.0.1:${s3Port}`);
    expect(new Set(Object.values(server.ports)).size).toBe(Object.keys(server.ports).length);
    for (const port of Object.values(server.ports)) expect(await accepts(port), `port ${port}`).toBe(true);

    const s3 = createS3Client({ endpoint: server.endpoint, credentials: server.credentials });
    await s3.send(new PutObjectCommand({ Bucket: 'own-bucket', Key: 'kept.txt', Body: 'kept' }));
    s3.destroy();
  });

  it('lets no one without its keys list or delete anything: weed shell, the filer, the master, the volumes', async () => {
    const { ports } = server!;
    const stranger = await weedShell(ports, 'fs.ls /buckets/own-bucket\nfs.rm -r /buckets/own-bucket', dir);
    expect(stranger).not.toContain('kept.txt');
    expect(await weedShell(ports, 'fs.ls /buckets/own-bucket', path.join(dir, 'data'))).toContain('kept.txt');

    // Every HTTP port but the gateway is TLS with client certificates, and the JWTs behind it.
    const plain = [
      `http://127.0.0.1:${ports.filer}/buckets/own-bucket/kept.txt`,
      `http://127.0.0.1:${ports.master}/col/delete?collection=own-bucket`,
      `http://127.0.0.1:${ports.volume}/status`,
    ];
    for (const url of plain) expect((await fetch(url, { method: 'POST' })).status, url).toBe(400);
    for (const port of [ports.filer, ports.master, ports.volume])
      await expect(
        new Promise((resolve, reject) =>
          https
            .get(`https://127.0.0.1:${port}/col/delete?collection=own-bucket`, { rejectUnauthorized: false }, resolve)
            .once('error', reject),
        ),
        `https on ${port} without a client certificate`,
      ).rejects.toThrow();

    const s3 = createS3Client({ endpoint: server!.endpoint, credentials: server!.credentials });
    const object = await s3.send(new GetObjectCommand({ Bucket: 'own-bucket', Key: 'kept.txt' }));
    expect(await object.Body!.transformToString()).toBe('kept');
    s3.destroy();
  });

  it('keeps its credentials 0600 and its objects across a restart', async () => {
    const before = server!.credentials;
    expect((await stat(identitiesFile())).mode & 0o777).toBe(0o600);
    await server!.stop();
    server = await start();
    expect(server.credentials).toEqual(before);
    const s3 = createS3Client({ endpoint: server.endpoint, credentials: server.credentials });
    const object = await s3.send(new GetObjectCommand({ Bucket: 'own-bucket', Key: 'kept.txt' }));
    expect(await object.Body!.transformToString()).toBe('kept');
    s3.destroy();
    await server.stop();
    expect(await accepts(server.ports.s3)).toBe(false);
    server = undefined;
  });

  it('dies with the process that started it, even one killed with SIGKILL', async () => {
    const module = new URL('../dist/cli/embedded/s3-server.js', import.meta.url).href;
    const script = `const { startS3Server } = await import(${JSON.stringify(module)});
      const server = await startS3Server({ directory: ${JSON.stringify(path.join(dir, 'orphan'))}, identitiesFile: ${JSON.stringify(path.join(dir, 'orphan.json'))}, buckets: [] });
      console.log(JSON.stringify(server.ports));
      setInterval(() => {}, 60_000);`;
    const parent = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const ports = await new Promise<Record<string, number>>((resolve, reject) => {
      parent.stdout!.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString()) as Record<string, number>));
      parent.once('exit', (code) => reject(new Error(`the parent exited with ${code} before its S3 server started`)));
    });
    expect(await accepts(ports.s3!)).toBe(true);
    parent.kill('SIGKILL');
    await expect
      .poll(async () => (await Promise.all(Object.values(ports).map(accepts))).some(Boolean), {
        timeout: 30_000,
        interval: 250,
      })
      .toBe(false);
  });
});

describe('docker-compose’s SeaweedFS, started as the compose file starts it', () => {
  const ROOT = fileURLToPath(new URL('..', import.meta.url));
  let dir: string;
  let weed: ReturnType<typeof launchWeed> | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-compose-s3-'));
  });
  afterAll(async () => {
    await weed?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('opens only S3 to callers without the keys its one-shot service writes', async () => {
    const compose = parse(await readFile(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
      services: Record<string, { command: string[]; environment?: Record<string, string>; volumes?: string[] }>;
    };
    const { command, environment, volumes } = compose.services.seaweedfs!;
    const keysService = compose.services['seaweedfs-keys']!;
    // The one-shot service's command, run here with its directory moved under the test's.
    const keysDir = path.join(dir, 'etc-seaweedfs');
    expect(keysService.command.slice(0, 3)).toEqual(['node', 'dist/cli/main.js', 'seaweedfs-keys']);
    const mountedAt = keysService.command[3]!;
    expect(volumes).toContain(`${keysService.volumes![0]!.split(':')[0]}:${mountedAt}:ro`);
    await promisify(execFile)(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'seaweedfs-keys', keysDir]);

    // Compose's command on loopback and free ports; SeaweedFS reads security.toml from its working directory.
    const ports = await pickSeaweedPorts('127.0.0.1');
    const args = command
      .map((arg) => arg.replace(/^-ip=.*/, '-ip=127.0.0.1').replace(/^-ip\.bind=.*/, '-ip.bind=127.0.0.1'))
      .map((arg) => arg.replace(/^-dir=.*/, `-dir=${path.join(dir, 'data')}`));
    weed = launchWeed(await resolveWeed(), [...args, ...seaweedPortFlags(ports)], keysDir, undefined, environment);
    const s3 = createS3Client({
      endpoint: `http://127.0.0.1:${ports.s3}`,
      credentials: {
        accessKeyId: environment!.AWS_ACCESS_KEY_ID!,
        secretAccessKey: environment!.AWS_SECRET_ACCESS_KEY!,
      },
    });
    await expect
      .poll(
        () =>
          s3.send(new PutObjectCommand({ Bucket: 'berth', Key: 'tables/t/kept.parquet', Body: 'kept' })).then(
            () => true,
            () => false,
          ),
        { timeout: 60_000, interval: 500 },
      )
      .toBe(true);

    expect(await weedShell(ports, 'fs.ls /buckets/berth/tables/t\nfs.rm -r /buckets/berth/tables', dir)).not.toContain(
      'kept.parquet',
    );
    expect(await weedShell(ports, 'fs.ls /buckets/berth/tables/t', keysDir)).toContain('kept.parquet');
    expect((await fetch(`http://127.0.0.1:${ports.master}/col/delete?collection=berth`)).status).toBe(400);
    const object = await s3.send(new GetObjectCommand({ Bucket: 'berth', Key: 'tables/t/kept.parquet' }));
    expect(await object.Body!.transformToString()).toBe('kept');
    s3.destroy();
  });
});
