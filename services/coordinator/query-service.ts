/**
 * Runs one query end to end: plan, prune segments by the manifest's time ranges, give the routing
 * verdict, then run the scan stage on the owners of each read's segments (in the serving group,
 * or, for a heavy query admitted by the heavy pool, on the pool's proven backends) while their rows
 * stream into the final stage, which runs here, on the coordinator's DuckDB.
 */
import { routingVerdict, type Verdict, type VerdictThresholds } from '../../core/routing-verdict.js';
import type { SegmentRow, TableVersion } from '../meta/client.js';
import type { ScanStats } from '../query-node/client.js';
import { HttpError } from '../common/errors.js';
import type { HeavyAdmission } from './heavy-admission.js';
import type { PlanCache } from './plan-cache.js';
import type { ResultCache } from './result-cache.js';
import type { JsonValue, QueryResult, QueryStats, ScanStage, WorkloadGroupStatus } from './api.js';
import type { ExecutablePlan } from './planner.js';
import type { Scatter } from './scatter.js';
import { ServingAdmission } from './serving-admission.js';
import type { Exchange, SqlEngine } from './sql-engine.js';
import type { SizedJsonResult } from './result-json.js';
import type { TableCatalog } from './table-catalog.js';

// A query's result and stats, and a workload group's figures, are the coordinator's wire contract.
export type { QueryResult, QueryStats, ScanStage, WorkloadGroupStatus };

/**
 * Where a streamed query's answer goes as it is made (the client's connection): the columns
 * first, then its rows batch by batch. Each call resolves once the client has taken what it was
 * given, so DuckDB computes no further ahead than the client reads.
 */
export interface AnswerSink {
  /** `signal` is the query's: a sink waiting on a slow client gives up when it aborts. */
  start(columns: string[], types: string[], signal: AbortSignal): Promise<void>;
  rows(batch: JsonValue[][]): Promise<void>;
}

/** The elastic heavy pool, as the coordinator sees it: its group, its admission, its queue figures. */
export interface HeavyPool {
  group: string;
  workflowId: string;
  admission: HeavyAdmission;
  /** The group's running and waiting queries over every coordinator, as the pool workflow counts them. */
  workload(): Promise<WorkloadGroupStatus>;
}

export interface QueryServiceOptions {
  plans: PlanCache;
  /** Answers to queries asked again over unchanged tables; without it every query runs. */
  results?: ResultCache;
  /** Table schemas and manifests, checked against meta's versions at every query. */
  catalog: TableCatalog;
  engine: SqlEngine;
  /** One scatter per compute group the coordinator can run queries on; must include the serving group. */
  scatters: Map<string, Scatter>;
  /** The group light queries run on. @default 'serving' */
  servingGroup?: string;
  /** Where heavy queries go; without it every query runs on the serving group. */
  heavyPool?: HeavyPool;
  /** Queries running at once on the serving group; the rest wait in line. @default 16 */
  maxConcurrency?: number;
  /** Queries waiting for the serving group; past them, 429. @default 16 */
  maxQueueSize?: number;
  /** Longest wait for the serving group; past it, 429. @default 10000 */
  queueTimeoutMs?: number;
  /** When a query is heavy. @default DEFAULT_VERDICT_THRESHOLDS */
  verdictThresholds?: VerdictThresholds;
  /** How long a query may take in all, waiting included; then it is stopped on every node. @default 300000 */
  deadlineMs?: number;
  /** Largest result, as JSON. @default 256 MiB */
  maxResultBytes?: number;
}

interface Prepared {
  plan: ExecutablePlan;
  cached: boolean;
  /** Each table the plan reads, as of the version check that began after the query arrived. */
  versions: Map<string, TableVersion>;
  /** The segments each input reads after pruning, in the order of plan.inputs. */
  chosen: SegmentRow[][];
  total: number;
  scanBytes: number;
  verdict: Verdict;
  /** Where the answer is kept for the next query that asks it over the same table versions; unset: not kept. */
  resultKey?: string;
}

export class QueryService {
  private readonly serving: ServingAdmission;
  /** Queries that read no segment run on the coordinator alone: a hung node's queries never hold them up. */
  private readonly local: ServingAdmission;

  constructor(private readonly options: QueryServiceOptions) {
    const rules = {
      maxConcurrency: options.maxConcurrency,
      maxQueueSize: options.maxQueueSize,
      queueTimeoutMs: options.queueTimeoutMs,
    };
    this.serving = new ServingAdmission({ ...rules, group: options.servingGroup });
    this.local = new ServingAdmission({ ...rules, group: 'coordinator-local' });
  }

  /** The query's own signal: aborted when the caller's is, or at the deadline, with the reason as an HTTP error. */
  private deadline(caller?: AbortSignal): { signal: AbortSignal; done(): void } {
    const deadlineMs = this.options.deadlineMs ?? 300_000;
    const controller = new AbortController();
    const timer = setTimeout(
      () =>
        controller.abort(
          new HttpError(
            504,
            'deadline_exceeded',
            `the query ran past its deadline of ${deadlineMs} ms (BERTH_QUERY_DEADLINE_MS)`,
          ),
        ),
      deadlineMs,
    );
    const left = () => controller.abort(new HttpError(499, 'client_gone', 'the client went away'));
    caller?.addEventListener('abort', left, { once: true });
    if (caller?.aborted) left();
    return {
      signal: controller.signal,
      done: () => {
        clearTimeout(timer);
        caller?.removeEventListener('abort', left);
      },
    };
  }

  private get servingGroup(): string {
    return this.options.servingGroup ?? 'serving';
  }

  /** This coordinator's queries on the serving group: running, and waiting for a slot. */
  servingLoad(): { running: number; waiting: number } {
    return this.serving.counts;
  }

  /** Running and waiting query counts per group (SHOW WORKLOAD GROUPS): the heavy pool's are the whole group's. */
  async workload(): Promise<WorkloadGroupStatus[]> {
    const groups: WorkloadGroupStatus[] = [
      {
        name: this.servingGroup,
        ...this.serving.counts,
        maxConcurrency: this.serving.maxConcurrency,
        maxQueueSize: this.serving.maxQueueSize,
      },
    ];
    const pool = this.options.heavyPool;
    if (pool) {
      groups.push(
        await pool.workload().catch((error: Error) => ({
          name: pool.group,
          ...pool.admission.counts,
          unavailable: `this coordinator's own counts: the pool cannot be reached (${error.message.split('\n')[0]})`,
        })),
      );
    }
    return groups;
  }

  /**
   * Answers a query: on the serving group when light; admitted by the heavy pool and run on its
   * backends when heavy. With a `sink`, the final stage's rows go to it as they are made (the
   * answer's `rows` is then empty) and BERTH_MAX_RESULT_BYTES does not apply. What the scan stage
   * sends is still held whole first, in the coordinator's DuckDB, which spills past its memory
   * limit and fails the query past its temp-directory limit (DuckDB's: 90 % of the free disk).
   */
  async query(sql: string, caller?: AbortSignal, sink?: AnswerSink): Promise<QueryResult> {
    const started = performance.now();
    const deadline = this.deadline(caller);
    try {
      return await this.answer(sql, started, deadline.signal, sink);
    } finally {
      deadline.done();
    }
  }

  private async answer(sql: string, started: number, signal: AbortSignal, sink?: AnswerSink): Promise<QueryResult> {
    const prepared = await this.prepare(sql);
    prepared.resultKey = this.options.results?.key(sql, prepared.versions, prepared.plan.reusable);
    const kept = this.options.results?.get(prepared.resultKey);
    if (kept) {
      // Asked before over these very table versions: no admission, no scan, no pool.
      const stats: QueryStats = { ...kept.stats, result: 'cached', elapsedMs: Math.round(performance.now() - started) };
      delete stats.pool;
      if (!sink) return { ...kept, stats };
      await sink.start(kept.columns, kept.types, signal);
      for (let i = 0; i < kept.rows.length; i += 2048) await sink.rows(kept.rows.slice(i, i + 2048));
      return { ...kept, rows: [], stats };
    }
    const pool = this.options.heavyPool;
    if (prepared.verdict.class === 'heavy' && pool) {
      const admission = await pool.admission.admit(signal);
      try {
        const result = await this.execute(prepared, pool.group, started, signal, new Set(admission.backends), sink);
        return {
          ...result,
          stats: { ...result.stats, pool: { workflowId: pool.workflowId, waitedMs: admission.waitedMs } },
        };
      } finally {
        admission.release();
      }
    }
    const scansSegments = prepared.chosen.some((segments) => segments.length > 0);
    return await (scansSegments ? this.serving : this.local).run(signal, () =>
      this.execute(prepared, this.servingGroup, started, signal, undefined, sink),
    );
  }

  /** Runs a query on a given group's backends, with no verdict and no admission (tests, benchmarks). */
  async queryOnGroup(sql: string, group: string): Promise<QueryResult> {
    const started = performance.now();
    await this.options.scatters.get(group)?.refreshMembers();
    const deadline = this.deadline();
    try {
      return await this.execute(await this.prepare(sql), group, started, deadline.signal);
    } finally {
      deadline.done();
    }
  }

  private async prepare(sql: string): Promise<Prepared> {
    const { plans, catalog } = this.options;
    const { plan, versions, cached } = await plans.plan(sql);
    let total = 0;
    const chosen: SegmentRow[][] = [];
    for (const input of plan.inputs) {
      // Each table's manifest as of this query's version check: each read's time window is applied here, by each segment's min/max.
      const all = await catalog.segments(input.table.name, versions.get(input.table.name)!);
      const { from = -Infinity, to = Infinity } = input.window;
      total += all.length;
      chosen.push(all.filter((s) => s.maxTs >= from && s.minTs <= to));
    }
    const scanBytes = chosen.reduce((sum, segments) => sum + segments.reduce((acc, s) => acc + s.bytes, 0), 0);
    // A query that is one aggregate or select over one table finishes partials; any other shape runs its own SQL over what the owners send.
    const route = plan.route === 'stages' ? 'rows' : 'partial';
    return {
      plan,
      cached,
      versions,
      chosen,
      total,
      scanBytes,
      verdict: routingVerdict({ route, scanBytes }, this.options.verdictThresholds),
    };
  }

  /**
   * Runs a prepared plan's scan stage on a group's backends (only on `only` when given) and its
   * final stage here, into one answer or, given a `sink`, streamed to it; `signal` stops it everywhere.
   */
  private async execute(
    { plan, cached, chosen, total, scanBytes, verdict, resultKey }: Prepared,
    group: string,
    started: number,
    signal: AbortSignal,
    only?: ReadonlySet<string>,
    sink?: AnswerSink,
  ): Promise<QueryResult> {
    const { engine } = this.options;
    const scatter = this.options.scatters.get(group);
    if (!scatter) throw new Error(`this coordinator does not run queries on group "${group}"`);
    // Backends proven moments ago may be newer than this coordinator's last member poll.
    if (only && !scatter.lists(only)) await scatter.refreshMembers();
    const scanned = chosen.reduce((sum, segments) => sum + segments.length, 0);
    const exchange = engine.openExchange(plan.inputs.map((i) => ({ name: i.name, columns: i.exchange })));
    // One input's scan failing fails the query: the other inputs' scans stop too, before the exchange closes.
    const scanStage = new AbortController();
    const scanSignal = AbortSignal.any([signal, scanStage.signal]);
    try {
      const outcomes = await Promise.all(
        plan.inputs.map(async (input, i) => {
          if (chosen[i]!.length === 0) return undefined; // nothing to read: the final stage sees an empty input
          return await scatter
            .toOwners(
              {
                sql: input.sql,
                table: input.table,
                segments: chosen[i]!,
                columns: input.columns,
                uncapped: sink !== undefined,
              },
              {
                receive: (body) => exchange.receive(input.name, body),
                discard: (part) => exchange.discard(input.name, part),
              },
              only,
              scanSignal,
            )
            .catch((error: unknown) => {
              scanStage.abort(error);
              throw error;
            });
        }),
      );
      const { bytes, ...result } = sink
        ? await this.streamTo(sink, exchange, plan.finalSql, signal)
        : await exchange.finish(plan.finalSql, { signal, maxBytes: this.options.maxResultBytes });
      const scans = outcomes.flatMap((o) => o?.scans ?? []);
      const sum = (pick: (s: ScanStats) => number) => scans.reduce((acc, s) => acc + pick(s), 0);
      const perNode = (list: ScanStats[], pick: (s: ScanStats) => number) => {
        const out: Record<string, number> = {};
        for (const s of list) out[s.node] = (out[s.node] ?? 0) + pick(s);
        return out;
      };
      const placements = outcomes.filter((o) => o !== undefined).map((o) => o.placement);
      const answer: QueryResult = {
        ...result,
        stats: {
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
              kind: input.kind,
              columns: input.columns,
              segments: chosen[i]!.length,
              rows: (outcomes[i]?.scans ?? []).reduce((acc, s) => acc + s.rows, 0),
              bytes: (outcomes[i]?.scans ?? []).reduce((acc, s) => acc + s.bytes, 0),
              nodes: perNode(outcomes[i]?.scans ?? [], (s) => s.segments),
            })),
            final: 'coordinator',
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
          elapsedMs: Math.round(performance.now() - started),
        },
      };
      if (!sink) this.options.results?.set(resultKey, answer, bytes);
      return answer;
    } finally {
      await exchange.close();
    }
  }

  /** The final stage's rows to `sink` as DuckDB makes them; resolves once the client has taken the last. */
  private async streamTo(
    sink: AnswerSink,
    exchange: Exchange,
    finalSql: string,
    signal: AbortSignal,
  ): Promise<SizedJsonResult> {
    const { columns, types, rows, close } = await exchange.stream(finalSql, signal);
    try {
      // The first chunk before the status: an error DuckDB meets in it is still answered as a 4xx.
      const batches = rows[Symbol.asyncIterator]();
      let next = await batches.next();
      await sink.start(columns, types, signal);
      for (; !next.done; next = await batches.next()) await sink.rows(next.value);
    } finally {
      close();
    }
    return { columns, types, rows: [], bytes: 0 };
  }
}
