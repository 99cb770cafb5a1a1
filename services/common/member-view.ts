/**
 * A reader's view of one group's live members, and the Placement over them. Every reader
 * (coordinator, query nodes, merges) derives owners from this view; none stores them. It follows
 * meta by change: it holds one request that meta answers when the list's version moves (within a
 * second) or, after `pollMs` (10 s by default) without a change, with "unchanged" (a 304 of a few
 * bytes); so a steady cluster costs each reader one small answer per `pollMs`, and a node that
 * leaves is out of every view within a second or two of meta dropping it.
 *
 * The view keeps one Placement per membership epoch (the members' ids and weights): a poll that
 * finds the same ones keeps the Placement and the owners it remembers, so planning a query is a
 * map lookup per segment that an earlier query in the epoch already placed. Sub-views over part of
 * the members (the heavy pool's proven backends) are kept per epoch too.
 */
import { Placement } from '../../core/ownership.js';
import { DEFAULT_MEMBER_POLL_MS } from './config.js';
import type { Member, MetaClient } from '../meta/client.js';

export interface MemberViewOptions {
  meta: MetaClient;
  group: string;
  /** @default 10000 */
  pollMs?: number;
  /** Segment owners each Placement remembers (about 100 bytes each); 0 turns memoisation off. @default 1000000 */
  memoEntries?: number;
  onError?: (error: Error) => void;
}

/** Members, their Placement and a lookup by id: the whole view or a part of it. */
export interface MemberSet {
  readonly members?: Member[];
  readonly placement?: Placement;
  member(id: string): Member | undefined;
}

/** Sub-views kept per epoch; a caller asks for a handful of distinct ones at most. */
const MAX_SUBSETS = 16;

interface Epoch {
  members: Member[];
  placement: Placement;
  /** Sorted "id weight" pairs: equal keys, equal ownership. */
  key: string;
  byId: Map<string, Member>;
  /** Sub-views of this member list, by their ids. */
  subsets: Map<string, MemberSet>;
  /** Their Placements, which outlive a poll that finds the same epoch (the sub-views hold URLs, which may not). */
  subsetPlacements: Map<string, Placement>;
}

export class MemberView implements MemberSet {
  private current: Epoch | undefined;
  /** The version of the list `current` was made from (meta's ETag). */
  private etag: string | undefined;
  private following: AbortController | undefined;
  private refreshing: Promise<void> | undefined;

  constructor(private readonly options: MemberViewOptions) {}

  /** Follows meta's member list until stop(). */
  start(): void {
    if (this.following) return;
    const following = (this.following = new AbortController());
    void this.follow(following.signal);
  }

  stop(): void {
    this.following?.abort();
    this.following = undefined;
  }

  /** Reads the member list now (single flight). */
  refresh(): Promise<void> {
    this.refreshing ??= (async () => {
      try {
        const answer = await this.options.meta.membersChanged(this.options.group, undefined, 0);
        if (answer !== 'unchanged') this.take(answer.members, answer.etag);
      } catch (error) {
        this.options.onError?.(error as Error);
        throw error;
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }

  /** One long poll after another; after a failure, the next a `pollMs` later. */
  private async follow(signal: AbortSignal): Promise<void> {
    const pollMs = this.options.pollMs ?? DEFAULT_MEMBER_POLL_MS;
    while (!signal.aborted) {
      try {
        const answer = await this.options.meta.membersChanged(this.options.group, this.etag, pollMs, signal);
        if (answer !== 'unchanged') this.take(answer.members, answer.etag);
      } catch (error) {
        if (signal.aborted) return;
        this.options.onError?.(error as Error);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollMs);
          signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
        });
      }
    }
  }

  private take(members: Member[], etag: string | undefined): void {
    this.current = this.epochOf(members);
    this.etag = etag;
  }

  /** Undefined until the first member list has arrived. */
  get members(): Member[] | undefined {
    return this.current?.members;
  }

  get placement(): Placement | undefined {
    return this.current?.placement;
  }

  member(id: string): Member | undefined {
    return this.current?.byId.get(id);
  }

  /** The members in `only`, with a Placement of their own (kept for the epoch). */
  subset(only: ReadonlySet<string>): MemberSet {
    const epoch = this.current;
    if (!epoch) return { member: () => undefined };
    const members = epoch.members.filter((m) => only.has(m.id));
    const key = members
      .map((m) => m.id)
      .sort()
      .join('\n');
    let subset = epoch.subsets.get(key);
    if (!subset) {
      if (epoch.subsets.size >= MAX_SUBSETS) epoch.subsets.clear();
      if (epoch.subsetPlacements.size >= MAX_SUBSETS) epoch.subsetPlacements.clear();
      let placement = epoch.subsetPlacements.get(key);
      if (!placement && members.length > 0) {
        placement = this.placementOf(members);
        epoch.subsetPlacements.set(key, placement);
      }
      const byId = new Map(members.map((m) => [m.id, m]));
      subset = { members, placement, member: (id) => byId.get(id) };
      epoch.subsets.set(key, subset);
    }
    return subset;
  }

  /** The epoch for a fresh member list: the current one's Placements when ids and weights are unchanged. */
  private epochOf(members: Member[]): Epoch {
    const key = members
      .map((m) => `${m.id} ${m.weight}`)
      .sort()
      .join('\n');
    const same = this.current?.key === key ? this.current : undefined;
    return {
      members,
      placement: same?.placement ?? this.placementOf(members),
      key,
      byId: new Map(members.map((m) => [m.id, m])),
      subsets: new Map(),
      subsetPlacements: same?.subsetPlacements ?? new Map(),
    };
  }

  private placementOf(members: Member[]): Placement {
    return new Placement(
      members.map((m) => ({ id: m.id, weight: m.weight })),
      { memoEntries: this.options.memoEntries ?? 1_000_000 },
    );
  }
}
