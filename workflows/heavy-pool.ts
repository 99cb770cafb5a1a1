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
 */
import {
  allHandlersFinished,
  ActivityFailure,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { applyReport, distribute, removeCoordinator, totals } from '../core/admission.js';
import { monthStart, recordReplicas, usageSince } from '../core/node-hours.js';
import { idleDeadline, launchRequestError, monitor, raiseTarget, readReadiness } from '../core/pool-rules.js';
import type { HeavyPoolActivities } from '../activities/heavy-pool.js';
import {
  admissionQuery,
  launchSignal,
  launchUpdate,
  parkedStatus,
  poolSettings,
  reportDemandUpdate,
  SEARCH_ATTRIBUTES,
  statusQuery,
  usageQuery,
  type AdmissionAnswer,
  type DemandReport,
  type LaunchRequest,
  type PoolMemory,
  type PoolPhase,
  type PoolSettings,
  type PoolWorkflowInput,
} from './api.js';

// Short timeouts: these are quick calls, and a worker that dies holding one must not stall the pool.
const steps = proxyActivities<HeavyPoolActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/** The pool's memory and its message handlers; the main loop below drives its scaling. */
class HeavyPool {
  readonly settings: PoolSettings;
  readonly m: PoolMemory;
  /** Bumps whenever a handler changes something the main loop decides on. */
  changes = 0;

  constructor(input: PoolWorkflowInput) {
    this.settings = poolSettings(input.config);
    this.m = input.carried ?? {
      status: parkedStatus(input.config, Date.now()),
      admissions: {},
      reportedAt: {},
      epoch: 0,
      launches: 0,
    };
    // Settings may change across continue-as-new; the status shows the current ones.
    this.m.status.maxConcurrency = this.settings.maxConcurrency;
    this.m.status.maxQueueSize = this.settings.maxQueueSize;
    // A run from before the ledger starts one: the replicas in force count from here.
    this.m.usage ??= recordReplicas({ days: {} }, Date.now(), this.m.status.replicasPatched);
  }

  get s() {
    return this.m.status;
  }

  get limits() {
    return { capacity: this.s.serveReady ? this.settings.maxConcurrency : 0, maxQueueSize: this.settings.maxQueueSize };
  }

  setPhase(phase: PoolPhase): void {
    if (this.s.phase === phase) return;
    this.s.phase = phase;
    upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.phase, value: phase }]);
  }

  /** Raise-only: the target becomes the largest asked for, rounded up to the increment, capped. */
  raise(requested: number): number {
    this.s.target = raiseTarget(this.s.target, requested, this.settings);
    this.s.lastActivity = Date.now();
    this.m.launches++;
    this.changes++;
    return this.s.target;
  }

  report(report: DemandReport): AdmissionAnswer {
    const before = this.m.admissions[report.coordinator];
    const waitingSince = report.waiting > 0 ? (before?.waitingSince ?? Date.now()) : undefined;
    this.m.admissions = applyReport(
      this.m.admissions,
      report.coordinator,
      { running: report.running, waiting: report.waiting, waitingSince },
      this.limits,
    );
    this.m.reportedAt[report.coordinator] = Date.now();
    const demand = report.running + report.waiting;
    if (demand > 0 || (before && before.running + before.queued > 0)) this.s.lastActivity = Date.now();
    // Demand on a pool with no target launches it, unless it is from before the last failed launch
    // (its coordinator has not seen the failure yet, and will answer those queries with it).
    const current = report.epoch === undefined || report.epoch >= this.m.epoch;
    if (current && demand > 0 && this.s.target === 0) this.raise(this.settings.increment);
    this.refreshCounts();
    this.changes++;
    return this.answer(report.coordinator);
  }

  answer(coordinator: string): AdmissionAnswer {
    const own = this.m.admissions[coordinator];
    return {
      grant: own?.grant ?? 0,
      queued: own?.queued ?? 0,
      serveReady: this.s.serveReady,
      phase: this.s.phase,
      notReady: this.s.notReady,
      backends: this.s.backends,
      epoch: this.m.epoch,
      lastFailure: this.s.lastFailure,
      running: this.s.running,
      waiting: this.s.waiting,
    };
  }

  /** Re-hands free slots after the capacity changed (ready, parked). */
  redistribute(): void {
    this.m.admissions = distribute(this.m.admissions, this.limits.capacity);
  }

  /** Forgets idle coordinators, and those that stopped reporting (they died); returns when the next one would expire. */
  expireReports(): number | undefined {
    let next: number | undefined;
    for (const [id, a] of Object.entries(this.m.admissions)) {
      const expiresAt = (this.m.reportedAt[id] ?? 0) + this.settings.reportTtlMs;
      const idle = a.running + a.queued === 0;
      if (idle || expiresAt <= Date.now()) {
        this.m.admissions = removeCoordinator(this.m.admissions, id, this.limits);
        delete this.m.reportedAt[id];
      } else next = Math.min(next ?? Infinity, expiresAt);
    }
    this.refreshCounts();
    return next;
  }

  /** The replicas the platform now has from the pool; the ledger counts node-time from here. */
  patched(replicas: number): void {
    this.s.replicasPatched = replicas;
    this.m.usage = recordReplicas(this.m.usage!, Date.now(), replicas);
  }

  refreshCounts(): void {
    const sum = totals(this.m.admissions);
    this.s.running = sum.running;
    this.s.waiting = sum.waiting;
    this.s.coordinators = Object.values(this.m.admissions).filter((a) => a.running + a.queued > 0).length;
  }

  wire(): void {
    const validate = (request: LaunchRequest) => {
      const error = launchRequestError(request, this.settings);
      if (error) throw new Error(error);
    };
    setHandler(
      launchUpdate,
      (request) => ({ workflowId: workflowInfo().workflowId, accepted: this.raise(request.target) }),
      { validator: validate },
    );
    setHandler(launchSignal, (request) => {
      // A signal cannot be refused; an invalid one changes nothing.
      if (!launchRequestError(request, this.settings)) this.raise(request.target);
    });
    setHandler(reportDemandUpdate, (report) => this.report(report), {
      validator: (report) => {
        const counts = [report.running, report.waiting, report.epoch ?? 0];
        if (
          typeof report.coordinator !== 'string' ||
          report.coordinator.length === 0 ||
          report.coordinator.length > 200
        )
          throw new Error('a report names its coordinator');
        if (!counts.every((n) => Number.isInteger(n) && n >= 0))
          throw new Error('running, waiting and epoch are whole numbers, at least 0');
      },
    });
    setHandler(statusQuery, () => ({
      ...this.s,
      idleDeadline: this.s.serveReady
        ? idleDeadline({ ...this.s, idleTimeoutMs: this.settings.idleTimeoutMs })
        : undefined,
      usage: usageSince(this.m.usage!, monthStart(Date.now())),
    }));
    setHandler(usageQuery, () => this.m.usage!);
    setHandler(admissionQuery, (coordinator) => this.answer(coordinator));
  }
}

export async function heavyPoolWorkflow(input: PoolWorkflowInput): Promise<void> {
  const pool = new HeavyPool(input);
  const { settings, m } = pool;
  const s = pool.s;
  const group = settings.group;
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.group, value: group },
    { key: SEARCH_ATTRIBUTES.phase, value: s.phase },
  ]);
  pool.wire();

  const setReplicas = async (replicas: number) => {
    const result = await steps.setReplicas.executeWithOptions(
      { startToCloseTimeout: '30 seconds', summary: `patch ${group} replicas ${s.replicasPatched} → ${replicas}` },
      [{ group, replicas }],
    );
    if (result.changed) s.patches++;
    pool.patched(replicas);
  };

  /**
   * A launch that cannot finish. From zero: back to zero, and waiting queries are answered with
   * `message`. A raise of a pool that serves: back to the replicas that serve, still serving.
   */
  const failLaunch = async (message: string) => {
    const serving = s.serveReady && (m.scaling?.previous ?? 0) > 0;
    const back = serving ? m.scaling!.previous : 0;
    if (!serving) m.epoch++;
    s.lastFailure = { epoch: m.epoch, at: Date.now(), message };
    m.scaling = undefined;
    s.launchDeadline = undefined;
    s.platformSays = undefined;
    s.target = back;
    try {
      await setReplicas(back);
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      // The platform refuses even the way back (the group is gone): there is nothing it runs for us.
      s.lastFailure.message += `; setting replicas to ${back} failed too: ${failureMessage(error)}`;
      pool.patched(back);
    }
    if (serving) {
      s.notReady = undefined;
      s.layersPassed = ['pods', 'backends', 'canary'];
      pool.setPhase('ready');
      return;
    }
    s.serveReady = false;
    s.notReady = message;
    s.layersPassed = [];
    s.backends = [];
    s.podsRunning = 0;
    s.aliveBackends = 0;
    pool.redistribute();
    pool.setPhase('parked');
  };

  /**
   * Patches a raised target and starts readiness for the replicas it adds. A raise during a launch
   * continues that launch: same start, same patch time (its first backends count as new).
   */
  const startScaling = async () => {
    const launch = m.scaling;
    const previous = launch ? launch.previous : s.serveReady ? s.replicasPatched : 0;
    const startedAt = launch?.startedAt ?? Date.now();
    const patchedAt = launch?.patchedAt ?? Date.now();
    pool.setPhase('scaling');
    s.layersPassed = [];
    await setReplicas(s.target);
    m.scaling = { startedAt, patchedAt, previous, fresh: [], looked: false };
    s.launchDeadline = startedAt + settings.launchDeadlineMs;
    pool.setPhase('waiting-for-backends');
  };

  /** One readiness step: an observation of pods and backends, or the canary. */
  const readinessStep = async () => {
    const scaling = m.scaling!;
    const target = s.replicasPatched;
    const needed = target - scaling.previous;
    if (s.phase === 'waiting-for-backends') {
      const untilDeadline = Math.max(1, s.launchDeadline! - Date.now());
      const saw = scaling.looked
        ? { pods: s.podsRunning, backends: scaling.fresh.length, why: s.platformSays }
        : undefined;
      const seen = await steps.observePool.executeWithOptions(
        {
          startToCloseTimeout: `${settings.readinessWaitMs + settings.readinessConfirmMs + 30_000} ms`,
          heartbeatTimeout: '10 seconds',
          summary: `observe ${group}: pods, and backends alive since the patch (twice, ${settings.readinessConfirmMs} ms apart)`,
        },
        [
          {
            group,
            startedAfter: scaling.patchedAt,
            wants: { pods: target, backends: needed },
            saw,
            waitMs: Math.min(settings.readinessWaitMs, untilDeadline),
            confirmMs: settings.readinessConfirmMs,
          },
        ],
      );
      const verdict = readReadiness({ pods: seen.pods, freshBackends: seen.backends.length }, target, scaling.previous);
      s.podsRunning = seen.pods;
      s.aliveBackends = seen.backends.length + s.backends.length;
      s.platformSays = seen.why;
      scaling.fresh = seen.backends;
      scaling.looked = true;
      if (verdict.podsUp && !s.layersPassed.includes('pods')) s.layersPassed.push('pods');
      if (!verdict.backendsUp || !seen.confirmed) {
        s.notReady = verdict.notReady ?? 'new backends were alive once, but not on the second observation';
        if (seen.why && !verdict.podsUp) s.notReady += `; the platform says: ${seen.why}`;
        // Nothing moved for a whole wait: a write undone behind the pool's back (a reconciler, a
        // person) is put back; setReplicas writes nothing when the target is in place.
        const stalled = saw && seen.pods === saw.pods && seen.backends.length === saw.backends && seen.why === saw.why;
        if (stalled && !verdict.podsUp) await setReplicas(target);
        return;
      }
      s.layersPassed.push('backends');
      pool.setPhase('canary');
      return;
    }
    // canary
    const results = await steps.canaryScan.executeWithOptions(
      {
        startToCloseTimeout: '2 minutes',
        summary: `canary scan of Berth's canary object on ${scaling.fresh.length} new backends`,
      },
      [{ backends: scaling.fresh }],
    );
    const failed = results.filter((r) => !r.ok);
    if (failed.length > 0) {
      s.notReady = `the canary scan failed on ${failed.map((f) => `${f.id} (${f.error})`).join(', ')}`;
      await condition(() => s.target > s.replicasPatched, Math.min(2_000, Math.max(1, s.launchDeadline! - Date.now())));
      return;
    }
    s.layersPassed.push('canary');
    s.backends = [...new Set([...s.backends, ...scaling.fresh.map((b) => b.id)])];
    s.notReady = undefined;
    s.platformSays = undefined;
    s.serveReady = true;
    s.launchDeadline = undefined;
    s.lastActivity = Date.now();
    m.scaling = undefined;
    pool.redistribute();
    pool.refreshCounts();
    pool.setPhase('ready');
  };

  /** Drain, release the group's leases, replicas to zero; a launch or demand meanwhile cancels it. */
  const reap = async () => {
    const launchesBefore = m.launches;
    pool.setPhase('draining');
    await steps.releaseGroupLeases.executeWithOptions(
      { startToCloseTimeout: '30 seconds', summary: `release ${group}'s leases in meta` },
      [{ group }],
    );
    if (m.launches !== launchesBefore || s.running + s.waiting > 0) return pool.setPhase('ready');
    s.serveReady = false;
    pool.redistribute();
    await setReplicas(0);
    s.layersPassed = [];
    s.backends = [];
    s.podsRunning = 0;
    s.aliveBackends = 0;
    if (m.launches === launchesBefore) s.target = 0;
    pool.setPhase(s.target > 0 ? 'scaling' : 'parked');
  };

  /** One turn of the pool: scale, prove readiness, monitor, reap, or sleep until a change or a deadline. */
  const turn = async () => {
    if (s.target > s.replicasPatched) return await startScaling();
    if (m.scaling) {
      if (Date.now() < s.launchDeadline!) return await readinessStep();
      return await failLaunch(
        `the heavy pool did not become serve-ready within ${Math.round(settings.launchDeadlineMs / 1000)} s: ${s.notReady ?? 'no readiness layer passed'}`,
      );
    }
    const nextExpiry = pool.expireReports();
    let wakeAt = nextExpiry ?? Infinity;
    if (s.replicasPatched === 0) {
      pool.setPhase('parked');
      m.waitingSince = undefined;
    } else {
      const watch = monitor({
        waiting: s.waiting,
        waitingSince: m.waitingSince,
        now: Date.now(),
        sustainMs: settings.monitorSustainMs,
        target: s.target,
        steps: settings,
      });
      m.waitingSince = watch.waitingSince;
      if (watch.raiseTo !== undefined && watch.raiseTo > s.target) return void pool.raise(watch.raiseTo);
      const idleAt = idleDeadline({
        running: s.running,
        waiting: s.waiting,
        lastActivity: s.lastActivity,
        idleTimeoutMs: settings.idleTimeoutMs,
      });
      if (idleAt !== undefined && Date.now() >= idleAt) return await reap();
      wakeAt = Math.min(wakeAt, watch.wakeAt ?? Infinity, idleAt ?? Infinity);
    }
    const seen = pool.changes;
    await condition(
      () => s.target > s.replicasPatched || pool.changes !== seen || workflowInfo().continueAsNewSuggested,
      Number.isFinite(wakeAt) ? Math.max(1, wakeAt - Date.now()) : undefined,
    );
  };

  for (;;) {
    try {
      await turn();
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      await failLaunch(`a step of the heavy pool failed: ${failureMessage(error)}`);
    }
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof heavyPoolWorkflow>({ config: input.config, carried: m });
    }
  }
}

/** The innermost message of a failure chain: what actually went wrong. */
function failureMessage(error: unknown): string {
  let e = error as { message?: string; cause?: unknown };
  while (e.cause) e = e.cause as typeof e;
  return e.message ?? String(error);
}
