/**
 * What a membership change does to ownership: counts each node's segments before and after, and
 * which segments moved from whom to whom. Backs `berth placement simulate` and the property tests.
 */
import { Placement, type WeightedNode } from './ownership.js';

export interface NodeShare {
  weight: number;
  /** Fraction of the segments this node owns. */
  share: number;
  segments: number;
}

export interface SimulationResult {
  segments: number;
  before: Record<string, NodeShare>;
  after: Record<string, NodeShare>;
  moved: {
    segments: number;
    fraction: number;
    /** "A->D": segments whose owner went from A to D. */
    byPair: Record<string, number>;
  };
}

export interface SimulationInput {
  before: readonly WeightedNode[];
  after: readonly WeightedNode[];
  segments: number;
  /** Segment id for index i. @default `seg-${i}` */
  segmentId?: (i: number) => string;
}

export function simulatePlacement(input: SimulationInput): SimulationResult {
  const segmentId = input.segmentId ?? ((i: number) => `seg-${i}`);
  const before = new Placement(input.before);
  const after = new Placement(input.after);
  const countsBefore = new Map<string, number>();
  const countsAfter = new Map<string, number>();
  const byPair: Record<string, number> = {};
  let moved = 0;
  for (let i = 0; i < input.segments; i++) {
    const id = segmentId(i);
    const from = before.owner(id)?.id;
    const to = after.owner(id)?.id;
    if (from !== undefined) countsBefore.set(from, (countsBefore.get(from) ?? 0) + 1);
    if (to !== undefined) countsAfter.set(to, (countsAfter.get(to) ?? 0) + 1);
    if (from !== to) {
      moved++;
      const pair = `${from ?? '(none)'}->${to ?? '(none)'}`;
      byPair[pair] = (byPair[pair] ?? 0) + 1;
    }
  }
  return {
    segments: input.segments,
    before: shares(before.nodes, countsBefore, input.segments),
    after: shares(after.nodes, countsAfter, input.segments),
    moved: { segments: moved, fraction: input.segments === 0 ? 0 : moved / input.segments, byPair },
  };
}

function shares(nodes: readonly WeightedNode[], counts: Map<string, number>, total: number): Record<string, NodeShare> {
  return Object.fromEntries(
    nodes.map((node) => {
      const segments = counts.get(node.id) ?? 0;
      return [node.id, { weight: node.weight, share: total === 0 ? 0 : segments / total, segments }];
    }),
  );
}
