/**
 * The local driver's own bookkeeping, with stand-in backends: it converges on each target it is
 * given, whatever happened to the backends it started before.
 */
import { describe, expect, it } from 'vitest';
import { LocalPlatform, type LocalBackend } from '../activities/platform/local-platform.js';

/** A backend whose exit the test decides. */
function standIn(): LocalBackend & { exit(code: number): void } {
  let exit!: (code: number) => void;
  const exited = new Promise<number>((resolve) => (exit = resolve));
  return { exited, exit, stop: async () => exit(0) };
}

describe('the local driver', () => {
  it('starts backends again after every one it had exited on its own and the group was parked', async () => {
    const started: ReturnType<typeof standIn>[] = [];
    const platform = new LocalPlatform({
      startBackend: async () => {
        const backend = standIn();
        started.push(backend);
        return backend;
      },
    });
    await platform.setReplicas('heavy', 2);
    await expect.poll(() => platform.runningPods('heavy')).toBe(2);
    for (const backend of started) backend.exit(137); // killed, as a lost machine's process is
    await expect.poll(() => platform.runningPods('heavy')).toBe(0);
    expect(await platform.why('heavy')).toMatch(/^backend heavy-\d exited on its own with code 137$/);

    // Parking finds nothing left to stop; the next launch still gets its backends.
    await platform.setReplicas('heavy', 0);
    await platform.setReplicas('heavy', 2);
    await expect.poll(() => platform.runningPods('heavy')).toBe(2);
    expect(started).toHaveLength(4);
    await platform.close();
    expect(await platform.runningPods('heavy')).toBe(0);
  });
});
