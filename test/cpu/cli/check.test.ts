import { test } from "node:test";
import assert from "node:assert/strict";
import pc from "picocolors";
import type { CheckCaseResult } from "../../../src/testing/runCheckCase.js";
import { checkGrid } from "../../../src/testing/checkGrid.js";
import { checkText, registerCheckCommand } from "../../../src/cli/commands/check.js";
import { runCommand } from "./runCommand.js";

const NO_GPU = { probeGpu: () => ({ ok: false as const, reason: "no device here (test)" }) };

test("flashmla check without a GPU exits 1 with a clear 'no GPU' message", async () => {
  const r = await runCommand(registerCheckCommand, ["check"], NO_GPU);
  assert.equal(r.code, 1);
  assert.equal(r.out, "");
  assert.match(r.err, /^flashmla check: no GPU: no device here \(test\)/);
});

test("flashmla check exits 2 for a bad grid, seed, dtype or any --kernel, before looking for a GPU", async () => {
  let probed = false;
  const probeGpu = () => {
    probed = true;
    return { ok: false as const, reason: "x" };
  };
  for (const [args, message] of [
    [["--grid", "huge"], /Allowed choices are small, flashmla, sparse \(run flashmla check --help\)\n$/],
    [["--seed", "x"], /expected a non-negative integer/],
    [["--dtype", "fp8"], /Allowed choices are bf16, fp16/],
    // The kernel is flashMlaWithKvcache's choice for each case: there is nothing to pick.
    [["--kernel", "dense_fast_bf16"], /unknown option '--kernel'/],
    [["--grid", "sparse", "--dtype", "fp16"], /^flashmla check: the sparse grid is bf16 only: FlashMLA's sparse decode takes bf16 q \(run flashmla check --help\)\n$/],
  ] as const) {
    const r = await runCommand(registerCheckCommand, ["check", ...args], { probeGpu });
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.err, message, args.join(" "));
    assert.equal(r.out, "");
  }
  assert.equal(probed, false);
});

test("flashmla check --grid sparse and --grid flashmla pass the command line and stop at the missing GPU (exit 1)", async () => {
  for (const args of [["--grid", "sparse"], ["--grid", "sparse", "--dtype", "bf16"], ["--grid", "flashmla"], ["--grid", "flashmla", "--dtype", "fp16"]]) {
    const r = await runCommand(registerCheckCommand, ["check", ...args], NO_GPU);
    assert.equal(r.code, 1, args.join(" "));
    assert.match(r.err, /^flashmla check: no GPU: no device here \(test\)/);
  }
});

test("flashmla check --help explains the data, tolerances and exit codes", async () => {
  const r = await runCommand(registerCheckCommand, ["check", "--help"], NO_GPU);
  assert.equal(r.code, 0);
  assert.match(r.out, /--grid <name>/);
  assert.match(r.out, /flashmla check --grid flashmla --dtype fp16/);
  assert.match(r.out, /flashmla check --grid sparse\n/);
  assert.match(r.out, /Every case runs flashMlaWithKvcache, which picks the kernel for its shape \(the table names it\)/);
  assert.doesNotMatch(r.out, /--kernel/);
  assert.match(r.out, /0xff poison in every token no index\npoints at/);
  assert.match(r.out, /Exit status: 0 all passed, 1 a case failed or no GPU, 2 bad command line/);
});

function result(i: number, outAbs: number, ok = true): CheckCaseResult {
  const spec = checkGrid("small")[i];
  const cmp = (maxAbsError: number) => ({ ok, count: 512, mismatches: ok ? 0 : 2, maxAbsError, maxRelError: 0.1, cosDiff: 1e-6, message: ok ? "fine" : "out: 2 of 512 elements outside tolerance" });
  return {
    spec,
    kernel: "dense_fast_bf16",
    seqlens: { min: 20, max: 20, zeros: 0 },
    ok,
    check: { ok, rows: 4, out: cmp(outAbs), lse: cmp(1e-7), badElements: 0, message: ok ? "ok" : "out: 2 of 512 elements outside tolerance" },
  };
}

test("checkText() lists each case with its worst errors and ends with the pass/fail count", () => {
  const text = checkText([result(0, 2.5e-4), result(1, 1e-3, false)], { grid: "small", gpu: "NVIDIA H200", total: 2, verbose: false, colors: pc.createColors(false) });
  assert.match(text, /flashmla check: flashMlaWithKvcache on NVIDIA H200, grid small/);
  assert.match(text, /b1-sq1-h1\/1-sk20 +│ dense_fast_bf16 +│ 20 +│ 4 +│ 2\.50e-4 +│ 1\.00e-6 +│ 1\.00e-7 +│ - +│ pass/);
  assert.match(text, /b2-sq2-h3\/1-sk140v-causal .*│ FAIL/);
  assert.match(text, /FAIL b2-sq2-h3\/1-sk140v-causal: out: 2 of 512 elements outside tolerance/);
  assert.match(text, /worst out abs error 1\.00e-3 \(b2-sq2-h3\/1-sk140v-causal\)/);
  assert.match(text, /2 of 2 cases run: 1 passed, 1 failed/);
});

test("checkText() shortens a large grid to its failures and worst passes unless verbose", () => {
  const many = Array.from({ length: 50 }, (_, i) => result(i % 11, (i + 1) * 1e-6));
  const short = checkText(many, { grid: "flashmla", gpu: "G", total: 50, verbose: false, colors: pc.createColors(false) });
  assert.equal((short.match(/│ pass/g) ?? []).length, 5);
  assert.match(short, /45 more passing cases not listed; --verbose lists all/);
  assert.match(short, /50 of 50 cases run: 50 passed, 0 failed/);
  const full = checkText(many, { grid: "flashmla", gpu: "G", total: 50, verbose: true, colors: pc.createColors(false) });
  assert.equal((full.match(/│ pass/g) ?? []).length, 50);
});

test("checkText() lists sparse cases, with no fp32 GPU comparison", () => {
  const spec = checkGrid("sparse")[0];
  const cmp = { ok: true, count: 512, mismatches: 0, maxAbsError: 3e-4, maxRelError: 0.01, cosDiff: 2e-7, message: "ok" };
  const r: CheckCaseResult = { spec, kernel: "sparse_h16x_bf16", seqlens: { min: 300, max: 700, zeros: 0 }, ok: true, check: { ok: true, rows: 32, out: cmp, lse: { ...cmp, maxAbsError: 1e-7 }, badElements: 0, tokensCopied: 200, message: "ok" } };
  const text = checkText([r], { grid: "sparse", gpu: "NVIDIA H200", total: 1, verbose: false, colors: pc.createColors(false) });
  assert.match(text, /flashmla check: flashMlaWithKvcache on NVIDIA H200, grid sparse/);
  assert.match(text, /sparse-b4-sq1-h8-sk512v-topk64-pbs2-sink +│ sparse_h16x_bf16 +│ 300\.\.700 +│ 32 +│ 3\.00e-4 +│ 2\.00e-7 +│ 1\.00e-7 +│ - +│ pass/);
  assert.match(text, /1 of 1 cases run: 1 passed, 0 failed/);
});

test("checkText() reports cases that were never run", () => {
  const text = checkText([result(0, 1e-4)], { grid: "small", gpu: "G", total: 11, verbose: false, colors: pc.createColors(false) });
  assert.match(text, /1 of 11 cases run: 1 passed, 0 failed, 10 not run/);
});
