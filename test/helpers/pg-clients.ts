/**
 * Real PostgreSQL clients for the tests, run as their users run them: Debian's psql, Python's
 * psycopg 3 (installed from PyPI into a cache outside the repo on first use) and the PostgreSQL
 * JDBC driver (fetched from Maven Central by Maven into its own repository outside the repo).
 * Each runs as a process of its own group, so it dies with the run.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { access, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { spawnOwned } from './process-groups.js';

const run = promisify(execFile);

/** Versions the tests pin: a client that changes its queries changes what Berth must answer. */
export const PSYCOPG = 'psycopg[binary]==3.3.9';
export const PGJDBC = 'org.postgresql:postgresql:42.7.14';

const CACHE = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'berth-tests');

export interface ClientRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a client to its end (or until `timeoutMs`, then kills it) and collects its output. */
export function runClient(
  command: string,
  args: string[],
  options: {
    env?: NodeJS.ProcessEnv;
    input?: string;
    timeoutMs?: number;
    onStart?: (child: ChildProcess) => void;
  } = {},
): Promise<ClientRun> {
  return new Promise((resolve, reject) => {
    const child = spawnOwned(command, args, { env: { ...process.env, ...options.env }, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin!.end(options.input ?? '');
    options.onStart?.(child);
  });
}

/** psql against `url` with the token as its password, no ~/.psqlrc, stopping at the first error. */
export function psql(url: string, token: string, args: string[], options: Parameters<typeof runClient>[2] = {}) {
  return runClient('psql', ['-X', '-v', 'ON_ERROR_STOP=1', url, ...args], {
    ...options,
    env: { PGPASSWORD: token, PGCONNECT_TIMEOUT: '10', ...options.env },
  });
}

/** A directory on PYTHONPATH that holds psycopg 3 with its bundled libpq. */
export async function psycopgPath(): Promise<string> {
  const target = path.join(CACHE, `python-${PSYCOPG.replace(/[^\w.=]/g, '_')}`);
  try {
    await access(path.join(target, 'psycopg', '__init__.py'));
  } catch {
    await mkdir(target, { recursive: true });
    await run(
      'python3',
      ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', target, PSYCOPG],
      {
        timeout: 300_000,
      },
    );
  }
  return target;
}

/** The JDBC driver's jar, fetched into Maven's own repository when it is not there yet. */
export async function pgjdbcJar(): Promise<string> {
  const [group, artifact, version] = PGJDBC.split(':') as [string, string, string];
  const repository = path.join(os.homedir(), '.m2', 'repository');
  const jar = path.join(repository, ...group.split('.'), artifact, version, `${artifact}-${version}.jar`);
  try {
    await access(jar);
  } catch {
    await run('mvn', ['-q', '-B', 'dependency:get', `-Dartifact=${PGJDBC}`, '-Dtransitive=false'], {
      timeout: 300_000,
    });
  }
  return jar;
}
