import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { mlaCost } from "../../../src/roofline/mlaCost.js";
import {
  achievedGbPerS,
  achievedTflops,
  measuredPoint,
  percentOfCeiling,
  ridgeHeadsTimesQueries,
  ridgePoint,
  roofline,
} from "../../../src/roofline/roofline.js";

const H200_MEASURED = { tflops: 767, gbPerS: 4138 };
const denseCompute = mlaCost({ kind: "dense", b: 128, h_q: 128, s_q: 1, s_k: 8192 });
const denseMemH16 = mlaCost({ kind: "dense", b: 128, h_q: 16, s_q: 1, s_k: 8192 });

test("ridgePoint() gives the H200's measured ≈ 185 FLOP/byte for 767 TFLOPS / 4.15 TB/s", () => {
  const r = ridgePoint(767, 4150);
  assert.ok(Math.abs(r - 184.82) < 0.01);
  assert.equal(Math.round(r), 185);
  assert.equal(Math.round(ridgePoint(989.4, 4800)), 206);
});

test("ridgeHeadsTimesQueries() gives the seed's h_q·s_q ≈ 128 threshold for H800 at 865 TFLOPS / 3.35 TB/s", () => {
  const ridge = ridgePoint(865, 3350);
  assert.ok(Math.abs(ridge - 258.2) < 0.05);
  // The seed halves the ridge (intensity ≈ 2·h_q·s_q): 129.1, which it calls 128.
  const seed = ridgeHeadsTimesQueries(ridge, { approximateFactor: 2 });
  assert.ok(Math.abs(seed - 129.1) < 0.05);
  assert.ok(Math.abs(seed - 128) / 128 < 0.01);
  // With the exact factor 1088/576 the threshold is a little higher.
  assert.ok(Math.abs(ridgeHeadsTimesQueries(ridge) - 136.7) < 0.05);
});

test("roofline() puts dense-compute under the compute roof on the H200", () => {
  const p = roofline(denseCompute, H200_MEASURED);
  assert.equal(p.bound, "compute");
  // 292,057,776,128 FLOP / 767 TFLOPS = 380.78 µs; 1,243,611,136 B / 4138 GB/s = 300.53 µs.
  assert.ok(Math.abs(p.computeUs - 380.78) < 0.01);
  assert.ok(Math.abs(p.memoryUs - 300.53) < 0.01);
  assert.equal(p.idealUs, p.computeUs);
  assert.ok(Math.abs(p.attainableTflops - 767) < 1e-9);
});

test("roofline() puts dense-mem-h16 under the memory roof and caps its TFLOPS", () => {
  const p = roofline(denseMemH16, H200_MEASURED);
  assert.equal(p.bound, "memory");
  assert.ok(Math.abs(p.idealUs - 1_212_416_000 / 4138e3) < 1e-9);
  assert.ok(p.attainableTflops < 767 && Math.abs(p.attainableTflops - p.intensity * 4.138) < 1e-9);
});

test("roofline() calls a call exactly at the ridge compute-bound", () => {
  assert.equal(roofline({ flop: 200, bytes: 1 }, { tflops: 200, gbPerS: 1000 }).bound, "compute");
  assert.equal(roofline({ flop: 199.9, bytes: 1 }, { tflops: 200, gbPerS: 1000 }).bound, "memory");
});

test("achievedTflops() turns FlashMLA's 452 µs dense-compute into its 646 TFLOPS", () => {
  const t = achievedTflops(denseCompute.flop, 452);
  assert.ok(Math.abs(t - 646.15) < 0.01);
  assert.equal(Math.round(t), 646);
  // And the 663 TFLOPS main-kernel figure is a 440.5 µs kernel.
  assert.ok(Math.abs(denseCompute.flop / 663e6 - 440.5) < 0.1);
});

test("achievedGbPerS() turns FlashMLA's 280 µs dense-mem-h16 into its 4337 GB/s, within rounding", () => {
  // 280 µs is itself rounded: over [279.5, 280.5] µs the formula spans 4322 … 4338 GB/s.
  const lo = achievedGbPerS(denseMemH16.bytes, 280.5);
  const hi = achievedGbPerS(denseMemH16.bytes, 279.5);
  assert.ok(lo <= 4337.5 && 4336.5 <= hi, `${lo} … ${hi}`);
  // Read the other way: 4337 GB/s is 279.55 µs, which prints as 280.
  assert.equal(Math.round(denseMemH16.bytes / 4337e3), 280);
  assert.ok(Math.abs(achievedGbPerS(denseMemH16.bytes, 280) - 4330.06) < 0.01);
});

test("percentOfCeiling() and measuredPoint() quote FlashMLA's dense-compute against the H200 roofs", () => {
  assert.ok(Math.abs(percentOfCeiling(646, 767) - 84.22) < 0.01);
  const m = measuredPoint(denseCompute, 452, H200_MEASURED);
  assert.ok(Math.abs(m.tflops - 646.15) < 0.01);
  assert.ok(Math.abs(m.gbPerS - 2751.35) < 0.01);
  assert.ok(Math.abs(m.percentOfPeak - 84.24) < 0.01);
  assert.ok(Math.abs(m.percentOfBandwidth - 66.49) < 0.01);
  // Compute-bound, so the share of the roofline is the share of the peak.
  assert.ok(Math.abs(m.percentOfRoofline - m.percentOfPeak) < 1e-9);
});

test("roofline() and the helpers reject non-positive inputs with ArgumentError", () => {
  assert.throws(() => roofline(denseCompute, { tflops: 0, gbPerS: 1 }), (e: unknown) => e instanceof ArgumentError && /'roofs.tflops'/.test(e.message));
  assert.throws(() => achievedTflops(1, 0), /achievedTflops\(\): argument 'timeUs': expected a positive finite number, got 0/);
  assert.throws(() => ridgePoint(767, NaN), /argument 'gbPerS'/);
});
