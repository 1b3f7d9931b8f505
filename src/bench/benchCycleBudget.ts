import { BLOCK_N, SPARSE_HEADS_PER_CTA } from "../mla/contract/shape.js";
import { SPARSE_FORMATS, type SparseFormatDims } from "../roofline/mlaCost.js";
import { sparseCycleBudget } from "../roofline/sparseCycles.js";

/** The seed's per-token cycle budget for one sparse case, and what it allows the kernel that ran it. */
export interface BenchCycleBudget {
  /** Query heads one CTA computes, and how many of them carry real queries. */
  hPerCta: number;
  usefulHeadsPerCta: number;
  /** Tensor-core cycles per K/V token per CTA. */
  mmaCycles: number;
  /** The seed's dequantization cycles per token for one CTA, without and with crossover. */
  dequantCycles: number;
  crossoverDequantCycles: number;
  /** Whether h_q spans the two CTAs crossover needs. */
  crossoverApplies: boolean;
  /** The rows that describe the kernel that ran (crossover or not). */
  crossover: boolean;
  bound: "mma" | "dequant";
  /** Share of the tensor peak the budget allows that kernel. */
  fractionOfPeak: number;
  /** fractionOfPeak × the measured tensor roof. */
  ceilingTflops: number;
  /** Measured TFLOPS over ceilingTflops, as %, once timed. */
  percentOfBudget?: number;
  /**
   * Once timed: the cycles one CTA spent per K/V entry it processed (the budget's unit), at the GPU's
   * maximum SM clock, and that clock. A CTA processes 64-entry blocks of one query token's list for 64
   * heads; an SM runs one CTA at a time.
   */
  measuredCyclesPerToken?: number;
  clockMhz?: number;
}

/** What one timed run was: its time, the GPU's SMs and maximum SM clock, and the case's shape. */
export interface MeasuredSparseRun {
  timeUs: number;
  smCount: number;
  clockMhz: number;
  b: number;
  s_q: number;
  h_q: number;
  topk: number;
  /** The second cache's index entries per query token (DeepSeek-V4's extra list). @default 0 */
  extraTopk?: number;
}

/**
 * K/V entries processed summed over CTAs: b · s_q · (64-head tiles) · the walk's entries, each list
 * rounded up to whole 64-entry blocks (with a second list, its blocks follow the first's).
 */
export function sparseCtaTokens(r: Pick<MeasuredSparseRun, "b" | "s_q" | "h_q" | "topk" | "extraTopk">): number {
  const blocks = Math.ceil(r.topk / BLOCK_N) + Math.ceil((r.extraTopk ?? 0) / BLOCK_N);
  return r.b * r.s_q * Math.ceil(r.h_q / SPARSE_HEADS_PER_CTA) * blocks * BLOCK_N;
}

/**
 * The seed's cycle budget (src/roofline/sparseCycles.ts, the Programming Guide's dequantization
 * rates: for 64 heads, 34 MMA cycles against 50 dequantization cycles per V3.2 token, 32 against 43.75
 * per MODEL1 token: 512 + 512 dims, 448 quantized) for a sparse case of `h_q` heads run by a kernel with
 * or without crossover, scaled by the measured tensor roof; with a measured TFLOPS figure, how close the
 * kernel came to what the budget allows. `dims`: the token format's (default V3.2's).
 */
export function benchCycleBudget(
  h_q: number,
  opts: { crossover: boolean; peakTflops: number; measuredTflops?: number; measured?: MeasuredSparseRun; dims?: SparseFormatDims },
): BenchCycleBudget {
  const dims = opts.dims ?? SPARSE_FORMATS.v32;
  const budget = sparseCycleBudget({ h_q, peakTflops: opts.peakTflops, d_qk: dims.d_qk, d_v: dims.d_v, dequantElements: dims.quantizedDims });
  const seed = (crossover: boolean) => budget.rows.find((r) => r.figure === "seed" && r.crossover === crossover)!;
  const ran = seed(opts.crossover);
  const ceilingTflops = ran.ceilingTflops!;
  return {
    hPerCta: budget.hPerCta,
    usefulHeadsPerCta: budget.usefulHeadsPerCta,
    mmaCycles: budget.mmaCycles,
    dequantCycles: seed(false).dequantCycles,
    crossoverDequantCycles: seed(true).dequantCycles,
    crossoverApplies: budget.crossoverApplies,
    crossover: opts.crossover,
    bound: ran.bound,
    fractionOfPeak: ran.fractionOfPeak,
    ceilingTflops,
    ...(opts.measuredTflops !== undefined ? { percentOfBudget: (100 * opts.measuredTflops) / ceilingTflops } : {}),
    ...(opts.measured !== undefined
      ? { measuredCyclesPerToken: (opts.measured.timeUs * opts.measured.clockMhz * opts.measured.smCount) / sparseCtaTokens(opts.measured), clockMhz: opts.measured.clockMhz }
      : {}),
  };
}

/** One line for the bench table: "seed cycle budget: 34.0 MMA clk vs 50.0 dequant clk per token → dequant-bound, ≤ 68 % of peak (522 TFLOPS); …". */
export function cycleBudgetText(b: BenchCycleBudget): string {
  const clk = (x: number) => x.toFixed(1);
  const pct = (x: number) => (100 * x).toFixed(0);
  const crossoverPart = b.crossover
    ? `crossover: ${clk(b.mmaCycles)} MMA clk vs ${clk(b.crossoverDequantCycles)} dequant clk per token (${clk(b.dequantCycles)} without)`
    : `${clk(b.mmaCycles)} MMA clk vs ${clk(b.dequantCycles)} dequant clk per token (${clk(b.crossoverDequantCycles)} with crossover${b.crossoverApplies ? "" : ", which needs h_q ≥ 128"})`;
  const heads = b.usefulHeadsPerCta < b.hPerCta ? `, ${b.usefulHeadsPerCta} of ${b.hPerCta} heads per CTA useful` : "";
  const cycles = b.measuredCyclesPerToken === undefined ? "" : ` (${clk(b.measuredCyclesPerToken)} clk per token per CTA at ${b.clockMhz} MHz)`;
  const measured = b.percentOfBudget === undefined ? "" : `; measured ${b.percentOfBudget.toFixed(0)} % of it${cycles}`;
  return `seed cycle budget: ${crossoverPart}${heads} → ${b.bound === "mma" ? "MMA" : "dequant"}-bound, ≤ ${pct(b.fractionOfPeak)} % of peak (${b.ceilingTflops.toFixed(0)} TFLOPS)${measured}`;
}
