/**
 * A query's stats (QueryStats, api.ts): how it was planned and routed, what each read's scan stage
 * sent from which nodes, and what those nodes read from their caches and from S3.
 */
import type { Verdict } from '../../../core/routing-verdict.js';
import type { SegmentRow } from '../../meta/client.js';
import type { ScanStats } from '../../query-node/client.js';
import type { QueryStats } from '../api.js';
import type { ExecutablePlan } from '../stages.js';
import type { ScatterOutcome } from './scatter.js';

/** A query that ran, as its stats describe it. */
export interface RanQuery {
  plan: ExecutablePlan;
  /** Whether the plan came from the plan cache. */
  cached: boolean;
  verdict: Verdict;
  /** The compute group that ran the scan stage. */
  group: string;
  /** Where the final stage ran: `coordinator`, or a heavy backend's node id. */
  final: string;
  /** The segments each input read after pruning, in the order of plan.inputs. */
  chosen: SegmentRow[][];
  /** A broadcast join's: the segments of each table its one input read whole, in the order of its `whole`. */
  whole?: SegmentRow[][];
  /** The segments of every input before pruning. */
  total: number;
  scanBytes: number;
  /** Each input's scan stage, in the order of plan.inputs; undefined for an input with no segment to read. */
  outcomes: (ScatterOutcome | undefined)[];
  /** When (performance.now()) the query arrived, was planned, sent its scans and had them all back; its stats are taken once its answer is made. */
  at: { started: number; planned: number; scanning: number; scanned: number };
}

/** The stats of a query computed now. */
export function computedStats({
  plan,
  cached,
  verdict,
  group,
  final,
  chosen,
  whole,
  total,
  scanBytes,
  outcomes,
  at,
}: RanQuery): QueryStats {
  const now = performance.now();
  const scanned = [...chosen, ...(whole ?? [])].reduce((sum, segments) => sum + segments.length, 0);
  const scans = outcomes.flatMap((o) => o?.scans ?? []);
  const sum = (pick: (s: ScanStats) => number) => scans.reduce((acc, s) => acc + pick(s), 0);
  const perNode = (list: ScanStats[], pick: (s: ScanStats) => number) => {
    const out: Record<string, number> = {};
    for (const s of list) out[s.node] = (out[s.node] ?? 0) + pick(s);
    return out;
  };
  const placements = outcomes.filter((o) => o !== undefined).map((o) => o.placement);
  return {
    result: 'computed',
    verdict,
    group,
    route: plan.route,
    ...(plan.reason ? { reason: plan.reason } : {}),
    plan: cached ? 'cached' : 'planned',
    stages: {
      scan: plan.inputs.map((input, i) => ({
        input: input.name,
        table: input.table.name,
        split: input.split,
        columns: input.columns,
        segments: chosen[i]!.length,
        rows: (outcomes[i]?.scans ?? []).reduce((acc, s) => acc + s.rows, 0),
        bytes: (outcomes[i]?.scans ?? []).reduce((acc, s) => acc + s.bytes, 0),
        nodes: perNode(outcomes[i]?.scans ?? [], (s) => s.segments),
        slowestNodeMs: Math.max(0, ...(outcomes[i]?.scans ?? []).map((s) => s.ms)),
        ...(input.whole && whole && outcomes[i]
          ? {
              broadcast: input.whole.map((w, j) => ({
                table: w.table.name,
                columns: w.columns,
                segments: whole[j]!.length,
                bytes: whole[j]!.reduce((acc, s) => acc + s.bytes, 0),
              })),
            }
          : {}),
      })),
      final,
    },
    bytesMoved: sum((s) => s.bytes),
    s3BytesByNode: perNode(scans, (s) => s.bytesFromS3),
    placement: placements.includes('round-robin') ? 'round-robin' : placements.length > 0 ? 'owner' : 'local',
    segments: { total, scanned, pruned: total - scanned },
    scanBytes,
    nodes: perNode(scans, (s) => s.segments),
    cacheHits: sum((s) => s.hits),
    cacheMisses: sum((s) => s.misses),
    s3Gets: sum((s) => s.s3Gets),
    bytesFromS3: sum((s) => s.bytesFromS3),
    fallbacks: outcomes.reduce((acc, o) => acc + (o?.fallbacks ?? 0), 0),
    elapsedMs: Math.round(now - at.started),
    timings: {
      planMs: round(at.planned - at.started),
      queuedMs: round(at.scanning - at.planned),
      scanMs: round(at.scanned - at.scanning),
      finalMs: round(now - at.scanned),
    },
  };
}

const round = (ms: number) => Math.round(ms * 10) / 10;

/**
 * The stats of an answer the result cache kept, as the query that reuses it reports them: its own
 * time, planned and then answered from the cache (no admission, no scan, no final stage, no pool).
 */
export function cachedStats(kept: QueryStats, at: { started: number; planned: number }): QueryStats {
  const stats: QueryStats = {
    ...kept,
    result: 'cached',
    elapsedMs: Math.round(performance.now() - at.started),
    timings: { planMs: round(at.planned - at.started), queuedMs: 0, scanMs: 0, finalMs: 0 },
  };
  delete stats.pool;
  return stats;
}
