import { test } from "node:test";
import assert from "node:assert/strict";
import { benchCaseByName } from "../../../src/bench/cases.js";
import { runBenchCase } from "../../../src/bench/runBenchCase.js";
import { expectedUniqueTokens } from "../../../src/roofline/mlaCost.js";
import type { Device } from "../../../src/runtime/Device.js";
import type { Stream } from "../../../src/runtime/Stream.js";

// A case a forced choice cannot run returns before touching the GPU, so none is needed here.
const NO_DEVICE = { device: undefined as unknown as Device, stream: undefined as unknown as Stream, roofs: { tflops: 767, gbPerS: 4138 } };

test("runBenchCase() reports a sparse case as not available for a dense override, with FlashMLA's cost model and the cycle budget", () => {
  const r = runBenchCase(benchCaseByName("sparse-v32")!, { overrides: { denseForm: "fast" }, ...NO_DEVICE });
  assert.equal(r.status, "not-available");
  assert.equal(r.reason, "not available: a dense override forced on a sparse case");
  assert.equal(r.kind, "sparse");
  assert.equal(r.kernel, "sparse_h128x_bf16");
  assert.equal(r.cost.nAttended, 128 * 2 * 2048);
  assert.equal(r.cost.nUnique, expectedUniqueTokens(128, 32768, 2, 2048));
  assert.equal(r.cost.flop, 2 * 128 * 128 * 2 * 2048 * (576 + 512));
  assert.equal(r.timeUs, undefined);
  assert.equal(r.cycleBudget?.crossover, true);
  assert.equal(r.cycleBudget?.percentOfBudget, undefined);
});

test("runBenchCase() reports sparse-h16 as not available for a forced h128x, its budget without crossover rows", () => {
  const r = runBenchCase(benchCaseByName("sparse-h16")!, { overrides: { sparsePlan: "h128x" }, ...NO_DEVICE });
  assert.equal(r.status, "not-available");
  assert.match(r.reason!, /not available: .*"h128x" only at h_q = 128.*got h_q = 16/);
  assert.equal(r.kernel, "sparse_h128x_bf16");
  assert.equal(r.cycleBudget?.crossover, false);
  assert.equal(r.cycleBudget?.crossoverApplies, false);
  const dense = runBenchCase(benchCaseByName("dense-b1")!, { overrides: { sparsePlan: "m64" }, ...NO_DEVICE });
  assert.equal(dense.status, "not-available");
  assert.equal(dense.cycleBudget, undefined);
  assert.match(dense.reason!, /sparse plan "m64" forced on a dense case/);
});
