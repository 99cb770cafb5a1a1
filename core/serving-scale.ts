/**
 * Autoscaling the serving group, opt-in: the heavy pool's monitor applied to the group that holds
 * the caches. Waiting queries above a threshold, sustained for a window, add one node; the group
 * idle for a window removes one; never below the floor nor past the maximum, one step per window.
 * Caches are stateful, which is why a serving group is usually not autoscaled (doris-operator#383);
 * Berth's ownership moves only the changed node's weight share, so each step's cost is known before
 * it is taken: the plan says how much moves and the cache-hit dip to expect. Pure: time comes in as
 * `now`.
 */

export interface ServingScaleSettings {
  /** The fewest replicas the scaler ever leaves. */
  floor: number;
  /** The most replicas it ever asks for. */
  max: number;
  /** Waiting queries above this many count as pressure. */
  waitingThreshold: number;
  /** Pressure sustained this long adds a node. */
  sustainMs: number;
  /** Nothing running or waiting for this long removes a node. */
  idleMs: number;
}

export interface ServingLoad {
  replicas: number;
  running: number;
  waiting: number;
  /** Since when waiting has been above the threshold / the group idle, if it is. */
  pressedSince?: number;
  idleSince?: number;
  now: number;
}

export interface ServingScaleDecision {
  pressedSince?: number;
  idleSince?: number;
  /** The replicas to go to, and why, when a step is due. */
  step?: { to: number; reason: string };
  /** When to look again if nothing changes. */
  wakeAt?: number;
}

export function decideServingScale(load: ServingLoad, settings: ServingScaleSettings): ServingScaleDecision {
  const pressed = load.waiting > settings.waitingThreshold;
  const idle = load.running === 0 && load.waiting === 0;
  const pressedSince = pressed ? (load.pressedSince ?? load.now) : undefined;
  const idleSince = idle ? (load.idleSince ?? load.now) : undefined;
  if (pressedSince !== undefined && load.replicas < settings.max) {
    if (load.now - pressedSince >= settings.sustainMs) {
      return {
        step: {
          to: load.replicas + 1,
          reason: `${load.waiting} queries waiting (above ${settings.waitingThreshold}) for ${Math.round((load.now - pressedSince) / 1000)} s`,
        },
      };
    }
    return { pressedSince, wakeAt: pressedSince + settings.sustainMs };
  }
  if (idleSince !== undefined && load.replicas > settings.floor) {
    if (load.now - idleSince >= settings.idleMs)
      return { step: { to: load.replicas - 1, reason: `idle for ${Math.round((load.now - idleSince) / 1000)} s` } };
    return { idleSince, wakeAt: idleSince + settings.idleMs };
  }
  return { pressedSince, idleSince };
}

/** What a step will move, said before it is taken. */
export interface ServingPlan {
  at: number;
  from: number;
  to: number;
  reason: string;
  /** The members the plan was made over. */
  members: number;
  /** The share of segments that changes owner, in expectation: the added or removed weight's share. */
  movedShare: number;
  /** About that many bytes of the manifest to warm again on their new owners. */
  movedBytes: number;
  /** The cache-hit rate to expect lost until the warmers have fetched the moved share. */
  expectedHitRateDip: number;
}

/**
 * The expected movement of one step, from the members' weights: a node of the group's median
 * weight joins (its weight's share of the new total moves to it) or leaves (its share of the old
 * total moves to the rest). Reads of moved segments miss until their new owners' warmers fetch
 * them, so the hit rate dips by about the moved share.
 */
export function planServingChange(input: {
  weights: number[];
  from: number;
  to: number;
  totalBytes: number;
  reason: string;
  at: number;
}): ServingPlan {
  const sorted = [...input.weights].sort((a, b) => a - b);
  const typical = sorted.length > 0 ? sorted[Math.floor((sorted.length - 1) / 2)]! : 1;
  const total = sorted.reduce((sum, w) => sum + w, 0);
  const changed = typical * Math.abs(input.to - input.from);
  const movedShare = input.to > input.from ? changed / (total + changed) : total > 0 ? Math.min(1, changed / total) : 0;
  return {
    at: input.at,
    from: input.from,
    to: input.to,
    reason: input.reason,
    members: sorted.length,
    movedShare,
    movedBytes: Math.round(movedShare * input.totalBytes),
    expectedHitRateDip: movedShare,
  };
}
