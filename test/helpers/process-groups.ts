/**
 * Every process a test starts gets a process group of its own, recorded in a directory that the
 * run's global teardown owns: whatever a test leaves behind (a timed-out test never reaches its
 * cleanup), the teardown ends it, children and grandchildren alike.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { inject } from 'vitest';

/** Spawns a process as the leader of a new process group, and records the group. */
export function spawnOwned(command: string, args: string[], options: SpawnOptions): ChildProcess {
  const child = spawn(command, args, { ...options, detached: true });
  if (child.pid) writeFileSync(path.join(inject('processGroupDir'), String(child.pid)), '');
  return child;
}

/** Sends `signal` to a spawned process's whole group (it and everything it started). */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/** Ends every recorded group (the global teardown calls this); returns how many were still running. */
export async function killRecordedGroups(dir: string): Promise<number> {
  let killed = 0;
  for (const name of await readdir(dir).catch(() => [])) {
    try {
      process.kill(-Number(name), 'SIGKILL');
      killed++;
    } catch {
      // ended with its test
    }
  }
  await rm(dir, { recursive: true, force: true });
  return killed;
}
