import { test } from "node:test";
import assert from "node:assert/strict";
import { BENCH_CASES, benchCaseByName } from "../../../src/bench/cases.js";
import { benchCaseSeqlens } from "../../../src/bench/benchCaseSeqlens.js";
import { model1BenchSpec, sparseBenchSpec } from "../../../src/bench/sparseBenchSpec.js";

// The V3.2 cases; the v4 group's MODEL1 cases take model1BenchSpec (makeModel1Case's draws).
const V32_SPARSE = BENCH_CASES.filter((c) => c.kind === "sparse" && c.model1 === undefined);

test("sparseBenchSpec() gives each sparse case FlashMLA's benchmark data: fixed lengths, sink on, no topkLength, pages of 64", () => {
  const sparse = V32_SPARSE;
  assert.deepEqual(sparse.map((c) => c.name), ["sparse-v32", "sparse-v32-h64", "sparse-long-topk", "sparse-h16"]);
  for (const c of sparse) {
    const spec = sparseBenchSpec(c, benchCaseSeqlens(c, 1));
    assert.deepEqual({ ...spec, seqlens: undefined }, { b: 128, s_q: 2, h_q: c.h_q, topk: c.topk, seqlens: undefined, pageBlockSize: 64, withSink: true, withTopkLength: false }, c.name);
    assert.ok(spec.seqlens.every((n) => n === 32768 && n >= spec.topk), c.name);
    assert.equal(spec.invalidFraction, undefined);
    assert.equal(spec.blockPadTokens, undefined);
  }
  assert.throws(() => sparseBenchSpec(benchCaseByName("dense-b1")!, [32768]), /sparseBenchSpec\(\): argument 'c': expected a sparse case with a topk, got dense case dense-b1/);
  assert.throws(() => sparseBenchSpec(benchCaseByName("sparse-h16")!, [1]), /expected 128 lengths/);
  const v4 = benchCaseByName("v4-cfg1")!;
  assert.throws(() => sparseBenchSpec(v4, benchCaseSeqlens(v4, 1)), /sparseBenchSpec\(\): argument 'c': expected a V3.2 sparse case, got MODEL1 case v4-cfg1/);
});

test("four input sets of every sparse case fit well within an H200's 141 GB (each set is the whole 2.7 GB cache)", () => {
  for (const c of V32_SPARSE) {
    const spec = sparseBenchSpec(c, benchCaseSeqlens(c, 1));
    // As makeGpuSparseCase allocates: q bf16, the FP8 cache with one spare block, the indices.
    const numBlocks = spec.seqlens.reduce((a, n) => a + Math.ceil(n / 64), 0) + 1;
    const setBytes = spec.b * spec.s_q * spec.h_q * 576 * 2 + numBlocks * 64 * 656 + spec.b * spec.s_q * spec.topk * 4;
    assert.ok(setBytes > 2.7e9 && setBytes < 2.9e9, `${c.name}: ${setBytes} B`);
    // runBenchCase keeps sets within 60 % of the free memory.
    assert.ok(4 * setBytes < 0.6 * 141e9, c.name);
    // Token ids stay 32-bit.
    assert.ok(numBlocks * 64 < 2 ** 31);
  }
});

test("model1BenchSpec() refuses what is not a MODEL1 case, and a list of lengths it cannot draw per cache", () => {
  assert.throws(() => model1BenchSpec(benchCaseByName("sparse-v32")!), /model1BenchSpec\(\): argument 'c': expected a MODEL1 sparse case with a topk, got sparse case sparse-v32/);
  assert.throws(() => model1BenchSpec(benchCaseByName("dense-b1")!), /got dense case dense-b1/);
  const v4 = benchCaseByName("v4-h16")!;
  assert.throws(() => model1BenchSpec({ ...v4, seqlens: { kind: "list", values: Array(128).fill(100) } }), /argument 'c.seqlens': expected fixed or varlen lengths/);
  assert.deepEqual(model1BenchSpec({ ...v4, seqlens: { kind: "fixed", s_k: 4096 } }).varlen, false);
  assert.equal(model1BenchSpec(v4).extra?.topkLengthRandom, undefined);
  assert.equal(model1BenchSpec(benchCaseByName("v4-cfg4")!).extra?.topkLengthRandom, true);
  assert.equal(model1BenchSpec(benchCaseByName("v4-peak-h64")!).extra, undefined);
});
