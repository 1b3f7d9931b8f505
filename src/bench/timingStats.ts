import { ArgumentError } from "../errors/ArgumentError.js";

/** Summary of repeated timings of one thing, all in the samples' unit. */
export interface TimingStats {
  /** Number of samples. */
  n: number;
  median: number;
  min: number;
  max: number;
  mean: number;
  /** 10th and 90th percentiles (linear interpolation between order statistics). */
  p10: number;
  p90: number;
}

/**
 * Median, min, max, mean and the 10th/90th percentiles of `samples`. Percentiles interpolate
 * linearly between neighbouring order statistics (the "R-7" rule), so the median of an even count
 * is the mean of the middle two.
 *
 * @example timingStats([3, 1, 2, 10]).median // 2.5
 */
export function timingStats(samples: readonly number[]): TimingStats {
  if (!Array.isArray(samples) || samples.length === 0) {
    throw new ArgumentError("timingStats", "samples", "a non-empty array of numbers", JSON.stringify(samples));
  }
  const bad = samples.findIndex((x) => typeof x !== "number" || !Number.isFinite(x));
  if (bad >= 0) throw new ArgumentError("timingStats", `samples[${bad}]`, "a finite number", String(samples[bad]));
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((a, x) => a + x, 0);
  return {
    n: sorted.length,
    median: percentileOfSorted(sorted, 0.5),
    min: sorted[0],
    max: sorted[sorted.length - 1],
    mean: sum / sorted.length,
    p10: percentileOfSorted(sorted, 0.1),
    p90: percentileOfSorted(sorted, 0.9),
  };
}

function percentileOfSorted(sorted: readonly number[], p: number): number {
  const pos = (sorted.length - 1) * p;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}
