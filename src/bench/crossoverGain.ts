import type { DecodeOverrides } from "../mla/flashMlaWithKvcache.js";
import { sparseKernelName } from "../mla/sparse/chooseSparseKernel.js";
import type { BenchCaseResult } from "./runBenchCase.js";

/**
 * The measured gain of crossover on one sparse case: h128x (the two 64-head CTAs of a query token share
 * each token's dequantization) against m64 on the same data, both production paths at 128 heads.
 * gain = plain µs / crossover µs, so above 1 crossover is faster.
 */
export interface CrossoverGain {
  case: string;
  plainKernel: string;
  crossoverKernel: string;
  plainUs: number;
  crossoverUs: number;
  gain: number;
}

/** What the bench forces for the plain run beside an h128x one. */
export const CROSSOVER_PARTNER: Readonly<DecodeOverrides> = Object.freeze({ sparsePlan: "m64" });

/** Whether a run of `result` should be followed by the plain (m64) run: a sparse case that h128x served and that ran ok. */
export function wantsCrossoverGain(result: BenchCaseResult): boolean {
  return result.kind === "sparse" && result.status === "ok" && result.kernel === sparseKernelName("h128x");
}

/**
 * The gain from two timed results of one case, one of them with crossover (their cycle budgets say
 * which); undefined when either has no time or both are the same kind.
 */
export function crossoverGain(a: BenchCaseResult, b: BenchCaseResult): CrossoverGain | undefined {
  if (a.timeUs === undefined || b.timeUs === undefined) return undefined;
  const ax = a.cycleBudget?.crossover === true;
  const bx = b.cycleBudget?.crossover === true;
  if (ax === bx) return undefined;
  const [plain, plainUs, xo, crossoverUs] = ax ? [b, b.timeUs.median, a, a.timeUs.median] : [a, a.timeUs.median, b, b.timeUs.median];
  return { case: a.case, plainKernel: plain.kernel, crossoverKernel: xo.kernel, plainUs, crossoverUs, gain: plainUs / crossoverUs };
}

/** One line for the table's footer: "crossover gain at sparse-v32: 1.05× (sparse_m64_bf16 403.7 µs, sparse_h128x_bf16 383.7 µs)". */
export function crossoverGainText(g: CrossoverGain): string {
  const pair = `${g.plainKernel} ${g.plainUs.toFixed(1)} µs, ${g.crossoverKernel} ${g.crossoverUs.toFixed(1)} µs`;
  return `crossover gain at ${g.case}: ${g.gain.toFixed(2)}× (${pair})`;
}
