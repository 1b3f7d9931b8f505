import { test } from "node:test";
import assert from "node:assert/strict";
import { benchCaseKernel } from "../../../src/bench/benchCaseKernel.js";
import { BENCH_CASES, benchCaseByName, benchCaseShape, caseBound, meanCacheLength } from "../../../src/bench/cases.js";
import { HEADLINE_CASES } from "../../../src/bench/headlineCases.js";
import { GPUS, gpuCeilings } from "../../../src/roofline/gpus.js";
import { mlaCost } from "../../../src/roofline/mlaCost.js";
import { achievedGbPerS, achievedTflops, roofline } from "../../../src/roofline/roofline.js";

const NAMED = [
  "dense-compute",
  "dense-compute-mtp",
  "dense-compute-d512",
  "dense-mem-h16",
  "dense-mem-h64",
  "dense-b1",
  "dense-uneven",
  "dense-short-h16",
  "sparse-v32",
  "sparse-v32-h64",
  "sparse-long-topk",
  "sparse-h16",
];

test("BENCH_CASES holds every named case once, and the 16-case dense-grid", () => {
  const names = BENCH_CASES.map((c) => c.name);
  assert.equal(new Set(names).size, names.length);
  assert.deepEqual(BENCH_CASES.filter((c) => c.group === undefined).map((c) => c.name).sort(), [...NAMED].sort());
  const grid = BENCH_CASES.filter((c) => c.group === "dense-grid");
  assert.equal(grid.length, 16);
  assert.deepEqual([...new Set(grid.map((c) => c.s_q))], [1, 2]);
  assert.deepEqual([...new Set(grid.map((c) => meanCacheLength(c.seqlens)))], [4096, 8192, 16384, 32768]);
  assert.equal(grid.filter((c) => c.causal).length, 8);
  assert.ok(grid.every((c) => c.seqlens.kind === "varlen" && c.b === 128 && c.h_q === 128));
  // Only s_q = 2 grid points carry targets.
  assert.ok(grid.every((c) => (c.s_q === 2) === (c.firstBar?.value === 711 && c.goal?.value === 750)));
});

test("BENCH_CASES holds the six long-context cases of issue 37 as the long group, FlashMLA's time their first bar", () => {
  const long = BENCH_CASES.filter((c) => c.group === "long");
  const shapes = long.map((c) => [c.name, c.b, c.h_q, c.h_kv, c.s_q, c.causal, c.seqlens.kind === "fixed" ? c.seqlens.s_k : c.seqlens.kind]);
  assert.deepEqual(shapes, [
    ["long-b16-16k", 16, 128, 1, 1, false, 16384],
    ["long-b16-64k", 16, 128, 1, 1, false, 65536],
    ["long-b16-128k", 16, 128, 1, 1, false, 131072],
    ["long-b1-128k", 1, 128, 1, 1, false, 131072],
    ["long-b4-128k-mtp", 4, 128, 1, 2, true, 131072],
    ["long-b32-64k-h16", 32, 16, 1, 1, false, 65536],
  ]);
  // FlashMLA 9241ae3, timed in the same device call as ours (the table).
  assert.deepEqual(long.map((c) => c.anchor?.timeUs), [125.0, 440.9, 867.4, 84.1, 409.4, 562.7]);
  for (const c of long) {
    assert.equal(c.kind, "dense", c.name);
    assert.deepEqual(c.firstBar, { metric: "timeUs", op: "<=", value: c.anchor?.timeUs, text: `≤ ${c.anchor?.timeUs} µs (FlashMLA)` }, c.name);
    assert.ok((c.note ?? "") !== "" && !(c.note ?? "").includes("\n"), c.name);
  }
  assert.deepEqual([...new Set(BENCH_CASES.flatMap((c) => (c.group !== undefined ? [c.group] : [])))], ["dense-grid", "long", "v4"]);
});

test("the long cases' notes agree with the cost model on the measured H200 roofs", () => {
  const measured = gpuCeilings(GPUS.h200).find((r) => r.label === "measured");
  assert.ok(measured !== undefined);
  const at = (name: string) => roofline(mlaCost(benchCaseShape(benchCaseByName(name)!)), measured);
  // 128 heads at s_q = 1: ≈ 240 FLOP/B, just past the ridge, the KV read ≈ 0.77 of the MMA time.
  for (const name of ["long-b16-16k", "long-b16-64k", "long-b16-128k", "long-b1-128k"]) {
    const r = at(name);
    assert.ok(Math.abs(r.intensity / 240 - 1) < 0.01 && r.intensity > measured.ridge && r.intensity < 1.35 * measured.ridge, name);
    assert.ok(Math.abs(r.memoryUs / r.computeUs - 0.77) < 0.01, name);
  }
  assert.equal(Math.round(at("long-b1-128k").computeUs), 48);
  assert.equal(Math.round((131072 * 1152) / (measured.gbPerS * 1e3)), 36);
  assert.equal(Math.round(at("long-b4-128k-mtp").intensity / 10) * 10, 480);
  assert.equal(Math.round(at("long-b32-64k-h16").intensity), 30);
  assert.equal(at("long-b32-64k-h16").bound, "memory");
  assert.match(benchCaseByName("long-b1-128k")!.note ?? "", /^latency/);
});

test("benchCaseByName() finds cases by exact name only", () => {
  assert.equal(benchCaseByName("dense-compute")?.b, 128);
  assert.equal(benchCaseByName("dense-grid-sq2-16k-causal")?.causal, true);
  assert.equal(benchCaseByName("dense-grid"), undefined);
  assert.equal(benchCaseByName("Dense-Compute"), undefined);
});

test("BENCH_CASES shapes are the benchmark's shapes", () => {
  const c = (name: string) => {
    const x = benchCaseByName(name);
    assert.ok(x !== undefined, name);
    return x;
  };
  assert.deepEqual(c("dense-uneven").seqlens, { kind: "list", values: [4641, 45118, 1730, 1696] });
  assert.equal(c("dense-uneven").b, 4); // one listed length per request
  assert.equal(meanCacheLength(c("dense-uneven").seqlens), 13296.25);
  assert.equal(c("dense-compute-mtp").causal, true);
  assert.deepEqual(c("dense-b1").seqlens, { kind: "fixed", s_k: 32768 });
  assert.equal(c("sparse-long-topk").topk, 32768);
  for (const s of BENCH_CASES.filter((x) => x.kind === "sparse")) {
    assert.equal(s.h_kv, 1, s.name);
    assert.ok(s.model1?.extra === undefined || s.model1.extra.topk <= s.model1.extra.s_k, s.name);
    assert.ok(s.topk !== undefined && s.topk % 64 === 0 && s.topk <= meanCacheLength(s.seqlens), s.name);
  }
  for (const d of BENCH_CASES.filter((x) => x.kind === "dense")) assert.equal(d.topk, undefined, d.name);
});

test("every FlashMLA anchor figure comes out of the formulas within rounding", () => {
  let checked = 0;
  for (const c of BENCH_CASES) {
    const a = c.anchor;
    if (a === undefined) continue;
    const cost = mlaCost(benchCaseShape(c));
    for (const f of [a.figure, ...(a.extra ?? [])]) {
      const got = f.unit === "TFLOPS" ? achievedTflops(cost.flop, a.timeUs) : achievedGbPerS(cost.bytes, a.timeUs);
      // Times and figures are both printed to 3–4 digits, so 0.5 % covers the rounding of both.
      assert.ok(Math.abs(got / f.value - 1) < 0.005, `${c.name}: ${got} vs ${f.value} ${f.unit}`);
      checked++;
    }
  }
  // 11 for the named cases, 6 + long-b1-128k's GB/s for the long group, FlashMLA's six MODEL1 cases.
  assert.equal(checked, 24);
});

test("dense-compute-d512 is dense-compute's shape at DeepSeek-V4's d_qk 512: its cost counts 512 dims, the _d512 pipe kernel serves it, no bar", () => {
  const c = benchCaseByName("dense-compute-d512")!;
  const base = benchCaseByName("dense-compute")!;
  const shapeOf = ({ kind, b, h_q, h_kv, s_q, seqlens, causal }: typeof c) => ({ kind, b, h_q, h_kv, s_q, seqlens, causal });
  assert.deepEqual(shapeOf(c), shapeOf(base));
  assert.deepEqual([c.anchor, c.firstBar, c.goal, c.group], [undefined, undefined, undefined, undefined], "no FlashMLA time, no bar");
  assert.equal(c.d_qk, 512);
  assert.equal(base.d_qk, undefined, "576 by default");
  assert.deepEqual(benchCaseShape(c), { kind: "dense", b: 128, h_q: 128, h_kv: 1, s_q: 1, s_k: 8192, d_qk: 512 });
  const cost = mlaCost(benchCaseShape(c));
  assert.equal(cost.flop, 128 * 128 * (2 * 512 * 8192 + 2 * 8192 * 512));
  assert.equal(cost.bytes, 128 * (128 * 512 * 2 + 8192 * 512 * 2 + 128 * 512 * 2));
  // The note's figures: 6 % fewer FLOPs and 11 % fewer cache bytes than dense-compute.
  const v3 = mlaCost(benchCaseShape(base));
  assert.equal(Math.round(100 * (1 - cost.flop / v3.flop)), 6);
  assert.equal(Math.round(100 * (1 - 512 / 576)), 11);
  assert.match(c.note ?? "", /6 % fewer FLOPs, 11 % fewer cache bytes/);
  assert.equal(benchCaseKernel(c), "dense_pipe_bf16_d512");
  assert.ok(!HEADLINE_CASES.includes(c.name), "not in the default set");
});

test("caseBound() is the cost model's answer on the measured H200 roofs: dense-b1 is past the ridge, so compute", () => {
  const measured = gpuCeilings(GPUS.h200).find((r) => r.label === "measured");
  assert.ok(measured !== undefined);
  const memory = new Set(["dense-mem-h16", "dense-mem-h64", "dense-uneven", "dense-short-h16", "sparse-h16", "long-b32-64k-h16", "v4-cfg1", "v4-cfg3", "v4-h16", "v4-h32"]);
  for (const c of BENCH_CASES) {
    assert.equal(caseBound(c, measured), memory.has(c.name) ? "memory" : "compute", c.name);
    assert.equal(caseBound(c, measured), roofline(mlaCost(benchCaseShape(c)), measured).bound, c.name);
  }
  // One request of 128 heads: ≈ 240 FLOP/B against a ridge of ≈ 185, with floors of ≈ 12 µs of MMA and
  // ≈ 9 µs of KV read (32768 · 1152 B); what really binds it, latency, is in its note.
  const b1 = roofline(mlaCost(benchCaseShape(benchCaseByName("dense-b1")!)), measured);
  assert.ok(b1.intensity > measured.ridge && b1.intensity < 1.5 * measured.ridge);
  assert.equal(Math.round(b1.computeUs), 12);
  assert.equal(Math.round((32768 * 1152) / (measured.gbPerS * 1e3)), 9);
  assert.match(benchCaseByName("dense-b1")!.note ?? "", /^latency/);
});

test("benchCaseShape() gives sparse cases the expected distinct-token count of random indices", () => {
  const s = benchCaseShape(benchCaseByName("sparse-v32")!);
  assert.equal(s.kind, "sparse");
  assert.equal(s.kind === "sparse" ? s.nUnique : 0, 507_904);
  // topk = s_k: every cache token is read exactly once.
  const long = benchCaseShape(benchCaseByName("sparse-long-topk")!);
  assert.equal(long.kind === "sparse" ? long.nUnique : 0, 128 * 32768);
});

test("sparse-h16's first bar is half of FlashMLA's 64-head time", () => {
  const h16 = benchCaseByName("sparse-h16");
  const h64 = benchCaseByName("sparse-v32-h64");
  assert.equal(h16?.firstBar?.metric, "timeUs");
  assert.equal(h16?.firstBar?.value, (h64?.anchor?.timeUs ?? 0) / 2);
  assert.equal(h16?.goal?.metric, "cacheReadGbPerS");
});

test("BENCH_CASES holds DeepSeek-V4's cases as the v4 group: FlashMLA's six MODEL1 cases, then 16 and 32 heads", () => {
  const v4 = BENCH_CASES.filter((c) => c.group === "v4");
  const main = (c: (typeof v4)[number]) => [c.b, c.h_q, c.s_q, meanCacheLength(c.seqlens), c.topk, c.model1?.pageBlockSize];
  const extra = (c: (typeof v4)[number]) => {
    const e = c.model1?.extra;
    return e === undefined ? "none" : [e.s_k, e.topk, e.pageBlockSize, e.topkLengthRandom === true ? "U[0, topk]" : "-"];
  };
  // ../shared/design/DEEPSEEK-V4.md: h_q; main cache s_k, topk, page; extra cache s_k, topk, page; extra_topk_length.
  assert.deepEqual(v4.map((c) => [c.name, ...main(c), extra(c)]), [
    ["v4-cfg1", 128, 64, 2, 16384, 128, 256, [16384, 512, 64, "-"]],
    ["v4-cfg2", 128, 128, 2, 16384, 128, 256, [16384, 1024, 64, "-"]],
    ["v4-cfg3", 128, 64, 2, 16384, 128, 256, [16384, 1024, 2, "U[0, topk]"]],
    ["v4-cfg4", 128, 128, 2, 16384, 128, 256, [16384, 1024, 2, "U[0, topk]"]],
    ["v4-peak-h64", 148, 64, 2, 32768, 16384, 64, "none"],
    ["v4-peak-h128", 148, 128, 2, 32768, 16384, 64, "none"],
    ["v4-h16", 128, 16, 2, 16384, 128, 256, [16384, 1024, 64, "-"]],
    ["v4-h32", 128, 32, 2, 16384, 128, 256, [16384, 1024, 64, "-"]],
  ]);
  for (const c of v4) {
    assert.equal(c.kind, "sparse", c.name);
    assert.equal(c.h_kv, 1, c.name);
    assert.equal(c.causal, false, c.name);
    // FlashMLA's MODEL1 data: lengths max(trunc(N(s_k, s_k/2)), s_q) per cache, softmax scale 512^-0.55, sinks on.
    assert.equal(c.seqlens.kind, "varlen", c.name);
    assert.equal(c.model1?.softmaxScale, 512 ** -0.55, c.name);
    assert.equal(c.model1?.attnSink, true, c.name);
    assert.ok((c.note ?? "") !== "" && !(c.note ?? "").includes("\n"), c.name);
  }
  // FlashMLA 9241ae3 on the H200 (DEEPSEEK-V4.md): the first bar is its time, the goal 1.15× faster.
  const six = v4.slice(0, 6);
  assert.deepEqual(six.map((c) => c.anchor?.timeUs), [90.9, 205.8, 121.7, 152.3, 2056.6, 2687.2]);
  for (const c of six) {
    const t = c.anchor!.timeUs;
    assert.deepEqual(c.firstBar, { metric: "timeUs", op: "<=", value: t, text: `≤ ${t} µs (FlashMLA)` }, c.name);
    assert.deepEqual(c.goal, { metric: "timeUs", op: "<=", value: t / 1.15, text: `≤ ${(t / 1.15).toFixed(1)} µs (1.15× FlashMLA)` }, c.name);
  }
  // docs/deepseek-v4.md §3's column "1.15 × FlashMLA".
  assert.deepEqual(six.map((c) => c.goal?.text.match(/≤ ([\d.]+) µs/)?.[1]), ["79.0", "179.0", "105.8", "132.4", "1788.3", "2336.7"]);
  // 16 and 32 heads: FlashMLA cannot run them, so no anchor and no first bar; 16 heads carry the cache-read goal.
  const [h16, h32] = v4.slice(6);
  for (const c of [h16, h32]) {
    assert.equal(c.anchor, undefined, c.name);
    assert.equal(c.firstBar, undefined, c.name);
    assert.match(c.note ?? "", /otherwise v4-cfg2's shape/, c.name);
    assert.match(c.note ?? "", new RegExp(`tensor parallel ${c.h_q === 16 ? 8 : 4} \\(${c.h_q} of 128 heads\\)`), c.name);
  }
  assert.deepEqual(h16.goal, { metric: "cacheReadGbPerS", op: ">=", value: 3500, text: "≥ 3500 GB/s of FP8 cache read" });
  assert.equal(h32.goal, undefined);
});

test("the v4 cases' notes agree with the cost model on the measured H200 roofs", () => {
  const measured = gpuCeilings(GPUS.h200).find((r) => r.label === "measured");
  assert.ok(measured !== undefined);
  for (const c of BENCH_CASES.filter((x) => x.group === "v4")) {
    const r = roofline(mlaCost(benchCaseShape(c)), measured);
    const note = c.note ?? "";
    // "≈ 168 FLOP/B", "compute-bound" or "memory-bound", "floors ≈ 28 µs of MMA, ≈ 31 µs of reads" (in either order).
    assert.equal(Number(/≈ (\d+) FLOP\/B/.exec(note)?.[1]), Math.round(r.intensity), c.name);
    assert.match(note, new RegExp(`${r.bound}-bound`), c.name);
    assert.equal(Number(/≈ (\d+) µs of MMA/.exec(note)?.[1]), Math.round(r.computeUs), c.name);
    assert.equal(Number(/≈ (\d+) µs of reads/.exec(note)?.[1]), Math.round(r.memoryUs), c.name);
  }
  // v4-h16's 167 MB of FP8 cache: 3500 GB/s of it is ≤ 47.8 µs.
  const h16 = mlaCost(benchCaseShape(benchCaseByName("v4-h16")!));
  assert.equal(Math.round(h16.cacheBytes! / 1e6), 167);
  assert.equal((h16.cacheBytes! / 3500e3).toFixed(1), "47.8");
});

test("benchCaseShape() gives a v4 case the MODEL1 form: both caches' lengths, a random valid length at its mean", () => {
  assert.deepEqual(benchCaseShape(benchCaseByName("v4-cfg1")!), {
    kind: "sparse", format: "model1", b: 128, h_q: 64, s_q: 2, topk: 128, s_k: 16384, extra: { s_k: 16384, topk: 512 },
  });
  assert.deepEqual(benchCaseShape(benchCaseByName("v4-cfg4")!), {
    kind: "sparse", format: "model1", b: 128, h_q: 128, s_q: 2, topk: 128, s_k: 16384, extra: { s_k: 16384, topk: 1024, meanTopkLength: 512 },
  });
  assert.deepEqual(benchCaseShape(benchCaseByName("v4-peak-h128")!), { kind: "sparse", format: "model1", b: 148, h_q: 128, s_q: 2, topk: 16384, s_k: 32768 });
  // v4-cfg3 counts as v4-cfg1 at the mean valid length: the same FLOPs and bytes (docs/deepseek-v4.md §3).
  assert.deepEqual(mlaCost(benchCaseShape(benchCaseByName("v4-cfg3")!)), mlaCost(benchCaseShape(benchCaseByName("v4-cfg1")!)));
});
