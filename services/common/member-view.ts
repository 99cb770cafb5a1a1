/**
 * A reader's view of one group's live members, polled from meta at most every `pollMs` (10 s by
 * default), and the Placement over them. Every reader (coordinator, query nodes, merges) derives
 * owners from this view; none stores them.
 */
import { Placement } from '../../core/ownership.js';
import type { Member, MetaClient } from '../meta/client.js';

export interface MemberViewOptions {
  meta: MetaClient;
  group: string;
  /** @default 10000 */
  pollMs?: number;
  onError?: (error: Error) => void;
}

export class MemberView {
  private current: { members: Member[]; placement: Placement } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;

  constructor(private readonly options: MemberViewOptions) {}

  /** Polls now and then every pollMs. */
  start(): void {
    void this.refresh().catch(() => {});
    this.timer = setInterval(() => void this.refresh().catch(() => {}), this.options.pollMs ?? 10_000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Reads the member list now (single flight). */
  refresh(): Promise<void> {
    this.refreshing ??= (async () => {
      try {
        const members = await this.options.meta.members(this.options.group);
        this.current = { members, placement: new Placement(members.map((m) => ({ id: m.id, weight: m.weight }))) };
      } catch (error) {
        this.options.onError?.(error as Error);
        throw error;
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }

  /** Undefined until the first member list has arrived. */
  get members(): Member[] | undefined {
    return this.current?.members;
  }

  get placement(): Placement | undefined {
    return this.current?.placement;
  }

  member(id: string): Member | undefined {
    return this.current?.members.find((m) => m.id === id);
  }
}
