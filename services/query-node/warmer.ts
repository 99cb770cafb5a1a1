/**
 * Prefetches the segments this node owns into free cache space only: every footer first (a first
 * query then plans from the cache), then whole segments, newest first. It never evicts anything to
 * make room and never touches a segment another node owns. It also keeps the
 * figures of warm-up: how much of what the node owns is in its cache, and, after a membership change
 * (the node's own arrival included), how much of the share that moved to it is.
 */
import type { MemberView } from '../common/member-view.js';
import type { MetaClient, SegmentRow } from '../meta/client.js';
import type { SegmentCache } from './segment-cache.js';
import type { WarmShare, Warmth } from './api.js';
import { DEFAULT_WARM_INTERVAL_MS } from './config.js';

export interface WarmerOptions {
  nodeId: string;
  meta: MetaClient;
  view: MemberView;
  cache: SegmentCache;
  /** @default 10000 */
  intervalMs?: number;
  onError?: (error: Error) => void;
}

/** The warm-up figures' shape is the node's wire contract (GET /v1/info). */
export type { WarmShare, Warmth };

type Owned = Pick<SegmentRow, 'id' | 'bytes'>;

export class Warmer {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  /** As of the last pass: what the node owned, the membership that decided it, what moved to it. */
  private owned: Owned[] = [];
  private membership: string | undefined;
  private moved: { segments: Owned[]; since: number } | undefined;

  constructor(private readonly options: WarmerOptions) {}

  start(): void {
    this.timer = setInterval(
      () => void this.runOnce().catch((error: Error) => this.options.onError?.(error)),
      this.options.intervalMs ?? DEFAULT_WARM_INTERVAL_MS,
    );
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One pass, fetching at most `limit` segments (0: survey only); resolves with how many it fetched. */
  runOnce(limit = Infinity): Promise<number> {
    this.running ??= this.pass(limit).finally(() => (this.running = undefined));
    return this.running;
  }

  /** The warm share of what the node owns, and of what moved to it, read against the cache now. */
  warmth(): Warmth {
    const share = (segments: Owned[]): WarmShare => {
      const bytes = segments.reduce((sum, s) => sum + s.bytes, 0);
      const warmBytes = segments
        .filter((s) => this.options.cache.holdsWhole(s.id))
        .reduce((sum, s) => sum + s.bytes, 0);
      return { segments: segments.length, bytes, warmBytes, fraction: bytes > 0 ? warmBytes / bytes : 1 };
    };
    if (this.membership === undefined) return {};
    return {
      owned: share(this.owned),
      ...(this.moved
        ? { moved: { ...share(this.moved.segments), since: new Date(this.moved.since).toISOString() } }
        : {}),
    };
  }

  private async pass(limit: number): Promise<number> {
    const { meta, view, cache, nodeId } = this.options;
    const placement = view.placement;
    if (!placement) return 0;
    const membership = (view.members ?? [])
      .map((m) => `${m.id}:${m.weight}`)
      .sort()
      .join(',');
    const owned: SegmentRow[] = [];
    for (const table of await meta.listTables()) {
      for (const segment of await meta.listSegments(table.name)) {
        if (placement.owner(segment.id)?.id !== nodeId) continue;
        owned.push(segment);
        cache.locate(segment.id, segment.object);
      }
    }
    if (membership !== this.membership) {
      // The share that moved here: all of it on the node's first pass (it just arrived, or came back).
      const before = new Set(this.membership === undefined ? [] : this.owned.map((s) => s.id));
      this.moved = {
        segments: owned.filter((s) => !before.has(s.id)).map(({ id, bytes }) => ({ id, bytes })),
        since: Date.now(),
      };
      this.membership = membership;
    }
    this.owned = owned.map(({ id, bytes }) => ({ id, bytes }));
    const cold = owned.filter((s) => !cache.holdsWhole(s.id)).sort((a, b) => b.maxTs - a.maxTs);
    if (limit === 0) return 0;
    // Every owned segment's footer first (the seed's index regions: a few KiB each), then whole segments while space allows.
    for (const segment of cold)
      if (!cache.has(segment.id)) await cache.prefetchFooter(segment.table, segment.id, segment.bytes);
    let fetched = 0;
    for (const segment of cold) {
      if (fetched >= limit) break;
      if (await cache.prefetch(segment.table, segment.id, segment.bytes)) fetched++;
    }
    return fetched;
  }
}
