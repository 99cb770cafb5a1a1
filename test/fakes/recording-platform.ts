/**
 * A compute platform that only records the replica targets it is given and never runs a pod: for
 * tests that need a heavy pool to launch (its one write) but not to become ready.
 */
import type { ComputePlatform } from '../../activities/platform/compute-platform.js';
import { preflightReport } from '../../core/preflight.js';

export function recordingPlatform(): { platform: ComputePlatform; replicas: Map<string, number> } {
  const replicas = new Map<string, number>();
  const platform: ComputePlatform = {
    kind: 'local',
    setReplicas: async (group, n) => {
      const previous = replicas.get(group) ?? 0;
      replicas.set(group, n);
      return { changed: previous !== n, previous };
    },
    replicas: async (group) => replicas.get(group) ?? 0,
    runningPods: async () => 0,
    why: async () => undefined,
    preflight: async (group) => preflightReport(group, 'local', []),
  };
  return { platform, replicas };
}
