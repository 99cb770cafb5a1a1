/**
 * The serving group's autoscaler, opt-in: one entity workflow per serving group, the heavy pool's
 * monitor applied to the group that holds the caches. Coordinators signal their serving queue's
 * counts (running, waiting) while they have queries and once when they empty; waiting above the
 * threshold for the sustain window adds one node, an idle window removes one, never below the floor
 * nor past the maximum (core/serving-scale.ts). Before each step it plans what the step will move
 * (the share of segments that change owner, the cache-hit dip to expect) and keeps the plan in its
 * status, then writes the replicas. It wakes only on a report or a deadline, and continues as new
 * when the server suggests it, carrying its memory.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { ServingScalerActivities } from '../activities/serving-scaler.js';
import { decideServingScale } from '../core/serving-scale.js';
import {
  servingLoadSignal,
  servingScalerSettings,
  servingScalerStatusQuery,
  type ServingScalerInput,
  type ServingScalerMemory,
} from './contracts/serving-scaler.js';

const steps = proxyActivities<ServingScalerActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/** Steps the status keeps. */
const KEPT_STEPS = 10;

export async function servingScalerWorkflow(input: ServingScalerInput): Promise<void> {
  const settings = servingScalerSettings(input.config);
  const { group } = settings;
  const m: ServingScalerMemory = input.carried ?? { loads: {}, steps: [] };
  let changes = 0;

  const totals = () => {
    const loads = Object.values(m.loads);
    return {
      running: loads.reduce((sum, l) => sum + l.running, 0),
      waiting: loads.reduce((sum, l) => sum + l.waiting, 0),
      coordinators: loads.length,
    };
  };
  setHandler(servingLoadSignal, (report) => {
    // A signal cannot be refused: a malformed one changes nothing.
    if (
      typeof report?.coordinator !== 'string' ||
      ![report.running, report.waiting].every((n) => Number.isInteger(n) && n >= 0)
    )
      return;
    m.loads[report.coordinator] = { running: report.running, waiting: report.waiting, at: Date.now() };
    changes++;
  });
  setHandler(servingScalerStatusQuery, () => ({
    group,
    replicas: m.replicas ?? 0,
    floor: settings.floor,
    max: settings.max,
    ...totals(),
    pressedSince: m.pressedSince,
    idleSince: m.idleSince,
    steps: m.steps,
  }));

  m.replicas ??= await steps.servingReplicas.executeWithOptions(
    { startToCloseTimeout: '1 minute', summary: `read ${group}'s replicas` },
    [{ group }],
  );

  for (;;) {
    // Coordinators that stopped reporting died: their load goes with them.
    let nextExpiry = Infinity;
    for (const [id, load] of Object.entries(m.loads)) {
      const expiresAt = load.at + settings.reportTtlMs;
      if (expiresAt <= Date.now()) delete m.loads[id];
      else nextExpiry = Math.min(nextExpiry, expiresAt);
    }
    const load = totals();
    const decision = decideServingScale(
      {
        replicas: m.replicas,
        running: load.running,
        waiting: load.waiting,
        pressedSince: m.pressedSince,
        idleSince: m.idleSince,
        now: Date.now(),
      },
      settings,
    );
    m.pressedSince = decision.pressedSince;
    m.idleSince = decision.idleSince;
    if (decision.step) {
      const from = m.replicas;
      const { to, reason } = decision.step;
      const plan = await steps.planServingStep.executeWithOptions(
        { startToCloseTimeout: '1 minute', summary: `plan ${group} ${from} → ${to}: ${reason}` },
        [{ group, from, to, reason }],
      );
      m.steps = [...m.steps, plan].slice(-KEPT_STEPS);
      await steps.scaleServing.executeWithOptions(
        {
          startToCloseTimeout: '1 minute',
          summary: `patch ${group} replicas ${from} → ${to} (about ${(plan.movedShare * 100).toFixed(1)}% of segments move)`,
        },
        [{ group, replicas: to }],
      );
      m.replicas = to;
      continue;
    }
    const wakeAt = Math.min(nextExpiry, decision.wakeAt ?? Infinity);
    const seen = changes;
    await condition(
      () => changes !== seen || workflowInfo().continueAsNewSuggested,
      Number.isFinite(wakeAt) ? Math.max(1, wakeAt - Date.now()) : undefined,
    );
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof servingScalerWorkflow>({ config: input.config, carried: m });
    }
  }
}
