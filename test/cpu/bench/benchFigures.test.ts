import { test } from "node:test";
import assert from "node:assert/strict";
import { benchCaseByName, benchCaseShape } from "../../../src/bench/cases.js";
import { benchCaseSeqlens } from "../../../src/bench/benchCaseSeqlens.js";
import { benchFigures } from "../../../src/bench/benchFigures.js";
import { mlaCost } from "../../../src/roofline/mlaCost.js";

const ROOFS = { tflops: 767, gbPerS: 4138 };

function caseNamed(name: string) {
  const c = benchCaseByName(name);
  assert.ok(c, name);
  return c;
}

test("benchFigures() turns FlashMLA's 452 µs on dense-compute into 646.1 TFLOPS, 84.2 % of 767, first bar met", () => {
  const c = caseNamed("dense-compute");
  const f = benchFigures(c, mlaCost(benchCaseShape(c)), 452, ROOFS);
  assert.equal(f.tflops.toFixed(1), "646.1");
  assert.equal(f.gbPerS.toFixed(1), "2751.4");
  assert.equal(f.bound, "compute");
  assert.equal(f.percentOfCeiling.toFixed(1), "84.2");
  assert.equal(f.firstBar?.met, true);
  assert.equal(f.firstBar?.actual, f.tflops);
  assert.equal(f.goal?.met, false);
  assert.equal(f.cacheReadGbPerS, undefined);
});

test("benchFigures() quotes a memory-bound case against the bandwidth roof", () => {
  const c = caseNamed("dense-mem-h16");
  const cost = mlaCost(benchCaseShape(c));
  const f = benchFigures(c, cost, 280, ROOFS);
  assert.equal(f.bound, "memory");
  assert.equal(f.gbPerS.toFixed(0), "4330");
  assert.equal(f.percentOfCeiling.toFixed(1), ((100 * f.gbPerS) / 4138).toFixed(1));
  assert.equal(f.firstBar?.met, true); // ≥ 4300 GB/s
  assert.equal(f.goal?.met, false); // ≥ 4450 GB/s
});

test("benchFigures() judges time targets with ≤, so 43.5 µs meets dense-b1's first bar and 43.6 does not", () => {
  const c = caseNamed("dense-b1");
  const cost = mlaCost(benchCaseShape(c));
  assert.equal(benchFigures(c, cost, 43.5, ROOFS).firstBar?.met, true);
  assert.equal(benchFigures(c, cost, 43.6, ROOFS).firstBar?.met, false);
  assert.equal(benchFigures(c, cost, 19.9, ROOFS).goal?.met, true);
  // The cost model's bound, as flashmla roofline gives it: ≈ 240 FLOP/B is past the ridge, so compute,
  // quoted in TFLOPS against the tensor roof.
  const f = benchFigures(c, cost, 43.5, ROOFS);
  assert.equal(f.bound, "compute");
  assert.deepEqual(f.headline, { metric: "tflops", value: f.tflops });
  assert.equal(f.percentOfCeiling, (100 * f.tflops) / ROOFS.tflops);
});

test("benchFigures() takes the bound from the roofs it is given: under a ridge past 240 FLOP/B dense-b1 is memory-bound", () => {
  const c = caseNamed("dense-b1");
  const cost = mlaCost(benchCaseShape(c));
  assert.equal(benchFigures(c, cost, 43.5, { tflops: 989.4, gbPerS: 3350 }).bound, "memory");
});

test("benchFigures() quotes sparse-h16 by its FP8 cache read against the bandwidth roof, for its goal too", () => {
  const c = caseNamed("sparse-h16");
  const cost = mlaCost(benchCaseShape(c));
  const f = benchFigures(c, cost, 100, ROOFS);
  assert.ok(cost.nUnique !== undefined);
  assert.equal(f.cacheReadGbPerS, (cost.nUnique! * 656) / 1e5);
  assert.deepEqual(f.headline, { metric: "cacheReadGbPerS", value: f.cacheReadGbPerS });
  assert.equal(f.percentOfCeiling, (100 * f.cacheReadGbPerS!) / 4138);
  // FlashMLA's byte count adds q and out: a little more than the cache read.
  assert.ok(f.gbPerS > f.cacheReadGbPerS! && f.gbPerS < 1.05 * f.cacheReadGbPerS!);
  assert.equal(f.firstBar?.met, true); // ≤ 112.5 µs
  assert.equal(f.goal?.actual, f.cacheReadGbPerS);
  assert.equal(f.goal?.met, f.cacheReadGbPerS! >= 3500);
});

test("benchFigures() quotes the compute-bound sparse cases by TFLOPS: FlashMLA's 364 µs on sparse-v32 is 401 TFLOPS", () => {
  const c = caseNamed("sparse-v32");
  const f = benchFigures(c, mlaCost(benchCaseShape(c)), 364, ROOFS);
  assert.equal(f.headline.metric, "tflops");
  // 2 · 128 heads · (128 · 2 · 2048) tokens · 1088 / 364 µs.
  assert.equal(f.tflops.toFixed(0), "401");
  assert.equal(f.percentOfCeiling, (100 * f.tflops) / 767);
  assert.equal(f.firstBar?.met, true);
  assert.equal(f.goal?.met, false);
  assert.ok(f.cacheReadGbPerS !== undefined);
  assert.deepEqual(benchFigures(caseNamed("dense-mem-h16"), mlaCost(benchCaseShape(caseNamed("dense-mem-h16"))), 280, ROOFS).headline.metric, "gbPerS");
});

test("benchCaseSeqlens() gives fixed lengths, explicit lists, and seeded varlen draws at least s_q", () => {
  assert.deepEqual(benchCaseSeqlens(caseNamed("dense-b1"), 1), [32768]);
  assert.deepEqual(benchCaseSeqlens(caseNamed("dense-uneven"), 1), [4641, 45118, 1730, 1696]);
  const grid = caseNamed("dense-grid-sq2-8k");
  const a = benchCaseSeqlens(grid, 1);
  assert.equal(a.length, 128);
  assert.ok(a.every((n) => Number.isInteger(n) && n >= 2));
  assert.deepEqual(benchCaseSeqlens(grid, 1), a);
  assert.notDeepEqual(benchCaseSeqlens(grid, 2), a);
  // N(8192, 4096) over 128 requests: the mean lands within a few standard errors (≈ 362) of 8192.
  const mean = a.reduce((s, n) => s + n, 0) / a.length;
  assert.ok(Math.abs(mean - 8192) < 1500, `mean ${mean}`);
  assert.ok(new Set(a).size > 100);
});
