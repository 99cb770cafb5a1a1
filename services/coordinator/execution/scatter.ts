/**
 * Runs a scan stage on the query nodes and streams their rows into the final stage. Segments go
 * to their owners; work aimed at a node that does not answer (a transport error, a 5xx, a stream
 * cut short, or no answer within the node timeout) goes to the next node in each segment's
 * ranking (a cache miss, never an error) after what it had sent is dropped, and that node is
 * passed over for a while, so that one hung node stalls only the queries already waiting on it. A
 * node's 4xx is the query's own fault (DuckDB's error, a result too large): it is the answer, and
 * no other node is tried. So is data that disagrees with its table (a node's segment, or a stream
 * the exchange refuses): a 500 that says so, never routed around to an answer; and so is a heavy
 * query's final stage failing on its backend (a 502 naming it). Before the
 * coordinator has a member list it spreads work round-robin over its seed nodes.
 */
import type { Readable } from 'node:stream';
import type { Placement } from '../../../core/ownership.js';
import { DomainError, unavailable } from '../../common/errors.js';
import { ServiceCallError } from '../../common/http-client.js';
import type { MemberView } from '../../common/member-view.js';
import type { SqlParameter } from '../../common/sql-parameters.js';
import type { Member, SegmentRow, TableInfo } from '../../meta/client.js';
import { SEGMENT_SCHEMA_MISMATCH } from '../../query-node/api.js';
import { QueryNodeClient, type ScanRequest, type ScanStats } from '../../query-node/client.js';

/** How long one node may take before its work goes to the next, unless the coordinator is told otherwise. */
export const DEFAULT_SCAN_TIMEOUT_MS = 120_000;

export interface ScatterOptions {
  view: MemberView;
  /** Query node URLs to use before any member list has arrived. */
  seedNodes: string[];
  token: string;
  /** How long one node may take before its work goes to the next. @default 120000 */
  scanTimeoutMs?: number;
  /** How long a node that failed to answer is passed over. @default 30000 */
  suspectMs?: number;
  /** Largest result a node may send back. @default unlimited */
  maxResultBytes?: number;
  /** @default Date.now */
  now?: () => number;
}

/** One node's share of the work, as sent. */
export interface NodeWork {
  node: string;
  url: string;
  segments: string[];
}

/** Where a scan's rows go as they stream in (one input of the final stage). */
export interface RowSink {
  /** Appends one node's stream; on failure nothing of it stays. */
  receive(body: Readable): Promise<{ part: string; rows: number }>;
  /** Drops a stream already appended (its node ended it with an error). */
  discard(part: string): Promise<void>;
}

/** What one scan stage reads: the table, its segments, the columns, and the SQL each owner runs. */
export interface ScanWork {
  sql: string;
  /** Values for the parameters `sql` names. */
  parameters?: SqlParameter[];
  table: TableInfo;
  segments: SegmentRow[];
  /** Columns the scan reads; every column when absent. */
  columns?: string[];
  /** The answer streams to its client, so no cap applies to what a node sends (DuckDB spills what it holds). */
  uncapped?: boolean;
  /** Tables every node reads whole beside its share (a broadcast join's small sides): each its columns and segments. */
  whole?: { table: TableInfo; columns: string[]; segments: SegmentRow[] }[];
}

export interface ScatterOutcome {
  scans: ScanStats[];
  /** Segments that had to be served by a node other than the first one picked. */
  fallbacks: number;
  /** 'owner' when placed by ownership, 'round-robin' before any member list. */
  placement: 'owner' | 'round-robin';
}

interface Target {
  id: string;
  url: string;
}

/** The members work may go to: the whole view, or the part of it a caller allows. */
interface Members {
  readonly members?: Member[];
  readonly placement?: Placement;
  member(id: string): Member | undefined;
}

export class Scatter {
  private roundRobin = 0;
  /** Nodes that failed to answer, and until when they are passed over. */
  private readonly suspects = new Map<string, number>();

  constructor(private readonly options: ScatterOptions) {}

  /** Runs a scan on the owners of its segments (only on `only` when given), each over its own share, streaming into `sink`; `signal` abandons it all. */
  async toOwners(
    work: ScanWork,
    sink: RowSink,
    only?: ReadonlySet<string>,
    signal?: AbortSignal,
  ): Promise<ScatterOutcome> {
    const members = this.members(only);
    const attached = new Map(
      [work.segments, ...(work.whole ?? []).map((w) => w.segments)]
        .flat()
        .flatMap((s) => (s.object ? ([[s.id, s.object]] as const) : [])),
    );
    const table = (info: TableInfo, ids: string[], columns?: string[]): ScanRequest['tables'][number] => {
      const objects =
        attached.size === 0 ? [] : ids.filter((id) => attached.has(id)).map((id) => [id, attached.get(id)!]);
      return {
        name: info.name,
        schema: info.columns,
        ...(columns ? { columns } : {}),
        segments: ids,
        ...(objects.length > 0 ? { objects: Object.fromEntries(objects) } : {}),
      };
    };
    const whole = (work.whole ?? []).map((w) => {
      const ids = w.segments.map((s) => s.id);
      return { ...table(w.table, ids, w.columns), broadcast: true };
    });
    const request = (ids: string[]): ScanRequest => ({
      sql: work.sql,
      tables: [table(work.table, ids, work.columns), ...whole],
      ...(work.uncapped ? {} : this.cap),
      ...(work.parameters?.length ? { parameters: work.parameters } : {}),
    });
    return await this.run(
      members,
      work.segments.map((s) => s.id),
      (failed, ids) => this.assign(members, ids, failed),
      async (target, ids, until) => {
        const response = await new QueryNodeClient(target.url, this.options.token).scan(request(ids), until);
        let part: string;
        try {
          ({ part } = await sink.receive(response.body));
        } catch (error) {
          // A stream cut short by the node says why in its trailers (a result past the cap, a bad cast): that answer wins.
          await response.ended;
          throw error;
        }
        try {
          return await response.ended;
        } catch (error) {
          await sink.discard(part);
          throw error;
        }
      },
      signal,
    );
  }

  private get cap(): { maxResultBytes?: number } {
    return this.options.maxResultBytes ? { maxResultBytes: this.options.maxResultBytes } : {};
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  /** The failed nodes plus those still suspected. */
  private avoided(failed: ReadonlySet<string>): Set<string> {
    const avoid = new Set(failed);
    for (const [id, until] of this.suspects) {
      if (until > this.now()) avoid.add(id);
      else this.suspects.delete(id);
    }
    return avoid;
  }

  /** Reads the member list now, for work that must not wait for the next poll (a pool just made ready). */
  async refreshMembers(): Promise<void> {
    await this.options.view.refresh();
  }

  /** The member with this id, if the view lists it. */
  member(id: string): Member | undefined {
    return this.options.view.member(id);
  }

  /** True when the view lists every one of these node ids. */
  lists(ids: Iterable<string>): boolean {
    for (const id of ids) if (!this.options.view.member(id)) return false;
    return true;
  }

  /** The view, or the members of it in `only` with a placement of their own (kept by the view for its epoch). */
  private members(only?: ReadonlySet<string>): Members {
    const { view } = this.options;
    return only && view.members ? view.subset(only) : view;
  }

  /** Where toOwners would send each segment, with no request made: what planning costs. */
  plan(segments: Pick<SegmentRow, 'id'>[], only?: ReadonlySet<string>): NodeWork[] {
    const groups = this.assign(
      this.members(only),
      segments.map((s) => s.id),
      new Set(),
    );
    return [...groups.values()].map(({ target, ids }) => ({ node: target.id, url: target.url, segments: ids }));
  }

  private get timeout(): number {
    return this.options.scanTimeoutMs ?? DEFAULT_SCAN_TIMEOUT_MS;
  }

  private async run(
    members: Members,
    ids: string[],
    assign: (failed: Set<string>, ids: string[]) => Map<string, { target: Target; ids: string[] }>,
    send: (target: Target, ids: string[], until: AbortSignal) => Promise<ScanStats>,
    signal?: AbortSignal,
  ): Promise<ScatterOutcome> {
    const placement = members.placement ? 'owner' : 'round-robin';
    const failed = new Set<string>();
    const scans: ScanStats[] = [];
    let fallbacks = 0;
    // One node's answer that fails the query ends every other node's work on it too.
    const stop = new AbortController();
    const query = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
    let pending = assign(failed, ids);
    if (pending.size === 0)
      throw unavailable('no_backend', 'no live query node is known: start query nodes, or wait for them to register');
    try {
      while (pending.size > 0) {
        const retry: string[] = [];
        await Promise.all(
          [...pending.values()].map(async ({ target, ids: share }) => {
            try {
              const stats = await send(target, share, AbortSignal.any([query, AbortSignal.timeout(this.timeout)]));
              this.suspects.delete(target.id);
              scans.push(stats);
            } catch (error) {
              query.throwIfAborted();
              const answer = finalAnswer(error);
              if (answer) throw answer;
              // No answer, or not one about the query: its work goes to the next node.
              failed.add(target.id);
              this.suspects.set(target.id, this.now() + (this.options.suspectMs ?? 30_000));
              retry.push(...share);
            }
          }),
        );
        if (retry.length === 0) break;
        fallbacks += retry.length;
        pending = assign(failed, retry);
        if (pending.size === 0)
          throw unavailable('no_backend', `no query node could serve the query (tried ${[...failed].join(', ')})`);
      }
    } catch (error) {
      stop.abort(error);
      throw error;
    }
    return { scans, fallbacks, placement };
  }

  /** Groups segments by the first node in each one's ranking that has not failed. */
  private assign(view: Members, ids: string[], failed: Set<string>): Map<string, { target: Target; ids: string[] }> {
    const groups = new Map<string, { target: Target; ids: string[] }>();
    const add = (target: Target, id: string) => {
      const group = groups.get(target.id) ?? { target, ids: [] };
      group.ids.push(id);
      groups.set(target.id, group);
    };
    const placement = view.placement;
    if (!placement) {
      const seeds = this.options.seedNodes.filter((url) => !failed.has(url));
      for (const id of ids) {
        if (seeds.length === 0) break;
        const url = seeds[this.roundRobin++ % seeds.length]!;
        add({ id: url, url }, id);
      }
      return groups;
    }
    const avoid = this.avoided(failed);
    for (const id of ids) {
      const ranked = avoid.size === 0 ? [placement.owner(id)] : placement.rank(id);
      // Suspected nodes only when every other node has failed.
      const owner = ranked.find((n) => n && !avoid.has(n.id)) ?? ranked.find((n) => n && !failed.has(n.id));
      const member = owner && view.member(owner.id);
      if (member) add({ id: member.id, url: member.url }, id);
    }
    return groups;
  }
}

/** A node's failure that is the query's answer (see the header), as the coordinator answers it; undefined: try the next node. */
function finalAnswer(error: unknown): DomainError | undefined {
  // Berth's own verdict: data that disagrees with itself, or a final stage that failed (its scan was whole).
  if (error instanceof DomainError) return error;
  if (!(error instanceof ServiceCallError)) return undefined;
  const message = error.body?.message ?? error.message;
  if (error.code === SEGMENT_SCHEMA_MISMATCH) return new DomainError('inconsistent', error.code, message);
  if (error.status < 400 || error.status >= 500) return undefined;
  const kind =
    error.status === 401
      ? 'upstream_failed'
      : error.status === 413
        ? 'too_large'
        : error.status === 409
          ? 'conflict'
          : 'invalid';
  return new DomainError(kind, error.code ?? 'scan_failed', message);
}
