/**
 * The heavy pool: one entity workflow per compute group, with a floor of zero. It is the pool's
 * gate and its admission control; it never carries SQL or results (coordinators run admitted
 * queries on the pool's backends themselves and stream the answers).
 *
 * - launch (update or signal): declarative, raise-only and idempotent; concurrent launches
 *   coalesce onto this one execution (callers use update-with-start with USE_EXISTING).
 * - reportDemand (update, answered at once): a coordinator's absolute counts of heavy queries
 *   running and waiting. Admission is by counts (core/admission.ts): each coordinator gets a grant
 *   (how many may run at once) and a queue allowance. Per-query state stays on the coordinators and
 *   one report carries any number of queries, so 1,000 queries cost a handful of short updates and
 *   never meet Temporal's 10-updates-in-flight limit; coordinators poll the `admission` query
 *   (no history) while they have queries waiting. Demand on a parked pool launches it.
 * - Scale up with the one write (replicas), then readiness in layers, each of which can lie on its
 *   own: pods running (a count) → new backends alive in meta on two observations → a canary scan
 *   on each new backend that reads Berth's canary object from storage. A launch that is not ready
 *   by its deadline, or a step that fails for good, parks the pool and says why; coordinators fail
 *   their waiting queries with that message.
 * - Monitor: waiting sustained for a window raises the target by one increment, never past the
 *   maximum. Idle reaper: nothing running or waiting for the idle timeout → drain, release the
 *   group's leases, replicas to zero. A launch arriving while draining cancels the reap.
 * - The loop wakes only on a change or a deadline, and continues as new whenever the server
 *   suggests it (up or parked), after its handlers finish, carrying its whole memory.
 *
 * Shaped as Temporal's safe-message-handlers sample: a state class (`HeavyPool`) holds the memory,
 * the methods the handlers call and one method per phase (scaleUp → awaitBackends → canaryScan →
 * serve, with reap and failLaunch), and its `run` loop; the workflow creates it, wires its
 * handlers, runs it and continues as new.
 */
import {
  allHandlersFinished,
  ActivityFailure,
  condition,
  continueAsNew,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { applyReport, distribute, removeCoordinator, totals } from '../core/admission.js';
import { monthStart, recordReplicas, usageSince, type NodeUsage } from '../core/node-hours.js';
import { idleDeadline, launchRequestError, monitor, raiseTarget, readReadiness } from '../core/pool-rules.js';
import type { HeavyPoolActivities } from '../activities/heavy-pool.js';
import { SEARCH_ATTRIBUTES } from './contracts/shared.js';
import {
  admissionQuery,
  launchSignal,
  launchUpdate,
  parkedStatus,
  poolSettings,
  poolShape,
  poolSummary,
  reportDemandUpdate,
  statusQuery,
  usageQuery,
  type AdmissionAnswer,
  type DemandReport,
  type LaunchAccepted,
  type LaunchRequest,
  type PoolMemory,
  type PoolPhase,
  type PoolSettings,
  type PoolStatus,
  type PoolWorkflowInput,
} from './contracts/heavy-pool.js';

// Short timeouts: these are quick calls, and a worker that dies holding one must not stall the pool.
const steps = proxyActivities<HeavyPoolActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/**
 * One heavy pool: its memory, the methods its message handlers call, and its phases, driven by
 * `run`. The workflow below creates it, wires its handlers and runs it.
 */
class HeavyPool {
  readonly settings: PoolSettings;
  readonly memory: PoolMemory;
  /** Bumps whenever a handler changes something the run loop decides on. */
  private changes = 0;

  constructor(input: PoolWorkflowInput) {
    this.settings = poolSettings(input.config);
    this.memory = input.carried ?? {
      status: parkedStatus(this.settings, Date.now()),
      admissions: {},
      reportedAt: {},
      epoch: 0,
      launches: 0,
    };
    // Settings may change across continue-as-new; the status shows the current ones.
    this.status.maxConcurrency = this.settings.maxConcurrency;
    this.status.maxQueueSize = this.settings.maxQueueSize;
    // A run from before the ledger starts one: the replicas in force count from here.
    this.memory.usage ??= recordReplicas({ days: {} }, Date.now(), this.status.replicasPatched);
  }

  get status(): PoolStatus {
    return this.memory.status;
  }

  get group(): string {
    return this.settings.group;
  }

  /** The search attributes a pool starts with: its group and phase. */
  tagSearchAttributes(): void {
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.group, value: this.group },
      { key: SEARCH_ATTRIBUTES.phase, value: this.status.phase },
    ]);
  }

  // ── handlers ───────────────────────────────────────────────────────────────────────────────

  validateLaunch(request: LaunchRequest): void {
    const error = launchRequestError(request, this.settings);
    if (error) throw new Error(error);
  }

  /** The launch update: raises the target and answers with the one accepted. */
  launch(request: LaunchRequest): LaunchAccepted {
    return { workflowId: workflowInfo().workflowId, accepted: this.raise(request.target) };
  }

  /** The launch signal: a signal cannot be refused, so an invalid one changes nothing. */
  launchBySignal(request: LaunchRequest): void {
    if (!launchRequestError(request, this.settings)) this.raise(request.target);
  }

  validateReport(report: DemandReport): void {
    const counts = [report.running, report.waiting, report.epoch ?? 0];
    if (typeof report.coordinator !== 'string' || report.coordinator.length === 0 || report.coordinator.length > 200)
      throw new Error('a report names its coordinator');
    if (!counts.every((n) => Number.isInteger(n) && n >= 0))
      throw new Error('running, waiting and epoch are whole numbers, at least 0');
  }

  /** A coordinator's report: its counts replace its last ones; answers with what it may do now. */
  report(report: DemandReport): AdmissionAnswer {
    const { memory, status } = this;
    const before = memory.admissions[report.coordinator];
    const waitingSince = report.waiting > 0 ? (before?.waitingSince ?? Date.now()) : undefined;
    memory.admissions = applyReport(
      memory.admissions,
      report.coordinator,
      { running: report.running, waiting: report.waiting, waitingSince },
      this.limits,
    );
    memory.reportedAt[report.coordinator] = Date.now();
    const demand = report.running + report.waiting;
    if (demand > 0 || (before && before.running + before.queued > 0)) status.lastActivity = Date.now();
    // Demand on a pool with no target launches it, unless it is from before the last failed launch
    // (its coordinator has not seen the failure yet, and will answer those queries with it).
    const current = report.epoch === undefined || report.epoch >= memory.epoch;
    if (current && demand > 0 && status.target === 0) this.raise(this.settings.increment);
    this.refreshCounts();
    this.changes++;
    return this.answer(report.coordinator);
  }

  /** The admission query: what one coordinator may do now. */
  answer(coordinator: string): AdmissionAnswer {
    const { memory, status } = this;
    const own = memory.admissions[coordinator];
    return {
      grant: own?.grant ?? 0,
      queued: own?.queued ?? 0,
      serveReady: status.serveReady,
      phase: status.phase,
      notReady: status.notReady,
      backends: status.backends,
      epoch: memory.epoch,
      lastFailure: status.lastFailure,
      running: status.running,
      waiting: status.waiting,
    };
  }

  /** The status query: the status, when the idle reaper would park the pool, and this month's ledger. */
  describe(): PoolStatus {
    const status = this.status;
    return {
      ...status,
      idleDeadline: status.serveReady
        ? idleDeadline({ ...status, idleTimeoutMs: this.settings.idleTimeoutMs })
        : undefined,
      usage: usageSince(this.memory.usage!, monthStart(Date.now())),
    };
  }

  /** The usage query: the whole node-hours ledger. */
  usage(): NodeUsage {
    return this.memory.usage!;
  }

  // ── the run loop ───────────────────────────────────────────────────────────────────────────

  /**
   * Turns until the server suggests continuing as new; a step that fails for good fails the
   * launch under way (or the reap) and the pool goes on.
   */
  async run(): Promise<void> {
    for (;;) {
      try {
        await this.turn();
      } catch (error) {
        if (!(error instanceof ActivityFailure)) throw error;
        await this.failLaunch(`a step of the heavy pool failed: ${failureMessage(error)}`);
      }
      if (workflowInfo().continueAsNewSuggested) return;
    }
  }

  /** One turn: scale, prove readiness, serve (monitor, reap), or sleep until a change or a deadline. */
  private async turn(): Promise<void> {
    const status = this.status;
    if (status.target > status.replicasPatched) return await this.scaleUp();
    if (this.memory.scaling) {
      if (Date.now() < status.launchDeadline!)
        return status.phase === 'waiting-for-backends' ? await this.awaitBackends() : await this.canaryScan();
      return await this.failLaunch(
        `the heavy pool did not become serve-ready within ${Math.round(this.settings.launchDeadlineMs / 1000)} s: ${status.notReady ?? 'no readiness layer passed'}`,
      );
    }
    return await this.serve();
  }

  // ── phases ─────────────────────────────────────────────────────────────────────────────────

  /**
   * Patches a raised target and starts readiness for the replicas it adds. A raise during a launch
   * continues that launch: same start, same patch time (its first backends count as new).
   */
  private async scaleUp(): Promise<void> {
    const { memory, status } = this;
    const launch = memory.scaling;
    const previous = launch ? launch.previous : status.serveReady ? status.replicasPatched : 0;
    const startedAt = launch?.startedAt ?? Date.now();
    const patchedAt = launch?.patchedAt ?? Date.now();
    this.setPhase('scaling');
    status.layersPassed = [];
    await this.setReplicas(status.target);
    memory.scaling = { startedAt, patchedAt, previous, fresh: [], looked: false };
    status.launchDeadline = startedAt + this.settings.launchDeadlineMs;
    this.setPhase('waiting-for-backends');
  }

  /** One observation of pods and of the new backends alive in meta (twice); both up → the canary. */
  private async awaitBackends(): Promise<void> {
    const { settings, status } = this;
    const scaling = this.memory.scaling!;
    const target = status.replicasPatched;
    const needed = target - scaling.previous;
    const untilDeadline = Math.max(1, status.launchDeadline! - Date.now());
    const saw = scaling.looked
      ? { pods: status.podsRunning, backends: scaling.fresh.length, why: status.platformSays }
      : undefined;
    const seen = await steps.observePool.executeWithOptions(
      {
        startToCloseTimeout: `${settings.readinessWaitMs + settings.readinessConfirmMs + 30_000} ms`,
        heartbeatTimeout: '10 seconds',
        summary: `observe ${this.group}: pods, and backends alive since the patch (twice, ${settings.readinessConfirmMs} ms apart)`,
      },
      [
        {
          group: this.group,
          startedAfter: scaling.patchedAt,
          wants: { pods: target, backends: needed },
          saw,
          waitMs: Math.min(settings.readinessWaitMs, untilDeadline),
          confirmMs: settings.readinessConfirmMs,
        },
      ],
    );
    const verdict = readReadiness({ pods: seen.pods, freshBackends: seen.backends.length }, target, scaling.previous);
    status.podsRunning = seen.pods;
    status.aliveBackends = seen.backends.length + status.backends.length;
    status.platformSays = seen.why;
    scaling.fresh = seen.backends;
    scaling.looked = true;
    if (verdict.podsUp && !status.layersPassed.includes('pods')) status.layersPassed.push('pods');
    if (!verdict.backendsUp || !seen.confirmed) {
      status.notReady = verdict.notReady ?? 'new backends were alive once, but not on the second observation';
      if (seen.why && !verdict.podsUp) status.notReady += `; the platform says: ${seen.why}`;
      // Nothing moved for a whole wait: a write undone behind the pool's back (a reconciler, a
      // person) is put back; setReplicas writes nothing when the target is in place.
      const stalled = saw && seen.pods === saw.pods && seen.backends.length === saw.backends && seen.why === saw.why;
      if (stalled && !verdict.podsUp) await this.setReplicas(target);
      return;
    }
    status.layersPassed.push('backends');
    this.setPhase('canary');
  }

  /** Each new backend reads Berth's canary object from storage; all pass → serve-ready. */
  private async canaryScan(): Promise<void> {
    const { memory, status } = this;
    const scaling = memory.scaling!;
    const results = await steps.canaryScan.executeWithOptions(
      {
        startToCloseTimeout: '2 minutes',
        summary: `canary scan of Berth's canary object on ${scaling.fresh.length} new backends`,
      },
      [{ backends: scaling.fresh }],
    );
    const failed = results.filter((r) => !r.ok);
    if (failed.length > 0) {
      status.notReady = `the canary scan failed on ${failed.map((f) => `${f.id} (${f.error})`).join(', ')}`;
      await condition(
        () => status.target > status.replicasPatched,
        Math.min(2_000, Math.max(1, status.launchDeadline! - Date.now())),
      );
      return;
    }
    status.layersPassed.push('canary');
    status.backends = [...new Set([...status.backends, ...scaling.fresh.map((b) => b.id)])];
    status.notReady = undefined;
    status.platformSays = undefined;
    status.serveReady = true;
    status.launchDeadline = undefined;
    status.lastActivity = Date.now();
    memory.scaling = undefined;
    this.redistribute();
    this.refreshCounts();
    this.setPhase('ready');
  }

  /**
   * No launch under way: forget coordinators that stopped reporting, then (unless parked) raise on
   * sustained waiting or reap when idle; otherwise sleep until a change or the next deadline.
   */
  private async serve(): Promise<void> {
    const { memory, settings, status } = this;
    const nextExpiry = this.expireReports();
    let wakeAt = nextExpiry ?? Infinity;
    if (status.replicasPatched === 0) {
      this.setPhase('parked');
      memory.waitingSince = undefined;
    } else {
      const watch = monitor({
        waiting: status.waiting,
        waitingSince: memory.waitingSince,
        now: Date.now(),
        sustainMs: settings.monitorSustainMs,
        target: status.target,
        steps: settings,
      });
      memory.waitingSince = watch.waitingSince;
      if (watch.raiseTo !== undefined && watch.raiseTo > status.target) return void this.raise(watch.raiseTo);
      const idleAt = idleDeadline({
        running: status.running,
        waiting: status.waiting,
        lastActivity: status.lastActivity,
        idleTimeoutMs: settings.idleTimeoutMs,
      });
      if (idleAt !== undefined && Date.now() >= idleAt) return await this.reap();
      wakeAt = Math.min(wakeAt, watch.wakeAt ?? Infinity, idleAt ?? Infinity);
    }
    const seen = this.changes;
    await condition(
      () => status.target > status.replicasPatched || this.changes !== seen || workflowInfo().continueAsNewSuggested,
      Number.isFinite(wakeAt) ? Math.max(1, wakeAt - Date.now()) : undefined,
    );
  }

  /** Drain, release the group's leases, replicas to zero; a launch or demand meanwhile cancels it. */
  private async reap(): Promise<void> {
    const { memory, status } = this;
    const launchesBefore = memory.launches;
    this.setPhase('draining');
    await steps.releaseGroupLeases.executeWithOptions(
      { startToCloseTimeout: '30 seconds', summary: `release ${this.group}'s leases in meta` },
      [{ group: this.group }],
    );
    if (memory.launches !== launchesBefore || status.running + status.waiting > 0) return this.setPhase('ready');
    status.serveReady = false;
    this.redistribute();
    await this.setReplicas(0);
    status.layersPassed = [];
    status.backends = [];
    status.podsRunning = 0;
    status.aliveBackends = 0;
    if (memory.launches === launchesBefore) status.target = 0;
    this.setPhase(status.target > 0 ? 'scaling' : 'parked');
  }

  /**
   * A launch that cannot finish. From zero: back to zero, and waiting queries are answered with
   * `message`. A raise of a pool that serves: back to the replicas that serve, still serving.
   */
  private async failLaunch(message: string): Promise<void> {
    const { memory, status } = this;
    const serving = status.serveReady && (memory.scaling?.previous ?? 0) > 0;
    const back = serving ? memory.scaling!.previous : 0;
    if (!serving) memory.epoch++;
    const failure = { epoch: memory.epoch, at: Date.now(), message };
    status.lastFailure = failure;
    memory.scaling = undefined;
    status.launchDeadline = undefined;
    status.platformSays = undefined;
    status.target = back;
    try {
      await this.setReplicas(back);
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      // The platform refuses even the way back (the group is gone): there is nothing it runs for us.
      failure.message += `; setting replicas to ${back} failed too: ${failureMessage(error)}`;
      this.patched(back);
    }
    if (serving) {
      status.notReady = undefined;
      status.layersPassed = ['pods', 'backends', 'canary'];
      this.setPhase('ready');
      return;
    }
    status.serveReady = false;
    status.notReady = message;
    status.layersPassed = [];
    status.backends = [];
    status.podsRunning = 0;
    status.aliveBackends = 0;
    this.redistribute();
    this.setPhase('parked');
  }

  // ── state changes the phases and handlers share ────────────────────────────────────────────

  private get limits() {
    return {
      capacity: this.status.serveReady ? this.settings.maxConcurrency : 0,
      maxQueueSize: this.settings.maxQueueSize,
    };
  }

  private setPhase(phase: PoolPhase): void {
    if (this.status.phase === phase) return;
    this.status.phase = phase;
    upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.phase, value: phase }]);
  }

  /** Raise-only: the target becomes the largest asked for, rounded up to the increment, capped. */
  private raise(requested: number): number {
    const status = this.status;
    status.target = raiseTarget(status.target, requested, this.settings);
    status.lastActivity = Date.now();
    this.memory.launches++;
    this.changes++;
    return status.target;
  }

  /** The one write: replicas to the platform, counted in the status and the ledger. */
  private async setReplicas(replicas: number): Promise<void> {
    const result = await steps.setReplicas.executeWithOptions(
      {
        startToCloseTimeout: '30 seconds',
        summary: `patch ${this.group} replicas ${this.status.replicasPatched} → ${replicas} (${poolShape(this.settings)})`,
      },
      [{ group: this.group, replicas }],
    );
    if (result.changed) this.status.patches++;
    this.patched(replicas);
  }

  /** The replicas the platform now has from the pool; the ledger counts node-time from here. */
  private patched(replicas: number): void {
    this.status.replicasPatched = replicas;
    this.memory.usage = recordReplicas(this.memory.usage!, Date.now(), replicas);
  }

  /** Re-hands free slots after the capacity changed (ready, parked). */
  private redistribute(): void {
    this.memory.admissions = distribute(this.memory.admissions, this.limits.capacity);
  }

  /** Forgets idle coordinators, and those that stopped reporting (they died); returns when the next one would expire. */
  private expireReports(): number | undefined {
    const memory = this.memory;
    let next: number | undefined;
    for (const [id, a] of Object.entries(memory.admissions)) {
      const expiresAt = (memory.reportedAt[id] ?? 0) + this.settings.reportTtlMs;
      const idle = a.running + a.queued === 0;
      if (idle || expiresAt <= Date.now()) {
        memory.admissions = removeCoordinator(memory.admissions, id, this.limits);
        delete memory.reportedAt[id];
      } else next = Math.min(next ?? Infinity, expiresAt);
    }
    this.refreshCounts();
    return next;
  }

  private refreshCounts(): void {
    const sum = totals(this.memory.admissions);
    this.status.running = sum.running;
    this.status.waiting = sum.waiting;
    this.status.coordinators = Object.values(this.memory.admissions).filter((a) => a.running + a.queued > 0).length;
  }
}

export async function heavyPoolWorkflow(input: PoolWorkflowInput): Promise<void> {
  const pool = new HeavyPool(input);
  pool.tagSearchAttributes();
  setCurrentDetails(poolSummary(pool.settings));
  setHandler(launchUpdate, (request) => pool.launch(request), { validator: (request) => pool.validateLaunch(request) });
  setHandler(launchSignal, (request) => pool.launchBySignal(request));
  setHandler(reportDemandUpdate, (report) => pool.report(report), {
    validator: (report) => pool.validateReport(report),
  });
  setHandler(statusQuery, () => pool.describe());
  setHandler(usageQuery, () => pool.usage());
  setHandler(admissionQuery, (coordinator) => pool.answer(coordinator));

  await pool.run();
  await condition(allHandlersFinished);
  await continueAsNew<typeof heavyPoolWorkflow>({ config: input.config, carried: pool.memory });
}

/** The innermost message of a failure chain: what actually went wrong. */
function failureMessage(error: unknown): string {
  let e = error as { message?: string; cause?: unknown };
  while (e.cause) e = e.cause as typeof e;
  return e.message ?? String(error);
}
