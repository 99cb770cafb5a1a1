/**
 * Runs one query end to end: plan, prune segments by the manifest's time ranges, give the routing
 * verdict, then run the scan stage on the owners of each read's segments (in the serving group,
 * or, for a heavy query admitted by the heavy pool, on the pool's proven backends) while their rows
 * stream into the final stage: here, on the coordinator's DuckDB, for a light query; on one of the
 * pool's backends for a heavy one (execution/remote-final-stage.ts), so that the serving tier's
 * front door never holds a heavy query's state.
 */
import { routingVerdict, type Verdict, type VerdictThresholds } from '../../core/routing-verdict.js';
import type { Member, SegmentRow, TableVersion } from '../meta/client.js';
import { QueryNodeClient } from '../query-node/client.js';
import { DEFAULT_SERVING_GROUP } from '../common/config.js';
import { DomainError, HttpError, unavailable } from '../common/errors.js';
import type { HeavyAdmission } from './admission/heavy-admission.js';
import type { PlanCache } from './planning/plan-cache.js';
import type { ResultCache } from './execution/result-cache.js';
import type { QueryResult, QueryStats, ScanStage, WorkloadGroupStatus } from './api.js';
import type { Scatter } from './execution/scatter.js';
import { FINAL_STAGE_FAILED, RemoteFinalStage, type FinalStage } from './execution/remote-final-stage.js';
import { ServingAdmission } from './admission/serving-admission.js';
import { cachedStats, computedStats } from './execution/query-stats.js';
import type { SizedJsonResult } from '../common/final-stage/result-json.js';
import type { AnswerSink } from './execution/streamed-answer.js';
import type { TableCatalog } from './planning/table-catalog.js';
import type { SqlEngine } from './sql-engine.js';
import type { BroadcastPlan, ExecutablePlan, ScanInput } from './stages.js';

// A query's result and stats, and a workload group's figures, are the coordinator's wire contract.
export type { QueryResult, QueryStats, ScanStage, WorkloadGroupStatus };

/** The elastic heavy pool, as the coordinator sees it: its group, its admission, its queue figures. */
export interface HeavyPool {
  group: string;
  workflowId: string;
  admission: HeavyAdmission;
  /** The group's running and waiting queries over every coordinator, as the pool workflow counts them. */
  workload(): Promise<WorkloadGroupStatus>;
}

/** How long a query may take in all unless the coordinator is told otherwise. */
export const DEFAULT_QUERY_DEADLINE_MS = 300_000;
/** How long past the query's deadline a heavy backend keeps a final stage its coordinator left. */
const FINAL_STAGE_GRACE_MS = 60_000;
/** The longest a backend keeps a final stage without a call (its wire contract's bound). */
const MAX_FINAL_STAGE_TTL_MS = 3_600_000;
/** The largest result, as JSON, that the coordinator answers with unless told otherwise. */
export const DEFAULT_MAX_RESULT_BYTES = 256 * 1024 ** 2;

/**
 * How small each table a join does not partition must be for every owner of the partitioned one
 * to read it whole (a broadcast join): all its segments' Parquet bytes, and rows.
 */
export interface BroadcastLimits {
  bytes: number;
  rows: number;
}
export const DEFAULT_BROADCAST_LIMITS: BroadcastLimits = { bytes: 16 * 1024 ** 2, rows: 1_000_000 };

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
  /** Where memory-bound heavy queries go (one big backend); without it they go to `heavyPool`. */
  memoryPool?: HeavyPool;
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
  /** The token heavy backends take, for the final stages run there. */
  token?: string;
  /** When a join's smaller tables are broadcast to its big one's owners; 0 bytes: never. @default DEFAULT_BROADCAST_LIMITS */
  broadcastLimits?: BroadcastLimits;
}

/** A table's segments left after pruning, and how many it has in all. */
interface PrunedSegments {
  segments: SegmentRow[];
  total: number;
}

interface Prepared {
  plan: ExecutablePlan;
  /** The statement as DuckDB parses it, literals included (CachedPlan.statement). */
  statement: string;
  cached: boolean;
  /** Each table the plan reads, as of the version check that began after the query arrived. */
  versions: Map<string, TableVersion>;
  /** The segments each input reads after pruning, in the order of plan.inputs. */
  chosen: SegmentRow[][];
  /** Of a broadcast join's one input, the segments of each table it reads whole, in the order of its `whole`. */
  whole?: SegmentRow[][];
  total: number;
  scanBytes: number;
  verdict: Verdict;
  /** Where the answer is kept for the next query that asks it over the same table versions; unset: not kept. */
  resultKey?: string;
  /** When (performance.now()) it was planned. */
  planned: number;
}

export class QueryService {
  private readonly serving: ServingAdmission;
  /** Queries that read no segment run on the coordinator alone: a hung node's queries never hold them up. */
  private readonly local: ServingAdmission;
  /** Heavy final stages running on each backend, by node id: the next goes to the least busy. */
  private readonly finalStagesOn = new Map<string, number>();

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
    const deadlineMs = this.options.deadlineMs ?? DEFAULT_QUERY_DEADLINE_MS;
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
    return this.options.servingGroup ?? DEFAULT_SERVING_GROUP;
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
    // Each heavy group's figures are a call to its workflow: asked of both at once.
    const pools = [this.options.heavyPool, this.options.memoryPool].filter((pool) => pool !== undefined);
    const heavy = await Promise.all(
      pools.map((pool) =>
        pool.workload().catch((error: Error) => ({
          name: pool.group,
          ...pool.admission.counts,
          unavailable: `this coordinator's own counts: the pool cannot be reached (${error.message.split('\n')[0]})`,
        })),
      ),
    );
    return [...groups, ...heavy];
  }

  /**
   * Answers a query: on the serving group when light; when heavy, admitted by the heavy group of
   * its bottleneck (the memory class for a memory-bound one, when there is one) and run on that
   * group's backends, its final stage on one of them. With a `sink`, the final stage's rows go to
   * it as they are made (the answer's `rows` is then empty) and BERTH_MAX_RESULT_BYTES does not
   * apply. What the scan stage sends is held whole first, by the final stage's DuckDB, which spills
   * past its memory limit and fails the query past its temp-directory limit.
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
    prepared.resultKey = this.options.results?.key(prepared.statement, prepared.versions, prepared.plan.reusable);
    const kept = this.options.results?.get(prepared.resultKey);
    if (kept) {
      // Asked before over these very table versions: no admission, no scan, no pool.
      const stats = cachedStats(kept.stats, { started, planned: prepared.planned });
      if (!sink) return { ...kept, stats };
      await sink.start(kept.columns, kept.types, signal);
      for (let i = 0; i < kept.rows.length; i += 2048) await sink.rows(kept.rows.slice(i, i + 2048));
      return { ...kept, rows: [], stats };
    }
    const { verdict } = prepared;
    const pool =
      verdict.class === 'heavy'
        ? ((verdict.bottleneck === 'memory' ? this.options.memoryPool : undefined) ?? this.options.heavyPool)
        : undefined;
    if (pool) {
      const admission = await pool.admission.admit(signal, sink?.notice?.bind(sink));
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

  /** A query's output columns, names and DuckDB types, as planning binds them: nothing runs. */
  async describe(sql: string): Promise<{ name: string; type: string }[]> {
    return (await this.options.plans.plan(sql)).plan.columns;
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
    const planned = await plans.plan(sql);
    const { statement, versions, cached } = planned;
    let { plan } = planned;
    // Each table's manifest as of this query's version check, the read's time window applied by
    // each segment's min/max; once per table and window.
    const pruned = new Map<string, Promise<PrunedSegments>>();
    const prune = (input: Pick<ScanInput, 'table' | 'window'>): Promise<PrunedSegments> => {
      const key = JSON.stringify([input.table.name, input.window.from, input.window.to]);
      let segments = pruned.get(key);
      if (!segments) {
        const table = { info: input.table, version: versions.get(input.table.name)! };
        pruned.set(key, (segments = catalog.segments(input.table.name, table, input.window)));
      }
      return segments;
    };
    const broadcast = plan.broadcastPlans && (await this.broadcastOf(plan.broadcastPlans, prune));
    let read: PrunedSegments[];
    let whole: SegmentRow[][] | undefined;
    if (broadcast) {
      const { route, input, finalSql } = broadcast.plan;
      plan = { ...plan, route, inputs: [input], finalSql };
      delete plan.reason; // why the query was not one read's aggregate or select: now it is
      read = [broadcast.partitioned, ...broadcast.whole];
      whole = broadcast.whole.map((w) => w.segments);
    } else read = await Promise.all(plan.inputs.map(prune));
    const chosen = read.slice(0, plan.inputs.length).map((r) => r.segments);
    const total = read.reduce((sum, r) => sum + r.total, 0);
    const scanBytes = read.reduce((sum, r) => sum + r.segments.reduce((acc, s) => acc + s.bytes, 0), 0);
    return {
      plan,
      statement,
      cached,
      versions,
      chosen,
      ...(whole ? { whole } : {}),
      total,
      scanBytes,
      verdict: routingVerdict({ split: plan.route, scanBytes }, this.options.verdictThresholds),
      planned: performance.now(),
    };
  }

  /**
   * The broadcast join to run, if any: of the tables that may be partitioned, the largest after
   * pruning whose every other table, read whole, is within the broadcast limits.
   */
  private async broadcastOf(
    broadcasts: BroadcastPlan[],
    prune: (input: Pick<ScanInput, 'table' | 'window'>) => Promise<PrunedSegments>,
  ): Promise<{ plan: BroadcastPlan; partitioned: PrunedSegments; whole: PrunedSegments[] } | undefined> {
    const limits = this.options.broadcastLimits ?? DEFAULT_BROADCAST_LIMITS;
    if (limits.bytes === 0) return undefined;
    const size = (r: PrunedSegments) => ({
      bytes: r.segments.reduce((acc, s) => acc + s.bytes, 0),
      rows: r.segments.reduce((acc, s) => acc + s.rows, 0),
    });
    let best: { plan: BroadcastPlan; partitioned: PrunedSegments; whole: PrunedSegments[]; bytes: number } | undefined;
    for (const plan of broadcasts) {
      const [partitioned, ...whole] = await Promise.all(
        [plan.input, ...plan.input.whole!.map((w) => ({ table: w.table, window: {} }))].map(prune),
      );
      const { bytes } = size(partitioned!);
      const small = whole.every((w) => {
        const s = size(w);
        return s.bytes <= limits.bytes && s.rows <= limits.rows;
      });
      if (small && (!best || bytes > best.bytes)) best = { plan, partitioned: partitioned!, whole, bytes };
    }
    return best;
  }

  /**
   * Runs a prepared plan's scan stage on a group's backends (only on `only` when given) and its
   * final stage, into one answer or, given a `sink`, streamed to it; `signal` stops it everywhere.
   * A heavy query (`only`: the pool's proven backends) has its final stage on one of them, and
   * once more on another when that one is lost before the answer began.
   */
  private async execute(
    prepared: Prepared,
    group: string,
    started: number,
    signal: AbortSignal,
    only?: ReadonlySet<string>,
    sink?: AnswerSink,
  ): Promise<QueryResult> {
    if (!only) return await this.executeOn(prepared, group, started, signal, undefined, undefined, sink);
    let answering = false;
    const watched: AnswerSink | undefined = sink && {
      start: (columns, types, s) => {
        answering = true;
        return sink.start(columns, types, s);
      },
      rows: (batch) => sink.rows(batch),
    };
    const lost = new Set<string>();
    let failure: unknown;
    for (;;) {
      // With no other backend left, the loss itself is the answer: it names the backend.
      const backend = await this.finalBackend(group, only, lost).catch((error: unknown) => {
        throw failure ?? error;
      });
      this.finalStagesOn.set(backend.id, (this.finalStagesOn.get(backend.id) ?? 0) + 1);
      try {
        return await this.executeOn(prepared, group, started, signal, only, backend, watched);
      } catch (error) {
        const retry = error instanceof DomainError && error.code === FINAL_STAGE_FAILED && !answering;
        if (!retry || lost.size > 0) throw error; // a failed query retries once
        lost.add(backend.id);
        failure = error;
      } finally {
        const left = this.finalStagesOn.get(backend.id)! - 1;
        if (left > 0) this.finalStagesOn.set(backend.id, left);
        else this.finalStagesOn.delete(backend.id);
      }
    }
  }

  /** Runs a prepared plan with its final stage on `backend`, or here without one. */
  private async executeOn(
    { plan, cached, chosen, whole, total, scanBytes, verdict, resultKey, planned }: Prepared,
    group: string,
    started: number,
    signal: AbortSignal,
    only: ReadonlySet<string> | undefined,
    backend: Member | undefined,
    sink: AnswerSink | undefined,
  ): Promise<QueryResult> {
    const { engine } = this.options;
    const scatter = this.options.scatters.get(group);
    if (!scatter) throw new Error(`this coordinator does not run queries on group "${group}"`);
    const inputs = plan.inputs.map((i) => ({ name: i.name, columns: i.exchange }));
    const exchange: FinalStage = backend
      ? await RemoteFinalStage.open(
          new QueryNodeClient(backend.url, this.options.token),
          inputs,
          Math.min(
            (this.options.deadlineMs ?? DEFAULT_QUERY_DEADLINE_MS) + FINAL_STAGE_GRACE_MS,
            MAX_FINAL_STAGE_TTL_MS,
          ),
          signal,
        )
      : engine.openExchange(inputs);
    // One input's scan failing fails the query: the other inputs' scans stop too, before the exchange closes.
    const scanStage = new AbortController();
    const scanSignal = AbortSignal.any([signal, scanStage.signal]);
    const scanning = performance.now();
    try {
      const outcomes = await Promise.all(
        plan.inputs.map(async (input, i) => {
          if (chosen[i]!.length === 0) return undefined; // nothing to read: the final stage sees an empty input
          return await scatter
            .toOwners(
              {
                sql: input.sql,
                parameters: plan.parameters,
                table: input.table,
                segments: chosen[i]!,
                columns: input.columns,
                // A streamed answer or a heavy backend's final stage holds nothing here: only the answer is capped.
                uncapped: sink !== undefined || backend !== undefined,
                ...(input.whole && whole ? { whole: input.whole.map((w, j) => ({ ...w, segments: whole[j]! })) } : {}),
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
      const scanned = performance.now();
      const { bytes, ...result } = sink
        ? await this.streamTo(sink, exchange, plan, signal)
        : await exchange.finish(plan.finalSql, {
            signal,
            maxBytes: this.options.maxResultBytes,
            parameters: plan.parameters,
          });
      const answer: QueryResult = {
        ...result,
        stats: computedStats({
          plan,
          cached,
          verdict,
          group,
          final: backend?.id ?? 'coordinator',
          chosen,
          ...(whole ? { whole } : {}),
          total,
          scanBytes,
          outcomes,
          at: { started, planned, scanning, scanned },
        }),
      };
      if (!sink) this.options.results?.set(resultKey, answer, bytes);
      return answer;
    } finally {
      await exchange.close();
    }
  }

  /**
   * The backend a heavy query's final stage runs on: of the proven backends the view lists (and
   * not `lost`), one of the greatest weight (vCPUs), then of the fewest final stages this
   * coordinator runs there now, then the first by id.
   */
  private async finalBackend(group: string, only: ReadonlySet<string>, lost: ReadonlySet<string>): Promise<Member> {
    const scatter = this.options.scatters.get(group);
    if (!scatter) throw new Error(`this coordinator does not run queries on group "${group}"`);
    // Backends proven moments ago may be newer than this coordinator's last member poll.
    if (!scatter.lists(only)) await scatter.refreshMembers();
    const load = (m: Member) => this.finalStagesOn.get(m.id) ?? 0;
    const [chosen] = [...only]
      .filter((id) => !lost.has(id))
      .flatMap((id) => scatter.member(id) ?? [])
      .sort((a, b) => b.weight - a.weight || load(a) - load(b) || a.id.localeCompare(b.id));
    if (!chosen)
      throw unavailable('no_backend', `no proven backend of group "${group}" is left to run the final stage on`);
    return chosen;
  }

  /** The final stage's rows to `sink` as DuckDB makes them; resolves once the client has taken the last. */
  private async streamTo(
    sink: AnswerSink,
    exchange: FinalStage,
    plan: ExecutablePlan,
    signal: AbortSignal,
  ): Promise<SizedJsonResult> {
    const { columns, types, rows, close } = await exchange.stream(plan.finalSql, signal, plan.parameters);
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
