import { test } from "node:test";
import assert from "node:assert/strict";
import { benchCycleBudget, cycleBudgetText, sparseCtaTokens } from "../../../src/bench/benchCycleBudget.js";
import { SPARSE_FORMATS } from "../../../src/roofline/mlaCost.js";

test("benchCycleBudget() gives the seed's 34 MMA against 50 dequant cycles: 68 % of peak without crossover", () => {
  const b = benchCycleBudget(128, { crossover: false, peakTflops: 767 });
  assert.equal(b.hPerCta, 64);
  assert.equal(b.mmaCycles.toFixed(1), "34.0");
  assert.equal(b.dequantCycles, 50);
  assert.equal(b.crossoverDequantCycles, 25);
  assert.equal(b.bound, "dequant");
  assert.equal(b.fractionOfPeak, 34 / 50);
  assert.equal(b.ceilingTflops.toFixed(2), "521.56");
  assert.equal(b.crossoverApplies, true);
  assert.equal(b.percentOfBudget, undefined);
});

test("benchCycleBudget() with crossover is MMA-bound and reports the share of its ceiling reached", () => {
  const b = benchCycleBudget(128, { crossover: true, peakTflops: 767, measuredTflops: 401 });
  assert.equal(b.bound, "mma");
  assert.equal(b.fractionOfPeak, 1);
  assert.equal(b.ceilingTflops, 767);
  assert.equal(b.percentOfBudget!.toFixed(1), ((100 * 401) / 767).toFixed(1));
});

test("benchCycleBudget() counts only the useful heads of a 64-row tile for h_q = 16", () => {
  const b = benchCycleBudget(16, { crossover: false, peakTflops: 800 });
  assert.equal(b.usefulHeadsPerCta, 16);
  assert.equal(b.crossoverApplies, false);
  assert.equal(b.fractionOfPeak, (16 / 64) * (34 / 50));
  const text = cycleBudgetText(b);
  assert.match(text, /^seed cycle budget: 34\.0 MMA clk vs 50\.0 dequant clk per token \(25\.0 with crossover, which needs h_q ≥ 128\), 16 of 64 heads per CTA useful → dequant-bound, ≤ 17 % of peak \(136 TFLOPS\)$/);
});

test("cycleBudgetText() names the crossover rows when the kernel crosses over, and the share measured", () => {
  const text = cycleBudgetText(benchCycleBudget(128, { crossover: true, peakTflops: 767, measuredTflops: 383.5 }));
  assert.equal(text, "seed cycle budget: crossover: 34.0 MMA clk vs 25.0 dequant clk per token (50.0 without) → MMA-bound, ≤ 100 % of peak (767 TFLOPS); measured 50 % of it");
});

test("benchCycleBudget() with a timed run quotes the cycles per token per CTA beside the budget's 34 / 50", () => {
  // sparse-v32 as measured at d55dbb2: b 128, s_q 2, h_q 128, topk 2048, 403.9 µs on 132 SMs at 1980 MHz.
  const run = { timeUs: 403.9, smCount: 132, clockMhz: 1980, b: 128, s_q: 2, h_q: 128, topk: 2048 };
  assert.equal(sparseCtaTokens(run), 128 * 2 * 2 * 2048);
  const b = benchCycleBudget(128, { crossover: false, peakTflops: 767, measuredTflops: 361.5, measured: run });
  assert.equal(b.measuredCyclesPerToken!.toFixed(1), ((403.9 * 1980 * 132) / (128 * 2 * 2 * 2048)).toFixed(1));
  assert.equal(b.measuredCyclesPerToken!.toFixed(1), "100.7");
  assert.match(cycleBudgetText(b), /; measured 69 % of it \(100\.7 clk per token per CTA at 1980 MHz\)$/);
  // topk not a multiple of 64 counts whole blocks; 16 heads still take one 64-head CTA per query token.
  assert.equal(sparseCtaTokens({ b: 2, s_q: 1, h_q: 16, topk: 100 }), 2 * 1 * 1 * 128);
});

test("benchCycleBudget() with MODEL1's dims: 32 MMA against 43.75 dequant cycles; a second list's blocks count in the walk", () => {
  const b = benchCycleBudget(64, { crossover: false, peakTflops: 767, dims: SPARSE_FORMATS.model1 });
  assert.deepEqual([b.mmaCycles, b.dequantCycles, b.crossoverDequantCycles, b.bound], [32, 43.75, 21.875, "dequant"]);
  assert.equal(b.fractionOfPeak, 32 / 43.75);
  // v4-cfg1's walk: 128 main entries (2 blocks) and 512 extra (8 blocks) per query token.
  assert.equal(sparseCtaTokens({ b: 128, s_q: 2, h_q: 64, topk: 128, extraTopk: 512 }), 128 * 2 * 1 * 10 * 64);
  assert.equal(sparseCtaTokens({ b: 1, s_q: 1, h_q: 128, topk: 1, extraTopk: 65 }), 2 * 3 * 64);
});
