import { ArgumentError } from "../errors/ArgumentError.js";
import { D_NOPE, D_QK } from "../numeric/kvCacheFp8.js";

/** One step of turning an e4m3 code into a scaled bf16, with its rate in elements per clock per SM. */
export interface DequantStep {
  op: string;
  perClockPerSm: number;
}

/**
 * The seed's dequantization chain with the Programming Guide's throughputs: sm_90 has no
 * e4m3 → bf16 conversion, so each element goes e4m3 → f16 → f32 → bf16 and is then scaled.
 * 512·(1/64 + 1/64 + 1/16 + 1/256) = 8 + 8 + 32 + 2 = 50 clk per token.
 */
export const SEED_DEQUANT_STEPS: readonly DequantStep[] = [
  { op: "e4m3 → f16", perClockPerSm: 64 },
  { op: "f16 → f32", perClockPerSm: 64 },
  { op: "f32 → bf16", perClockPerSm: 16 },
  { op: "bf16 × scale", perClockPerSm: 256 },
];

/**
 * FlashMLA's dequantization path (e4m3x2 → f16x2 → f32 → bf16x2, bf16x2 multiply) timed on an H200
 * (HOPPER-NOTES.md §7), in elements per clock per SM: with the whole SM issuing (1024 threads) and
 * with one warpgroup, which is what a producer warpgroup gets.
 */
export const H200_DEQUANT_ELEMENTS_PER_CLOCK = { wholeSm: 38.7, oneWarpgroup: 33.8 } as const;

/** Elements of a V32 token that are quantized (the 64 RoPE dims stay bf16). */
export const DEQUANT_ELEMENTS_PER_TOKEN = D_NOPE;

/** Hopper's dense bf16 tensor-core rate: 989.4 TFLOPS / 1830 MHz / 132 SMs. */
export const HOPPER_MMA_FLOP_PER_CLOCK = 4096;

/** Cycles to dequantize `elements` elements through `steps`, each step at its own rate. */
export function dequantCyclesFromSteps(
  steps: readonly DequantStep[] = SEED_DEQUANT_STEPS,
  elements: number = DEQUANT_ELEMENTS_PER_TOKEN,
): number {
  requirePositive("dequantCyclesFromSteps", "elements", elements);
  let cyclesPerElement = 0;
  for (const [i, s] of steps.entries()) {
    requirePositive("dequantCyclesFromSteps", `steps[${i}].perClockPerSm`, s.perClockPerSm);
    cyclesPerElement += 1 / s.perClockPerSm;
  }
  return cyclesPerElement * elements;
}

/** A per-token dequantization cost for one CTA that dequantizes the whole token. */
export interface DequantFigure {
  key: "seed" | "h200-warpgroup" | "h200-sm";
  label: string;
  cyclesPerToken: number;
}

/** The dequantization figures the budget compares: the seed's, and the H200-measured path. */
export function dequantFigures(elements: number = DEQUANT_ELEMENTS_PER_TOKEN): DequantFigure[] {
  return [
    { key: "seed", label: "seed (Guide throughputs)", cyclesPerToken: dequantCyclesFromSteps(SEED_DEQUANT_STEPS, elements) },
    {
      key: "h200-warpgroup",
      label: "H200 measured, one warpgroup",
      cyclesPerToken: elements / H200_DEQUANT_ELEMENTS_PER_CLOCK.oneWarpgroup,
    },
    { key: "h200-sm", label: "H200 measured, whole SM", cyclesPerToken: elements / H200_DEQUANT_ELEMENTS_PER_CLOCK.wholeSm },
  ];
}

export interface SparseCycleOptions {
  /** Query heads of the call. */
  h_q: number;
  /** Query heads one CTA computes (the wgmma M tile). @default 64 */
  hPerCta?: number;
  /** @default 576 */
  d_qk?: number;
  /** @default 512 */
  d_v?: number;
  /** Tensor-core FLOP per clock per SM. @default 4096 */
  mmaFlopPerClock?: number;
  /** Quantized elements per token. @default 512 */
  dequantElements?: number;
  /** CTAs of a cluster that share each dequantized token. @default 2 */
  crossoverCtas?: number;
  /** Tensor peak to scale the ceiling fraction by; omit to get fractions only. */
  peakTflops?: number;
}

/** One line of the budget: a dequantization figure, with or without crossover. */
export interface CycleBudgetRow {
  figure: DequantFigure["key"];
  label: string;
  crossover: boolean;
  mmaCycles: number;
  /** Dequantization cycles one CTA spends per token. */
  dequantCycles: number;
  /** Which unit limits a token when MMA (tensor cores) and dequantization (CUDA cores) overlap. */
  bound: "mma" | "dequant";
  /** Useful MMA work per cycle over the tensor cores' rate. */
  fractionOfPeak: number;
  /** fractionOfPeak × peakTflops, when a peak was given. */
  ceilingTflops?: number;
}

export interface SparseCycleBudget {
  hPerCta: number;
  /** Heads of a CTA's tile that carry real queries (fewer than hPerCta when h_q is small). */
  usefulHeadsPerCta: number;
  mmaFlopPerClock: number;
  /** Tensor-core cycles per K/V token per CTA: hPerCta·(d_qk + d_v)·2 / mmaFlopPerClock. */
  mmaCycles: number;
  /** Whether h_q spans `crossoverCtas` CTAs, so the crossover rows describe a real kernel. */
  crossoverApplies: boolean;
  crossoverCtas: number;
  rows: CycleBudgetRow[];
}

/**
 * The seed's per-token cycle budget for the sparse FP8 decode kernel: tensor-core cycles a CTA
 * spends on one K/V token against the cycles it spends dequantizing that token, without and with
 * crossover (the CTAs of a cluster each dequantize 1/crossoverCtas of the token and swap halves
 * through distributed shared memory). With 64 heads per CTA that is 34 MMA cycles against the
 * seed's 50 dequantization cycles: dequantization-bound without crossover, MMA-bound with it.
 */
export function sparseCycleBudget(options: SparseCycleOptions): SparseCycleBudget {
  const fn = "sparseCycleBudget";
  const hPerCta = options.hPerCta ?? 64;
  const d_qk = options.d_qk ?? D_QK;
  const d_v = options.d_v ?? D_NOPE;
  const mmaFlopPerClock = options.mmaFlopPerClock ?? HOPPER_MMA_FLOP_PER_CLOCK;
  const crossoverCtas = options.crossoverCtas ?? 2;
  requirePositiveInteger(fn, "h_q", options.h_q);
  requirePositiveInteger(fn, "hPerCta", hPerCta);
  requirePositiveInteger(fn, "crossoverCtas", crossoverCtas);
  requirePositive(fn, "mmaFlopPerClock", mmaFlopPerClock);
  if (options.peakTflops !== undefined) requirePositive(fn, "peakTflops", options.peakTflops);

  const mmaCycles = (hPerCta * (d_qk + d_v) * 2) / mmaFlopPerClock;
  const usefulHeadsPerCta = Math.min(options.h_q, hPerCta);
  const rows: CycleBudgetRow[] = [];
  for (const crossover of [false, true]) {
    for (const f of dequantFigures(options.dequantElements)) {
      const dequantCycles = crossover ? f.cyclesPerToken / crossoverCtas : f.cyclesPerToken;
      // Tensor cores and CUDA cores run side by side, so the slower of the two sets the pace.
      const fractionOfPeak = ((usefulHeadsPerCta / hPerCta) * mmaCycles) / Math.max(mmaCycles, dequantCycles);
      rows.push({
        figure: f.key,
        label: f.label,
        crossover,
        mmaCycles,
        dequantCycles,
        bound: dequantCycles > mmaCycles ? "dequant" : "mma",
        fractionOfPeak,
        ...(options.peakTflops === undefined ? {} : { ceilingTflops: fractionOfPeak * options.peakTflops }),
      });
    }
  }
  return {
    hPerCta,
    usefulHeadsPerCta,
    mmaFlopPerClock,
    mmaCycles,
    crossoverApplies: Math.ceil(options.h_q / hPerCta) >= crossoverCtas,
    crossoverCtas,
    rows,
  };
}

function requirePositive(fn: string, name: string, v: number): void {
  if (!(typeof v === "number" && Number.isFinite(v) && v > 0)) {
    throw new ArgumentError(fn, name, "a positive finite number", String(v));
  }
}

function requirePositiveInteger(fn: string, name: string, v: number): void {
  if (!Number.isSafeInteger(v) || v <= 0) throw new ArgumentError(fn, name, "a positive integer", String(v));
}
