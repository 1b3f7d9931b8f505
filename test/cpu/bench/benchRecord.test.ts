import { test } from "node:test";
import assert from "node:assert/strict";
import { BENCH_RECORD_SCHEMA, benchRecord, type BenchRecordInput } from "../../../src/bench/benchRecord.js";
import { benchRooflineSvg } from "../../../src/bench/benchRooflineSvg.js";
import type { GpuEnvironment } from "../../../src/bench/gpuEnvironment.js";
import { timingStats } from "../../../src/bench/timingStats.js";
import { notAvailableResult, sparseTimedResult, timedResult } from "./fakeBenchResults.js";

const GPU: GpuEnvironment = {
  name: "NVIDIA H200", ordinal: 0, computeCapability: "9.0", smCount: 132, maxSmClockMhz: 1980, smClockMhzNow: 1980,
  memoryClockMhz: 3201, memoryBusWidthBits: 6016, l2CacheBytes: 62914560, totalMemBytes: 150109880320,
  driverVersion: "580.159.04", cudaDriverVersion: "13.0",
};

function input(): BenchRecordInput {
  const t = timingStats([1, 2, 3]);
  return {
    gpu: GPU,
    commit: { commit: "0123456789abcdef0123456789abcdef01234567", dirty: false },
    kernel: "dense_pipe_bf16",
    ceilings: {
      gpuName: GPU.name, driverVersion: GPU.driverVersion, measuredAt: "2026-11-30T00:00:00.000Z", copyGbPerS: 4174, readGbPerS: 4138, gemmTflops: 767,
      detail: { copyBytes: 2, readBytes: 1, wgmmaFlop: 1, copyUs: t, readUs: t, wgmmaUs: t },
    },
    ceilingsSource: "this run",
    reference: { label: "measured", tflops: 767, gbPerS: 4138, ridge: 185.35 },
    datasheet: { tflops: 989.4, gbPerS: 4800 },
    iters: 40,
    seed: 1,
    results: [timedResult("dense-compute", 452), timedResult("dense-grid-sq1-8k", 800), notAvailableResult("sparse-v32")],
    createdAt: new Date("2026-11-30T12:00:00Z"),
  };
}

test("benchRecord() carries the GPU, driver, clocks, commit, ceilings and settings of the run", () => {
  const r = JSON.parse(JSON.stringify(benchRecord(input())));
  assert.equal(r.schema, BENCH_RECORD_SCHEMA);
  assert.equal(r.createdAt, "2026-11-30T12:00:00.000Z");
  assert.equal(r.tool.name, "flashmla-ts");
  assert.match(r.tool.version, /^\d+\.\d+\.\d+/);
  assert.equal(r.commit, "0123456789abcdef0123456789abcdef01234567");
  assert.equal(r.commitDirty, false);
  assert.equal(r.kernel, "dense_pipe_bf16");
  assert.equal(r.gpu.name, "NVIDIA H200");
  assert.equal(r.gpu.driverVersion, "580.159.04");
  assert.equal(r.gpu.maxSmClockMhz, 1980);
  assert.equal(r.gpu.smClockMhzNow, 1980);
  assert.deepEqual(r.ceilings.measured, { gemmTflops: 767, copyGbPerS: 4174, readGbPerS: 4138, measuredAt: "2026-11-30T00:00:00.000Z", source: "this run" });
  assert.deepEqual(r.ceilings.datasheet, { tflops: 989.4, gbPerS: 4800 });
  assert.deepEqual(r.settings, { iters: 40, seed: 1 });
});

test("benchRecord() gives each timed case its shape, µs median/min/p90, TFLOPS, GB/s, % ceiling and verdicts", () => {
  const [dc, grid, sparse] = benchRecord(input()).results;
  assert.equal(dc.case, "dense-compute");
  assert.equal(dc.status, "ok");
  assert.deepEqual([dc.shape.b, dc.shape.h_q, dc.shape.s_q], [128, 128, 1]);
  assert.equal(dc.flop, 292_057_776_128);
  assert.equal(dc.bytes, 1_243_611_136);
  assert.deepEqual([dc.usMedian, dc.usMin, dc.samples], [452, 451, 4]);
  assert.equal(dc.usP90, 453.4);
  assert.equal(dc.tflops!.toFixed(1), "646.1");
  assert.equal(dc.percentOfCeiling!.toFixed(1), "84.2");
  assert.equal(dc.bound, "compute");
  assert.equal(dc.firstBar && "met" in dc.firstBar && dc.firstBar.met, true);
  assert.equal(dc.anchor?.timeUs, 452);
  assert.equal(dc.check?.ok, true);
  assert.equal(grid.group, "dense-grid");
  assert.equal(sparse.status, "not-available");
  assert.equal(sparse.usMedian, undefined);
  assert.equal(sparse.tflops, undefined);
  assert.equal(sparse.kernel, "sparse_h128x_bf16");
  assert.match(sparse.reason!, /not available: a dense override forced on a sparse case/);
});

test("benchRecord() gives a timed sparse case its N attended, N_unique, FP8 cache read rate and cycle budget", () => {
  const rec = benchRecord({ ...input(), kernel: "dense_pipe_bf16 + sparse_h16x_bf16", results: [timedResult("dense-compute", 452), sparseTimedResult("sparse-h16", 100)] });
  assert.equal(rec.kernel, "dense_pipe_bf16 + sparse_h16x_bf16");
  const [dense, sparse] = JSON.parse(JSON.stringify(rec)).results;
  assert.equal(dense.nUnique, undefined);
  assert.equal(dense.cycleBudget, undefined);
  assert.equal(sparse.kernel, "sparse_h16x_bf16");
  assert.equal(sparse.nAttended, 128 * 2 * 2048);
  // Two draws of 2048 from 32768 per request: 128 · 32768 · (1 − (15/16)²) tokens.
  assert.equal(Math.round(sparse.nUnique), 507904);
  assert.equal(sparse.cacheReadGbPerS, (sparse.nUnique * 656) / 1e5);
  assert.equal(sparse.percentOfCeiling, (100 * sparse.cacheReadGbPerS) / 4138);
  assert.equal(sparse.cycleBudget.crossover, false);
  assert.equal(sparse.cycleBudget.usefulHeadsPerCta, 16);
  assert.ok(sparse.cycleBudget.percentOfBudget > 0);
});

test("benchRooflineSvg() plots the record's timed cases, FlashMLA's anchors and both roofs", () => {
  const svg = benchRooflineSvg(benchRecord(input()));
  assert.match(svg, /MLA decode roofline: dense_pipe_bf16 on NVIDIA H200/);
  assert.match(svg, /2026-11-30, commit 0123456789, driver 580\.159\.04/);
  assert.equal([...svg.matchAll(/<g class="roof"/g)].length, 2);
  assert.equal([...svg.matchAll(/<circle class="point measured"/g)].length, 2);
  // dense-compute and sparse-v32 have anchors; the sparse one stands alone.
  assert.equal([...svg.matchAll(/<circle class="point anchor"/g)].length, 2);
  assert.match(svg, /sparse-v32 \(FlashMLA only\)/);
  assert.match(svg, /dense-grid \(1 cases\)|dense-grid \(1 case\)/);
});

test("benchRecord() carries the measured crossover gains when the run made any", () => {
  const g = { case: "sparse-v32", plainKernel: "sparse_m64_bf16", crossoverKernel: "sparse_h128x_bf16", plainUs: 403.7, crossoverUs: 383.7, gain: 403.7 / 383.7 };
  assert.deepEqual(benchRecord({ ...input(), crossoverGains: [g] }).crossoverGains, [g]);
  assert.equal(benchRecord({ ...input(), crossoverGains: [] }).crossoverGains, undefined);
  assert.equal(benchRecord(input()).crossoverGains, undefined);
});

test("benchRecord() carries the SM clock, power, reasons and sample count NVML gave for each case, where there are any", () => {
  const i = input();
  i.results = [{ ...timedResult("dense-compute", 452), smClockMhz: 1729, powerW: 698, clockReasons: ["sw-power-cap"], clockSamples: 18 }, timedResult("dense-b1", 43)];
  const r = JSON.parse(JSON.stringify(benchRecord(i)));
  assert.equal(r.schema, "flashmla-ts/bench@3");
  assert.equal(r.results[0].smClockMhz, 1729);
  assert.equal(r.results[0].powerW, 698);
  assert.deepEqual(r.results[0].clockReasons, ["sw-power-cap"]);
  assert.equal(r.results[0].clockSamples, 18);
  for (const k of ["smClockMhz", "powerW", "clockReasons", "clockSamples"]) assert.equal(k in r.results[1], false, k);
});
