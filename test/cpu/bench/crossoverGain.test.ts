import { test } from "node:test";
import assert from "node:assert/strict";
import { benchCycleBudget } from "../../../src/bench/benchCycleBudget.js";
import { BENCH_KERNELS } from "../../../src/bench/benchKernels.js";
import { crossoverGain, crossoverGainText, crossoverPartner, wantsCrossoverGain } from "../../../src/bench/crossoverGain.js";
import { SPARSE_DEFAULT } from "../../../src/mla/flashMlaWithKvcache.js";
import { ROOFS, timedResult } from "./fakeBenchResults.js";

function sparseResult(name: string, us: number, kernel: string, crossover: boolean) {
  const r = timedResult(name, us);
  return { ...r, kernel, cycleBudget: benchCycleBudget(r.shape.h_q, { crossover, peakTflops: ROOFS.tflops }) };
}

test("crossoverPartner() pairs each sparse kernel with the same producer and the other crossover setting", () => {
  assert.equal(crossoverPartner(BENCH_KERNELS.sparse_v1)?.name, "sparse_crossover");
  assert.equal(crossoverPartner(BENCH_KERNELS.sparse_crossover)?.name, "sparse_v1");
  assert.equal(crossoverPartner(BENCH_KERNELS.sparse_v2)?.name, "sparse_crossover_v2");
  assert.equal(crossoverPartner(BENCH_KERNELS.sparse_crossover_v2)?.name, "sparse_v2");
  assert.equal(crossoverPartner(BENCH_KERNELS.sparse_crossover_v3)?.name, "sparse_v3");
  assert.equal(crossoverPartner(BENCH_KERNELS.sparse_v3)?.name, "sparse_crossover_v3");
  // The API default runs crossover v3 where h_q = 128 (the h16 consumer only at 8 and 16 heads): its
  // partner there is the plain v3 kernel.
  assert.deepEqual(SPARSE_DEFAULT, { crossover: "h128", producer: "v3", h16: "auto", h16x: "auto" });
  assert.equal(crossoverPartner(BENCH_KERNELS.sparse)?.name, "sparse_v3");
  assert.equal(crossoverPartner(BENCH_KERNELS.dense_seesaw_fast), undefined);
});

test("crossoverPartner() is what the bench times beside a kernel for the gain: nothing for dense", () => {
  const names = (k: keyof typeof BENCH_KERNELS) => [crossoverPartner(BENCH_KERNELS[k])].filter((x) => x !== undefined).map((x) => x.name);
  assert.deepEqual(names("sparse_v2"), ["sparse_crossover_v2"]);
  assert.deepEqual(names("sparse_crossover"), ["sparse_v1"]);
  assert.deepEqual(names("sparse_v3"), ["sparse_crossover_v3"]);
  assert.deepEqual(names("sparse"), ["sparse_v3"]);
  assert.deepEqual(names("dense_seesaw_fast"), []);
});

test("wantsCrossoverGain() only for sparse h_q = 128 cases that ran ok with a kernel that has crossover-gain runs", () => {
  const v32 = sparseResult("sparse-v32", 490, "sparse_v2", false);
  assert.equal(wantsCrossoverGain(v32, BENCH_KERNELS.sparse_v2), true);
  assert.equal(wantsCrossoverGain(v32, BENCH_KERNELS.sparse_v3), true);
  assert.equal(wantsCrossoverGain({ ...v32, status: "check-failed" }, BENCH_KERNELS.sparse_v2), false);
  assert.equal(wantsCrossoverGain(sparseResult("sparse-v32-h64", 258, "sparse_v2", false), BENCH_KERNELS.sparse_v2), false);
  assert.equal(wantsCrossoverGain(timedResult("dense-compute", 552), BENCH_KERNELS.dense_seesaw_fast), false);
});

test("crossoverGain() is plain µs over crossover µs whichever ran first, and the text quotes both", () => {
  const plain = sparseResult("sparse-v32", 489.9, "sparse_v2", false);
  const xo = sparseResult("sparse-v32", 529.9, "sparse_crossover_v2", true);
  for (const g of [crossoverGain(plain, xo)!, crossoverGain(xo, plain)!]) {
    assert.equal(g.plainKernel, "sparse_v2");
    assert.equal(g.crossoverKernel, "sparse_crossover_v2");
    assert.equal(g.plainUs, 489.9);
    assert.equal(g.crossoverUs, 529.9);
    assert.ok(Math.abs(g.gain - 489.9 / 529.9) < 1e-12);
    assert.equal(crossoverGainText(g), "crossover gain at sparse-v32: 0.92× (sparse_v2 489.9 µs, sparse_crossover_v2 529.9 µs)");
  }
  // Two runs of the same kind, or one without a time, give no gain.
  assert.equal(crossoverGain(plain, plain), undefined);
  const { timeUs: _t, ...untimed } = xo;
  assert.equal(crossoverGain(plain, untimed), undefined);
});
