/**
 * A node's lower CPU priority (BERTH_NODE_NICENESS): every thread of the process gets it, threads
 * made later inherit it, and a process already nicer is left as it is. It renices this test's own
 * process, which vitest runs as a fork of its own.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { lowerCpuPriority } from '../services/common/startup.js';

/** The nice value of each thread of this process. */
const niceValues = () =>
  readdirSync('/proc/self/task').map((thread) => {
    const stat = readFileSync(`/proc/self/task/${thread}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });

describe('lowering a process’s CPU priority', () => {
  it('renices every thread, later ones inherit it, and it never raises a priority', async () => {
    expect(niceValues().length).toBeGreaterThan(1);
    lowerCpuPriority(5);
    expect(new Set(niceValues())).toEqual(new Set([5]));
    // A thread made afterwards (as DuckDB makes its own) runs at the same priority.
    const worker = new Worker('setInterval(() => {}, 1000)', { eval: true });
    await new Promise((resolve) => worker.once('online', resolve));
    expect(new Set(niceValues())).toEqual(new Set([5]));
    await worker.terminate();
    // Asked for less than it has, it changes nothing and does not fail (raising needs a right it lacks).
    expect(() => lowerCpuPriority(3)).not.toThrow();
    expect(new Set(niceValues())).toEqual(new Set([5]));
  });
});
