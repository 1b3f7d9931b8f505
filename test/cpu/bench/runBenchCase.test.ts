import { test } from "node:test";
import assert from "node:assert/strict";
import { benchCaseKernel } from "../../../src/bench/benchCaseKernel.js";
import { benchRecord } from "../../../src/bench/benchRecord.js";
import { benchTable } from "../../../src/bench/benchTable.js";
import { BENCH_CASES, benchCaseByName, benchCaseShape, caseBound } from "../../../src/bench/cases.js";
import { runBenchCase } from "../../../src/bench/runBenchCase.js";
import { model1BenchSpec } from "../../../src/bench/sparseBenchSpec.js";
import { timingStats } from "../../../src/bench/timingStats.js";
import { expectedUniqueTokens, mlaCost } from "../../../src/roofline/mlaCost.js";
import type { Device } from "../../../src/runtime/Device.js";
import type { Stream } from "../../../src/runtime/Stream.js";
import { planGpuModel1Case } from "../../../src/testing/gpuModel1Case.js";

// A case a forced choice cannot run returns before touching the GPU, so none is needed here; any other
// case reaches the GPU and fails there.
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

test("runBenchCase() carries dense-compute-d512's d_qk into its shape, its cost model and its kernel", () => {
  const r = runBenchCase(benchCaseByName("dense-compute-d512")!, { overrides: { sparsePlan: "m64" }, ...NO_DEVICE });
  assert.equal(r.status, "not-available");
  assert.equal(r.kernel, "dense_pipe_bf16_d512");
  assert.equal(r.shape.d_qk, 512);
  assert.deepEqual(r.model, { kind: "dense", b: 128, h_q: 128, h_kv: 1, s_q: 1, s_k: 8192, d_qk: 512 });
  assert.equal(r.cost.flop, 2 * 128 * 128 * 8192 * (512 + 512));
  // dense-compute keeps 576.
  const v3 = runBenchCase(benchCaseByName("dense-compute")!, { overrides: { sparsePlan: "m64" }, ...NO_DEVICE });
  assert.equal(v3.shape.d_qk, undefined);
  assert.equal(v3.cost.flop, 2 * 128 * 128 * 8192 * (576 + 512));
});

const V4 = BENCH_CASES.filter((c) => c.group === "v4");
/** The v4 cases of more than 16 heads, which h16x cannot run. */
const V4_WIDE = V4.filter((c) => c.h_q > 16);
/** What runBenchCase says when h16x is forced on a case of h_q > 16 heads. */
const noH16x = (h_q: number) => `not available: runBenchCase(): argument 'overrides.sparsePlan': expected "h16x" only at h_q <= 16 (the heads are wgmma's N), got h_q = ${h_q}`;

test("every v4 case names the MODEL1 kernel flashMlaWithKvcache runs for it: h16x at 16 heads, h128x at 128, m64 otherwise", () => {
  assert.equal(V4.length, 8);
  assert.deepEqual(Object.fromEntries(V4.map((c) => [c.name, benchCaseKernel(c)])), {
    "v4-cfg1": "sparse_m64_model1_extra",
    "v4-cfg2": "sparse_h128x_model1_extra",
    "v4-cfg3": "sparse_m64_model1_extra",
    "v4-cfg4": "sparse_h128x_model1_extra",
    "v4-peak-h64": "sparse_m64_model1",
    "v4-peak-h128": "sparse_h128x_model1",
    "v4-h16": "sparse_h16x_model1_extra",
    "v4-h32": "sparse_m64_model1_extra",
  });
  const cfg2 = benchCaseByName("v4-cfg2")!;
  assert.equal(benchCaseKernel(cfg2, { sparsePlan: "m64" }), "sparse_m64_model1_extra");
  // A forced plan's kernel, whether or not the head count fits it (runBenchCase says so).
  assert.equal(benchCaseKernel(cfg2, { sparsePlan: "h16x" }), "sparse_h16x_model1_extra");
  // The V3.2 cases keep their kernels.
  assert.equal(benchCaseKernel(benchCaseByName("sparse-h16")!), "sparse_h16x_bf16");
});

test("runBenchCase() reports a forced plan a v4 case cannot run as not available, with the MODEL1 cost model and cycle budget and set 0's lengths", () => {
  for (const c of V4_WIDE) {
    // NO_DEVICE: any use of the device or the stream would throw.
    const r = runBenchCase(c, { overrides: { sparsePlan: "h16x" }, ...NO_DEVICE });
    assert.equal(r.status, "not-available", c.name);
    assert.equal(r.reason, noH16x(c.h_q), c.name);
    assert.equal(r.kernel, benchCaseKernel(c, { sparsePlan: "h16x" }), c.name);
    assert.equal(r.group, "v4", c.name);
    assert.deepEqual(r.model, benchCaseShape(c), c.name);
    assert.deepEqual(r.cost, mlaCost(benchCaseShape(c)), c.name);
    assert.equal(r.bound, caseBound(c, NO_DEVICE.roofs), c.name);
    assert.equal(r.shape.topk, c.topk, c.name);
    for (const field of ["timeUs", "figures", "check", "sets"] as const) assert.equal(r[field], undefined, `${c.name}: ${field}`);
    assert.deepEqual([r.anchor, r.firstBar, r.goal], [c.anchor, c.firstBar, c.goal], c.name);
    // MODEL1's budget: 64 · (512 + 512) · 2 / 4096 = 32 MMA clk against the seed's rate over 448
    // quantized dims (50 · 448 / 512 = 43.75), halved with crossover; the forced h16x does not cross over.
    const b = r.cycleBudget!;
    assert.deepEqual([b.mmaCycles, b.dequantCycles, b.crossoverDequantCycles, b.crossover, b.crossoverApplies, b.percentOfBudget], [32, 43.75, 21.875, false, c.h_q === 128, undefined], c.name);
  }
  // The lengths are those the first input set's main cache draws (seed 1: set seed 1001), FlashMLA's MODEL1 draw.
  const cfg1 = benchCaseByName("v4-cfg1")!;
  const r = runBenchCase(cfg1, { overrides: { sparsePlan: "h16x" }, ...NO_DEVICE });
  const lengths = planGpuModel1Case(model1BenchSpec(cfg1), 1001).main.layout.seqlens;
  assert.deepEqual(r.shape.seqlens, { min: Math.min(...lengths), mean: lengths.reduce((a, n) => a + n, 0) / 128, max: Math.max(...lengths) });
  assert.ok(Math.abs(r.shape.seqlens.mean - 16384) < 1500 && r.shape.seqlens.min >= 2, JSON.stringify(r.shape.seqlens));

  const h128x = runBenchCase(cfg1, { overrides: { sparsePlan: "h128x" }, ...NO_DEVICE });
  assert.equal(h128x.kernel, "sparse_h128x_model1_extra");
  assert.match(h128x.reason!, /not available: .*"h128x" only at h_q = 128.*got h_q = 64/);
  const dense = runBenchCase(cfg1, { overrides: { denseForm: "fast" }, ...NO_DEVICE });
  assert.equal(dense.reason, "not available: a dense override forced on a sparse case");
  assert.equal(dense.kernel, "sparse_m64_model1_extra");
  assert.equal(dense.cycleBudget?.mmaCycles, 32);
  assert.equal(runBenchCase(benchCaseByName("v4-cfg2")!, { overrides: { sparsePlan: "h16x" }, ...NO_DEVICE }).cost.flop, 77_309_411_328);
});

test("runBenchCase() builds a v4 case's sets on the GPU: without one it reports the error, not a missing kernel", () => {
  // The host draws run; the first GPU call (the stream's device) throws, and the result says so.
  const r = runBenchCase(benchCaseByName("v4-h16")!, NO_DEVICE);
  assert.equal(r.status, "error");
  assert.equal(r.kernel, "sparse_h16x_model1_extra");
  assert.doesNotMatch(r.reason!, /not built|not available/);
  assert.equal(r.cycleBudget?.usefulHeadsPerCta, 16);
});

test("bench's table and record show v4 rows a forced plan cannot run: no time, FlashMLA's figure, the targets, one note per reason", () => {
  const rows = V4_WIDE.map((c) => runBenchCase(c, { overrides: { sparsePlan: "h16x" }, ...NO_DEVICE }));
  const text = benchTable(rows);
  assert.match(text, /v4-cfg1 +│ sparse_h16x_model1_extra +│ n\/a +│ +│ +│ +│ +│ memory +│ 90\.9 µs, 236 TFLOPS +│ ≤ 90\.9 µs +│ ≤ 79\.0 µs +│ not available/);
  assert.match(text, /v4-peak-h128 +│ sparse_h16x_model1 +│ n\/a .*│ compute +│ 2687 µs, 473 TFLOPS +│ ≤ 2687\.2 µs +│ ≤ 2336\.7 µs +│ not available/);
  assert.match(text, /v4-h32 +│ sparse_h16x_model1_extra +│ n\/a .*│ memory +│ - +│ - +│ - +│ not available/);
  // One note per reason (head count), not one per row.
  assert.equal((text.match(/note:/g) ?? []).length, 3);
  assert.ok(text.includes(`note: v4-cfg1, v4-cfg3, v4-peak-h64: ${noH16x(64)}\n`));
  assert.ok(text.includes(`note: v4-cfg2, v4-cfg4, v4-peak-h128: ${noH16x(128)}\n`));
  assert.ok(text.includes(`note: v4-h32: ${noH16x(32)}\n`));
  assert.doesNotMatch(text, /sparse rows:/);
  // Each row's MODEL1 budget, untimed.
  assert.ok(text.includes("v4-cfg2 (sparse_h16x_model1_extra): seed cycle budget: 32.0 MMA clk vs 43.8 dequant clk per token (21.9 with crossover) → dequant-bound"), text);
  assert.ok(text.includes("v4-h32 (sparse_h16x_model1_extra): seed cycle budget: 32.0 MMA clk vs 43.8 dequant clk per token (21.9 with crossover, which needs h_q ≥ 128), 32 of 64 heads per CTA useful → dequant-bound"), text);

  const t = timingStats([1]);
  const record = JSON.parse(JSON.stringify(benchRecord({
    gpu: {
      name: "NVIDIA H200", ordinal: 0, computeCapability: "9.0", smCount: 132, maxSmClockMhz: 1980, memoryClockMhz: 3201, memoryBusWidthBits: 6016,
      l2CacheBytes: 62914560, totalMemBytes: 150109880320, driverVersion: "580.159.04", cudaDriverVersion: "13.0",
    },
    commit: { commit: "0123456789abcdef0123456789abcdef01234567" },
    kernel: "no kernel",
    ceilings: { gpuName: "NVIDIA H200", driverVersion: "580.159.04", measuredAt: "2026-12-01T00:00:00.000Z", copyGbPerS: 4174, readGbPerS: 4138, gemmTflops: 767, detail: { copyBytes: 2, readBytes: 1, wgmmaFlop: 1, copyUs: t, readUs: t, wgmmaUs: t } },
    ceilingsSource: "cache",
    reference: { label: "measured", tflops: 767, gbPerS: 4138, ridge: 185.35 },
    iters: 40,
    seed: 1,
    results: rows,
  })));
  const cfg1 = record.results[0];
  assert.deepEqual([cfg1.case, cfg1.group, cfg1.kernel, cfg1.status, cfg1.reason], ["v4-cfg1", "v4", "sparse_h16x_model1_extra", "not-available", noH16x(64)]);
  assert.deepEqual([cfg1.flop, cfg1.bytes, cfg1.nAttended, cfg1.nUnique, cfg1.bound], [21_474_836_480, 127_966_208, 163_840, 161_664, "memory"]);
  assert.equal(cfg1.usMedian, undefined);
  assert.equal(cfg1.anchor.timeUs, 90.9);
});
