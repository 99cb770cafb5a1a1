import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { InvalidMemberListError, owner, Placement, rank, ruledOutBelow, type WeightedNode } from '../core/ownership.js';
import { simulatePlacement } from '../core/placement-simulation.js';

const nodes = (spec: string): WeightedNode[] =>
  spec.split(',').map((entry) => {
    const [id, weight] = entry.split(':');
    return { id: id!, weight: Number(weight) };
  });
const totalWeight = (list: readonly WeightedNode[]) => list.reduce((sum, n) => sum + n.weight, 0);

/** |observed - n p| within 4 standard deviations of the binomial(n, p) expectation. */
function expectBinomial(observed: number, n: number, p: number): void {
  const sigma = Math.sqrt(n * p * (1 - p));
  expect(
    Math.abs(observed - n * p),
    `observed ${observed}, expected ${(n * p).toFixed(1)} ± ${(4 * sigma).toFixed(1)}`,
  ).toBeLessThanOrEqual(4 * sigma);
}

/** Member lists of 1 to 12 distinct nodes with weights from 0.5 to 64, fractions included. */
const memberList = fc.uniqueArray(
  fc.record({ id: fc.string({ minLength: 1, maxLength: 12 }), weight: fc.double({ min: 0.5, max: 64, noNaN: true }) }),
  { minLength: 1, maxLength: 12, selector: (n) => n.id },
);
const segmentIds = Array.from({ length: 400 }, (_, i) => `prop/seg-${i}`);
const PROPERTY_RUNS = { seed: 42, numRuns: 150 };

describe('weighted ownership', () => {
  it('splits segments in proportion to weight, each node within 4 sigma of its expectation', () => {
    const members = nodes('A:16,B:16,C:8,D:4,E:1.5');
    const result = simulatePlacement({ before: members, after: members, segments: 200_000 });
    for (const node of members) {
      expectBinomial(result.before[node.id]!.segments, 200_000, node.weight / totalWeight(members));
    }
  });

  it('gives a 2:1 pair a 2:1 split, not the 3:1 of a naive weight-times-hash score', () => {
    const result = simulatePlacement({
      before: nodes('big:64,small:32'),
      after: nodes('big:64,small:32'),
      segments: 90_000,
    });
    expectBinomial(result.before.big!.segments, 90_000, 2 / 3);
  });

  it('moves exactly the new node’s share when a node is added, all of it to the new node', () => {
    const result = simulatePlacement({
      before: nodes('A:16,B:16,C:8'),
      after: nodes('A:16,B:16,C:8,D:16'),
      segments: 100_000,
    });
    expect(Object.keys(result.moved.byPair).sort()).toEqual(['A->D', 'B->D', 'C->D']);
    expect(result.moved.segments).toBe(result.after.D!.segments);
    expectBinomial(result.moved.segments, 100_000, 16 / 56); // the seed's 28.6 %
  });

  it('moves only the removed node’s segments, spread over the survivors by weight', () => {
    const result = simulatePlacement({
      before: nodes('A:16,B:16,C:8,D:16'),
      after: nodes('A:16,B:16,D:16'),
      segments: 100_000,
    });
    expect(Object.keys(result.moved.byPair).sort()).toEqual(['C->A', 'C->B', 'C->D']);
    expect(result.moved.segments).toBe(result.before.C!.segments);
    expectBinomial(result.moved.segments, 100_000, 8 / 56); // the seed's 14.3 %
    for (const survivor of ['A', 'B', 'D']) {
      expectBinomial(result.moved.byPair[`C->${survivor}`]!, result.moved.segments, 1 / 3);
    }
  });

  it('moves segments only to a node whose weight rises, and only from one whose weight falls', () => {
    const raised = simulatePlacement({
      before: nodes('A:16,B:16,C:8'),
      after: nodes('A:16,B:16,C:24'),
      segments: 50_000,
    });
    expect(Object.keys(raised.moved.byPair).sort()).toEqual(['A->C', 'B->C']);
    expectBinomial(raised.after.C!.segments, 50_000, 24 / 56);
    const lowered = simulatePlacement({
      before: nodes('A:16,B:16,C:24'),
      after: nodes('A:16,B:16,C:8'),
      segments: 50_000,
    });
    expect(Object.keys(lowered.moved.byPair).sort()).toEqual(['C->A', 'C->B']);
  });

  it('keeps membership changes minimal for any member list (property)', () => {
    fc.assert(
      fc.property(memberList, fc.nat(), fc.double({ min: 0.5, max: 64, noNaN: true }), (members, pick, newWeight) => {
        const changed = members[pick % members.length]!;
        const others = members.filter((n) => n !== changed);
        const reweighted = members.map((n) => (n === changed ? { ...n, weight: newWeight } : n));
        const [full, without, retuned] = [members, others, reweighted].map((list) => new Placement(list));
        for (const id of segmentIds) {
          const o = full!.owner(id)!.id;
          // Removing `changed` moves only its segments; adding it back moves only segments to it.
          if (o !== changed.id) expect(without!.owner(id)?.id).toBe(o);
          // Reweighting `changed` never moves a segment between two other nodes.
          const r = retuned!.owner(id)!.id;
          if (o !== changed.id && r !== changed.id) expect(r).toBe(o);
        }
      }),
      PROPERTY_RUNS,
    );
  });

  it('ranks every node exactly once, owner first, whatever the order of the member list (property)', () => {
    fc.assert(
      fc.property(
        memberList.chain((m) => fc.tuple(fc.constant(m), fc.shuffledSubarray(m, { minLength: m.length }))),
        ([members, shuffled]) => {
          const a = new Placement(members);
          const b = new Placement(shuffled);
          for (const id of segmentIds.slice(0, 50)) {
            const ranked = a.rank(id).map((n) => n.id);
            expect(ranked.slice().sort()).toEqual(members.map((n) => n.id).sort());
            expect(b.rank(id).map((n) => n.id)).toEqual(ranked);
            expect(a.owner(id)!.id).toBe(ranked[0]);
          }
        },
      ),
      PROPERTY_RUNS,
    );
  });

  it('never rules out a node that could beat or tie the best score so far (property)', () => {
    // u from a pair's two words exactly as ownership-hash.ts draws it.
    const uniform = (high: number, low: number) => {
      const top53 = high * 2 ** 21 + (low >>> 11);
      return top53 === 0 ? 2 ** -53 : top53 / 2 ** 53;
    };
    const weight = fc.double({ min: 1e-3, max: 1e4, noNaN: true });
    const draw = fc.double({ min: 2 ** -53, max: 1 - 2 ** -53, noNaN: true });
    fc.assert(
      fc.property(
        weight,
        weight,
        draw,
        fc.nat(64),
        fc.integer({ min: 0, max: 0xffff_ffff }),
        (w, bestWeight, bestU, below, low) => {
          // A best score as the loop meets one: some node's w / -ln(u).
          const best = bestWeight / -Math.log(bestU);
          const floor = ruledOutBelow(w, best);
          if (floor === 0) return; // nothing is ruled out
          // The largest u a ruled-out high word can give (every low bit set), right at the floor and below it.
          const high = Math.max(0, floor - 1 - below);
          expect(w / -Math.log(uniform(high, 0xffff_ffff))).toBeLessThan(best);
          expect(w / -Math.log(uniform(high, low))).toBeLessThan(best);
        },
      ),
      { seed: 1302, numRuns: 50_000 },
    );
  });

  it('finds the same owner as the full ranking, for many nodes and widely spread weights (property)', () => {
    const wide = fc.uniqueArray(
      fc.record({
        id: fc.string({ minLength: 1, maxLength: 8 }),
        weight: fc.oneof(fc.double({ min: 1e-3, max: 1e3, noNaN: true }), fc.constantFrom(1, 2, 4, 8, 16)),
      }),
      { minLength: 1, maxLength: 160, selector: (n) => n.id },
    );
    fc.assert(
      fc.property(wide, (members) => {
        const placement = new Placement(members);
        for (const id of segmentIds.slice(0, 60)) expect(placement.owner(id)).toBe(placement.ranking(id)[0]!.node);
      }),
      { seed: 2026, numRuns: 200 },
    );
  });

  it('remembers owners within its limit and answers exactly as without a memo (property)', () => {
    fc.assert(
      fc.property(memberList, fc.integer({ min: 1, max: 64 }), (members, memoEntries) => {
        const plain = new Placement(members);
        const remembering = new Placement(members, { memoEntries });
        // Twice over more ids than the memo holds: hits, misses and the older half being dropped.
        for (const id of [...segmentIds.slice(0, 100), ...segmentIds.slice(0, 100)])
          expect(remembering.owner(id)).toBe(plain.owner(id));
      }),
      PROPERTY_RUNS,
    );
  });

  it('does not compute a remembered owner again', () => {
    const placement = new Placement(nodes('A:4,B:4,C:2'), { memoEntries: 100 });
    const first = segmentIds.slice(0, 50).map((id) => placement.owner(id));
    const ownerIndex = vi.spyOn(placement as unknown as { ownerIndex(id: string): number }, 'ownerIndex');
    expect(segmentIds.slice(0, 50).map((id) => placement.owner(id))).toEqual(first);
    expect(ownerIndex).not.toHaveBeenCalled();
    placement.owner('not-seen-yet');
    expect(ownerIndex).toHaveBeenCalledTimes(1);
  });

  it('hands a missing owner’s segment to the next node in its ranking', () => {
    const members = nodes('A:4,B:4,C:2,D:8');
    for (const id of segmentIds.slice(0, 100)) {
      const [first, second] = rank(id, members);
      expect(
        owner(
          id,
          members.filter((n) => n.id !== first!.id),
        ),
      ).toEqual(second);
    }
  });

  it('reports scores in descending order, the owner’s highest', () => {
    const ranking = new Placement(nodes('A:16,B:16,C:8')).ranking('seg-0001');
    expect(ranking.map((r) => r.score)).toEqual(ranking.map((r) => r.score).sort((x, y) => y - x));
    expect(ranking.every((r) => r.score > 0 && Number.isFinite(r.score))).toBe(true);
  });

  it('has no owner for an empty member list', () => {
    expect(owner('seg-1', [])).toBeUndefined();
    expect(rank('seg-1', [])).toEqual([]);
  });

  it.each([
    [
      [
        { id: 'A', weight: 1 },
        { id: 'A', weight: 2 },
      ],
      /duplicate node id "A" at index 1/,
    ],
    [[{ id: '', weight: 1 }], /node at index 0 has an empty id/],
    [[{ id: 'A', weight: 0 }], /node "A" has weight 0/],
    [[{ id: 'B', weight: -4 }], /node "B" has weight -4/],
    [[{ id: 'C', weight: Number.NaN }], /node "C" has weight NaN/],
    [[{ id: 'D', weight: Number.POSITIVE_INFINITY }], /node "D" has weight Infinity/],
  ])('rejects a bad member list, naming the bad entry (%j)', (members, message) => {
    expect(() => new Placement(members)).toThrow(InvalidMemberListError);
    expect(() => new Placement(members)).toThrow(message);
  });
});
