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
    [["bench", "--case", "nope"], /unknown case 'nope'; known cases: dense-compute,/],
    [["bench", "--case", "dense-b1", "--all"], /give --case or --all, not both/],
    [["bench", "--iters", "5"], /option '--iters <n>' argument '5' is invalid\. expected an integer >= 20/],
    [["bench", "--kernel", "dense_v9"], /Allowed choices are dense, dense_combine, dense_seesaw, dense_seesaw_fast, dense_seesaw_mc, dense_seesaw_pipe, dense_h16, dense_v1, sparse, sparse_v1, sparse_crossover, sparse_v2, sparse_crossover_v2, sparse_v3, sparse_crossover_v3, sparse_h16, sparse_h16x\./],
    [["bench", "--seed", "-1"], /error: /],
    [["bench", "--bogus"], /unknown option '--bogus'/],
  ];
  for (const [args, message] of cases) {
    const r = await runCommand(registerBenchCommand, args, { probeGpu });
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.err, message, args.join(" "));
    assert.equal(r.out, "", args.join(" "));
  }
  assert.equal(probed, false);
});

test("flashmla bench accepts case lists, commas, the dense-grid family and the sparse kernels before needing the GPU", async () => {
  for (const args of [
    ["--case", "dense-b1", "dense-uneven"], ["--case", "dense-b1,dense-uneven"], ["--case", "dense-grid"], ["--all"],
    ["--case", "sparse-v32", "--kernel", "sparse_crossover"], ["--all", "--kernel", "sparse_v1"], ["--case", "sparse-h16,dense-b1"],
  ]) {
    const r = await runCommand(registerBenchCommand, ["bench", ...args], NO_GPU);
    // Past the argument checks: the missing GPU is what stops it.
    assert.equal(r.code, 1, args.join(" "));
    assert.match(r.err, /no GPU/);
  }
});

test("flashmla bench --list names every case and kernel and needs no GPU", async () => {
  const r = await runCommand(registerBenchCommand, ["bench", "--list"], NO_GPU);
  assert.equal(r.code, 0);
  assert.match(r.out, /dense-compute +dense +b=128 h_q=128 s_q=1 s_k 8192 +\(compute\) \[headline\]/);
  assert.match(r.out, /dense-grid-sq2-32k-causal/);
  assert.match(r.out, /sparse-v32 +sparse/);
  assert.match(r.out, /dense_seesaw +dense +flashMlaWithKvcache, kernel "seesaw"/);
  assert.match(r.out, /dense_v1 +dense +flashMlaWithKvcache, kernel "v1"/);
  assert.match(r.out, /sparse-h16 +sparse +b=128 h_q=16 s_q=2 s_k 32768 topk 2048 +\(memory\)/);
  assert.match(r.out, /Kernels \(--kernel; default dense for dense cases, sparse for sparse ones\):/);
  assert.match(r.out, /sparse_v1 +sparse +sparseDecodeGpu: /);
  assert.match(r.out, /sparse_crossover +sparse +sparseDecodeGpu with crossover: .*\[h_q = 128 only\]/);
});

test("flashmla bench --help shows the options, examples and exit codes", async () => {
  const r = await runCommand(registerBenchCommand, ["bench", "--help"], NO_GPU);
  assert.equal(r.code, 0);
  for (const s of [
    "--case <names...>", "--all", "--json [file]", "--svg [file]", "--kernel <name>", "--iters <n>", "Examples:", "flashmla bench --all --svg",
    "flashmla bench --case sparse-v32 --kernel sparse_crossover", "(default: dense for\n                     dense cases, sparse for sparse ones)",
    "Without --kernel, dense cases run dense\n(flashMlaWithKvcache's own choice of kernel) and sparse ones sparse.", "Exit status: 0 ok, 1 a check failed or no GPU, 2 bad command line",
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
