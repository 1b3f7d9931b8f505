import { benchCaseByName, benchCaseShape } from "../../../bench/cases.js";
import { benchCycleBudget } from "../../../src/bench/benchCycleBudget.js";
import { benchFigures } from "../../../src/bench/benchFigures.js";
import type { BenchCaseResult } from "../../../src/bench/runBenchCase.js";
import { timingStats } from "../../../src/bench/timingStats.js";
import { mlaCost } from "../../../src/roofline/mlaCost.js";

export const ROOFS = { tflops: 767, gbPerS: 4138 };

/** A result as runBenchCase() would return it for case `name` timed at `timeUs` (median exactly, min 1 µs less, p90 1.4 µs more), check ok. */
export function timedResult(name: string, timeUs: number): BenchCaseResult {
  const c = benchCaseByName(name)!;
  const model = benchCaseShape(c);
  const cost = mlaCost(model);
  const timing = timingStats([timeUs - 1, timeUs, timeUs, timeUs + 2]);
  return {
    case: c.name,
    ...(c.group !== undefined ? { group: c.group } : {}),
    kind: c.kind,
    bound: c.bound,
    kernel: "dense_v1",
    status: "ok",
    shape: { b: c.b, h_q: c.h_q, h_kv: c.h_kv, s_q: c.s_q, causal: c.causal, seqlens: { min: 1, mean: 2, max: 3 } },
    model,
    cost,
    timeUs: timing,
    sets: 4,
    setBytes: 300e6,
    hostOutran: false,
    figures: benchFigures(c, cost, timing.median, ROOFS),
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
 * A sparse case timed at `timeUs` by `kernel`, as runBenchCase() returns it: N_unique as drawn (here
 * the expected count), the seed's cycle budget, check ok.
 */
export function sparseTimedResult(name: string, timeUs: number, kernel = "sparse_v1"): BenchCaseResult {
  const r = timedResult(name, timeUs);
  const crossover = kernel === "sparse_crossover";
  return { ...r, kernel, cycleBudget: benchCycleBudget(r.shape.h_q, { crossover, peakTflops: ROOFS.tflops, measuredTflops: r.figures!.tflops }) };
}

/** A case the chosen kernel cannot run (a sparse case asked of dense_v1). */
export function notAvailableResult(name: string): BenchCaseResult {
  const c = benchCaseByName(name)!;
  const model = benchCaseShape(c);
  return {
    case: c.name, kind: c.kind, bound: c.bound, kernel: "dense_v1", status: "not-available",
    reason: "not available: kernel dense_v1 does not do sparse decode (try --kernel sparse_v1)",
    shape: { b: c.b, h_q: c.h_q, h_kv: c.h_kv, s_q: c.s_q, causal: c.causal, seqlens: { min: 1, mean: 1, max: 1 } },
    model, cost: mlaCost(model),
    ...(c.anchor !== undefined ? { anchor: c.anchor } : {}),
    ...(c.firstBar !== undefined ? { firstBar: c.firstBar } : {}),
    ...(c.goal !== undefined ? { goal: c.goal } : {}),
  };
}
