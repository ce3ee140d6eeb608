/** Latency percentile from unsorted samples in ms. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return 0;
  const sorted = Float64Array.from(samples).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const round = (n: number, places = 1): number => Math.round(n * 10 ** places) / 10 ** places;
