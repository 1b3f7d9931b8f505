import { test } from "node:test";
import assert from "node:assert/strict";
import { benchCycleBudget } from "../../../src/bench/benchCycleBudget.js";
import { CROSSOVER_PARTNER, crossoverGain, crossoverGainText, wantsCrossoverGain } from "../../../src/bench/crossoverGain.js";
import { chooseKernel } from "../../../src/mla/chooseKernel.js";
import type { KernelName } from "../../../src/mla/contract/kernelRegistry.js";
import { benchCaseByName } from "../../../src/bench/cases.js";
import { ROOFS, timedResult } from "./fakeBenchResults.js";

function sparseResult(name: string, us: number, kernel: KernelName) {
  const r = timedResult(name, us);
  return { ...r, kernel, cycleBudget: benchCycleBudget(r.shape.h_q, { crossover: kernel === "sparse_h128x_bf16", peakTflops: ROOFS.tflops }) };
}

test("the crossover partner is m64 on the same case: what the bench times beside h128x for the gain", () => {
  const v32 = benchCaseByName("sparse-v32")!;
  assert.equal(chooseKernel(v32), "sparse_h128x_bf16");
  assert.equal(chooseKernel(v32, CROSSOVER_PARTNER), "sparse_m64_bf16");
});

test("wantsCrossoverGain() only for sparse cases h128x served that ran ok", () => {
  const v32 = sparseResult("sparse-v32", 384, "sparse_h128x_bf16");
  assert.equal(wantsCrossoverGain(v32), true);
  assert.equal(wantsCrossoverGain({ ...v32, status: "check-failed" }), false);
  assert.equal(wantsCrossoverGain(sparseResult("sparse-v32", 404, "sparse_m64_bf16")), false, "the partner run itself");
  assert.equal(wantsCrossoverGain(sparseResult("sparse-v32-h64", 258, "sparse_m64_bf16")), false);
  assert.equal(wantsCrossoverGain(timedResult("dense-compute", 552)), false);
});

test("crossoverGain() is plain µs over crossover µs whichever ran first, and the text quotes both", () => {
  const plain = sparseResult("sparse-v32", 489.9, "sparse_m64_bf16");
  const xo = sparseResult("sparse-v32", 529.9, "sparse_h128x_bf16");
  for (const g of [crossoverGain(plain, xo)!, crossoverGain(xo, plain)!]) {
    assert.equal(g.plainKernel, "sparse_m64_bf16");
    assert.equal(g.crossoverKernel, "sparse_h128x_bf16");
    assert.equal(g.plainUs, 489.9);
    assert.equal(g.crossoverUs, 529.9);
    assert.ok(Math.abs(g.gain - 489.9 / 529.9) < 1e-12);
    assert.equal(crossoverGainText(g), "crossover gain at sparse-v32: 0.92× (sparse_m64_bf16 489.9 µs, sparse_h128x_bf16 529.9 µs)");
  }
  // Two runs of the same kind, or one without a time, give no gain.
  assert.equal(crossoverGain(plain, plain), undefined);
  const { timeUs: _t, ...untimed } = xo;
  assert.equal(crossoverGain(plain, untimed), undefined);
});
