/**
 * The console's server-side pure parts: the placement what-if (the simulation `berth placement
 * simulate` runs, and its refusals) and a table's segments by day.
 */
import { describe, expect, it } from 'vitest';
import { simulatePlacement } from '../core/placement-simulation.js';
import { segmentsByDay } from '../core/segment-days.js';
import { EARLIEST_MS } from '../core/time-bounds.js';
import { placementWhatIf, WHAT_IF_SEGMENTS } from '../services/coordinator/console/placement-what-if.js';

const members = [
  { id: 'A', weight: 4 },
  { id: 'B', weight: 4 },
  { id: 'C', weight: 2 },
];

describe('placementWhatIf', () => {
  it('is the CLI’s simulation over the members and the change, and names the CLI’s flags', () => {
    const added = placementWhatIf(members, { add: 'D:4' });
    expect(added).toMatchObject({ nodes: 'A:4,B:4,C:2', add: 'D:4' });
    expect(added.result).toEqual(
      simulatePlacement({ before: members, after: [...members, { id: 'D', weight: 4 }], segments: WHAT_IF_SEGMENTS }),
    );
    // Minimal disruption: only the new node gains, and only the removed node's segments move.
    expect(added.result.moved.segments).toBe(added.result.after.D!.segments);
    const removed = placementWhatIf(members, { remove: 'C' });
    expect(removed.result.moved.segments).toBe(removed.result.before.C!.segments);
  });

  it('refuses a node that is not ID:VCPU, one already a member, and an unknown one to remove', () => {
    for (const add of ['D', 'D:0', 'D:x', 'D:4,E:4', ':4'])
      expect(() => placementWhatIf(members, { add }), add).toThrow(/is not ID:VCPU/);
    expect(() => placementWhatIf(members, { add: 'A:8' })).toThrow(/already a member/);
    expect(() => placementWhatIf(members, { remove: 'Z' })).toThrow(/no live member/);
  });
});

describe('segmentsByDay', () => {
  it('counts segments, rows and bytes by the UTC day of their oldest row, a timeless one as undated', () => {
    const day = (iso: string) => Date.parse(iso);
    expect(
      segmentsByDay([
        { minTs: day('2026-11-02T23:59:59Z'), rows: 5, bytes: 50 },
        { minTs: day('2026-11-01T00:00:00Z'), rows: 1, bytes: 10 },
        { minTs: day('2026-11-02T00:00:00Z'), rows: 2, bytes: 20 },
        { minTs: EARLIEST_MS, rows: 7, bytes: 70 },
      ]),
    ).toEqual([
      { day: '2026-11-01', segments: 1, rows: 1, bytes: 10 },
      { day: '2026-11-02', segments: 2, rows: 7, bytes: 70 },
      { day: 'undated', segments: 1, rows: 7, bytes: 70 },
    ]);
  });
});
