/**
 * A table's active segments as the coordinator keeps them, indexed by time: the segments a
 * query's time range meets are found by two binary searches, not by a pass over every segment.
 *
 * Segments spanning at most a day (every merged one: merges never cross a day) are kept sorted by
 * their first timestamp, so the ones meeting [from, to] start in [from - a day, to]; the few
 * wider ones (a batch spanning days, a table without a clock) are kept apart and checked each
 * time. It moves from one manifest version to the next by meta's changes (ManifestChanges).
 */
import type { ManifestChanges, SegmentRow } from '../../meta/client.js';

/** A day: the longest a narrow segment spans (meta's NARROW_SPAN_MS). */
const NARROW_SPAN_MS = 86_400_000;

const before = (a: SegmentRow, b: SegmentRow) => a.minTs - b.minTs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
const isNarrow = (s: SegmentRow) => s.maxTs - s.minTs <= NARROW_SPAN_MS;

export class SegmentIndex {
  private readonly byId = new Map<string, SegmentRow>();
  /** Narrow segments by (minTs, id). */
  private narrow: SegmentRow[] = [];
  private readonly wide = new Map<string, SegmentRow>();

  constructor(
    /** The manifest version the index holds. */
    public version: number,
    /** The table incarnation it is of: another one is another table. */
    readonly incarnation: number,
  ) {}

  get size(): number {
    return this.byId.size;
  }

  /** Builds an index of `segments` at once (a manifest read whole). */
  static of(version: number, incarnation: number, segments: Iterable<SegmentRow>): SegmentIndex {
    const index = new SegmentIndex(version, incarnation);
    for (const segment of segments) {
      index.byId.set(segment.id, segment);
      if (isNarrow(segment)) index.narrow.push(segment);
      else index.wide.set(segment.id, segment);
    }
    index.narrow.sort(before);
    return index;
  }

  /** Moves the index to `changes.version`. */
  apply(changes: ManifestChanges): void {
    for (const id of changes.retired) this.remove(id);
    for (const segment of changes.added) this.add(segment);
    this.version = Math.max(this.version, changes.version);
  }

  /** The segments that meet [from, to], newest first (as meta lists them). */
  inRange(from = -Infinity, to = Infinity): SegmentRow[] {
    const found: SegmentRow[] = [];
    for (let i = this.lowerBound(from - NARROW_SPAN_MS); i < this.narrow.length; i++) {
      const segment = this.narrow[i]!;
      if (segment.minTs > to) break;
      if (segment.maxTs >= from) found.push(segment);
    }
    for (const segment of this.wide.values()) if (segment.maxTs >= from && segment.minTs <= to) found.push(segment);
    return found.sort((a, b) => b.maxTs - a.maxTs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  private add(segment: SegmentRow): void {
    if (this.byId.has(segment.id)) return;
    this.byId.set(segment.id, segment);
    if (!isNarrow(segment)) this.wide.set(segment.id, segment);
    else this.narrow.splice(this.position(segment), 0, segment);
  }

  private remove(id: string): void {
    const segment = this.byId.get(id);
    if (!segment) return;
    this.byId.delete(id);
    if (!isNarrow(segment)) this.wide.delete(id);
    else this.narrow.splice(this.position(segment), 1);
  }

  /** Where `segment` stands, or would, in the narrow list. */
  private position(segment: SegmentRow): number {
    let [lo, hi] = [0, this.narrow.length];
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (before(this.narrow[mid]!, segment) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first narrow segment starting at or after `minTs`. */
  private lowerBound(minTs: number): number {
    let [lo, hi] = [0, this.narrow.length];
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.narrow[mid]!.minTs < minTs) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
