/**
 * A segment's time range in the manifest, and a query's bounds on it: epoch milliseconds, the
 * floor of the earliest and the ceiling of the latest timestamp. A DuckDB TIMESTAMP also holds
 * -infinity and infinity, and instants past 2^53 ms from the epoch: they are kept as the safe
 * integers at either end, so that pruning compares them as it compares any other time.
 */

/** The manifest's bound for -infinity (and anything before 2^53 ms before the epoch). */
export const EARLIEST_MS = Number.MIN_SAFE_INTEGER;
/** The manifest's bound for infinity (and anything past 2^53 ms after the epoch). */
export const LATEST_MS = Number.MAX_SAFE_INTEGER;

/**
 * The time range of every segment of a table without a timestamp column: all of time, so that no
 * query's range prunes it and no retention period ever passes it.
 */
export const TIMELESS = { minTs: EARLIEST_MS, maxTs: LATEST_MS } as const;

/** SQL for a TIMESTAMP expression's epoch milliseconds, rounded down or up, within [EARLIEST_MS, LATEST_MS]; NULL stays NULL. */
export function epochMsSql(expression: string, round: 'floor' | 'ceil'): string {
  const ms = round === 'floor' ? `epoch_ms(${expression})` : `ceil(epoch_us(${expression}) / 1000)`;
  return (
    `CASE WHEN ${expression} IS NULL THEN NULL WHEN isinf(${expression}) THEN (CASE WHEN ${expression} > TIMESTAMP 'epoch' THEN ${LATEST_MS} ELSE ${EARLIEST_MS} END) ` +
    `ELSE greatest(${EARLIEST_MS}, least(${LATEST_MS}, ${ms})) END`
  );
}
