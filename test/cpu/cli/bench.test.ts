import { test } from "node:test";
import assert from "node:assert/strict";
import { FAILURE_EXIT_CODE, registerBenchCommand } from "../../../src/cli/commands/bench.js";
import { registerCeilingsCommand } from "../../../src/cli/commands/ceilings.js";
import { runCommand } from "./runCommand.js";

const NO_GPU = { probeGpu: () => ({ ok: false as const, reason: "no device here (test)" }) };

test("flashmla bench without a GPU exits 1 with a clear 'no GPU' message and prints nothing on stdout", async () => {
  const r = await runCommand(registerBenchCommand, ["bench"], NO_GPU);
  assert.equal(r.code, FAILURE_EXIT_CODE);
  assert.equal(r.out, "");
  assert.match(r.err, /^flashmla bench: no GPU: no device here \(test\)\n/);
  assert.match(r.err, /flashmla roofline --case NAME/);
});

test("flashmla bench checks its command line before looking for a GPU (exit 2)", async () => {
  let probed = false;
  const probeGpu = () => {
    probed = true;
    return { ok: false as const, reason: "x" };
  };
  const cases: Array<[string[], RegExp]> = [
    [["bench", "--case", "nope"], /^flashmla bench: unknown case 'nope' \(try flashmla bench --list\)\n$/],
    [["bench", "--case", "dense-b1,sparse-v23"], /^flashmla bench: unknown case 'sparse-v23'; did you mean sparse-v32\? \(try flashmla bench --list\)\n$/],
    [["bench", "--case", "dense-b1", "--all"], /give --case or --all, not both/],
    [["bench", "--iters", "5"], /option '--iters <n>' argument '5' is invalid\. expected an integer >= 20/],
    // The kernel is flashMlaWithKvcache's choice: there is nothing to pick.
    [["bench", "--kernel", "dense_fast_bf16"], /unknown option '--kernel'/],
    [["bench", "--seed", "-1"], /^flashmla bench: option '--seed <n>' argument '-1' is invalid\. expected a non-negative integer \(run flashmla bench --help\)\n$/],
    [["bench", "--bogus"], /^flashmla bench: unknown option '--bogus' \(run flashmla bench --help\)\n$/],
    [["bench", "--cas", "dense-b1"], /^flashmla bench: unknown option '--cas'; did you mean --case\? \(run flashmla bench --help\)\n$/],
  ];
  for (const [args, message] of cases) {
    const r = await runCommand(registerBenchCommand, args, { probeGpu });
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.err, message, args.join(" "));
    // One line and a hint, not the 35-line help.
    assert.equal(r.err.split("\n").length, 2, r.err);
    assert.equal(r.out, "", args.join(" "));
  }
  assert.equal(probed, false);
});

test("flashmla bench accepts case lists, commas, the dense-grid, long and v4 families and the sparse cases before needing the GPU", async () => {
  for (const args of [
    ["--case", "dense-b1", "dense-uneven"], ["--case", "dense-b1,dense-uneven"], ["--case", "dense-grid"], ["--case", "long"], ["--all"],
    ["--case", "sparse-v32"], ["--case", "sparse-h16,dense-b1"], ["--case", "v4"], ["--case", "v4-cfg1,v4-h16"],
  ]) {
    const r = await runCommand(registerBenchCommand, ["bench", ...args], NO_GPU);
    // Past the argument checks: the missing GPU is what stops it.
    assert.equal(r.code, 1, args.join(" "));
    assert.match(r.err, /no GPU/);
  }
});

test("flashmla bench --list names every case with the kernel that serves it and needs no GPU", async () => {
  const r = await runCommand(registerBenchCommand, ["bench", "--list"], NO_GPU);
  assert.equal(r.code, 0);
  assert.match(r.out, /^Cases, each with the kernel flashMlaWithKvcache runs for it and the roof that binds it on an H200:$/m);
  // The cost model's bound, as flashmla roofline --case dense-b1 gives it.
  assert.match(r.out, /dense-b1 +dense +dense_fast_bf16 +b=1 h_q=128 s_q=1 s_k 32768 +\(compute\) \[headline\]/);
  assert.match(r.out, /sparse-v32-h64 +sparse +sparse_m64_bf16 +.*\(compute\) \[headline\]/);
  assert.match(r.out, /dense-compute +dense +dense_pipe_bf16 +b=128 h_q=128 s_q=1 s_k 8192 +\(compute\) \[headline\]/);
  // DeepSeek-V4's head on the same shape: its _d512 kernel, not a headline case.
  assert.match(r.out, /dense-compute-d512 +dense +dense_pipe_bf16_d512 +b=128 h_q=128 s_q=1 s_k 8192 d_qk 512 +\(compute\)$/m);
  assert.match(r.out, /dense-b1 +dense +dense_fast_bf16 +b=1 h_q=128/);
  assert.match(r.out, /dense-mem-h16 +dense +dense_fast_bf16 /);
  assert.match(r.out, /dense-grid-sq2-32k-causal +dense +dense_pipe_bf16 /);
  assert.match(r.out, /sparse-v32 +sparse +sparse_h128x_bf16 /);
  assert.match(r.out, /sparse-v32-h64 +sparse +sparse_m64_bf16 /);
  assert.match(r.out, /sparse-h16 +sparse +sparse_h16x_bf16 +b=128 h_q=16 s_q=2 s_k 32768 topk 2048 +\(memory\)/);
  // The long group (issue 37): all six, fixed lengths, none a headline case.
  for (const line of [
    /long-b16-16k +dense +\S+ +b=16 h_q=128 s_q=1 s_k 16384 +\(compute\)$/m,
    /long-b16-64k +dense +\S+ +b=16 h_q=128 s_q=1 s_k 65536 +\(compute\)$/m,
    /long-b16-128k +dense +\S+ +b=16 h_q=128 s_q=1 s_k 131072 +\(compute\)$/m,
    /long-b1-128k +dense +\S+ +b=1 h_q=128 s_q=1 s_k 131072 +\(compute\)$/m,
    /long-b4-128k-mtp +dense +\S+ +b=4 h_q=128 s_q=2 s_k 131072 causal +\(compute\)$/m,
    /long-b32-64k-h16 +dense +\S+ +b=32 h_q=16 s_q=1 s_k 65536 +\(memory\)$/m,
  ]) {
    assert.match(r.out, line);
  }
  // The v4 group (issue 34): the MODEL1 kernels, h128x at 128 heads and m64 elsewhere; the bound is the cost model's.
  for (const line of [
    /v4-cfg1 +sparse +sparse_m64_model1_extra +b=128 h_q=64 s_q=2 s_k ~16384 varlen topk 128 \+ extra s_k ~16384 topk 512 +\(memory\)$/m,
    /v4-cfg2 +sparse +sparse_h128x_model1_extra +b=128 h_q=128 s_q=2 s_k ~16384 varlen topk 128 \+ extra s_k ~16384 topk 1024 +\(compute\)$/m,
    /v4-cfg3 +sparse +sparse_m64_model1_extra +b=128 h_q=64 s_q=2 .* topk 1024 \(valid U\[0, 1024\]\) +\(memory\)$/m,
    /v4-cfg4 +sparse +sparse_h128x_model1_extra +b=128 h_q=128 s_q=2 .* topk 1024 \(valid U\[0, 1024\]\) +\(compute\)$/m,
    /v4-peak-h64 +sparse +sparse_m64_model1 +b=148 h_q=64 s_q=2 s_k ~32768 varlen topk 16384 +\(compute\)$/m,
    /v4-peak-h128 +sparse +sparse_h128x_model1 +b=148 h_q=128 s_q=2 s_k ~32768 varlen topk 16384 +\(compute\)$/m,
    /v4-h16 +sparse +sparse_h16x_model1_extra +b=128 h_q=16 .* +\(memory\)$/m,
    /v4-h32 +sparse +sparse_m64_model1_extra +b=128 h_q=32 .* +\(memory\)$/m,
  ]) {
    assert.match(r.out, line);
  }
  // Every case has a kernel now: no "[no kernel]" marks and no note about them.
  assert.doesNotMatch(r.out, /no kernel|none/);
  assert.doesNotMatch(r.out, /--kernel|seesaw|sparse_v1|crossover_v/);
});

test("flashmla bench --help shows the options, examples and exit codes", async () => {
  const r = await runCommand(registerBenchCommand, ["bench", "--help"], NO_GPU);
  assert.equal(r.code, 0);
  for (const s of [
    "--case <names...>", "--all", "--json [file]", "--svg [file]", "--iters <n>", "Examples:", "flashmla bench --all --svg",
    "Every case runs the kernel\nflashMlaWithKvcache chooses for its shape (--list names it)", "Exit status: 0 ok, 1 a check failed or no GPU, 2 bad command line",
    "dense-b1", "sparse-long-topk", 'or { "error": … } on a failure',
  ]) {
    assert.ok(r.out.includes(s), s);
  }
});

test("flashmla ceilings without a GPU exits 1 with a 'no GPU' message; --help exits 0", async () => {
  const r = await runCommand(registerCeilingsCommand, ["ceilings"], NO_GPU);
  assert.equal(r.code, 1);
  assert.match(r.err, /^flashmla ceilings: no GPU: no device here \(test\)/);
  const help = await runCommand(registerCeilingsCommand, ["ceilings", "--help"], NO_GPU);
  assert.equal(help.code, 0);
  assert.match(help.out, /Examples:\n +This GPU's ceilings/);
  const bad = await runCommand(registerCeilingsCommand, ["ceilings", "--iters", "3"], NO_GPU);
  assert.equal(bad.code, 2);
});

test("the GPU commands colour their messages only when the output has colours", async () => {
  const plain = await runCommand(registerBenchCommand, ["bench"], NO_GPU, false);
  const coloured = await runCommand(registerBenchCommand, ["bench"], NO_GPU, true);
  assert.doesNotMatch(plain.err, /\x1b\[/);
  assert.match(coloured.err, /\x1b\[31mflashmla bench: no GPU\x1b\[39m/);
});
