/**
 * Runs one query end to end: plan, prune segments by the manifest's time ranges, scatter to
 * owners (or gather on one backend), finish at the coordinator, and report what happened.
 */
import pLimit from 'p-limit';
import { routingVerdict, type Verdict, type VerdictThresholds } from '../../core/routing-verdict.js';
import type { MetaClient, SegmentRow, TableInfo } from '../meta/client.js';
import type { ScanStats } from '../query-node/client.js';
import type { Planner, Route } from './planner.js';
import type { JsonResult } from './result-json.js';
import type { Scatter } from './scatter.js';
import type { SqlEngine } from './sql-engine.js';

export interface QueryStats {
  /** The routing verdict at plan time: light (serving group) or heavy (the elastic pool), with the bottleneck. */
  verdict: Verdict;
  route: Route;
  /** Why the query ran whole on one backend. */
  reason?: string;
  placement: 'owner' | 'round-robin' | 'local';
  segments: { total: number; scanned: number; pruned: number };
  /** Segments scanned per node id. */
  nodes: Record<string, number>;
  cacheHits: number;
  cacheMisses: number;
  s3Gets: number;
  bytesFromS3: number;
  fallbacks: number;
  elapsedMs: number;
}

export interface QueryResult extends JsonResult {
  stats: QueryStats;
}

export interface WorkloadGroupStatus {
  name: string;
  running: number;
  waiting: number;
  maxConcurrency: number;
}

export interface QueryServiceOptions {
  planner: Planner;
  engine: SqlEngine;
  scatter: Scatter;
  meta: MetaClient;
  /** The compute group these queries run on. @default 'serving' */
  group?: string;
  /** Queries running at once; the rest wait in line. @default 16 */
  maxConcurrency?: number;
  /** When a query is heavy. @default DEFAULT_VERDICT_THRESHOLDS */
  verdictThresholds?: VerdictThresholds;
}

export class QueryService {
  private readonly limit;

  constructor(private readonly options: QueryServiceOptions) {
    this.limit = pLimit(options.maxConcurrency ?? 16);
  }

  /** Running and waiting query counts, as the heavy pool's monitor reads them. */
  workload(): WorkloadGroupStatus {
    return { name: this.options.group ?? 'serving', running: this.limit.activeCount, waiting: this.limit.pendingCount, maxConcurrency: this.limit.concurrency };
  }

  query(sql: string): Promise<QueryResult> {
    return this.limit(() => this.run(sql));
  }

  private async run(sql: string): Promise<QueryResult> {
    const started = performance.now();
    const { planner, engine, scatter, meta } = this.options;
    const plan = await planner.plan(sql);
    let total = 0;
    const chosen: { table: TableInfo; segments: SegmentRow[] }[] = [];
    for (const table of plan.tables) {
      total += (await meta.listSegments(table.name)).length;
      chosen.push({ table, segments: await meta.listSegments(table.name, plan.windows.get(table.name) ?? {}) });
    }
    const scanned = chosen.reduce((sum, t) => sum + t.segments.length, 0);
    const scanBytes = chosen.reduce((sum, t) => sum + t.segments.reduce((acc, s) => acc + s.bytes, 0), 0);
    const verdict = routingVerdict({ route: plan.route, scanBytes }, this.options.verdictThresholds);

    let partials: Buffer[];
    let scans: ScanStats[] = [];
    let fallbacks = 0;
    let placement: QueryStats['placement'] = 'local';
    if (scanned === 0) {
      // Nothing to read: the node SQL over empty tables gives the right empty (or zero-count) partial.
      partials = [await engine.runToParquet(plan.nodeSql, plan.tables.map((t) => ({ ...t, files: [] })))];
    } else {
      const outcome =
        plan.route === 'gather' ? await scatter.toOneNode(plan.nodeSql, chosen) : await scatter.toOwners(plan.nodeSql, chosen[0]!.table, chosen[0]!.segments);
      ({ partials, scans, fallbacks } = outcome);
      placement = outcome.placement;
    }
    const result = await engine.finish(plan.finalSql, partials);
    const sum = (pick: (s: ScanStats) => number) => scans.reduce((acc, s) => acc + pick(s), 0);
    const nodes: Record<string, number> = {};
    for (const s of scans) nodes[s.node] = (nodes[s.node] ?? 0) + s.segments;
    return {
      ...result,
      stats: {
        verdict,
        route: plan.route,
        ...(plan.reason ? { reason: plan.reason } : {}),
        placement,
        segments: { total, scanned, pruned: total - scanned },
        nodes,
        cacheHits: sum((s) => s.hits),
        cacheMisses: sum((s) => s.misses),
        s3Gets: sum((s) => s.s3Gets),
        bytesFromS3: sum((s) => s.bytesFromS3),
        fallbacks,
        elapsedMs: Math.round(performance.now() - started),
      },
    };
  }
}
