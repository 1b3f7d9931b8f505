import { clockReasonNames } from "../driver/clockReasonNames.js";
import type { NvmlSample } from "../driver/nvml.js";
import { timingStats } from "./timingStats.js";

/** What NVML saw of the GPU during one set of timed calls. */
export interface NvmlSummary {
  /** Samples the figures come from. */
  samples: number;
  /** Median SM clock. */
  smClockMhz: number;
  /** Median board power over the samples that had it (NVML's 1 s average on Ampere and newer). */
  powerW?: number;
  /** Every clock-event reason seen in any sample (clockReasonNames); [] when none was set. */
  clockReasons?: string[];
}

/** Fewer samples than this say too little about a clock that moves within milliseconds. */
export const MIN_NVML_SAMPLES = 3;

/**
 * The median SM clock and power and the union of the clock-event reasons of `samples`, or
 * undefined when there are fewer than {@link MIN_NVML_SAMPLES} (a run too short to sample): no
 * figure rather than one from a sample or two.
 *
 * @example summarizeNvmlSamples([{ smClockMhz: 1710 }, { smClockMhz: 1740 }, { smClockMhz: 1725 }]) // { samples: 3, smClockMhz: 1725 }
 */
export function summarizeNvmlSamples(samples: readonly NvmlSample[]): NvmlSummary | undefined {
  if (samples.length < MIN_NVML_SAMPLES) return undefined;
  const summary: NvmlSummary = { samples: samples.length, smClockMhz: timingStats(samples.map((s) => s.smClockMhz)).median };
  const powers = samples.flatMap((s) => (s.powerW === undefined ? [] : [s.powerW]));
  if (powers.length > 0) summary.powerW = timingStats(powers).median;
  const masks = samples.flatMap((s) => (s.reasons === undefined ? [] : [s.reasons]));
  if (masks.length > 0) summary.clockReasons = clockReasonNames(masks.reduce((a, m) => a | m, 0n));
  return summary;
}
