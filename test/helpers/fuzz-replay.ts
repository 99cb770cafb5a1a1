/**
 * What replays a failed fuzz run: `BERTH_FUZZ_SEED` (and `BERTH_FUZZ_PATH`, its counterexample's
 * path), both as fast-check printed them. Empty when neither is set: a run of fresh cases.
 */
export function fuzzReplay(): { seed?: number; path?: string } {
  const seed = Number(process.env.BERTH_FUZZ_SEED);
  const path = process.env.BERTH_FUZZ_PATH;
  return { ...(Number.isInteger(seed) && seed !== 0 && { seed }), ...(path && { path }) };
}
