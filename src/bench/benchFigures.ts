import type { BenchCase, Target } from "./cases.js";
import type { MlaCost } from "../roofline/mlaCost.js";
import { achievedGbPerS, achievedTflops, percentOfCeiling, roofline, type Bound, type Roofs } from "../roofline/roofline.js";

/** A case's target and whether a measured time meets it. */
export interface TargetVerdict extends Target {
  /** The measured value of the target's metric. */
  actual: number;
  met: boolean;
}

/** What a measured time means for one case. */
export interface BenchFigures {
  tflops: number;
  gbPerS: number;
  /** Sparse: the FP8 cache bytes alone (N_unique · 656, or · 584 for MODEL1) over the time. */
  cacheReadGbPerS?: number;
  /** The roof that binds this call under `roofs`, by the cost model. */
  bound: Bound;
  /**
   * The figure quoted against that roof: TFLOPS when compute-bound; when memory-bound, GB/s, or for a
   * sparse case the FP8 cache read (what sparse-h16's goal measures).
   */
  headline: { metric: "tflops" | "gbPerS" | "cacheReadGbPerS"; value: number };
  /** The headline figure as % of its roof (the measured tensor peak or read bandwidth). */
  percentOfCeiling: number;
  firstBar?: TargetVerdict;
  goal?: TargetVerdict;
}

/**
 * TFLOPS, GB/s, % of the binding roof and the verdict on the case's first bar and goal, for a
 * call of `cost` that took `timeUs`. The binding roof is the cost model's (intensity against the
 * ridge of `roofs`), the same answer `flashmla roofline` gives. A memory-bound sparse case is quoted
 * by its FP8 cache read (the cost model's cache bytes, N_unique · token bytes, over the time).
 */
export function benchFigures(c: BenchCase, cost: Pick<MlaCost, "flop" | "bytes" | "cacheBytes">, timeUs: number, roofs: Roofs): BenchFigures {
  const tflops = achievedTflops(cost.flop, timeUs);
  const gbPerS = achievedGbPerS(cost.bytes, timeUs);
  const cacheReadGbPerS = cost.cacheBytes === undefined ? undefined : achievedGbPerS(cost.cacheBytes, timeUs);
  const bound = roofline(cost, roofs).bound;
  const headline: BenchFigures["headline"] =
    bound === "compute"
      ? { metric: "tflops", value: tflops }
      : c.kind === "sparse" && cacheReadGbPerS !== undefined
        ? { metric: "cacheReadGbPerS", value: cacheReadGbPerS }
        : { metric: "gbPerS", value: gbPerS };
  const figures: BenchFigures = {
    tflops,
    gbPerS,
    bound,
    headline,
    percentOfCeiling: percentOfCeiling(headline.value, headline.metric === "tflops" ? roofs.tflops : roofs.gbPerS),
  };
  if (cacheReadGbPerS !== undefined) figures.cacheReadGbPerS = cacheReadGbPerS;
  const verdict = (t: Target): TargetVerdict => {
    const actual =
      t.metric === "tflops" ? tflops : t.metric === "gbPerS" ? gbPerS : t.metric === "timeUs" ? timeUs : (figures.cacheReadGbPerS ?? 0);
    return { ...t, actual, met: t.op === ">=" ? actual >= t.value : actual <= t.value };
  };
  if (c.firstBar !== undefined) figures.firstBar = verdict(c.firstBar);
  if (c.goal !== undefined) figures.goal = verdict(c.goal);
  return figures;
}
