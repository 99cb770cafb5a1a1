/**
 * The coordinator's time index of a table's segments (services/coordinator/planning/segment-index.ts)
 * against the plain filter it replaces: after any sequence of manifest changes, the segments it
 * finds for a range are exactly those whose [minTs, maxTs] meets it, in meta's order.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SegmentIndex } from '../services/coordinator/planning/segment-index.js';
import type { SegmentRow } from '../services/meta/client.js';

const DAY = 86_400_000;
const EDGE = Number.MAX_SAFE_INTEGER;

const row = (id: string, minTs: number, maxTs: number): SegmentRow => ({
  id,
  table: 't',
  minTs,
  maxTs,
  rows: 1,
  bytes: 1,
  level: 0,
  state: 'active',
  createdAt: 0,
  retiredAt: null,
  replacedBy: null,
});

/** A time: mostly within a few days, sometimes at the ends of all time (a table without a clock). */
const time = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0, max: 6 * DAY }) },
  { weight: 1, arbitrary: fc.constantFrom(-EDGE, EDGE) },
);
const span = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: DAY }) },
  { weight: 1, arbitrary: fc.integer({ min: DAY + 1, max: 4 * DAY }) },
);
const change = fc.record({
  added: fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), time, span), { maxLength: 6 }),
  retired: fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 4 }),
});

const meets = (s: SegmentRow, from: number, to: number) => s.maxTs >= from && s.minTs <= to;
const metaOrder = (a: SegmentRow, b: SegmentRow) => b.maxTs - a.maxTs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

describe('the segment index', () => {
  it('finds exactly the segments a range meets, after any manifest changes', () => {
    fc.assert(
      fc.property(
        fc.array(change, { maxLength: 12 }),
        fc.array(fc.tuple(time, time), { minLength: 1, maxLength: 6 }),
        (changes, ranges) => {
          const index = SegmentIndex.of(0, 1, []);
          const active = new Map<string, SegmentRow>();
          let version = 0;
          for (const c of changes) {
            const added = c.added
              .map(([n, minTs, width]) => row(`s${n}`, minTs, Math.min(minTs + width, EDGE)))
              .filter((s, i, all) => !active.has(s.id) && all.findIndex((o) => o.id === s.id) === i);
            const retired = c.retired.map((n) => `s${n}`).filter((id) => active.has(id));
            for (const id of retired) active.delete(id);
            for (const s of added) active.set(s.id, s);
            index.apply({ version: ++version, incarnation: 1, added, retired });
          }
          expect(index.size).toBe(active.size);
          expect(index.version).toBe(version);
          for (const [a, b] of ranges) {
            const [from, to] = a <= b ? [a, b] : [b, a];
            const expected = [...active.values()].filter((s) => meets(s, from, to)).sort(metaOrder);
            expect(index.inRange(from, to)).toEqual(expected);
          }
          expect(index.inRange()).toEqual([...active.values()].sort(metaOrder));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('builds from a whole manifest as it would from its changes', () => {
    const segments = [row('a', 0, DAY), row('b', DAY, 3 * DAY), row('c', -EDGE, EDGE), row('d', 5, 10)];
    const whole = SegmentIndex.of(4, 1, segments);
    const changed = SegmentIndex.of(0, 1, []);
    changed.apply({ version: 4, incarnation: 1, added: segments, retired: [] });
    for (const [from, to] of [
      [0, 0],
      [2 * DAY, 2 * DAY],
      [11, DAY - 1],
      [-EDGE, EDGE],
    ] as const)
      expect(whole.inRange(from, to)).toEqual(changed.inRange(from, to));
    expect(whole.inRange(2 * DAY, 2 * DAY).map((s) => s.id)).toEqual(['c', 'b']);
  });
});
