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
