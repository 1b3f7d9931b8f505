import { test } from "node:test";
import assert from "node:assert/strict";
import { GPUS, mmaFlopPerClockPerSm } from "../../../src/roofline/gpus.js";
import {
  dequantCyclesFromSteps,
  dequantFigures,
  H200_DEQUANT_ELEMENTS_PER_CLOCK,
  SEED_DEQUANT_STEPS,
  sparseCycleBudget,
} from "../../../src/roofline/sparseCycles.js";

const row = (b: ReturnType<typeof sparseCycleBudget>, figure: string, crossover: boolean) => {
  const r = b.rows.find((x) => x.figure === figure && x.crossover === crossover);
  assert.ok(r !== undefined, `${figure} ${crossover}`);
  return r;
};

test("dequantCyclesFromSteps() gives the seed's 8 + 8 + 32 + 2 = 50 cycles per 512-element token", () => {
  assert.equal(dequantCyclesFromSteps(), 50);
  assert.deepEqual(SEED_DEQUANT_STEPS.map((s) => 512 / s.perClockPerSm), [8, 8, 32, 2]);
  assert.equal(dequantCyclesFromSteps(SEED_DEQUANT_STEPS, 448), 43.75); // MODEL1 quantizes 448 dims
});

test("dequantFigures() gives the H200-measured ≈13 (whole SM) and ≈15 (one warpgroup) cycles", () => {
  const f = Object.fromEntries(dequantFigures().map((x) => [x.key, x.cyclesPerToken]));
  assert.equal(f.seed, 50);
  assert.equal(Math.round(f["h200-sm"]), 13);
  assert.equal(Math.round(f["h200-warpgroup"]), 15);
  assert.equal(f["h200-sm"], 512 / H200_DEQUANT_ELEMENTS_PER_CLOCK.wholeSm);
});

test("sparseCycleBudget() gives the seed's 34 MMA cycles against 50 dequantization cycles at 64 heads", () => {
  const b = sparseCycleBudget({ h_q: 128 });
  // 64·(576 + 512)·2 = 139,264 FLOP = 34 · 4096.
  assert.equal(b.mmaCycles, 34);
  const plain = row(b, "seed", false);
  assert.equal(plain.dequantCycles, 50);
  assert.equal(plain.bound, "dequant");
  assert.equal(plain.fractionOfPeak, 34 / 50);
});

test("sparseCycleBudget() with crossover halves dequantization per CTA and makes the seed MMA-bound", () => {
  const b = sparseCycleBudget({ h_q: 128 });
  assert.equal(b.crossoverApplies, true);
  const xo = row(b, "seed", true);
  assert.equal(xo.dequantCycles, 25);
  assert.equal(xo.bound, "mma");
  assert.equal(xo.fractionOfPeak, 1);
  assert.equal(b.rows.length, 6);
});

test("sparseCycleBudget() finds the H200-measured path MMA-bound even without crossover", () => {
  const b = sparseCycleBudget({ h_q: 128 });
  for (const figure of ["h200-sm", "h200-warpgroup"]) {
    const r = row(b, figure, false);
    assert.equal(r.bound, "mma", figure);
    assert.ok(r.dequantCycles < 16, figure);
  }
});

test("sparseCycleBudget() scales the seed's H800 practical peak: 865 × 34/50 ≈ 588 TFLOPS without crossover", () => {
  const b = sparseCycleBudget({ h_q: 128, peakTflops: GPUS.h800.practical?.tflops, mmaFlopPerClock: mmaFlopPerClockPerSm(GPUS.h800) });
  assert.ok(Math.abs(b.mmaCycles - 34) < 0.01);
  assert.equal(Math.round(row(b, "seed", false).ceilingTflops ?? 0), 588);
  assert.ok(Math.abs((row(b, "seed", true).ceilingTflops ?? 0) - 865) < 1e-9);
});

test("sparseCycleBudget() counts only useful heads and flags crossover it cannot do", () => {
  const h16 = sparseCycleBudget({ h_q: 16 });
  assert.equal(h16.usefulHeadsPerCta, 16);
  assert.equal(h16.crossoverApplies, false);
  assert.equal(row(h16, "seed", true).fractionOfPeak, 0.25);
  assert.equal(sparseCycleBudget({ h_q: 64 }).crossoverApplies, false);
  // A 32-head tile costs half the MMA cycles and is dequantization-bound even with crossover.
  const small = sparseCycleBudget({ h_q: 128, hPerCta: 32 });
  assert.equal(small.mmaCycles, 17);
  assert.equal(row(small, "seed", true).bound, "dequant");
});

test("sparseCycleBudget() rejects bad options", () => {
  assert.throws(() => sparseCycleBudget({ h_q: 0 }), /sparseCycleBudget\(\): argument 'h_q': expected a positive integer, got 0/);
  assert.throws(() => sparseCycleBudget({ h_q: 64, mmaFlopPerClock: -1 }), /argument 'mmaFlopPerClock'/);
});
