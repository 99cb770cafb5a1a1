/**
 * Prefetches the segments this node owns, newest first, into free cache space only: it never
 * evicts anything to make room and never touches a segment another node owns.
 */
import type { MemberView } from '../common/member-view.js';
import type { MetaClient } from '../meta/client.js';
import type { SegmentCache } from './segment-cache.js';

export interface WarmerOptions {
  nodeId: string;
  meta: MetaClient;
  view: MemberView;
  cache: SegmentCache;
  /** @default 10000 */
  intervalMs?: number;
  onError?: (error: Error) => void;
}

export class Warmer {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(private readonly options: WarmerOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce().catch((error: Error) => this.options.onError?.(error)), this.options.intervalMs ?? 10_000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One pass; resolves with how many segments it fetched. */
  runOnce(): Promise<number> {
    this.running ??= this.pass().finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(): Promise<number> {
    const { meta, view, cache, nodeId } = this.options;
    const placement = view.placement;
    if (!placement) return 0;
    const owned = [];
    for (const table of await meta.listTables()) {
      for (const segment of await meta.listSegments(table.name)) {
        if (placement.owner(segment.id)?.id === nodeId && !cache.has(segment.id)) owned.push(segment);
      }
    }
    owned.sort((a, b) => b.maxTs - a.maxTs);
    let fetched = 0;
    for (const segment of owned) {
      if (cache.usedBytes + segment.bytes > cache.budgetBytes) break;
      if (await cache.prefetch(segment.table, segment.id, segment.bytes)) fetched++;
    }
    return fetched;
  }
}
