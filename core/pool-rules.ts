/**
 * The heavy pool's decisions, as pure functions of what the pool knows: how a requested target is
 * rounded, whether a launch request is valid, what the readiness observations mean, when sustained
 * waiting raises the target, and when an idle pool parks. The pool workflow holds the state and
 * calls these; property tests hold them to their rules. No I/O, no clock: time comes in as `now`.
 */

/** A target past this is a mistake, not a request: it is rejected instead of capped. */
export const LARGEST_SANE_TARGET = 10_000;

export interface CapacitySteps {
  /** Capacity moves in steps of this many replicas. */
  increment: number;
  /** The most replicas the pool ever asks for. */
  maxReplicas: number;
}

/** Rounds a requested target up to the increment and caps it at the maximum. */
export function roundTarget(requested: number, steps: CapacitySteps): number {
  return Math.min(steps.maxReplicas, Math.ceil(requested / steps.increment) * steps.increment);
}

/** Raise-only: the larger of the current target and the rounded request. */
export function raiseTarget(current: number, requested: number, steps: CapacitySteps): number {
  return Math.max(current, roundTarget(requested, steps));
}

/** Why a launch request is invalid, in words; undefined when it is valid. */
export function launchRequestError(
  request: { target: unknown; group?: unknown },
  pool: { group: string } & CapacitySteps,
): string | undefined {
  const { target } = request;
  if (typeof target !== 'number' || !Number.isInteger(target))
    return `target must be a whole number of replicas, not ${JSON.stringify(target)}`;
  if (target < 1) return `target must be at least 1, not ${target}: the pool parks itself when idle`;
  if (target > LARGEST_SANE_TARGET)
    return `target ${target} is past ${LARGEST_SANE_TARGET}, the largest this pool takes (its maximum is ${pool.maxReplicas})`;
  if (request.group !== undefined && request.group !== pool.group)
    return `unknown group ${JSON.stringify(request.group)}: this pool scales "${pool.group}"`;
  return undefined;
}

/** One look at the platform and at meta while the pool scales up. */
export interface ReadinessObservation {
  /** Pods of the group running (a count: it proves nothing about the engine). */
  pods: number;
  /** Backends alive in meta that started after the patch. */
  freshBackends: number;
}

export interface ReadinessVerdict {
  podsUp: boolean;
  backendsUp: boolean;
  /** What is missing, in words (the layer that has not passed). */
  notReady?: string;
}

/**
 * Reads one observation against the target: pods first (a count only), then the backends that
 * registered after the patch, of which the pool needs one per replica added.
 */
export function readReadiness(seen: ReadinessObservation, target: number, previous: number): ReadinessVerdict {
  const needed = Math.max(0, target - previous);
  const podsUp = seen.pods >= target;
  const backendsUp = podsUp && seen.freshBackends >= needed;
  const pods = `${seen.pods} of ${target} pods running`;
  if (!podsUp) return { podsUp, backendsUp, notReady: pods };
  if (!backendsUp)
    return {
      podsUp,
      backendsUp,
      notReady: `${pods}, but ${seen.freshBackends} of ${needed} new backends alive in meta`,
    };
  return { podsUp, backendsUp };
}

export interface MonitorInput {
  /** Queries waiting in the pool's admission queue, over every coordinator. */
  waiting: number;
  /** Since when the queue has been non-empty, if it is. */
  waitingSince: number | undefined;
  now: number;
  /** How long waiting must last before it raises the target. */
  sustainMs: number;
  target: number;
  steps: CapacitySteps;
}

export interface MonitorDecision {
  waitingSince: number | undefined;
  /** The new target, when sustained waiting raises it. */
  raiseTo?: number;
  /** When to look again, if waiting continues and nothing else changes. */
  wakeAt?: number;
}

/**
 * The monitor (the analogue of scaling on `waiting_query_num`): waiting sustained for the window
 * raises the target by one increment, never past the maximum; the window starts over after a raise.
 */
export function monitor(input: MonitorInput): MonitorDecision {
  if (input.waiting <= 0) return { waitingSince: undefined };
  const since = input.waitingSince ?? input.now;
  if (input.target >= input.steps.maxReplicas) return { waitingSince: since };
  if (input.now - since >= input.sustainMs)
    return {
      waitingSince: undefined,
      raiseTo: raiseTarget(input.target, input.target + input.steps.increment, input.steps),
    };
  return { waitingSince: since, wakeAt: since + input.sustainMs };
}

/** When an idle pool parks: after the idle timeout with nothing running or waiting; undefined while busy. */
export function idleDeadline(input: {
  running: number;
  waiting: number;
  lastActivity: number;
  idleTimeoutMs: number;
}): number | undefined {
  return input.running === 0 && input.waiting === 0 ? input.lastActivity + input.idleTimeoutMs : undefined;
}
