/**
 * Weighted ownership: which query node owns a segment, and who stands in when it is gone.
 *
 * Weighted rendezvous hashing by the logarithmic method: node n scores `w_n / -ln(u)` for segment s,
 * with u the pair's uniform draw from ownership-hash.ts. The highest score owns the segment; the
 * rest, in score order, are its standby order. This is exactly proportional to weight in
 * expectation and minimally disruptive: adding, removing or reweighting one node moves segments
 * only to or from that node. Ownership is computed, never stored; every caller that sees the same
 * member list gets the same answer, whatever order the list comes in.
 *
 * Not for workflow code: see the note on the hash in ownership-hash.ts.
 */
import { idHash, pairUniformOf } from './ownership-hash.js';

export interface WeightedNode {
  id: string;
  weight: number;
}

/** One node's place in a segment's ranking. */
export interface RankedNode {
  node: WeightedNode;
  score: number;
}

/** Thrown when a member list has an empty or duplicate id, or a weight that is not positive and finite. */
export class InvalidMemberListError extends Error {
  override name = 'InvalidMemberListError';
}

/** Ownership over one fixed member list; build it once per member list, then ask per segment. */
export class Placement {
  /** Nodes sorted by id, so that the input order never matters (ties break by id too). */
  readonly nodes: readonly WeightedNode[];
  private readonly weights: Float64Array;
  private readonly hashHi: Uint32Array;
  private readonly hashLo: Uint32Array;

  constructor(nodes: readonly WeightedNode[]) {
    validate(nodes);
    this.nodes = [...nodes].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const n = this.nodes.length;
    this.weights = new Float64Array(n);
    this.hashHi = new Uint32Array(n);
    this.hashLo = new Uint32Array(n);
    this.nodes.forEach((node, i) => {
      const h = idHash(node.id);
      this.weights[i] = node.weight;
      this.hashHi[i] = h.hi;
      this.hashLo[i] = h.lo;
    });
  }

  /** The live node that owns the segment; undefined only for an empty member list. */
  owner(segmentId: string): WeightedNode | undefined {
    const { hi, lo } = idHash(segmentId);
    let best = -1;
    let bestScore = -1;
    for (let i = 0; i < this.weights.length; i++) {
      const u = pairUniformOf(hi, lo, this.hashHi[i]!, this.hashLo[i]!);
      const weight = this.weights[i]!;
      // An exact shortcut: -ln(u) >= 1 - u, so weight / (1 - u) bounds the score from above, and a
      // node that cannot beat the best so far skips the logarithm.
      if (weight / (1 - u) <= bestScore) continue;
      const score = weight / -Math.log(u);
      // Strictly greater: on an exact tie the smaller id (earlier in sorted order) wins.
      if (score > bestScore) {
        bestScore = score;
        best = i;
      }
    }
    return best < 0 ? undefined : this.nodes[best];
  }

  /** Every node, owner first, then the standby order. */
  rank(segmentId: string): WeightedNode[] {
    return this.ranking(segmentId).map((r) => r.node);
  }

  /** Every node with its score, highest first: what `berth placement explain` shows. */
  ranking(segmentId: string): RankedNode[] {
    const { hi, lo } = idHash(segmentId);
    const ranked = this.nodes.map((node, i) => ({ node, score: this.score(i, hi, lo), i }));
    ranked.sort((a, b) => b.score - a.score || a.i - b.i);
    return ranked.map(({ node, score }) => ({ node, score }));
  }

  private score(i: number, segHi: number, segLo: number): number {
    const u = pairUniformOf(segHi, segLo, this.hashHi[i]!, this.hashLo[i]!);
    return this.weights[i]! / -Math.log(u);
  }
}

/** The owner of one segment; for many segments over one member list, build a Placement once. */
export function owner(segmentId: string, nodes: readonly WeightedNode[]): WeightedNode | undefined {
  return new Placement(nodes).owner(segmentId);
}

/** The ranking of one segment, owner first; for many segments, build a Placement once. */
export function rank(segmentId: string, nodes: readonly WeightedNode[]): WeightedNode[] {
  return new Placement(nodes).rank(segmentId);
}

function validate(nodes: readonly WeightedNode[]): void {
  const seen = new Set<string>();
  nodes.forEach((node, index) => {
    if (typeof node.id !== 'string' || node.id.length === 0) {
      throw new InvalidMemberListError(`node at index ${index} has an empty id`);
    }
    if (seen.has(node.id)) {
      throw new InvalidMemberListError(`duplicate node id "${node.id}" at index ${index}`);
    }
    seen.add(node.id);
    if (typeof node.weight !== 'number' || !Number.isFinite(node.weight) || node.weight <= 0) {
      throw new InvalidMemberListError(
        `node "${node.id}" has weight ${String(node.weight)}: a weight must be a positive finite number`,
      );
    }
  });
}
