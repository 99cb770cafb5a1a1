/**
 * Sends a plan's work to the query nodes and brings back their results. Segments go to their
 * owners; work aimed at a node that fails goes to the next node in each segment's ranking (a cache
 * miss, never an error); before the coordinator has a member list it spreads work round-robin
 * over its seed nodes.
 */
import type { Placement } from '../../core/ownership.js';
import { HttpError } from '../common/errors.js';
import { ServiceCallError } from '../common/http-client.js';
import type { MemberView } from '../common/member-view.js';
import type { Member, SegmentRow, TableInfo } from '../meta/client.js';
import { scanOnNode, type ScanStats } from '../query-node/client.js';

export interface ScatterOptions {
  view: MemberView;
  /** Query node URLs to use before any member list has arrived. */
  seedNodes: string[];
  token: string;
  /** @default 120000 */
  scanTimeoutMs?: number;
}

/** One node's share of the work, as sent. */
export interface NodeWork {
  node: string;
  url: string;
  segments: string[];
}

export interface ScatterOutcome {
  partials: Buffer[];
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

  constructor(private readonly options: ScatterOptions) {}

  /** Runs `sql` on the owners of `segments` (one table), each over its own share; only on `only` when given. */
  async toOwners(sql: string, table: TableInfo, segments: SegmentRow[], only?: ReadonlySet<string>): Promise<ScatterOutcome> {
    const members = this.members(only);
    return await this.run(members, segments.map((s) => s.id), (failed, ids) => this.assign(members, ids, failed), (target, ids) =>
      scanOnNode(target.url, { sql, tables: [{ name: table.name, columns: table.columns, segments: ids }] }, this.options.token, this.timeout),
    );
  }

  /** Runs `sql` whole on one node holding all the segments of every table: the one that owns most of them. */
  async toOneNode(sql: string, tables: { table: TableInfo; segments: SegmentRow[] }[], only?: ReadonlySet<string>): Promise<ScatterOutcome> {
    const all = tables.flatMap((t) => t.segments.map((s) => s.id));
    const members = this.members(only);
    return await this.run(
      members,
      ['*'],
      (failed) => {
        const target = this.gatherTarget(members, all, failed);
        return target ? new Map([[target.id, { target, ids: ['*'] }]]) : new Map();
      },
      (target) =>
        scanOnNode(
          target.url,
          { sql, tables: tables.map((t) => ({ name: t.table.name, columns: t.table.columns, segments: t.segments.map((s) => s.id) })) },
          this.options.token,
          this.timeout,
        ),
    );
  }

  /** Reads the member list now, for work that must not wait for the next poll (a pool just made ready). */
  async refreshMembers(): Promise<void> {
    await this.options.view.refresh();
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
    const groups = this.assign(this.members(only), segments.map((s) => s.id), new Set());
    return [...groups.values()].map(({ target, ids }) => ({ node: target.id, url: target.url, segments: ids }));
  }

  private get timeout(): number {
    return this.options.scanTimeoutMs ?? 120_000;
  }

  private async run(
    members: Members,
    ids: string[],
    assign: (failed: Set<string>, ids: string[]) => Map<string, { target: Target; ids: string[] }>,
    send: (target: Target, ids: string[]) => Promise<{ body: Buffer; stats: ScanStats }>,
  ): Promise<ScatterOutcome> {
    const placement = members.placement ? 'owner' : 'round-robin';
    const failed = new Set<string>();
    const partials: Buffer[] = [];
    const scans: ScanStats[] = [];
    let fallbacks = 0;
    let pending = assign(failed, ids);
    if (pending.size === 0) throw new HttpError(503, 'no_backend', 'no live query node is known: start query nodes, or wait for them to register');
    while (pending.size > 0) {
      const retry: string[] = [];
      await Promise.all(
        [...pending.values()].map(async ({ target, ids: share }) => {
          try {
            const { body, stats } = await send(target, share);
            partials.push(body);
            scans.push(stats);
          } catch (error) {
            if (error instanceof ServiceCallError && error.status >= 400 && error.status < 500) {
              throw new HttpError(error.status === 401 ? 502 : 400, 'scan_failed', error.body?.message ?? error.message);
            }
            failed.add(target.id);
            retry.push(...share);
          }
        }),
      );
      if (retry.length === 0) break;
      fallbacks += retry.filter((id) => id !== '*').length || 1;
      pending = assign(failed, retry);
      if (pending.size === 0) throw new HttpError(503, 'no_backend', `no query node could serve the query (tried ${[...failed].join(', ')})`);
    }
    return { partials, scans, fallbacks, placement };
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
    for (const id of ids) {
      const owner = failed.size === 0 ? placement.owner(id) : placement.rank(id).find((n) => !failed.has(n.id));
      const member = owner && view.member(owner.id);
      if (member) add({ id: member.id, url: member.url }, id);
    }
    return groups;
  }

  /** The live node that owns the most of these segments (fewest cold reads), skipping failed ones. */
  private gatherTarget(view: Members, ids: string[], failed: Set<string>): Target | undefined {
    if (!view.placement) {
      const seeds = this.options.seedNodes.filter((url) => !failed.has(url));
      const url = seeds[this.roundRobin++ % Math.max(1, seeds.length)];
      return url ? { id: url, url } : undefined;
    }
    const counts = new Map<string, number>();
    for (const [nodeId, group] of this.assign(view, ids, failed)) counts.set(nodeId, group.ids.length);
    const candidates = (view.members ?? []).filter((m) => !failed.has(m.id));
    candidates.sort((a, b) => (counts.get(b.id) ?? 0) - (counts.get(a.id) ?? 0) || a.id.localeCompare(b.id));
    const best = candidates[0];
    return best && { id: best.id, url: best.url };
  }
}
