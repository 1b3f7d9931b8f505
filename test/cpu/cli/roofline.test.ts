import { test } from "node:test";
import assert from "node:assert/strict";
import { BENCH_CASES, benchCaseShape } from "../../../src/bench/cases.js";
import { mlaCost } from "../../../src/roofline/mlaCost.js";
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

test("flashmla roofline --case dense-compute-d512 counts DeepSeek-V4's 512 dims, also with the shape restated or changed", async () => {
  const r = await run(["--case", "dense-compute-d512"]);
  assert.equal(r.code, 0);
  assert.match(r.out, /^shape +b=128 h_q=128 h_kv=1 s_q=1 s̄_k=8192 d_qk=512 +case dense-compute-d512$/m);
  // 128 · 128 · 8192 · 2 · (512 + 512) FLOPs; 128 · (128 · 512 + 8192 · 512 + 128 · 512) · 2 bytes.
  assert.match(r.out, /274,877,906,944/);
  assert.match(r.out, /1,107,296,256/);
  const restated = await run(["--case", "dense-compute-d512", "--sk", "8192"]);
  assert.match(restated.out, /case dense-compute-d512$/m);
  assert.match(restated.out, /274,877,906,944/);
  const h64 = await run(["--case", "dense-compute-d512", "--hq", "64"]);
  assert.match(h64.out, /^shape +b=128 h_q=64 h_kv=1 s_q=1 s̄_k=8192 d_qk=512$/m);
  assert.match(h64.out, /137,438,953,472/);
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
    [[...DENSE_COMPUTE, "--extra-topk", "64"], /--extra-topk, --extra-sk and --extra-topk-length apply to sparse decode over the FP8 cache: add --fp8/],
    [[...DENSE_COMPUTE, "--format", "v4"], /argument 'v4' is invalid\. Allowed choices are v32, model1/],
    [["--b", "1", "--hq", "64", "--sk", "1k", "--format", "model1"], /--fp8 needs --topk/],
    [["--b", "1", "--hq", "64", "--sk", "1k", "--fp8", "--topk", "64", "--extra-sk", "512"], /--extra-sk and --extra-topk-length describe a second cache: add --extra-topk <n>/],
    [["--b", "1", "--hq", "64", "--sk", "1k", "--fp8", "--topk", "64", "--extra-topk", "2048"], /--extra-topk 2048 exceeds the second cache's length 1024 \(--extra-sk\)/],
    [["--b", "1", "--hq", "64", "--sk", "4k", "--fp8", "--topk", "64", "--extra-topk", "512", "--extra-topk-length", "600"], /--extra-topk-length 600 exceeds --extra-topk 512/],
    [["--case", "v4-cfg1", "--extra-topk-length", "-1"], /option '--extra-topk-length <x>' argument '-1' is invalid\. expected a number >= 0/],
    [["--case", "v4"], /^flashmla roofline: case 'v4' is a grid of 8 cases; name one, e\.g\. v4-cfg1 \(try flashmla bench --list\)\n$/],
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

test("flashmla roofline --case v4-cfg1 prints the MODEL1 counts, its bound, FlashMLA's time and the MODEL1 cycle budget", async () => {
  const r = await run(["--case", "v4-cfg1"]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^MLA decode roofline: sparse FP8, DeepSeek-V4 MODEL1 cache \(d_qk = d_v = 512\) on NVIDIA H200 SXM/);
  assert.match(r.out, /^shape +b=128 h_q=64 h_kv=1 s_q=2 topk=128 s_k=16384 \+ extra topk=512 s_k=16384 +case v4-cfg1$/m);
  // docs/deepseek-v4.md §3: 21.5 GFLOP, 128 MB, 168 FLOP/B, floors 28 µs of MMA and 31 µs of reads.
  assert.match(r.out, /^FLOPs +21,474,836,480 +\(21\.47 GFLOP\)$/m);
  assert.match(r.out, /^bytes +127,966,208 +\(0\.128 GB\)$/m);
  assert.match(r.out, /^tokens +163,840 attended, 161,664 distinct read \(expected for random indices over both caches, 584 B each\)$/m);
  assert.match(r.out, /^intensity +167\.82 FLOP\/byte$/m);
  assert.match(r.out, /^bound +memory \(intensity below the measured ridge, 185\.4 FLOP\/byte\)$/m);
  assert.match(r.out, /measured .*767 .*4138 .*185\.4 .*memory .*28\.0 .*30\.9 .*30\.9/);
  assert.match(r.out, /FlashMLA on H200 \(anchor\): 90\.9 µs = 236\.2 TFLOPS/);
  assert.match(r.out, /targets: first bar ≤ 90\.9 µs \(FlashMLA\); goal ≤ 79\.0 µs \(1\.15× FlashMLA\)/);
  assert.match(r.out, /note: V4-Flash, .*memory-bound/);
  // 64·(512 + 512)·2 / 4096 = 32 MMA clk; 448 quantized dims: the seed's 43.75 clk, 11.6 at the H200's whole-SM rate.
  assert.match(r.out, /→ 32\.0 MMA clk/);
  assert.match(r.out, /seed \(Guide throughputs\) +│ no +│ 32\.0 +│ 43\.8 +│ dequant /);
  assert.match(r.out, /H200 measured, whole SM +│ no +│ 32\.0 +│ 11\.6 +│ MMA /);
});

test("flashmla roofline --case gives every v4 case the cost model's counts and bound", async () => {
  for (const c of BENCH_CASES.filter((x) => x.group === "v4")) {
    const r = await run(["--case", c.name, "--json"]);
    assert.equal(r.code, 0, `${c.name}: ${r.err}`);
    const j = JSON.parse(r.out);
    assert.equal(j.case.name, c.name);
    assert.deepEqual(j.case.model1, c.model1, c.name);
    assert.deepEqual(j.shape, benchCaseShape(c), c.name);
    assert.deepEqual(j.cost, mlaCost(benchCaseShape(c)), c.name);
    assert.equal(j.bound, ["v4-cfg1", "v4-cfg3", "v4-h16", "v4-h32"].includes(c.name) ? "memory" : "compute", c.name);
    // 64 heads per CTA · (512 + 512) · 2 FLOP per token at ≈ 4096 FLOP/clk; the seed dequantizes 448 dims in 43.75 clk.
    assert.equal(j.cycleBudget.mmaCycles.toFixed(1), "32.0", c.name);
    assert.equal(j.cycleBudget.rows[0].dequantCycles, 43.75, c.name);
    assert.equal(j.measured?.timeUs, c.anchor?.timeUs, c.name);
  }
});

test("flashmla roofline builds MODEL1 shapes from flags, keeps a restated v4 case and its format under overrides", async () => {
  const cfg1 = JSON.parse((await run(["--case", "v4-cfg1", "--json"])).out);
  // The same call from flags, and the case restated by them: its figures stay.
  const flags = ["--b", "128", "--hq", "64", "--sq", "2", "--sk", "16k", "--format", "model1", "--topk", "128", "--extra-topk", "512"];
  const built = JSON.parse((await run([...flags, "--json"])).out);
  assert.deepEqual(built.cost, cfg1.cost);
  assert.equal(built.case, undefined);
  const restated = JSON.parse((await run(["--case", "v4-cfg1", ...flags, "--json"])).out);
  assert.equal(restated.case?.name, "v4-cfg1");
  assert.equal(restated.measured.timeUs, 90.9);
  assert.doesNotMatch(restated.notes.join(" "), /differs/);
  // v4-cfg3 from flags: the second cache's mean valid length.
  const cfg3 = JSON.parse((await run(["--case", "v4-cfg3", "--json"])).out);
  const cfg3Flags = ["--b", "128", "--hq", "64", "--sq", "2", "--sk", "16k", "--format", "model1", "--topk", "128", "--extra-topk", "1024", "--extra-topk-length", "512"];
  assert.deepEqual(JSON.parse((await run([...cfg3Flags, "--json"])).out).cost, cfg3.cost);
  // An override keeps the case's format and second cache, and drops its anchor.
  const h64 = JSON.parse((await run(["--case", "v4-cfg2", "--hq", "64", "--json"])).out);
  assert.deepEqual(h64.shape, { kind: "sparse", format: "model1", b: 128, h_q: 64, s_q: 2, topk: 128, s_k: 16384, extra: { s_k: 16384, topk: 1024 } });
  assert.equal(h64.case, undefined);
  assert.match(h64.notes.join(" "), /the shape differs from case v4-cfg2/);
  // --format v32 turns a v4 case into V3.2's format: a different call.
  const v32 = JSON.parse((await run(["--case", "v4-cfg1", "--format", "v32", "--json"])).out);
  assert.equal(v32.shape.format, undefined);
  assert.equal(v32.case, undefined);
  assert.equal(v32.cost.flop, 2 * 64 * 128 * 2 * 640 * (576 + 512));
  // V3.2 over one cache keeps its old shape: the precomputed N_unique.
  const plain = JSON.parse((await run(["--b", "128", "--hq", "128", "--sq", "2", "--sk", "32k", "--format", "v32", "--topk", "2048", "--json"])).out);
  assert.deepEqual(plain.shape, { kind: "sparse", b: 128, h_q: 128, s_q: 2, topk: 2048, nUnique: 507_904 });
});

test("flashmla roofline --case v4-h16 --time judges the FP8 cache read of 584-byte tokens", async () => {
  // 286,592 distinct tokens · 584 B = 167.4 MB: 3500 GB/s of it is ≤ 47.8 µs.
  assert.match((await run(["--case", "v4-h16", "--time", "47.5"])).out, /goal ≥ 3500 GB\/s of FP8 cache read \[met\]/);
  assert.match((await run(["--case", "v4-h16", "--time", "48"])).out, /goal ≥ 3500 GB\/s of FP8 cache read \[not met\]/);
});
