/**
 * Admission to a workload group held by one authority (the heavy pool's workflow) for many
 * coordinators, by counts only: each coordinator reports how many of its queries run and wait, and
 * gets back a grant (how many it may run at once) and a queue allowance (how many may wait).
 *
 * The rules, as Doris' workload groups have them, over every coordinator together:
 * - at most `maxConcurrency` queries run at once: grants never sum past the capacity;
 * - at most `maxQueueSize` queries wait: queue allowances never sum past it; a coordinator drops
 *   (answers "queue full" to) its newest waiting queries beyond its allowance;
 * - a grant or allowance is never taken back from a coordinator except by its own report of less
 *   demand, so a coordinator acting on the last answer it saw can never oversubscribe the group;
 * - free slots go one at a time to the coordinator holding the fewest (max-min fairness), ties to
 *   the longest-waiting and then by id, so the result is deterministic.
 * Pure functions, shared by the workflow (deterministic) and tested by property tests.
 */

export interface CoordinatorDemand {
  /** Queries of this coordinator running on the group now. */
  running: number;
  /** Queries of this coordinator waiting (not yet refused). */
  waiting: number;
  /** Since when this coordinator has had queries waiting (authority time), if it has. */
  waitingSince?: number;
}

export interface CoordinatorAdmission extends CoordinatorDemand {
  /** How many of its queries may run at once. */
  grant: number;
  /** How many of its waiting queries hold a place in the group's queue. */
  queued: number;
}

export interface AdmissionLimits {
  /** Slots: 0 while the group cannot serve. */
  capacity: number;
  maxQueueSize: number;
}

/**
 * Applies one coordinator's new report: its queue allowance is first trimmed to what it reports,
 * then grown into the room the others leave (first come, first served between reports).
 */
export function applyReport(
  all: Readonly<Record<string, CoordinatorAdmission>>,
  coordinator: string,
  report: CoordinatorDemand,
  limits: AdmissionLimits,
): Record<string, CoordinatorAdmission> {
  const before = all[coordinator];
  const kept = Math.min(report.waiting, before?.queued ?? 0);
  const othersQueued = Object.entries(all).reduce((sum, [id, a]) => (id === coordinator ? sum : sum + a.queued), 0);
  const room = Math.max(0, limits.maxQueueSize - othersQueued - kept);
  const queued = kept + Math.min(report.waiting - kept, room);
  const grant = Math.min(before?.grant ?? 0, report.running + queued);
  const next = { ...all, [coordinator]: { ...report, grant: Math.max(grant, report.running), queued } };
  return distribute(next, limits.capacity);
}

/** Removes a coordinator (its reports expired): its grant and queue places go back to the group. */
export function removeCoordinator(
  all: Readonly<Record<string, CoordinatorAdmission>>,
  coordinator: string,
  limits: AdmissionLimits,
): Record<string, CoordinatorAdmission> {
  const next = { ...all };
  delete next[coordinator];
  return distribute(next, limits.capacity);
}

/** Hands free capacity to coordinators whose demand exceeds their grant, one slot at a time, fewest first. */
export function distribute(
  all: Readonly<Record<string, CoordinatorAdmission>>,
  capacity: number,
): Record<string, CoordinatorAdmission> {
  const next: Record<string, CoordinatorAdmission> = {};
  for (const [id, a] of Object.entries(all)) next[id] = { ...a };
  let free = capacity - Object.values(next).reduce((sum, a) => sum + a.grant, 0);
  const wanting = () =>
    Object.entries(next)
      .filter(([, a]) => a.grant < a.running + a.queued)
      .sort(
        ([ia, a], [ib, b]) =>
          a.grant - b.grant ||
          (a.waitingSince ?? Infinity) - (b.waitingSince ?? Infinity) ||
          (ia < ib ? -1 : ia > ib ? 1 : 0),
      );
  while (free > 0) {
    const [first] = wanting();
    if (!first) break;
    first[1].grant++;
    free--;
  }
  return next;
}

/** Sums over every coordinator: what the group's queue figures show. */
export function totals(all: Readonly<Record<string, CoordinatorAdmission>>): {
  running: number;
  waiting: number;
  granted: number;
} {
  let running = 0;
  let waiting = 0;
  let granted = 0;
  for (const a of Object.values(all)) {
    running += a.running;
    waiting += a.queued;
    granted += a.grant;
  }
  return { running, waiting, granted };
}
