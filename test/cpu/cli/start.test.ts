import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { registerStartCommand } from "../../../src/cli/commands/start.js";
import { runCommand } from "./runCommand.js";

const NO_GPU = { probeGpu: () => ({ ok: false as const, reason: "no device here (test)" }) };

test("flashmla start without a GPU says why, runs the CPU reference and the H200 roofline, and exits 0 fast", async () => {
  const t0 = performance.now();
  const r = await runCommand(registerStartCommand, ["start"], NO_GPU);
  const seconds = (performance.now() - t0) / 1000;
  assert.equal(r.code, 0, r.err);
  assert.equal(r.err, "");
  assert.match(r.out, /^No GPU found: no device here \(test\)\./);
  assert.match(r.out, /CPU reference \(float64\) on a small dense case/);
  assert.match(r.out, /b=4 s_q=2 h_q=16 h_kv=1 s_k=1024\/700\/333\/64 causal bf16/);
  assert.match(r.out, /\d+\.\d ms for 147\.7 MFLOP by FlashMLA's formula/);
  assert.match(r.out, /second run of 16 sampled rows alone: identical \(ok\)/);
  assert.match(r.out, /Roofline of the headline cases on the NVIDIA H200 SXM \(measured roofs 767 TFLOPS, 4138 GB\/s; ridge 185\.4 FLOP\/B\)/);
  assert.doesNotMatch(r.out, /BENCH\.md/);
  // FlashMLA's dense-compute: 292 GFLOP in 452 µs, ideal 380.8 µs under 767 TFLOPS: 84.2 % of the roofline.
  assert.match(r.out, /│ kernel +│ GFLOP +│/);
  assert.match(r.out, /dense-compute +│ dense_pipe_bf16 +│ 292\.1 +│ 1243\.6 +│ 234\.8 +│ compute +│ 380\.8 +│ 452 +│ 84\.2 +│ ≥ 646 TFLOPS +│ ≥ 700 TFLOPS/);
  // Every headline case, sparse included, with the kernel that serves it and the cost model's bound
  // (dense-b1 is past the ridge: compute, as flashmla roofline --case dense-b1 says).
  for (const [name, kernel, bound] of [
    ["dense-compute-mtp", "dense_pipe_bf16", "compute"], ["dense-mem-h16", "dense_fast_bf16", "memory"], ["dense-mem-h64", "dense_fast_bf16", "memory"],
    ["dense-b1", "dense_fast_bf16", "compute"], ["dense-uneven", "dense_fast_bf16", "memory"], ["dense-short-h16", "dense_fast_bf16", "memory"],
    ["sparse-v32", "sparse_h128x_bf16", "compute"], ["sparse-v32-h64", "sparse_m64_bf16", "compute"], ["sparse-h16", "sparse_h16x_bf16", "memory"],
  ]) {
    assert.match(r.out, new RegExp(`│ ${name} +│ ${kernel} +│[^\n]*│ ${bound} +│`), `${name} is served by ${kernel}, ${bound}-bound`);
  }
  assert.doesNotMatch(r.out, /\x1b\[/);
  assert.ok(seconds < 20, `${seconds} s`);
});

test("flashmla start --json without a GPU prints the CPU results and the roofline as data", async () => {
  const r = await runCommand(registerStartCommand, ["start", "--json"], NO_GPU);
  assert.equal(r.code, 0);
  const j = JSON.parse(r.out);
  assert.equal(j.gpu, null);
  assert.equal(j.noGpuReason, "no device here (test)");
  assert.equal(j.cpuReference.ok, true);
  assert.equal(j.cpuReference.rowsRechecked, 16);
  assert.ok(j.cpuReference.timeMs > 0);
  const dc = j.roofline.cases.find((c: { case: string }) => c.case === "dense-compute");
  assert.equal(dc.flop, 292_057_776_128);
  assert.equal(dc.kernel, "dense_pipe_bf16");
  assert.equal(dc.anchor.timeUs, 452);
  assert.equal(dc.anchorPercentOfRoofline.toFixed(1), "84.2");
});

test("flashmla start --help names the headline cases; a bad option exits 2", async () => {
  const help = await runCommand(registerStartCommand, ["start", "--help"], NO_GPU);
  assert.equal(help.code, 0);
  assert.match(help.out, /dense-compute, dense-compute-mtp, dense-mem-h16/);
  const bad = await runCommand(registerStartCommand, ["start", "--iters", "1"], NO_GPU);
  assert.equal(bad.code, 2);
});
