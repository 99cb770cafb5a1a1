/** Order statistics for benchmark timings. */
export const percentile = (xs: number[], p: number): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
export const median = (xs: number[]): number => percentile(xs, 50);
