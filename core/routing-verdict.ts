/**
 * The routing verdict, made at plan time: does a query belong on the serving group (light) or on
 * the elastic heavy pool, and if heavy, what bounds it?
 *
 * - `scan`: many bytes to read. Scale out: more backends, more S3 fetch parallelism.
 * - `memory`: a shape whose state does not decompose (windows, exact quantiles, joins): the
 *   owners send rows, and the final stage holds state over all of them, which must fit one
 *   backend's RAM. Scale up and spill; more backends buy nothing.
 *
 * Thresholds are configuration: the seed's heavy tail is a few percent of executions.
 */
import type { Split } from './query-plan/decompose.js';

export interface VerdictThresholds {
  /** Bytes to scan at or above which any query is heavy (scan-bound). @default 8 GiB */
  scanBytes: number;
  /** Bytes at or above which a query whose final stage takes rows (not partials) is heavy (memory-bound). @default 1 GiB */
  memoryBytes: number;
}

export const DEFAULT_VERDICT_THRESHOLDS: VerdictThresholds = { scanBytes: 8 * 1024 ** 3, memoryBytes: 1024 ** 3 };

export type Verdict = { class: 'light' } | { class: 'heavy'; bottleneck: 'scan' | 'memory'; reason: string };

export interface VerdictInput {
  /**
   * The query's split: `aggregate` and `select` finish one read's partials; `rows` runs the
   * query's own SQL (windows, joins, subqueries, exact quantiles) over the rows the owners send,
   * holding its state in one place.
   */
  split: Split;
  /** Bytes of the segments left after pruning. */
  scanBytes: number;
}

export function routingVerdict(
  input: VerdictInput,
  thresholds: VerdictThresholds = DEFAULT_VERDICT_THRESHOLDS,
): Verdict {
  if (input.split === 'rows' && input.scanBytes >= thresholds.memoryBytes) {
    return {
      class: 'heavy',
      bottleneck: 'memory',
      reason: `non-decomposable state over ${input.scanBytes} bytes (threshold ${thresholds.memoryBytes})`,
    };
  }
  if (input.scanBytes >= thresholds.scanBytes) {
    return {
      class: 'heavy',
      bottleneck: 'scan',
      reason: `${input.scanBytes} bytes to scan (threshold ${thresholds.scanBytes})`,
    };
  }
  return { class: 'light' };
}
