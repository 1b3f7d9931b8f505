import { test } from "node:test";
import assert from "node:assert/strict";
import { runRoofline as run } from "./runCommand.js";

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
  assert.match(r.out, /anchor: FlashMLA 280 µs, 4337 GB\/s on an H200 with our harness; FlashMLA README, H800: 3000 GB\/s/);
  assert.match(r.out, /^bound +memory \(intensity below the measured ridge, 185\.4 FLOP\/byte\)$/m);
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
    [["--case", "nope"], /^flashmla roofline: unknown case 'nope' \(try flashmla bench --list\)\n$/],
    [["--case", "dense-b2"], /^flashmla roofline: unknown case 'dense-b2'; did you mean dense-b1\? \(try flashmla bench --list\)\n$/],
    [["--case", "dense-grid"], /^flashmla roofline: case 'dense-grid' is a grid of 16 cases; name one, e\.g\. dense-grid-sq1-4k \(try flashmla bench --list\)\n$/],
    [[...DENSE_COMPUTE, "--time", "-3"], /option '--time <us>' argument '-3' is invalid/],
    [[...DENSE_COMPUTE, "--bogus"], /^flashmla roofline: unknown option '--bogus' \(run flashmla roofline --help\)\n$/],
  ];
  for (const [args, message] of cases) {
    const r = await run(args);
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.err, message, args.join(" "));
    // One line and a hint, never the whole help.
    assert.equal(r.err.split("\n").length, 2, r.err);
    assert.doesNotMatch(r.err, /Examples:|Options:/);
    assert.equal(r.out, "", args.join(" "));
  }
});

test("flashmla roofline --json reports a bad command line as JSON on stdout, exit 2", async () => {
  for (const args of [["--case", "nope", "--json"], ["--json", "--b", "128", "--hq", "128"], ["--json", "--bogus"], ["--json", "--b", "x"]]) {
    const r = await run(args);
    assert.equal(r.code, 2, args.join(" "));
    const j = JSON.parse(r.out);
    assert.equal(j.error.kind, "usage", args.join(" "));
    assert.equal(j.error.command, "flashmla roofline");
    assert.equal(j.error.exitCode, 2);
    assert.equal(typeof j.error.message, "string");
    assert.match(r.err, /^flashmla roofline: /);
  }
  const unknown = JSON.parse((await run(["--case", "nope", "--json"])).out);
  assert.deepEqual(unknown.error, { kind: "usage", message: "unknown case 'nope'", command: "flashmla roofline", hint: "try flashmla bench --list", exitCode: 2 });
});

test("flashmla roofline --case sparse-v32 --fp8 --topk 2048 is the case itself: its figures stay, no 'differs' note", async () => {
  const plain = JSON.parse((await run(["--case", "sparse-v32", "--json"])).out);
  for (const extra of [["--fp8", "--topk", "2048"], ["--fp8"], ["--b", "128", "--hq", "128", "--sq", "2", "--sk", "32k", "--fp8", "--topk", "2048"]]) {
    const r = await run(["--case", "sparse-v32", ...extra, "--json"]);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.equal(j.case?.name, "sparse-v32", extra.join(" "));
    assert.equal(j.measured.timeUs, 364, extra.join(" "));
    assert.deepEqual(j.cost, plain.cost, extra.join(" "));
    assert.doesNotMatch(j.notes.join(" "), /differs/, extra.join(" "));
  }
  const text = await run(["--case", "sparse-v32", "--fp8", "--topk", "2048"]);
  assert.match(text.out, /anchor: FlashMLA 364 µs, 401 TFLOPS/);
  assert.match(text.out, /targets: first bar ≥ 401 TFLOPS/);
  assert.doesNotMatch(text.out, /differs/);
  // The same for a dense case restated: --sk 8k is dense-compute's 8192.
  const dense = JSON.parse((await run(["--case", "dense-compute", "--sk", "8k", "--b", "128", "--json"])).out);
  assert.equal(dense.case?.name, "dense-compute");
  // A real change still drops the case's figures.
  const other = JSON.parse((await run(["--case", "sparse-v32", "--topk", "1024", "--json"])).out);
  assert.equal(other.case, undefined);
  assert.match(other.notes.join(" "), /the shape differs from case sparse-v32/);
});

test("flashmla roofline --case dense-b1 is compute-bound by the cost model, and says latency binds in practice", async () => {
  const j = JSON.parse((await run(["--case", "dense-b1", "--json"])).out);
  assert.equal(j.bound, "compute");
  assert.equal(j.ceilings.find((c: { label: string }) => c.label === "measured").bound, "compute");
  assert.match(j.case.note, /^latency/);
  const text = (await run(["--case", "dense-b1"])).out;
  assert.match(text, /^bound +compute \(intensity at or past the measured ridge, 185\.4 FLOP\/byte\)$/m);
  assert.match(text, /note: latency: one long request/);
});

test("flashmla roofline uses this machine's measured ceilings from the cache when it holds the GPU model", async () => {
  const rec = { gpuName: "NVIDIA H200", driverVersion: "580.159.04", measuredAt: "2026-12-02T17:39:06.119Z", gemmTflops: 876, readGbPerS: 4579, copyGbPerS: 3909 } as const;
  const cache = { all: () => [rec as never] };
  const r = await run(["--case", "dense-compute"], { cache });
  assert.match(r.out, /measured +│ 876 +│ 4579 +│ 191\.3 /);
  assert.match(r.out, /measured roofs: flashmla ceilings on this machine's NVIDIA H200 \(driver 580\.159\.04, 2026-12-02\)/);
  assert.match(r.out, /of the measured 876 TFLOPS/);
  // Another model's record is not used for an H200 analysis; --gpu h100 with it is.
  const h100 = { all: () => [{ ...rec, gpuName: "NVIDIA H100 80GB HBM3" } as never] };
  assert.match((await run(["--case", "dense-compute"], { cache: h100 })).out, /measured +│ 767 +│ 4138 /);
  assert.match((await run([...DENSE_COMPUTE, "--gpu", "h100"], { cache: h100 })).out, /measured +│ 876 +│ 4579 /);
  // --tflops replaces the cached compute roof and keeps its bandwidth.
  assert.match((await run([...DENSE_COMPUTE, "--tflops", "800"], { cache })).out, /measured +│ 800 +│ 4579 /);
});
