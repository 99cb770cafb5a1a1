/**
 * Smoke mode (BERTH_BENCH_SMOKE=1): a bench runs its whole code path at small sizes, in seconds,
 * so that test/bench-smoke.test.ts notices a bench that no longer runs. Its figures mean nothing;
 * its checks (answers compared, errors counted) still fail the run.
 */
export const SMOKE = process.env.BERTH_BENCH_SMOKE === '1';

if (SMOKE) console.error('smoke mode (BERTH_BENCH_SMOKE=1): small sizes, the figures mean nothing');

/** The full run's size, or the smoke run's. */
export const sized = <T>(full: T, smoke: T): T => (SMOKE ? smoke : full);

/**
 * In smoke mode, throws when a bench counted failures that a full run reports as figures
 * (a query's errors, a heartbeat's): a smoke run asserts no figures, but a failure is rot.
 */
export function failInSmoke(what: string, failures: number, first?: string): void {
  if (SMOKE && failures > 0) throw new Error(`${what}: ${failures} failed${first ? ` (first: ${first})` : ''}`);
}
