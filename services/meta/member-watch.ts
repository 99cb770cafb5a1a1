/**
 * Member lists by change, not by poll: each group's list is read from the store at most once per
 * `refreshMs`, whoever asks, and carries a version (an ETag of its content). A reader that holds
 * the current version may wait for the next one (a long poll), and is answered "unchanged" if none
 * comes in time; a node that registers, leaves or expires is seen by every waiting reader within
 * `refreshMs`. So a steady cluster costs meta one store read per group and second, and a reader an
 * idle request per wait, however many nodes and readers there are.
 */
import { createHash } from 'node:crypto';
import type { Member } from './api.js';

export interface VersionedMembers {
  members: Member[];
  /** A quoted ETag of the list's content: equal lists, equal versions, on every meta replica. */
  etag: string;
}

export interface MemberWatchOptions {
  members(group: string): Promise<Member[]>;
  /** How stale a list answered may be. @default 1000 */
  refreshMs?: number;
  /** @default Date.now */
  now?: () => number;
}

interface Group {
  list?: VersionedMembers;
  readAt: number;
  reading?: Promise<VersionedMembers>;
}

export class MemberWatch {
  private readonly groups = new Map<string, Group>();

  constructor(private readonly options: MemberWatchOptions) {}

  /** The group's list, read from the store unless a read began within `maxAgeMs`. */
  current(group: string, maxAgeMs = this.refreshMs): Promise<VersionedMembers> {
    const now = this.options.now ?? Date.now;
    let state = this.groups.get(group);
    if (!state) this.groups.set(group, (state = { readAt: -Infinity }));
    if (state.list && now() - state.readAt < maxAgeMs) return Promise.resolve(state.list);
    const entry = state;
    entry.reading ??= (async () => {
      const startedAt = now();
      try {
        const members = await this.options.members(group);
        const etag = `"${createHash('sha256').update(JSON.stringify(members)).digest('base64url').slice(0, 22)}"`;
        entry.list = entry.list?.etag === etag ? entry.list : { members, etag };
        entry.readAt = startedAt;
        return entry.list;
      } finally {
        entry.reading = undefined;
      }
    })();
    return entry.reading;
  }

  /**
   * The group's list once its version is no longer `since`, or at `waitMs` the same one (whose
   * etag then equals `since`); `signal` (the reader gone) ends the wait early. A reader with no
   * version yet gets the list as the store has it now.
   */
  async next(
    group: string,
    since: string | undefined,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<VersionedMembers> {
    const now = this.options.now ?? Date.now;
    const until = now() + waitMs;
    let list = await this.current(group, since === undefined ? 0 : this.refreshMs);
    while (list.etag === since && now() < until && !signal?.aborted) {
      await pause(Math.min(this.refreshMs, until - now()), signal);
      list = await this.current(group);
    }
    return list;
  }

  private get refreshMs(): number {
    return this.options.refreshMs ?? 1_000;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(ms, 0));
    signal?.addEventListener('abort', done, { once: true });
  });
}
