import { test } from "node:test";
import assert from "node:assert/strict";
import { benchRecord } from "../../../src/bench/benchRecord.js";
import { benchTable } from "../../../src/bench/benchTable.js";
import { BENCH_CASES, benchCaseByName, benchCaseShape, caseBound } from "../../../src/bench/cases.js";
import { runBenchCase } from "../../../src/bench/runBenchCase.js";
import { timingStats } from "../../../src/bench/timingStats.js";
import { expectedUniqueTokens, mlaCost } from "../../../src/roofline/mlaCost.js";
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

const V4_REASON = "DeepSeek-V4 (MODEL1) decode kernels are not built yet (docs/deepseek-v4.md)";
const V4 = BENCH_CASES.filter((c) => c.group === "v4");

test("runBenchCase() reports every v4 case as not available without a GPU, with the MODEL1 cost model and its bound", () => {
  assert.equal(V4.length, 8);
  for (const c of V4) {
    // NO_DEVICE: any use of the device or the stream would throw.
    const r = runBenchCase(c, NO_DEVICE);
    assert.equal(r.status, "not-available", c.name);
    assert.equal(r.reason, V4_REASON, c.name);
    assert.equal(r.kernel, "none", c.name);
    assert.equal(r.group, "v4", c.name);
    assert.deepEqual(r.model, benchCaseShape(c), c.name);
    assert.deepEqual(r.cost, mlaCost(benchCaseShape(c)), c.name);
    assert.equal(r.bound, caseBound(c, NO_DEVICE.roofs), c.name);
    assert.equal(r.shape.topk, c.topk, c.name);
    assert.equal(r.shape.seqlens.mean > 0, true, c.name);
    for (const field of ["timeUs", "figures", "check", "cycleBudget", "sets"] as const) assert.equal(r[field], undefined, `${c.name}: ${field}`);
    assert.deepEqual([r.anchor, r.firstBar, r.goal], [c.anchor, c.firstBar, c.goal], c.name);
  }
  // A forced plan changes nothing: there is no MODEL1 kernel to force.
  const forced = runBenchCase(benchCaseByName("v4-cfg2")!, { overrides: { sparsePlan: "m64" }, ...NO_DEVICE });
  assert.equal(forced.reason, V4_REASON);
  assert.equal(runBenchCase(benchCaseByName("v4-cfg2")!, NO_DEVICE).cost.flop, 77_309_411_328);
});

test("bench's table and record show the v4 rows as not available: no time, FlashMLA's figure, the targets, one note", () => {
  const rows = V4.map((c) => runBenchCase(c, NO_DEVICE));
  const text = benchTable(rows);
  assert.match(text, /v4-cfg1 +│ none +│ n\/a +│ +│ +│ +│ +│ memory +│ 90\.9 µs, 236 TFLOPS +│ ≤ 90\.9 µs +│ ≤ 79\.0 µs +│ not available/);
  assert.match(text, /v4-peak-h128 +│ none +│ n\/a .*│ compute +│ 2687 µs, 473 TFLOPS +│ ≤ 2687\.2 µs +│ ≤ 2336\.7 µs +│ not available/);
  assert.match(text, /v4-h16 +│ none +│ n\/a .*│ memory +│ - +│ - +│ ≥ 3500 GB\/s cache +│ not available/);
  assert.match(text, /v4-h32 +│ none +│ n\/a .*│ memory +│ - +│ - +│ - +│ not available/);
  // One note for the eight, not eight notes.
  assert.equal((text.match(/note:/g) ?? []).length, 1);
  assert.match(text, new RegExp(`^note: ${V4.map((c) => c.name).join(", ")}: DeepSeek-V4 \\(MODEL1\\) decode kernels are not built yet \\(docs/deepseek-v4\\.md\\)$`, "m"));
  assert.doesNotMatch(text, /sparse rows:|seed cycle budget/);

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
  assert.deepEqual([cfg1.case, cfg1.group, cfg1.kernel, cfg1.status, cfg1.reason], ["v4-cfg1", "v4", "none", "not-available", V4_REASON]);
  assert.deepEqual([cfg1.flop, cfg1.bytes, cfg1.nAttended, cfg1.nUnique, cfg1.bound], [21_474_836_480, 127_966_208, 163_840, 161_664, "memory"]);
  assert.equal(cfg1.usMedian, undefined);
  assert.equal(cfg1.anchor.timeUs, 90.9);
});
