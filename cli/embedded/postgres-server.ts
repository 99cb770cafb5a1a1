/**
 * A throwaway PostgreSQL cluster on loopback, for the tests and the meta benchmarks: `initdb` into
 * a new directory, then `postgres` as our child process on a free port. Debian's `postgresql`
 * package provides the binaries. As root it runs as the `postgres` user (PostgreSQL refuses root).
 *
 * It dies with its parent whatever happens: `postgres` runs under a small shell that waits for its
 * stdin to close, which happens when we stop it and equally when our process is killed (even by
 * SIGKILL), and then shuts it down and removes its directory.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './free-port.js';

export interface PostgresServerOptions {
  /**
   * fsync and synchronous commit on, as PostgreSQL ships; off (not crash-safe, faster) suits tests.
   * @default false
   */
  durable?: boolean;
  /** @default 60000 */
  startTimeoutMs?: number;
}

export interface PostgresServer {
  /** The superuser's URL to the `postgres` database. */
  url: string;
  /** The process the server runs under: its descendants are the postmaster and its backends. */
  pid: number;
  /** Creates an empty database and returns its URL. */
  createDatabase(name?: string): Promise<string>;
  stop(): Promise<void>;
}

/** Where this machine keeps initdb and postgres: PATH, else Debian's /usr/lib/postgresql/<version>/bin. */
export function postgresBinDir(): string {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && existsSync(path.join(dir, 'initdb')) && existsSync(path.join(dir, 'postgres'))) return dir;
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root).filter((v) => existsSync(path.join(root, v, 'bin', 'postgres')))
    : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest)
    throw new Error('PostgreSQL is not installed: install Debian\'s "postgresql" package (initdb and postgres)');
  return path.join(root, newest, 'bin');
}

/** The uid and gid to run PostgreSQL as: ours, or the `postgres` user's when we are root. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const user = runAs();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-pg-'));
  if (user) await chown(dir, user.uid, user.gid);
  const data = path.join(dir, 'data');
  const superuser = 'berth';
  try {
    execFileSync(
      path.join(bin, 'initdb'),
      ['-D', data, '-U', superuser, '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync'],
      { ...user, stdio: 'pipe' },
    );
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${(error as { stderr?: Buffer }).stderr?.toString() ?? (error as Error).message}`, {
      cause: error,
    });
  }

  const port = await freePort();
  const settings = [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    `unix_socket_directories=${dir}`,
    '-c',
    'max_connections=200',
    '-c',
    'log_min_messages=warning',
  ];
  if (!options.durable) settings.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  // `read` returns when our end of the shell's stdin closes (stop(), or our death); then postgres
  // gets a fast shutdown and its directory is removed.
  const script =
    'dir=$1; shift; postgres "$@" & pid=$!; read -r _ || true; kill -INT "$pid" 2>/dev/null; wait "$pid"; rm -rf "$dir"';
  const child = spawn('sh', ['-c', script, 'sh', dir, '-D', data, '-p', String(port), ...settings], {
    ...user,
    env: { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}` },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    child.stdin!.end();
    await exited;
  };

  const url = `postgres://${superuser}@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      break;
    } catch (error) {
      await client.end().catch(() => {});
      if (child.exitCode !== null || Date.now() > deadline) {
        await stop();
        throw new Error(`postgres did not answer on port ${port}: ${stderr.trim() || (error as Error).message}`, {
          cause: error,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  return { url, pid: child.pid!, createDatabase: (name) => createDatabase(url, name), stop };
}

/** Creates an empty database on the server that `url` points to (as a user who may), and returns its URL. */
export async function createDatabase(url: string, name = `berth_${randomBytes(6).toString('hex')}`): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  const database = new URL(url);
  database.pathname = `/${name}`;
  return database.toString();
}
