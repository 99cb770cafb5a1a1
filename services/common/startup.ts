/**
 * What every service's main does first. Files it creates are private to its user (umask 077:
 * 0600 files, 0700 directories: segments, the manifest, logs and tokens are data or secrets).
 * It refuses to start with a token anyone could guess. And when `berth up` started it, it exits
 * once `berth up` is gone, however that went, so that no service outlives its supervisor.
 */
import { readdirSync } from 'node:fs';
import os from 'node:os';

/** The shortest token a service accepts, in bytes. */
export const MIN_TOKEN_BYTES = 32;

/** Thrown when the configured token is missing, a sample value, or too short to resist guessing. */
export class WeakTokenError extends Error {
  override name = 'WeakTokenError';
}

/** The token, if it is one a service may run with. */
export function checkToken(token: string, variable = 'BERTH_TOKEN'): string {
  if (/^change-?me$/i.test(token.trim()))
    throw new WeakTokenError(
      `${variable} is the sample value "${token}": set a random token (e.g. openssl rand -hex 32)`,
    );
  if (Buffer.byteLength(token) < MIN_TOKEN_BYTES)
    throw new WeakTokenError(
      `${variable} must be at least ${MIN_TOKEN_BYTES} bytes (e.g. openssl rand -hex 32); it is ${Buffer.byteLength(token)}`,
    );
  return token;
}

/** Set by `berth up` on its children: their stdin is a pipe from it, which closes when it ends. */
export const SUPERVISED_ENV = 'BERTH_SUPERVISED';

/**
 * `berth up` is gone, and with it the reader of this process's log: exiting the usual way would
 * first flush the log lines still waiting to that closed pipe, which pino's exit handler retries
 * forever (sonic-boom's flushSync sleeps and retries on EPIPE). Nothing is left to flush to: end
 * at once.
 */
const supervisorGone = () => process.kill(process.pid, 'SIGKILL');

/** Applies the process-wide settings and returns the service's checked token (BERTH_TOKEN of its configuration). */
export function startService(config: { BERTH_TOKEN: string }): { token: string } {
  process.umask(0o077);
  if (process.env[SUPERVISED_ENV] === '1') {
    process.stdin.on('data', () => {});
    process.stdin.once('end', supervisorGone);
    process.stdin.once('error', supervisorGone);
    // Watching the pipe must not keep a service alive that is shutting down on its own.
    (process.stdin as { unref?: () => void }).unref?.();
  }
  try {
    return { token: checkToken(config.BERTH_TOKEN) };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(78); // EX_CONFIG
  }
}

/**
 * Lowers this process's CPU priority to `niceness` (0–19), every thread of it: on Linux a nice
 * value is a thread's, and each thread made later (DuckDB's, libuv's) inherits its maker's.
 */
export function lowerCpuPriority(niceness: number): void {
  if (niceness <= 0) return;
  let threads = ['0']; // without /proc: the calling thread only
  try {
    threads = readdirSync('/proc/self/task');
  } catch {
    // no /proc here
  }
  for (const thread of threads) {
    try {
      // Never raised: a process started nicer than asked (nice -n 19 npx berth up) stays so.
      if (os.getPriority(Number(thread)) < niceness) os.setPriority(Number(thread), niceness);
    } catch (error) {
      // A thread that ended meanwhile; or no right to change it, which costs priority, not the node.
      process.stderr.write(`lowering the CPU priority of thread ${thread} failed: ${(error as Error).message}\n`);
    }
  }
}
