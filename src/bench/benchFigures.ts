import type { BenchCase, Target } from "../../bench/cases.js";
import type { Bound } from "../roofline/roofline.js";
import { FP8_V32_TOKEN_BYTES, type MlaCost } from "../roofline/mlaCost.js";
import { achievedGbPerS, achievedTflops, percentOfCeiling, type Roofs } from "../roofline/roofline.js";

/** A target of BENCH.md and whether a measured time meets it. */
export interface TargetVerdict extends Target {
  /** The measured value of the target's metric. */
  actual: number;
  met: boolean;
}

/** What a measured time means for one case. */
export interface BenchFigures {
  tflops: number;
  gbPerS: number;
  /** Sparse: the FP8 cache bytes alone (N_unique · 656) over the time. */
  cacheReadGbPerS?: number;
  /** The roof BENCH.md says binds for this case. */
  bound: Bound;
  /** Achieved TFLOPS (compute-bound) or GB/s (memory-bound) as % of that roof. */
  percentOfCeiling: number;
  firstBar?: TargetVerdict;
  goal?: TargetVerdict;
}

/**
 * TFLOPS, GB/s, % of the binding roof and the verdict on the case's first bar and goal, for a
 * call of `cost` that took `timeUs`. The binding roof is the case's (BENCH.md's "bound" column):
 * dense-b1 sits just past the ridge by intensity but is bound by latency and the KV read.
 */
export function benchFigures(c: BenchCase, cost: Pick<MlaCost, "flop" | "bytes" | "nUnique">, timeUs: number, roofs: Roofs): BenchFigures {
  const tflops = achievedTflops(cost.flop, timeUs);
  const gbPerS = achievedGbPerS(cost.bytes, timeUs);
  const figures: BenchFigures = {
    tflops,
    gbPerS,
    bound: c.bound,
    percentOfCeiling: c.bound === "compute" ? percentOfCeiling(tflops, roofs.tflops) : percentOfCeiling(gbPerS, roofs.gbPerS),
  };
  if (cost.nUnique !== undefined) figures.cacheReadGbPerS = achievedGbPerS(cost.nUnique * FP8_V32_TOKEN_BYTES, timeUs);
  const verdict = (t: Target): TargetVerdict => {
    const actual =
      t.metric === "tflops" ? tflops : t.metric === "gbPerS" ? gbPerS : t.metric === "timeUs" ? timeUs : (figures.cacheReadGbPerS ?? 0);
    return { ...t, actual, met: t.op === ">=" ? actual >= t.value : actual <= t.value };
  };
  if (c.firstBar !== undefined) figures.firstBar = verdict(c.firstBar);
  if (c.goal !== undefined) figures.goal = verdict(c.goal);
  return figures;
}
