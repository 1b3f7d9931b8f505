import { test } from "node:test";
import assert from "node:assert/strict";
import { Command } from "commander";
import { registerRooflineCommand, type RooflineCommandDeps } from "../../../src/cli/commands/roofline.js";

class ExitCalled extends Error {
  constructor(readonly code: number) {
    super(`exit(${code})`);
  }
}

interface Run {
  /** Exit status: 0 when the action returned without calling exit. */
  code: number;
  out: string;
  err: string;
}

/** Runs `flashmla roofline <args>` in process, with output captured and exit turned into a throw. */
async function run(args: string[], deps: Omit<RooflineCommandDeps, "exit"> = {}, colors = false): Promise<Run> {
  let out = "";
  let err = "";
  const program = new Command("flashmla")
    .exitOverride()
    .configureOutput({
      writeOut: (s) => void (out += s),
      writeErr: (s) => void (err += s),
      getOutHasColors: () => colors,
      getErrHasColors: () => false,
    });
  registerRooflineCommand(program, {
    ...deps,
    exit: (code: number): never => {
      throw new ExitCalled(code);
    },
  });
  try {
    await program.parseAsync(["roofline", ...args], { from: "user" });
    return { code: 0, out, err };
  } catch (e) {
    if (e instanceof ExitCalled) return { code: e.code, out, err };
    throw e;
  }
}

const DENSE_COMPUTE = ["--b", "128", "--hq", "128", "--sq", "1", "--sk", "8192"];

test("flashmla roofline prints FLOPs, bytes, intensity, ridges, bound and ideal time", async () => {
  const r = await run(DENSE_COMPUTE);
  assert.equal(r.code, 0);
  assert.equal(r.err, "");
  assert.match(r.out, /FLOPs +292,057,776,128/);
  assert.match(r.out, /bytes +1,243,611,136/);
  assert.match(r.out, /intensity +234\.85 FLOP\/byte/);
  assert.match(r.out, /datasheet .*989 .*4800 .*206\.1 .*compute .*295\.2/);
  assert.match(r.out, /measured .*767 .*4138 .*185\.4 .*compute .*380\.8/);
  assert.doesNotMatch(r.out, /cycle budget/);
  assert.doesNotMatch(r.out, /\x1b\[/);
});

test("flashmla roofline --case dense-compute shows FlashMLA's 452 µs as 646 TFLOPS and the targets", async () => {
  const r = await run(["--case", "dense-compute"]);
  assert.equal(r.code, 0);
  assert.match(r.out, /292,057,776,128/);
  assert.match(r.out, /452\.0 µs = 646\.1 TFLOPS/);
  assert.match(r.out, /84\.2 % of the measured 767 TFLOPS/);
  assert.match(r.out, /first bar ≥ 646 TFLOPS \(FlashMLA\); goal ≥ 700 TFLOPS/);
});

test("flashmla roofline --case dense-mem-h16 shows FlashMLA's 280 µs as ≈ 4330 GB/s, memory-bound", async () => {
  const r = await run(["--case", "dense-mem-h16"]);
  assert.equal(r.code, 0);
  assert.match(r.out, /measured .*memory .*293\.0/);
  assert.match(r.out, /280\.0 µs = \d+\.\d TFLOPS, 4330 GB\/s/);
  assert.match(r.out, /FlashMLA 280 µs, 4337 GB\/s/);
});

test("flashmla roofline --fp8 --topk prints the cycle budget with and without crossover", async () => {
  const r = await run(["--b", "128", "--hq", "128", "--sq", "2", "--sk", "32k", "--fp8", "--topk", "2048", "--gpu", "h800"]);
  assert.equal(r.code, 0);
  assert.match(r.out, /FLOPs +146,028,888,064/);
  assert.match(r.out, /507,904 distinct/);
  assert.match(r.out, /→ 34\.0 MMA clk/);
  // The seed on its throttled H800: 50 clk dequant-bound at 865·34/50 ≈ 588 TFLOPS, 25 clk with crossover.
  assert.match(r.out, /seed \(Guide throughputs\) +│ no +│ 34\.0 +│ 50\.0 +│ dequant +│ 588 /);
  assert.match(r.out, /seed \(Guide throughputs\) +│ yes \(÷2\) +│ 34\.0 +│ 25\.0 +│ MMA +│ 865 /);
  assert.match(r.out, /H200 measured, one warpgroup +│ no +│ 34\.0 +│ 15\.1 /);
  assert.match(r.out, /H200 measured, whole SM +│ no +│ 34\.0 +│ 13\.2 /);
  assert.match(r.out, /practical .*865 .*3350 .*258\.2/);
});

test("flashmla roofline --json prints the report as data", async () => {
  const r = await run(["--case", "sparse-v32", "--json"]);
  assert.equal(r.code, 0);
  const j = JSON.parse(r.out);
  assert.equal(j.case.name, "sparse-v32");
  assert.equal(j.cost.flop, 146_028_888_064);
  assert.equal(j.cost.bytes, 404_488_192);
  assert.deepEqual(j.ceilings.map((c: { label: string }) => c.label), ["datasheet", "measured"]);
  assert.equal(Math.round(j.measured.tflops), 401);
  assert.equal(j.cycleBudget.rows.length, 6);
  assert.equal(j.cycleBudget.rows[0].dequantCycles, 50);
});

test("flashmla roofline options override a case's shape and then drop its anchor", async () => {
  const r = await run(["--case", "dense-compute", "--hq", "64", "--json"]);
  assert.equal(r.code, 0);
  const j = JSON.parse(r.out);
  assert.equal(j.shape.h_q, 64);
  assert.equal(j.shape.s_k, 8192);
  assert.equal(j.case, undefined);
  assert.equal(j.measured, undefined);
  assert.match(j.notes.join(" "), /differs from case dense-compute/);
});

test("flashmla roofline --time judges a measured time against the case's targets", async () => {
  const r = await run(["--case", "dense-compute", "--time", "400"]);
  assert.equal(r.code, 0);
  assert.match(r.out, /measured \(--time\): 400\.0 µs = 730\.1 TFLOPS/);
  assert.match(r.out, /first bar ≥ 646 TFLOPS \(FlashMLA\) \[met\]; goal ≥ 700 TFLOPS \[met\]/);
  const slow = await run(["--case", "dense-compute", "--time", "460"]);
  assert.match(slow.out, /\[not met\]; goal ≥ 700 TFLOPS \[not met\]/);
});

test("flashmla roofline --gpu detect uses the injected detector, else falls back to h200 with a note", async () => {
  const h800 = await run([...DENSE_COMPUTE, "--gpu", "detect"], { detectGpuName: async () => "NVIDIA H800" });
  assert.match(h800.out, /on NVIDIA H800 SXM/);
  assert.doesNotMatch(h800.out, /note:/);
  const none = await run([...DENSE_COMPUTE, "--gpu", "detect"]);
  assert.equal(none.code, 0);
  assert.match(none.out, /on NVIDIA H200 SXM/);
  assert.match(none.out, /note: no GPU detected: using h200 figures/);
  const broken = await run([...DENSE_COMPUTE, "--gpu", "detect"], {
    detectGpuName: () => {
      throw new Error("libcuda.so.1 not found");
    },
  });
  assert.equal(broken.code, 0);
  assert.match(broken.out, /GPU detection failed \(libcuda\.so\.1 not found\)/);
  const other = await run([...DENSE_COMPUTE, "--gpu", "detect"], { detectGpuName: () => "NVIDIA A100-SXM4-80GB" });
  assert.match(other.out, /no figures for 'NVIDIA A100-SXM4-80GB': using h200 figures/);
});

test("flashmla roofline --tflops and --gbps replace the measured roofs", async () => {
  const r = await run([...DENSE_COMPUTE, "--tflops", "795", "--gbps", "4259"]);
  assert.match(r.out, /measured .*795 .*4259 .*186\.7 /);
});

test("flashmla roofline colours its output only when the output has colours", async () => {
  const plain = await run(["--case", "sparse-v32"], {}, false);
  const coloured = await run(["--case", "sparse-v32"], {}, true);
  assert.doesNotMatch(plain.out, /\x1b\[/);
  assert.match(coloured.out, /\x1b\[/);
});

test("flashmla roofline --help lists the options and examples and exits 0", async () => {
  const r = await run(["--help"]);
  assert.equal(r.code, 0);
  assert.match(r.out, /--topk <n>/);
  assert.match(r.out, /Examples:/);
  assert.match(r.out, /flashmla roofline --case dense-compute/);
});

test("flashmla roofline exits 2 with a message for a bad command line", async () => {
  const cases: Array<[string[], RegExp]> = [
    [["--b", "abc", "--hq", "128", "--sk", "8192"], /option '--b <n>' argument 'abc' is invalid/],
    [["--b", "0", "--hq", "128", "--sk", "8192"], /expected a positive integer/],
    [["--b", "1.5", "--hq", "128", "--sk", "8192"], /expected a positive integer/],
    [[...DENSE_COMPUTE, "--gpu", "a100"], /Allowed choices are h200, h100, h800, detect/],
    [["--b", "128", "--hq", "128"], /required option '--sk <n>' not specified/],
    [["--hq", "128", "--sk", "8192"], /required option '--b <n>' not specified/],
    [[...DENSE_COMPUTE, "--fp8"], /--fp8 needs --topk/],
    [[...DENSE_COMPUTE, "--topk", "64"], /--topk applies to sparse decode/],
    [["--b", "1", "--hq", "64", "--sk", "100", "--fp8", "--topk", "128"], /--topk 128 exceeds the cache length --sk 100/],
    [["--b", "1", "--hq", "6", "--hkv", "4", "--sk", "100"], /--hkv 4 must divide --hq 6/],
    [["--case", "nope"], /unknown case 'nope'; known cases: dense-compute,/],
    [["--case", "dense-grid"], /grid of 16 cases; name one: dense-grid-sq1-4k,/],
    [[...DENSE_COMPUTE, "--time", "-3"], /option '--time <us>' argument '-3' is invalid/],
    [[...DENSE_COMPUTE, "--bogus"], /unknown option '--bogus'/],
  ];
  for (const [args, message] of cases) {
    const r = await run(args);
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.err, message, args.join(" "));
    assert.equal(r.out, "", args.join(" "));
  }
});
