/**
 * Runs a program that knows nothing of Berth (the Temporal dev server, an S3 server) on a tether:
 * as this script's child, ended when this script's stdin closes, which is when the `berth up`
 * holding the other end is gone, however it went (even kill -9). Signals are passed on, and the
 * script exits with the program.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(import.meta.url);
/** The compiled script (tests import this module from its TypeScript source). */
const TETHER_SCRIPT = HERE.replace(/\/cli\/embedded\/tether\.ts$/, '/dist/cli/embedded/tether.js');

/** Spawns `command` on a tether held by this process: its stdin is the tether, stdout and stderr as given. */
export function spawnTethered(
  command: string,
  args: string[],
  output: { stdout: 'ignore' | 'pipe'; stderr: 'ignore' | 'pipe' },
  options: Omit<SpawnOptions, 'stdio'> = {},
): ChildProcess {
  return spawn(process.execPath, [TETHER_SCRIPT, command, ...args], {
    ...options,
    stdio: ['pipe', output.stdout, output.stderr],
  });
}

if (process.argv[1] === HERE) {
  const [command, ...args] = process.argv.slice(2);
  const child = spawn(command!, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  const end = (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  process.stdin.on('data', () => {});
  process.stdin.once('end', () => end('SIGTERM'));
  process.stdin.once('error', () => end('SIGTERM'));
  (process.stdin as { unref?: () => void }).unref?.();
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => end(signal));
  child.once('error', (error) => {
    process.stderr.write(`${error.message}\n`);
    process.exit(127);
  });
  // A program ended by a signal exits as a shell reports it: 128 + the signal's number.
  child.once('exit', (code, signal) => process.exit(code ?? 128 + (signal ? os.constants.signals[signal] : 0)));
}
