/**
 * The heavy pool's node-hours: a ledger of the replicas it asked for, kept by the pool workflow in
 * its own memory (so it outlives Temporal's history retention, which deletes each closed run, and
 * every continue-as-new closes one), bounded to node-milliseconds per UTC day. Replicas patched are
 * what the pool pays for, from the patch that raises them to the patch that lowers them. Pure: time
 * comes in as arguments.
 */

const DAY_MS = 86_400_000;
export const HOUR_MS = 3_600_000;
/** Days the ledger keeps: a year and a month, enough for `--since 365d` and last year's same month. */
export const LEDGER_DAYS = 400;

export interface DayUsage {
  /** Replicas × milliseconds in force during the day. */
  nodeMs: number;
  /** The most replicas in force at once during the day. */
  peak: number;
}

export interface NodeUsage {
  /** Closed time only, by UTC day (YYYY-MM-DD). */
  days: Record<string, DayUsage>;
  /** The replicas in force since `since`, not yet in `days`. */
  open?: { since: number; replicas: number };
}

export const dayOf = (at: number) => new Date(at).toISOString().slice(0, 10);
const dayStart = (at: number) => Math.floor(at / DAY_MS) * DAY_MS;

/** Adds `replicas` in force over [from, to) to a copy of `days`, split at UTC midnights. */
function addSpan(days: Record<string, DayUsage>, from: number, to: number, replicas: number): Record<string, DayUsage> {
  const out = { ...days };
  for (let start = from; start < to;) {
    const end = Math.min(to, dayStart(start) + DAY_MS);
    const day = dayOf(start);
    const before = out[day] ?? { nodeMs: 0, peak: 0 };
    out[day] = { nodeMs: before.nodeMs + replicas * (end - start), peak: Math.max(before.peak, replicas) };
    start = end;
  }
  return out;
}

/** The ledger after the replicas in force became `replicas` at `at`; days older than LEDGER_DAYS are dropped. */
export function recordReplicas(usage: NodeUsage, at: number, replicas: number): NodeUsage {
  let days = usage.open ? addSpan(usage.days, usage.open.since, at, usage.open.replicas) : { ...usage.days };
  const oldest = dayOf(at - (LEDGER_DAYS - 1) * DAY_MS);
  days = Object.fromEntries(Object.entries(days).filter(([day]) => day >= oldest));
  return replicas > 0 ? { days, open: { since: at, replicas } } : { days };
}

/** Every day's usage, the replicas still in force counted up to `now`. */
export function usageUntil(usage: NodeUsage, now: number): Record<string, DayUsage> {
  return usage.open && now > usage.open.since
    ? addSpan(usage.days, usage.open.since, now, usage.open.replicas)
    : usage.days;
}

/** The ledger's days from `fromDay` on (YYYY-MM-DD), for a status that shows this month only. */
export function usageSince(usage: NodeUsage, fromDay: string): NodeUsage {
  return {
    days: Object.fromEntries(Object.entries(usage.days).filter(([day]) => day >= fromDay)),
    ...(usage.open ? { open: usage.open } : {}),
  };
}

export interface UsageWindow {
  /** First UTC day counted (YYYY-MM-DD) and the instant the window ends. */
  fromDay: string;
  to: number;
  nodeMs: number;
  nodeHours: number;
  /** The most replicas in force at once in the window. */
  peak: number;
  /** Hours from the window's first midnight to its end. */
  hours: number;
}

/** Node-time of whole UTC days from `fromDay` to the day of `now`, the current day counted up to `now`. */
export function usageWindow(usage: NodeUsage, fromDay: string, now: number): UsageWindow {
  const days = Object.entries(usageUntil(usage, now)).filter(([day]) => day >= fromDay && day <= dayOf(now));
  const nodeMs = days.reduce((sum, [, d]) => sum + d.nodeMs, 0);
  return {
    fromDay,
    to: now,
    nodeMs,
    nodeHours: nodeMs / HOUR_MS,
    peak: Math.max(0, ...days.map(([, d]) => d.peak)),
    hours: (now - Date.parse(`${fromDay}T00:00:00Z`)) / HOUR_MS,
  };
}

/** The first day of a window of `days` whole UTC days ending today (today counts as one). */
export const windowStart = (now: number, days: number) => dayOf(dayStart(now) - (days - 1) * DAY_MS);
/** The first day of the UTC month of `now`. */
export const monthStart = (now: number) => `${dayOf(now).slice(0, 7)}-01`;

/** Node-hours today and this month (UTC), the replicas in force counted up to `now`. */
export function nodeHoursNow(usage: NodeUsage, now: number): { today: number; month: number } {
  return {
    today: usageWindow(usage, dayOf(now), now).nodeHours,
    month: usageWindow(usage, monthStart(now), now).nodeHours,
  };
}

export interface Bill {
  pricePerNodeHour: number;
  nodeHours: number;
  /** What the pool's node-hours cost. */
  poolCost: number;
  /** A resident pool of `residentNodes` for every hour of the window. */
  residentNodes: number;
  residentCost: number;
  saving: number;
  /** The saving as a fraction of the resident cost. */
  savingFraction: number;
}

const cents = (dollars: number) => Math.round(dollars * 100) / 100;

/** The window's cost against a resident pool of `residentNodes` nodes for all of its hours, in cents. */
export function bill(window: UsageWindow, pricePerNodeHour: number, residentNodes: number): Bill {
  const poolCost = cents(window.nodeHours * pricePerNodeHour);
  const residentCost = cents(residentNodes * window.hours * pricePerNodeHour);
  return {
    pricePerNodeHour,
    nodeHours: window.nodeHours,
    poolCost,
    residentNodes,
    residentCost,
    saving: cents(residentCost - poolCost),
    savingFraction: residentCost > 0 ? (residentCost - poolCost) / residentCost : 0,
  };
}

/** The seed's on-demand node: a resident 2-node pool at about $772 a month (730 hours). */
export const DEFAULT_PRICE_PER_NODE_HOUR = 0.5288;

/**
 * The bill `berth cost` prints, over `days` whole UTC days up to `now`, against a resident pool of
 * `residentNodes` (default: the window's peak). Shared by the CLI and the console, so both show one figure.
 */
export function poolBill(
  usage: NodeUsage,
  now: number,
  days: number,
  pricePerNodeHour = DEFAULT_PRICE_PER_NODE_HOUR,
  residentNodes?: number,
): { window: UsageWindow & { days: number }; bill: Bill } {
  const window = usageWindow(usage, windowStart(now, days), now);
  return { window: { ...window, days }, bill: bill(window, pricePerNodeHour, residentNodes ?? window.peak) };
}
