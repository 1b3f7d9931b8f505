import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { benchCaseByName } from "../../../src/bench/cases.js";
import { benchSpinKernel } from "../../../src/bench/benchSpin.js";
import { CeilingsCache } from "../../../src/bench/CeilingsCache.js";
import { checkDenseCase } from "../../../src/testing/checkDenseCase.js";
import type { CheckCaseSpec } from "../../../src/testing/checkGrid.js";
import { gpuEnvironment } from "../../../src/bench/gpuEnvironment.js";
import { makeGpuDenseCase } from "../../../src/testing/gpuDenseCase.js";
import { measureCeilings } from "../../../src/bench/measureCeilings.js";
import { runBenchCase } from "../../../src/bench/runBenchCase.js";
import { timeGpuCalls } from "../../../src/bench/timeGpuCalls.js";
import { timingStats } from "../../../src/bench/timingStats.js";
import { registerBenchCommand } from "../../../src/cli/commands/bench.js";
import { registerCheckCommand } from "../../../src/cli/commands/check.js";
import { nvmlGpu } from "../../../src/driver/nvml.js";
import { chooseKernel } from "../../../src/mla/chooseKernel.js";
import { flashMlaWithKvcache, type DecodeOverrides } from "../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { runCommand } from "../../cpu/cli/runCommand.js";
import { describeGpu } from "../../helpers/gpu.js";

describeGpu("bench harness on the GPU", (device) => {
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), "flashmla-bench-"));
  const cache = new CeilingsCache(path.join(cacheDir, "ceilings.json"));

  test("timeGpuCalls() measures a 200 µs spin as about 200 µs per call", () => {
    const stream = Stream.create(device.ordinal);
    try {
      const spin = benchSpinKernel(device.ordinal);
      const times = timeGpuCalls([() => spin.launch({ grid: 1, block: 1, stream }, [{ kind: "u64", value: 200_000n }])], { stream, iters: 20, spin });
      const s = timingStats(times.samplesUs);
      assert.equal(s.n, 20);
      assert.equal(times.hostOutran, false);
      assert.ok(s.median >= 195 && s.median < 260, `median ${s.median} µs`);
    } finally {
      stream.dispose();
    }
  });

  // NVML is part of the driver, but a host may lack it (a container without the driver's utility
  // libraries): then the clock tests are skipped with NVML's reason, never passed silently.
  test("timeGpuCalls() samples the SM clock with NVML during 50 spins of 200 µs (≥ 3 samples, 200–2100 MHz), and reports none for 2 spins of 1 µs", (t) => {
    const nvml = nvmlGpu(device.ordinal);
    const stream = Stream.create(device.ordinal);
    try {
      const spin = benchSpinKernel(device.ordinal);
      const spins = (ns: bigint) => [() => spin.launch({ grid: 1, block: 1, stream }, [{ kind: "u64", value: ns }])];
      const times = timeGpuCalls(spins(200_000n), { stream, iters: 50, spin });
      if (!nvml.ok) {
        assert.equal(times.nvml, undefined);
        t.skip(`NVML not available: ${nvml.reason}`);
        return;
      }
      // 10 ms of timed calls, one sample per ~1 ms.
      assert.ok(times.nvml !== undefined, "no NVML summary");
      assert.ok(times.nvml.samples >= 3, `${times.nvml.samples} samples`);
      // One spinning thread barely loads the GPU: any clock the governor picks is fine, up to the H200's 1980.
      assert.ok(times.nvml.smClockMhz >= 200 && times.nvml.smClockMhz <= 2100, `SM clock ${times.nvml.smClockMhz} MHz`);
      assert.equal(timeGpuCalls(spins(1_000n), { stream, iters: 2, spin }).nvml, undefined);
    } finally {
      stream.dispose();
    }
  });

  test("runBenchCase() reports for dense-mem-h16 (40 calls of ~300 µs) the SM clock NVML sampled during them: 500–2100 MHz over ≥ 3 samples, with power and reasons", (t) => {
    const nvml = nvmlGpu(device.ordinal);
    const c = benchCaseByName("dense-mem-h16")!;
    const stream = Stream.create(device.ordinal);
    try {
      const r = runBenchCase(c, { device, stream, roofs: { tflops: 767, gbPerS: 4138 }, iters: 40 });
      assert.equal(r.status, "ok", r.reason);
      if (!nvml.ok) {
        assert.equal(r.smClockMhz, undefined);
        t.skip(`NVML not available: ${nvml.reason}`);
        return;
      }
      t.diagnostic(`NVML (${nvml.gpu.matchedBy}): ${r.smClockMhz} MHz, ${r.powerW} W, reasons ${JSON.stringify(r.clockReasons)}, ${r.clockSamples} samples over ${r.timeUs!.median.toFixed(1)} µs × 40`);
      assert.ok(r.clockSamples !== undefined && r.clockSamples >= 3, `${r.clockSamples} samples`);
      assert.ok(r.smClockMhz !== undefined && r.smClockMhz >= 500 && r.smClockMhz <= 2100, `SM clock ${r.smClockMhz} MHz`);
      assert.ok(r.powerW !== undefined && r.powerW > 0 && r.powerW < 1500, `power ${r.powerW} W`);
      assert.ok(Array.isArray(r.clockReasons), "no clock-event reasons");
    } finally {
      stream.dispose();
    }
  });

  test("measureCeilings() gives Hopper-sized copy, read and bf16 wgmma figures", () => {
    const env = gpuEnvironment(device);
    const rec = measureCeilings(device, env, { streamBytes: 512 << 20, iters: 20, wgmmaIters: 512 });
    assert.equal(rec.gpuName, device.name);
    // H100 SXM ≈ 3 TB/s, H200 ≈ 4.2 TB/s copy; dense bf16 ≈ 600–990 TFLOPS.
    assert.ok(rec.copyGbPerS > 1500 && rec.copyGbPerS < 5200, `copy ${rec.copyGbPerS} GB/s`);
    assert.ok(rec.readGbPerS > 1500 && rec.readGbPerS < 5200, `read ${rec.readGbPerS} GB/s`);
    assert.ok(rec.gemmTflops > 300 && rec.gemmTflops < 1100, `wgmma ${rec.gemmTflops} TFLOPS`);
    assert.equal(rec.detail.copyUs.n, 20);
    assert.equal(rec.detail.copyBytes, 2 * rec.detail.readBytes);
  });

  test("checkDenseCase() passes the kernel's output and fails it once one element is corrupted", () => {
    const stream = Stream.create(device.ordinal);
    const gc = makeGpuDenseCase({ b: 3, s_q: 2, h_q: 16, h_kv: 1, seqlens: [300, 65, 1000], causal: true, dtype: "bf16" }, { seed: 5, stream });
    const meta = getMlaMetadata();
    const res = flashMlaWithKvcache({ q: gc.q, kCache: gc.kCache, blockTable: gc.blockTable, cacheSeqlens: gc.cacheSeqlens, headDimV: 512, schedMeta: meta, softmaxScale: gc.softmaxScale, causal: true, stream });
    try {
      const good = checkDenseCase(gc, res, { stream, gpuReference: true });
      assert.ok(good.ok, good.message);
      assert.equal(good.rows, 3 * 2 * 16);
      assert.equal(good.badElements, 0);
      // Element [2, 1, 5, 7] (last request, last token, head 5, dim 7) set to 1.0 in bf16 (0x3f80).
      const at = (((2 * 2 + 1) * 16 + 5) * 512 + 7) * 2;
      res.out.buffer!.copyFromHost(new Uint16Array([0x3f80]), at);
      const bad = checkDenseCase(gc, res, { stream, requests: [2], heads: [5] });
      assert.equal(bad.ok, false);
      assert.equal(bad.out.mismatches, 1);
      assert.match(bad.message, /out: 1 of 1024 elements outside tolerance/);
    } finally {
      res.out.dispose();
      res.lse.dispose();
      meta.dispose();
      gc.dispose();
      stream.dispose();
    }
  });

  const variants: Array<[string, DecodeOverrides]> = [["the API's choice", {}], ["pairs left to the combine", { mergeSplitPairs: false }], ["fast", { denseForm: "fast" }], ["pipe", { denseForm: "pipe" }]];
  for (const [label, overrides] of variants) {
    test(`runBenchCase() times dense-short-h16 with ${label} over ≥ 4 input sets and its output passes the check`, () => {
      const c = benchCaseByName("dense-short-h16")!;
      const stream = Stream.create(device.ordinal);
      try {
        const r = runBenchCase(c, { overrides, device, stream, roofs: { tflops: 767, gbPerS: 4138 }, iters: 20 });
        assert.equal(r.status, "ok", r.reason);
        assert.equal(r.kernel, chooseKernel(c, overrides));
        assert.ok(r.sets !== undefined && r.sets >= 4);
        assert.ok(r.sets! * r.setBytes! > 2 * device.l2CacheBytes);
        assert.equal(r.timeUs!.n, 20);
        assert.ok(r.timeUs!.median > 5 && r.timeUs!.median < 5000, `median ${r.timeUs!.median} µs`);
        // Back to back the events between calls are gone, so a call costs no more than between them.
        assert.ok(r.backToBackUs! > 0.5 * r.timeUs!.min && r.backToBackUs! < 1.1 * r.timeUs!.max, `back to back ${r.backToBackUs} µs`);
        assert.equal(r.check!.ok, true);
        assert.ok(r.figures!.gbPerS > 0);
      } finally {
        stream.dispose();
      }
    });
  }

  test("flashmla bench --case dense-b1 --json prints a record with the timed case and exits 0", async () => {
    const r = await runCommand(registerBenchCommand, ["bench", "--case", "dense-b1", "sparse-v32", "--iters", "20", "--json"], { cache });
    assert.equal(r.code, 0, r.err);
    const rec = JSON.parse(r.out);
    assert.equal(rec.gpu.name, device.name);
    assert.equal(rec.results.length, 2);
    assert.equal(rec.results[0].case, "dense-b1");
    assert.equal(rec.results[0].status, "ok");
    assert.ok(rec.results[0].usMedian > 0);
    assert.ok(rec.results[0].usBackToBack > 0);
    // Each case runs the kernel flashMlaWithKvcache chooses for it.
    assert.equal(rec.kernel, "dense_fast_bf16 + sparse_h128x_bf16");
    assert.equal(rec.results[0].kernel, "dense_fast_bf16");
    assert.equal(rec.results[1].kernel, "sparse_h128x_bf16");
    assert.equal(rec.results[1].status, "ok", rec.results[1].reason);
    assert.ok(rec.results[1].tflops > 0 && rec.results[1].nUnique > 0);
    // sparse-v32 has h_q = 128: h128x (crossover) serves it.
    assert.equal(rec.results[1].cycleBudget.crossover, true);
    // It was also timed with m64, for the measured crossover gain.
    assert.equal(rec.crossoverGains?.length, 1);
    assert.equal(rec.crossoverGains[0].case, "sparse-v32");
    assert.equal(rec.crossoverGains[0].plainKernel, "sparse_m64_bf16");
    assert.equal(rec.crossoverGains[0].crossoverKernel, "sparse_h128x_bf16");
    assert.equal(rec.crossoverGains[0].crossoverUs, rec.results[1].usMedian);
    assert.ok(rec.crossoverGains[0].gain > 0 && Number.isFinite(rec.crossoverGains[0].gain));
    // The ceilings measured by this run were cached for the next one.
    assert.ok(cache.get(device.name, rec.gpu.driverVersion) !== undefined);
  });

  test("flashmla check --grid small passes every case and exits 0", async () => {
    const r = await runCommand(registerCheckCommand, ["check", "--grid", "small"]);
    assert.equal(r.code, 0, r.out + r.err);
    assert.match(r.out, /11 of 11 cases run: 11 passed, 0 failed/);
  });

  test("flashmla check --grid small --json names the kernel flashMlaWithKvcache chose for every case", async () => {
    const r = await runCommand(registerCheckCommand, ["check", "--grid", "small", "--json"]);
    assert.equal(r.code, 0, r.err);
    const rec = JSON.parse(r.out) as { cases: number; results: Array<{ ok: boolean; kernel: string; spec: CheckCaseSpec; seqlens: { max: number } }> };
    assert.equal(rec.cases, 11);
    for (const x of rec.results) {
      assert.equal(x.ok, true, x.spec.name);
      // The dense form depends on the block table's width: the case's longest request.
      assert.equal(x.kernel, chooseKernel({ ...x.spec, kind: "dense", maxLen: x.seqlens.max }), x.spec.name);
    }
  });

  test("flashmla bench --svg writes a plot with the measured point", async () => {
    const svg = path.join(cacheDir, "plot.svg");
    const r = await runCommand(registerBenchCommand, ["bench", "--case", "dense-mem-h16", "--iters", "20", "--svg", svg], { cache });
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /dense-mem-h16 .*│ ok/);
    assert.match(readFileSync(svg, "utf8"), /data-case="dense-mem-h16"/);
    rmSync(cacheDir, { recursive: true, force: true });
  });
});
