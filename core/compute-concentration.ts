/**
 * Compute concentration: how much of the scanned bytes and of the compute time the largest few
 * percent of queries take, and the scan threshold of the routing verdict that would send exactly
 * those queries to the heavy pool. The seed's case for a pool with a floor of zero rests on this
 * shape (97 % of compute in under 3 % of queries); here it is measured from a coordinator's log.
 */

export interface LoggedQuery {
  /** When it was answered (ms since the epoch). */
  at: number;
  /** Bytes of the segments it covered after pruning: what the verdict weighs. */
  scanBytes: number;
  /** Time spent running it, without its wait for the heavy pool. */
  computeMs: number;
  /** The verdict it got. */
  heavy: boolean;
  /** The compute group it ran on. */
  group: string;
  /** What its heavy verdict named as the bottleneck. */
  bottleneck?: 'scan' | 'memory';
  /** Where its final stage ran: `coordinator`, the id of the heavy backend, or `result cache` (none ran). */
  finalStage: string;
}

/** The queries that ran alike: on one group, for one bottleneck. */
export interface Placement {
  group: string;
  bottleneck?: 'scan' | 'memory';
  queries: number;
  /** Their share of all compute time. */
  timeShare: number;
  /** How many of their final stages each host ran, most first. */
  finalStages: { host: string; queries: number }[];
}

export interface TopShare {
  /** The fraction of queries, e.g. 0.01 for the top 1 %. */
  top: number;
  /** How many queries that is (at least one). */
  queries: number;
  /** Their share of all scanned bytes (ranked by bytes). */
  bytesShare: number;
  /** The share of all compute time of the top queries by time. */
  timeShare: number;
  /** The scan threshold (bytes, at or above) that would route the top queries by bytes to the pool. */
  scanThreshold: number;
  /** How many queries that threshold sends (more than `queries` when sizes tie). */
  sent: number;
  /** The share of compute time those sent queries take. */
  sentTimeShare: number;
}

export interface Concentration {
  queries: number;
  scanBytes: number;
  computeMs: number;
  /** The queries the verdict already sent to the pool, and their shares. */
  heavyNow: { queries: number; bytesShare: number; timeShare: number };
  tops: TopShare[];
  /** Where the queries ran, the most queries first. */
  placements: Placement[];
}

export const DEFAULT_TOPS = [0.01, 0.03, 0.1];

const share = (part: number, whole: number) => (whole > 0 ? part / whole : 0);
const sum = (list: LoggedQuery[], pick: (q: LoggedQuery) => number) => list.reduce((acc, q) => acc + pick(q), 0);

export function concentration(log: readonly LoggedQuery[], tops: readonly number[] = DEFAULT_TOPS): Concentration {
  const scanBytes = sum([...log], (q) => q.scanBytes);
  const computeMs = sum([...log], (q) => q.computeMs);
  const byBytes = [...log].sort((a, b) => b.scanBytes - a.scanBytes);
  const byTime = [...log].sort((a, b) => b.computeMs - a.computeMs);
  const heavy = log.filter((q) => q.heavy);
  return {
    queries: log.length,
    scanBytes,
    computeMs,
    heavyNow: {
      queries: heavy.length,
      bytesShare: share(
        sum(heavy, (q) => q.scanBytes),
        scanBytes,
      ),
      timeShare: share(
        sum(heavy, (q) => q.computeMs),
        computeMs,
      ),
    },
    placements: placements(log, computeMs),
    tops:
      log.length === 0
        ? []
        : tops.map((top) => {
            const k = Math.max(1, Math.ceil(top * log.length));
            const threshold = byBytes[k - 1]!.scanBytes;
            const sent = byBytes.filter((q) => q.scanBytes >= threshold);
            return {
              top,
              queries: k,
              bytesShare: share(
                sum(byBytes.slice(0, k), (q) => q.scanBytes),
                scanBytes,
              ),
              timeShare: share(
                sum(byTime.slice(0, k), (q) => q.computeMs),
                computeMs,
              ),
              scanThreshold: threshold,
              sent: sent.length,
              sentTimeShare: share(
                sum(sent, (q) => q.computeMs),
                computeMs,
              ),
            };
          }),
  };
}

function placements(log: readonly LoggedQuery[], computeMs: number): Placement[] {
  const byPlace = new Map<string, { place: Placement; ms: number; hosts: Map<string, number> }>();
  for (const q of log) {
    const key = `${q.group}\0${q.bottleneck ?? ''}`;
    let at = byPlace.get(key);
    if (!at) {
      const place: Placement = { group: q.group, queries: 0, timeShare: 0, finalStages: [] };
      if (q.bottleneck) place.bottleneck = q.bottleneck;
      byPlace.set(key, (at = { place, ms: 0, hosts: new Map() }));
    }
    at.place.queries++;
    at.ms += q.computeMs;
    at.hosts.set(q.finalStage, (at.hosts.get(q.finalStage) ?? 0) + 1);
  }
  const most = (a: { queries: number }, b: { queries: number }) => b.queries - a.queries;
  return [...byPlace.values()]
    .map(({ place, ms, hosts }) => ({
      ...place,
      timeShare: share(ms, computeMs),
      finalStages: [...hosts].map(([host, queries]) => ({ host, queries })).sort(most),
    }))
    .sort(most);
}
