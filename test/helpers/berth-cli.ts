/** Runs the built `berth` command as a user would (the test script builds it first). */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnOwned } from './process-groups.js';

export const BERTH_BIN = fileURLToPath(new URL('../../bin/berth.js', import.meta.url));

/** `berth up` options that put every server on a free port. */
export const FREE_PORTS = [
  '--temporal-port',
  '0',
  '--temporal-ui-port',
  '0',
  '--s3-port',
  '0',
  '--meta-port',
  '0',
  '--coordinator-port',
  '0',
  '--postgres-port',
  '0',
  '--controller-port',
  '0',
];

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `berth ...args` to completion. */
export function berth(...args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BERTH_BIN, ...args], { maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Starts a long-running `berth ...args` in a process group the run's teardown owns; `waitFor` resolves once its stdout has printed a match. */
export function startBerth(...args: string[]): {
  child: ChildProcess;
  output: () => string;
  waitFor(pattern: RegExp): Promise<void>;
  exited: Promise<number | null>;
} {
  const child = spawnOwned(process.execPath, [BERTH_BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const listeners = new Set<() => void>();
  const append = (chunk: Buffer) => {
    output += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    output: () => output,
    exited,
    waitFor: (pattern) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (pattern.test(output)) {
            listeners.delete(check);
            resolve();
          }
        };
        listeners.add(check);
        check();
        void exited.then((code) =>
          reject(new Error(`berth exited with ${code} before printing ${pattern}:\n${output}`)),
        );
      }),
  };
}

/**
 * A data dir for `--data-dir` that points the CLI at services a test started (as `berth up` would
 * have written it): their endpoints and the cluster's token.
 */
export async function cliDataDir(
  dir: string,
  endpoints: { coordinator: string; controller?: string },
  token: string,
): Promise<string> {
  const dataDir = path.join(dir, 'cli');
  await mkdir(dataDir, { recursive: true });
  await writeFile(path.join(dataDir, 'endpoints.json'), JSON.stringify(endpoints));
  await writeFile(path.join(dataDir, 'token'), token);
  return dataDir;
}
