import { describe, expect, it } from 'vitest';
import { Placement } from '../core/ownership.js';
import type { SimulationResult } from '../core/placement-simulation.js';
import { berth } from './helpers/berth-cli.js';

const within4Sigma = (observed: number, n: number, p: number) =>
  Math.abs(observed - n * p) <= 4 * Math.sqrt(n * p * (1 - p));

describe('berth placement', () => {
  it('simulates adding D:16 to A:16,B:16,C:8: about 28.6 % move, all of them to D', async () => {
    const { code, stdout } = await berth(
      'placement',
      'simulate',
      '--nodes',
      'A:16,B:16,C:8',
      '--add',
      'D:16',
      '--segments',
      '100000',
      '--json',
    );
    expect(code).toBe(0);
    const result = JSON.parse(stdout) as SimulationResult;
    expect(result.segments).toBe(100_000);
    expect(Object.keys(result.before)).toEqual(['A', 'B', 'C']);
    expect(result.after.D).toMatchObject({ weight: 16, segments: result.moved.segments });
    expect(Object.keys(result.moved.byPair).sort()).toEqual(['A->D', 'B->D', 'C->D']);
    expect(within4Sigma(result.moved.segments, 100_000, 16 / 56)).toBe(true);
    expect(result.moved.fraction).toBeCloseTo(0.286, 1);
  });

  it('simulates removing C from A:16,B:16,C:8,D:16: about 14.3 % move, a third each to A, B and D', async () => {
    const { stdout } = await berth('placement', 'simulate', '--nodes', 'A:16,B:16,C:8,D:16', '--remove', 'C', '--json');
    const result = JSON.parse(stdout) as SimulationResult;
    expect(result.segments).toBe(100_000);
    expect(within4Sigma(result.moved.segments, 100_000, 8 / 56)).toBe(true);
    for (const to of ['A', 'B', 'D']) {
      expect(within4Sigma(result.moved.byPair[`C->${to}`]!, result.moved.segments, 1 / 3)).toBe(true);
    }
    expect(Object.keys(result.moved.byPair)).toHaveLength(3);
  });

  it('prints tables a person reads at a glance', async () => {
    const { stdout } = await berth(
      'placement',
      'simulate',
      '--nodes',
      'A:16,B:16,C:8',
      '--set',
      'C:24',
      '--segments',
      '20000',
    );
    expect(stdout).toMatch(/^Before \(20,000 segments\)/);
    expect(stdout).toMatch(/After \(set C:24\)/);
    expect(stdout).toMatch(/Moved: [\d,]+ segments \(\d+\.\d%\)/);
    expect(stdout).toMatch(/A → C/);
    expect(stdout).not.toMatch(/C → A/);
  });

  it('explains a segment’s ranking, owner first, as the shared Placement ranks it', async () => {
    const { stdout } = await berth(
      'placement',
      'explain',
      'events/2026-11-30/l0-7',
      '--nodes',
      'A:16,B:16,C:8',
      '--json',
    );
    const { ranking } = JSON.parse(stdout) as { ranking: { rank: number; id: string; score: number }[] };
    const expected = new Placement([
      { id: 'A', weight: 16 },
      { id: 'B', weight: 16 },
      { id: 'C', weight: 8 },
    ]).rank('events/2026-11-30/l0-7');
    expect(ranking.map((r) => r.id)).toEqual(expected.map((n) => n.id));
    expect(ranking[0]!.score).toBeGreaterThan(ranking[1]!.score);
    const human = await berth('placement', 'explain', 'events/2026-11-30/l0-7', '--nodes', 'A:16,B:16,C:8');
    expect(human.stdout).toContain(`owner ${expected[0]!.id}`);
  });

  it.each([
    [['--nodes', 'A,B:16'], /"A" needs the form ID:WEIGHT/],
    [['--nodes', 'A:16,B:16,A:8'], /duplicate node id "A"/],
    [['--nodes', 'A:16,B:16', '--remove', 'C'], /--remove: node "C" is not in --nodes/],
    [['--nodes', 'A:-2'], /node "A" has weight "-2"/],
    [['--nodes', 'A:16', '--segments', 'many'], /--segments: "many" must be a whole number/],
    [[], /required option '--nodes/],
  ])('exits non-zero with a one-line reason for %j', async (args, reason) => {
    const { code, stdout, stderr } = await berth('placement', 'simulate', ...args);
    expect(code).not.toBe(0);
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(reason);
  });
});
