import { benchCaseKernel } from "../../../src/bench/benchCaseKernel.js";
import { benchCaseByName, benchCaseShape, caseBound } from "../../../src/bench/cases.js";
import { benchCycleBudget } from "../../../src/bench/benchCycleBudget.js";
import { benchFigures } from "../../../src/bench/benchFigures.js";
import type { BenchCaseResult } from "../../../src/bench/runBenchCase.js";
import { timingStats } from "../../../src/bench/timingStats.js";
import { chooseKernel } from "../../../src/mla/chooseKernel.js";
import type { KernelName } from "../../../src/mla/contract/kernelRegistry.js";
import { mlaCost, SPARSE_FORMATS } from "../../../src/roofline/mlaCost.js";

export const ROOFS = { tflops: 767, gbPerS: 4138 };

/**
 * A result as runBenchCase() would return it for case `name` timed at `timeUs` (median exactly, min 1 µs
 * less, p90 1.4 µs more) by the kernel flashMlaWithKvcache chooses for it (MODEL1's for a v4 case), check ok, figured against
 * `roofs` (the run's measured ceilings).
 */
export function timedResult(name: string, timeUs: number, roofs: { tflops: number; gbPerS: number } = ROOFS): BenchCaseResult {
  const c = benchCaseByName(name)!;
  const model = benchCaseShape(c);
  const cost = mlaCost(model);
  const timing = timingStats([timeUs - 1, timeUs, timeUs, timeUs + 2]);
  return {
    case: c.name,
    ...(c.group !== undefined ? { group: c.group } : {}),
    kind: c.kind,
    bound: caseBound(c, roofs),
    kernel: benchCaseKernel(c),
    status: "ok",
    shape: { b: c.b, h_q: c.h_q, h_kv: c.h_kv, s_q: c.s_q, causal: c.causal, seqlens: { min: 1, mean: 2, max: 3 } },
    model,
    cost,
    timeUs: timing,
    sets: 4,
    setBytes: 300e6,
    hostOutran: false,
    figures: benchFigures(c, cost, timing.median, roofs),
    check: {
      ok: true, rows: 32, badElements: 0,
      out: { ok: true, count: 16384, mismatches: 0, maxAbsError: 1e-4, maxRelError: 0.5, cosDiff: 1e-6, message: "out ok" },
      lse: { ok: true, count: 32, mismatches: 0, maxAbsError: 1e-7, maxRelError: 1e-7, cosDiff: 0, message: "lse ok" },
      message: "ok",
    },
    ...(c.anchor !== undefined ? { anchor: c.anchor } : {}),
    ...(c.firstBar !== undefined ? { firstBar: c.firstBar } : {}),
    ...(c.goal !== undefined ? { goal: c.goal } : {}),
  };
}

/**
 * A sparse case timed at `timeUs` by `kernel` (the API's choice unless given), as runBenchCase() returns
 * it: N_unique as drawn (here the expected count), the seed's cycle budget, check ok.
 */
export function sparseTimedResult(name: string, timeUs: number, kernel?: KernelName): BenchCaseResult {
  const r = timedResult(name, timeUs);
  const c = benchCaseByName(name)!;
  kernel ??= c.model1 !== undefined ? benchCaseKernel(c) : chooseKernel(c);
  const crossover = kernel.startsWith("sparse_h128x");
  const dims = SPARSE_FORMATS[c.model1 !== undefined ? "model1" : "v32"];
  return { ...r, kernel, cycleBudget: benchCycleBudget(r.shape.h_q, { crossover, peakTflops: ROOFS.tflops, measuredTflops: r.figures!.tflops, dims }) };
}

/** A case a forced choice cannot run (a dense form forced on a sparse case). */
export function notAvailableResult(name: string): BenchCaseResult {
  const c = benchCaseByName(name)!;
  const model = benchCaseShape(c);
  return {
    case: c.name, kind: c.kind, bound: caseBound(c, ROOFS), kernel: benchCaseKernel(c), status: "not-available",
    reason: "not available: a dense override forced on a sparse case",
    shape: { b: c.b, h_q: c.h_q, h_kv: c.h_kv, s_q: c.s_q, causal: c.causal, seqlens: { min: 1, mean: 1, max: 1 } },
    model, cost: mlaCost(model),
    ...(c.anchor !== undefined ? { anchor: c.anchor } : {}),
    ...(c.firstBar !== undefined ? { firstBar: c.firstBar } : {}),
    ...(c.goal !== undefined ? { goal: c.goal } : {}),
  };
}
