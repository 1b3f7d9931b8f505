import { BENCH_KERNELS, type BenchKernel } from "./benchKernels.js";
import type { BenchCaseResult } from "./runBenchCase.js";

/**
 * The measured gain of crossover on one sparse case: the same producer timed with and without the
 * 2-CTA cluster (issue 5 asks for it beside the seed's cycle budget). gain = plain µs / crossover µs,
 * so above 1 crossover is faster.
 */
export interface CrossoverGain {
  case: string;
  plainKernel: string;
  crossoverKernel: string;
  plainUs: number;
  crossoverUs: number;
  gain: number;
}

/** The kernel that differs from `kernel` only by crossover, when there is one (sparse kernels with a partner). */
export function crossoverPartner(kernel: BenchKernel): BenchKernel | undefined {
  return kernel.crossoverPartner === undefined ? undefined : BENCH_KERNELS[kernel.crossoverPartner];
}

/** Whether a run of `result` should be followed by a run of its crossover partner: an h_q = 128 sparse case that ran ok. */
export function wantsCrossoverGain(result: BenchCaseResult, kernel: BenchKernel): boolean {
  return result.kind === "sparse" && result.status === "ok" && result.shape.h_q === 128 && crossoverPartner(kernel) !== undefined;
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
  const [plain, xo] = ax ? [b, a] : [a, b];
  return {
    case: a.case,
    plainKernel: plain.kernel,
    crossoverKernel: xo.kernel,
    plainUs: plain.timeUs!.median,
    crossoverUs: xo.timeUs!.median,
    gain: plain.timeUs!.median / xo.timeUs!.median,
  };
}

/** One line for the table's footer: "crossover gain at sparse-v32: 0.92× (sparse_v2 489.9 µs, sparse_crossover_v2 529.9 µs)". */
export function crossoverGainText(g: CrossoverGain): string {
  const pair = `${g.plainKernel} ${g.plainUs.toFixed(1)} µs, ${g.crossoverKernel} ${g.crossoverUs.toFixed(1)} µs`;
  return `crossover gain at ${g.case}: ${g.gain.toFixed(2)}× (${pair})`;
}
