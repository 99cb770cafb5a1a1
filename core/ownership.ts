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
 * Cost. A Placement belongs to one member list (one membership epoch), so it may remember the
 * owners it computed (`memoEntries`): a query's planning is then one map lookup per segment. A
 * lookup it must compute hashes the segment id once and mixes it with every node's hash: that part
 * cannot shrink below one mix per node without changing the hash contract. No node can be ruled
 * out before its pair is mixed, because u may lie anywhere up to 1 - 2^-53, where a node of weight w
 * scores about w * 9e15: beating every other node unless weights differed by some fifteen orders
 * of magnitude. What the loop does save is everything after the mix for nodes that cannot win
 * (see `ruledOutBelow`): the draw, its logarithm and the division, for all but about ln(n) nodes
 * per lookup among equal weights. Nodes are visited heaviest first, so that the best score rises
 * early, and one bound serves each run of equal weights.
 *
 * Not for workflow code: see the note on the hash in ownership-hash.ts.
 */
import { idHash, lastPairUniform, pairHighWord, pairUniformOf } from './ownership-hash.js';

export interface WeightedNode {
  id: string;
  weight: number;
}

/** One node's place in a segment's ranking. */
export interface RankedNode {
  node: WeightedNode;
  score: number;
}

export interface PlacementOptions {
  /**
   * How many segments' owners to remember (0: none). Each costs one map entry (about 100 bytes
   * with its id); past the limit the older half is dropped. @default 0
   */
  memoEntries?: number;
}

/** Thrown when a member list has an empty or duplicate id, or a weight that is not positive and finite. */
export class InvalidMemberListError extends Error {
  override name = 'InvalidMemberListError';
}

const TWO_POW_32 = 2 ** 32;
/** The margin, in u, by which `ruledOutBelow` stays clear of the exact boundary. */
const MARGIN = 2 ** -30;

/**
 * The high word below which a node of `weight` can neither beat nor tie `bestScore`: when
 * `pairHighWord(...) < ruledOutBelow(weight, bestScore)`, the node's score is below bestScore and
 * the loop skips its logarithm. Proof, with x = w / B (B = bestScore):
 * - T = floor(E * 2^32) with E = 1 - x - 2^-30. A high word h < T gives h + 1 <= E * 2^32, and
 *   u < (h + 1) / 2^32 (u's low 21 bits add less than 2^-32; the u = 0 guard gives 2^-53), so u < E.
 * - -ln(u) >= 1 - u for every u in (0, 1), so -ln(u) > x + 2^-30, and the score w / -ln(u) < B.
 * - Floating point: a skip needs E > 0, so x < 1. Computing E errs by at most 3 * 2^-53, leaving a
 *   gap g > 2^-31 between -ln(u) and x. The computed logarithm errs by under one ulp (2^-52
 *   relative) and the division by half an ulp, so the computed score is at most
 *   B * x (1 + 2^-53) / ((x + g)(1 - 2^-52)), which is below B while x * 2^-51 < g: true for x < 1.
 * Ties are never skipped (the bound is strict), so the smaller id still wins a tie. The bound is
 * loose by e^-x - (1 - x) < x^2 / 2, a few extra logarithms. test/ownership.test.ts checks the
 * claim on random weights, scores and hashes.
 */
export function ruledOutBelow(weight: number, bestScore: number): number {
  if (!(bestScore > 0)) return 0;
  const edge = 1 - weight / bestScore - MARGIN;
  return edge > 0 ? Math.floor(edge * TWO_POW_32) : 0;
}

/** Ownership over one fixed member list; build it once per member list, then ask per segment. */
export class Placement {
  /** Nodes sorted by id, so that the input order never matters (ties break by id too). */
  readonly nodes: readonly WeightedNode[];
  /** The owner loop's order: indexes into `nodes`, heaviest first, then by id. */
  private readonly order: Int32Array;
  /** Weights and id hashes in the loop's order. */
  private readonly weights: Float64Array;
  private readonly hashHi: Uint32Array;
  private readonly hashLo: Uint32Array;
  private readonly memoLimit: number;
  /** Remembered owners (indexes into `nodes`): new entries go to `recent`; when it is full, it becomes `older`. */
  private recent = new Map<string, number>();
  private older = new Map<string, number>();

  constructor(nodes: readonly WeightedNode[], options: PlacementOptions = {}) {
    validate(nodes);
    this.nodes = [...nodes].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const n = this.nodes.length;
    const byWeight = Array.from({ length: n }, (_, i) => i).sort(
      (a, b) => this.nodes[b]!.weight - this.nodes[a]!.weight || a - b,
    );
    this.order = Int32Array.from(byWeight);
    this.weights = new Float64Array(n);
    this.hashHi = new Uint32Array(n);
    this.hashLo = new Uint32Array(n);
    byWeight.forEach((index, k) => {
      const node = this.nodes[index]!;
      const h = idHash(node.id);
      this.weights[k] = node.weight;
      this.hashHi[k] = h.hi;
      this.hashLo[k] = h.lo;
    });
    this.memoLimit = Math.max(0, Math.floor(options.memoEntries ?? 0));
  }

  /** The live node that owns the segment; undefined only for an empty member list. */
  owner(segmentId: string): WeightedNode | undefined {
    if (this.memoLimit === 0) return this.nodes[this.ownerIndex(segmentId)];
    let index = this.recent.get(segmentId);
    if (index === undefined) {
      index = this.older.get(segmentId) ?? this.ownerIndex(segmentId);
      if (index < 0) return undefined;
      this.remember(segmentId, index);
    }
    return this.nodes[index];
  }

  /** Every node, owner first, then the standby order. */
  rank(segmentId: string): WeightedNode[] {
    return this.ranking(segmentId).map((r) => r.node);
  }

  /** Every node with its score, highest first: what `berth placement explain` shows. */
  ranking(segmentId: string): RankedNode[] {
    const { hi, lo } = idHash(segmentId);
    const ranked = Array.from(this.order, (i, k) => ({
      node: this.nodes[i]!,
      score: this.weights[k]! / -Math.log(pairUniformOf(hi, lo, this.hashHi[k]!, this.hashLo[k]!)),
      i,
    }));
    ranked.sort((a, b) => b.score - a.score || a.i - b.i);
    return ranked.map(({ node, score }) => ({ node, score }));
  }

  /** The owner's index in `nodes`, computed; -1 for an empty member list. */
  private ownerIndex(segmentId: string): number {
    const { hi, lo } = idHash(segmentId);
    const { order, weights, hashHi, hashLo } = this;
    let best = -1;
    let bestScore = -1;
    let floor = 0; // ruledOutBelow(floorWeight, bestScore)
    let floorWeight = Number.NaN;
    for (let k = 0; k < order.length; k++) {
      const weight = weights[k]!;
      if (weight !== floorWeight) {
        floorWeight = weight;
        floor = ruledOutBelow(weight, bestScore);
      }
      const high = pairHighWord(hi, lo, hashHi[k]!, hashLo[k]!);
      if (high < floor) continue;
      const score = weight / -Math.log(lastPairUniform(high));
      const index = order[k]!;
      // On an exact tie the smaller id (earlier in `nodes`) wins.
      if (score > bestScore || (score === bestScore && index < best)) {
        bestScore = score;
        best = index;
        floorWeight = Number.NaN;
      }
    }
    return best;
  }

  private remember(segmentId: string, index: number): void {
    if (this.recent.size >= this.memoLimit / 2) {
      this.older = this.recent;
      this.recent = new Map();
    }
    this.recent.set(segmentId, index);
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
