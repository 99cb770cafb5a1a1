/**
 * The README's run command with the demo: `berth up --demo --exit --json` runs the whole tour on a
 * fresh data dir and prints one JSON summary on stdout (a smaller month of events here, to keep the
 * suite quick; the default size is the same code).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { DemoSummary } from '../cli/demo.js';
import { berth, FREE_PORTS } from './helpers/berth-cli.js';

describe('berth up --demo', () => {
  let dataDir: string | undefined;
  afterAll(() => (dataDir ? rm(dataDir, { recursive: true, force: true }) : undefined));

  it(
    'serves a light query from the serving group’s caches and a memory-bound heavy one on the memory class launched 0 → 1, then parks it',
    { timeout: 300_000 },
    async () => {
      dataDir = await mkdtemp(path.join(os.tmpdir(), 'berth-demo-'));
      const { code, stdout, stderr } = await berth(
        'up',
        '--demo',
        '--exit',
        '--json',
        '--demo-rows',
        '60000',
        '--data-dir',
        dataDir,
        ...FREE_PORTS,
      );
      expect(code, stderr.slice(-2000)).toBe(0);
      const summary = JSON.parse(stdout) as DemoSummary;
      expect(summary.rows).toBeGreaterThanOrEqual(60_000);
      expect(summary.segments).toEqual({ ingested: 120, afterMerge: 30 });
      expect(summary.light).toMatchObject({
        verdict: 'light',
        route: 'aggregate',
        group: 'serving',
        placement: 'owner',
        cacheMisses: 0,
      });
      expect(summary.light.cacheHits).toBe(7); // the last seven days, one merged segment each, warm on their owners
      // Which owners got them is random per segment (all seven on one node about 1 run in 300): count, not spread.
      expect(Object.values(summary.light.nodes).reduce((a, b) => a + b, 0)).toBe(7);
      expect(summary.heavy).toMatchObject({
        verdict: 'heavy',
        bottleneck: 'memory',
        // Memory-bound: the memory class, one big backend, not the scan group's increment of two.
        launchWorkflowId: 'heavy-pool-heavy-memory',
        target: 1,
        layersPassed: ['pods', 'backends', 'canary'],
      });
      expect(summary.heavy.rows).toBe(8 * 30); // eight services, thirty days
      expect(summary.poolPhaseAtEnd).toBe('parked');
      expect(stderr).toMatch(/pool ready: target 1, pods 1, alive backends 1, layers pods → backends → canary/);
    },
  );
});
