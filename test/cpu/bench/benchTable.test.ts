import { test } from "node:test";
import assert from "node:assert/strict";
import pc from "picocolors";
import { benchTable } from "../../../src/bench/benchTable.js";
import { notAvailableResult, sparseTimedResult, timedResult } from "./fakeBenchResults.js";

test("benchTable() prints the kernel, µs, TFLOPS, GB/s, % of ceiling, bound, FlashMLA's figure, targets and check per case", () => {
  const text = benchTable([timedResult("dense-compute", 452), timedResult("dense-b1", 65)]);
  const row = text.split("\n").find((l) => l.includes("dense-compute"))!;
  const cells = row.split("│").map((s) => s.trim()).filter((s) => s !== "");
  assert.deepEqual(cells, ["dense-compute", "dense_pipe_bf16", "452.0", "453.4", "646.1", "2751", "84.2", "compute", "452 µs, 646 TFLOPS", "≥ 646 TFLOPS met", "≥ 700 TFLOPS miss", "ok"]);
  const b1 = text.split("\n").find((l) => l.includes("dense-b1"))!;
  // Past the ridge by the cost model, so quoted in TFLOPS against the tensor roof, as flashmla roofline says.
  assert.match(b1, /│ 140\.4 +│ 585 +│ 18\.3 +│ compute +│ 43\.5 µs, 875 GB\/s +│ ≤ 43\.5 µs miss +│ ≤ 20 µs miss +│ ok/);
  assert.match(text, /% ceil: achieved TFLOPS \(compute-bound\) or GB\/s \(memory-bound\) over the measured roof/);
  assert.doesNotMatch(text, /\x1b\[/);
});

test("benchTable() shows a case a forced choice cannot run as not available, with its reason as a note", () => {
  const text = benchTable([notAvailableResult("sparse-v32")]);
  assert.match(text, /sparse-v32 +│ sparse_h128x_bf16 +│ n\/a .*│ 364 µs, 401 TFLOPS +│ ≥ 401 TFLOPS +│ ≥ 450 TFLOPS +│ not available/);
  assert.match(text, /note: sparse-v32: not available: a dense override forced on a sparse case/);
});

test("benchTable() shows sparse rows' FP8 cache read as GB/s and the seed's cycle budget beside each sparse case", () => {
  const h16 = sparseTimedResult("sparse-h16", 100);
  const v32 = sparseTimedResult("sparse-v32", 364);
  const text = benchTable([timedResult("dense-compute", 452), v32, h16]);
  const row = text.split("\n").find((l) => l.includes("sparse-h16"))!;
  const cells = row.split("│").map((s) => s.trim()).filter((s) => s !== "");
  assert.equal(cells[1], "sparse_h16x_bf16");
  assert.equal(cells[5], h16.figures!.cacheReadGbPerS!.toFixed(0));
  assert.equal(cells[6], h16.figures!.percentOfCeiling.toFixed(1));
  assert.equal(cells[7], "memory");
  assert.match(cells[10], /≥ 3500 GB\/s cache (met|miss)/);
  assert.equal(cells[11], "ok");
  assert.match(text, /sparse rows: GB\/s is the FP8 cache read \(N_unique · 656 B, 584 B for MODEL1, over the time\)/);
  assert.match(text, /^sparse-v32 \(sparse_h128x_bf16\): seed cycle budget: crossover: 34\.0 MMA clk vs 25\.0 dequant clk per token \(50\.0 without\) → MMA-bound, ≤ 100 % of peak \(767 TFLOPS\); measured 52 % of it$/m);
  assert.match(text, /^sparse-h16 \(sparse_h16x_bf16\): seed cycle budget: 34\.0 MMA clk vs 50\.0 dequant clk per token .*16 of 64 heads per CTA useful → dequant-bound, ≤ 17 % of peak/m);
  assert.equal((text.match(/seed cycle budget/g) ?? []).length, 2);
});

test("benchTable() shows a timed v4 row with its MODEL1 kernel, cache read and MODEL1 cycle budget", () => {
  const cfg1 = sparseTimedResult("v4-cfg1", 90);
  const h16 = sparseTimedResult("v4-h16", 50);
  const text = benchTable([cfg1, h16]);
  const cells = text.split("\n").find((l) => l.includes("v4-cfg1"))!.split("│").map((s) => s.trim()).filter((s) => s !== "");
  assert.deepEqual(cells.slice(0, 3), ["v4-cfg1", "sparse_m64_model1_extra", "90.0"]);
  // Memory-bound: quoted by the FP8 cache read, N_unique · 584 B over the time.
  assert.equal(cells[5], ((cfg1.cost.nUnique! * 584) / 90e-6 / 1e9).toFixed(0));
  assert.deepEqual(cells.slice(7), ["memory", "90.9 µs, 236 TFLOPS", "≤ 90.9 µs met", "≤ 79.0 µs miss", "ok"]);
  assert.match(text, /v4-h16 +│ sparse_h16x_model1_extra .*≥ 3500 GB\/s cache (met|miss) +│ ok/);
  // MODEL1's budget per token: 32 MMA clk against 43.75 of conversions (448 quantized dims).
  assert.match(text, /^v4-cfg1 \(sparse_m64_model1_extra\): seed cycle budget: 32\.0 MMA clk vs 43\.8 dequant clk per token \(21\.9 with crossover, which needs h_q ≥ 128\) → dequant-bound, ≤ 73 % of peak \(561 TFLOPS\); measured \d+ % of it$/m);
  assert.match(text, /^v4-h16 \(sparse_h16x_model1_extra\): seed cycle budget: .*16 of 64 heads per CTA useful → dequant-bound/m);
  assert.doesNotMatch(text, /note:/);
});

test("benchTable() marks a failed check and prints why", () => {
  const r = timedResult("dense-mem-h16", 300);
  r.status = "check-failed";
  r.check = { ...r.check!, ok: false, message: "out: 3 of 16384 elements outside tolerance" };
  r.reason = `check FAILED: ${r.check.message}`;
  const text = benchTable([r]);
  assert.match(text, /dense-mem-h16 .*│ FAILED/);
  assert.match(text, /note: dense-mem-h16: check FAILED: out: 3 of 16384/);
});

test("benchTable() colours only when given colours", () => {
  const r = timedResult("dense-compute", 452);
  assert.doesNotMatch(benchTable([r], { colors: pc.createColors(false) }), /\x1b\[/);
  assert.match(benchTable([r], { colors: pc.createColors(true) }), /\x1b\[32mmet\x1b\[39m/);
});

test("benchTable() lists the SM clock, power and reasons NVML sampled during each case's timed calls, and no such line without them", () => {
  const text = benchTable([
    { ...timedResult("dense-compute", 452), smClockMhz: 1729, powerW: 698, clockReasons: ["sw-power-cap", "hw-slowdown"], clockSamples: 18 },
    { ...timedResult("dense-b1", 43), smClockMhz: 1980, powerW: 410, clockReasons: [], clockSamples: 3 },
    { ...timedResult("dense-mem-h16", 300), smClockMhz: 1755, clockSamples: 9 },
    timedResult("dense-mem-h64", 314),
  ]);
  assert.match(
    text,
    /^NVML during each case's timed calls \(median SM clock as NVML reports it, which can be above the clock the SMs run at; power is NVML's 1 s average; clock-event reasons seen\): dense-compute 1729 MHz 698 W sw-power-cap\+hw-slowdown; dense-b1 1980 MHz 410 W none; dense-mem-h16 1755 MHz\.$/m,
  );
  assert.doesNotMatch(benchTable([timedResult("dense-compute", 452)]), /SM clock/);
});
