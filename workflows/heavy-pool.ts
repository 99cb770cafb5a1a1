/**
 * The heavy pool: one entity workflow per compute group, with a floor of zero.
 *
 * - launch (update or signal): declarative, raise-only and idempotent. The target is rounded up to
 *   the pool's increment and capped at its maximum; concurrent launches coalesce onto this one
 *   execution (callers use update-with-start with USE_EXISTING) at the largest target asked for.
 * - Scale up with the one write (replicas), then readiness in layers, each of which can lie on its
 *   own: pods running (a count) → new backends alive in meta on two consecutive observations →
 *   a canary scan on each new backend that reads a real segment from storage.
 * - runQuery (update): waits until serve-ready, runs the query on the pool (a lost backend costs
 *   exactly one retry), and counts running and waiting queries.
 * - Idle reaper: nothing running or waiting for the idle timeout → drain, release the group's
 *   leases, replicas to zero, parked. A launch arriving while draining cancels the reap.
 * - Monitor: the group's waiting queries above zero for a sustained window raise the target by one
 *   increment, never past the maximum.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Backend, HeavyPoolActivities } from '../activities/heavy-pool.js';
import {
  LARGEST_SANE_TARGET,
  launchSignal,
  launchUpdate,
  parkedStatus,
  runQueryUpdate,
  SEARCH_ATTRIBUTES,
  statusQuery,
  type LaunchRequest,
  type PoolPhase,
  type PoolStatus,
  type PoolWorkflowInput,
} from './api.js';

// Short timeouts: these are quick calls, and a worker that dies holding one must not stall the pool.
const steps = proxyActivities<HeavyPoolActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});
// A heavy query whose backend is lost mid-query is retried exactly once.
const queries = proxyActivities<HeavyPoolActivities>({ startToCloseTimeout: '1 hour', heartbeatTimeout: '30 seconds', retry: { maximumAttempts: 2 } });

export async function heavyPoolWorkflow(input: PoolWorkflowInput): Promise<void> {
  const group = input.config.group;
  const config = {
    increment: input.config.increment ?? 2,
    maxReplicas: input.config.maxReplicas ?? 4,
    idleTimeoutMs: input.config.idleTimeoutMs ?? 300_000,
    readinessPollMs: input.config.readinessPollMs ?? 2_000,
    monitorSustainMs: input.config.monitorSustainMs ?? 30_000,
    monitorPollMs: input.config.monitorPollMs ?? 10_000,
  };
  const s: PoolStatus = { ...parkedStatus(group, Date.now()), ...input.carried };
  let launches = 0; // bumps on every launch, so that a drain can tell one arrived
  const setPhase = (phase: PoolPhase) => {
    if (s.phase === phase) return;
    s.phase = phase;
    upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.phase, value: phase }]);
  };
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.group, value: group },
    { key: SEARCH_ATTRIBUTES.phase, value: s.phase },
  ]);

  const validate = (request: LaunchRequest) => {
    const { target } = request;
    if (typeof target !== 'number' || !Number.isInteger(target)) throw new Error(`target must be a whole number of replicas, not ${JSON.stringify(target)}`);
    if (target < 1) throw new Error(`target must be at least 1, not ${target}: the pool parks itself when idle`);
    if (target > LARGEST_SANE_TARGET) throw new Error(`target ${target} is past ${LARGEST_SANE_TARGET}, the largest this pool takes (its maximum is ${config.maxReplicas})`);
    if (request.group !== undefined && request.group !== group) throw new Error(`unknown group "${request.group}": this pool scales "${group}"`);
  };
  /** Raise-only: the target becomes the largest asked for, rounded up to the increment, capped. */
  const raise = (requested: number) => {
    const rounded = Math.min(config.maxReplicas, Math.ceil(requested / config.increment) * config.increment);
    s.target = Math.max(s.target, rounded);
    s.lastActivity = Date.now();
    launches++;
    return s.target;
  };

  setHandler(launchUpdate, (request) => ({ workflowId: workflowInfo().workflowId, accepted: raise(request.target) }), { validator: validate });
  setHandler(launchSignal, (request) => {
    try {
      validate(request);
      raise(request.target);
    } catch {
      // A signal cannot be refused; an invalid one changes nothing.
    }
  });
  setHandler(statusQuery, () => ({ ...s, idleDeadline: s.serveReady && s.running === 0 && s.waiting === 0 ? s.lastActivity + config.idleTimeoutMs : undefined }));
  setHandler(
    runQueryUpdate,
    async (request) => {
      s.waiting++;
      try {
        raise(Math.max(s.target, config.increment));
        await condition(() => s.serveReady);
      } finally {
        s.waiting--;
      }
      s.running++;
      try {
        return await queries.runHeavyQuery.executeWithOptions(
          { startToCloseTimeout: '1 hour', heartbeatTimeout: '30 seconds', retry: { maximumAttempts: 2 }, summary: `run heavy query ${request.queryId} on ${group}` },
          [{ group, queryId: request.queryId, sql: request.sql }],
        );
      } finally {
        s.running--;
        s.lastActivity = Date.now();
      }
    },
    {
      validator: (request) => {
        if (typeof request.sql !== 'string' || request.sql.length === 0) throw new Error('a heavy query needs its SQL');
      },
    },
  );

  const setReplicas = async (replicas: number) => {
    const result = await steps.setReplicas.executeWithOptions(
      { startToCloseTimeout: '30 seconds', summary: `patch ${group} replicas ${s.replicasPatched} → ${replicas}` },
      [{ group, replicas }],
    );
    if (result.changed) s.patches++;
    s.replicasPatched = replicas;
  };

  /** Patch, then readiness in layers. Returns early when the target is raised again meanwhile. */
  const scaleUp = async () => {
    const previous = s.replicasPatched;
    const target = s.target;
    setPhase('scaling');
    s.serveReady = false;
    s.layersPassed = [];
    const patchedAt = Date.now();
    await setReplicas(target);

    setPhase('waiting-for-backends');
    let fresh: Backend[] = [];
    for (let consecutive = 0; consecutive < 2; ) {
      if (s.target > s.replicasPatched) return;
      const seen = await steps.observePool.executeWithOptions({ startToCloseTimeout: '10 seconds', summary: `observe ${group}: pods, and backends alive since the patch` }, [{ group, startedAfter: patchedAt }]);
      s.podsRunning = seen.pods;
      s.aliveBackends = seen.backends.length;
      fresh = seen.backends;
      const podsUp = seen.pods >= target;
      if (podsUp && !s.layersPassed.includes('pods')) s.layersPassed.push('pods');
      const backendsUp = podsUp && fresh.length >= target - previous;
      consecutive = backendsUp ? consecutive + 1 : 0;
      s.notReady = !podsUp
        ? `${seen.pods} of ${target} pods running`
        : !backendsUp
          ? `pods are running, but ${fresh.length} of ${target - previous} new backends are alive in meta`
          : 'backends alive once; waiting for a second observation';
      if (consecutive < 2) await sleep(config.readinessPollMs);
    }
    s.layersPassed.push('backends');

    setPhase('canary');
    for (;;) {
      if (s.target > s.replicasPatched) return;
      const results = await steps.canaryScan.executeWithOptions({ startToCloseTimeout: '2 minutes', summary: `canary scan of a stored segment on ${fresh.length} new backends` }, [{ backends: fresh }]);
      const failed = results.filter((r) => !r.ok);
      if (failed.length === 0) break;
      s.notReady = `the canary scan failed on ${failed.map((f) => `${f.id} (${f.error})`).join(', ')}`;
      await sleep(config.readinessPollMs);
    }
    s.layersPassed.push('canary');
    s.notReady = undefined;
    s.serveReady = true;
    s.lastActivity = Date.now();
    setPhase('ready');
  };

  /** Drain, release the group's leases, replicas to zero; a launch meanwhile cancels it. */
  const reap = async () => {
    const launchesBefore = launches;
    setPhase('draining');
    await condition(() => s.running === 0 && s.waiting === 0);
    await steps.releaseGroupLeases.executeWithOptions({ startToCloseTimeout: '30 seconds', summary: `release ${group}'s leases in meta` }, [{ group }]);
    if (launches !== launchesBefore) return setPhase('ready');
    s.serveReady = false;
    await setReplicas(0);
    s.layersPassed = [];
    s.podsRunning = 0;
    s.aliveBackends = 0;
    if (launches === launchesBefore) s.target = 0;
    setPhase('parked');
  };

  let waitingSince: number | undefined;
  for (;;) {
    if (s.target > s.replicasPatched) {
      await scaleUp();
      continue;
    }
    if (s.replicasPatched === 0) {
      setPhase('parked');
      if (workflowInfo().continueAsNewSuggested) {
        await condition(allHandlersFinished);
        await continueAsNew<typeof heavyPoolWorkflow>({ config: input.config, carried: { target: s.target, replicasPatched: 0, patches: s.patches, lastActivity: s.lastActivity } });
      }
      await condition(() => s.target > s.replicasPatched);
      continue;
    }
    // Up and serving: wake for a raise, for the monitor, or when the idle deadline passes.
    const idle = () => s.running === 0 && s.waiting === 0;
    const untilIdleDeadline = s.lastActivity + config.idleTimeoutMs - Date.now();
    await condition(() => s.target > s.replicasPatched, Math.max(1, Math.min(config.monitorPollMs, untilIdleDeadline)));
    if (s.target > s.replicasPatched) continue;
    const waiting = await steps.waitingQueries.executeWithOptions({ startToCloseTimeout: '10 seconds', summary: `read ${group}'s waiting queries` }, [{ group }]);
    waitingSince = waiting > 0 ? (waitingSince ?? Date.now()) : undefined;
    if (waitingSince !== undefined && Date.now() - waitingSince >= config.monitorSustainMs && s.target < config.maxReplicas) {
      raise(s.target + config.increment);
      waitingSince = undefined;
      continue;
    }
    if (idle() && Date.now() >= s.lastActivity + config.idleTimeoutMs) await reap();
  }
}
