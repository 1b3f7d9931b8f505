import { test } from "node:test";
import assert from "node:assert/strict";
import { BENCH_CASES } from "../../../bench/cases.js";
import { BENCH_KERNELS, DEFAULT_BENCH_KERNEL, DEFAULT_BENCH_KERNELS, benchKernelUnsupported, defaultBenchKernel } from "../../../src/bench/benchKernels.js";

test("BENCH_KERNELS holds the dense kernels and sparse_v1 and sparse_crossover, each under its own name", () => {
  for (const [name, k] of Object.entries(BENCH_KERNELS)) assert.equal(k.name, name);
  assert.deepEqual(BENCH_KERNELS.sparse_v1.kinds, ["sparse"]);
  assert.equal(BENCH_KERNELS.sparse_v1.crossover, false);
  assert.equal(BENCH_KERNELS.sparse_v1.headCounts, undefined);
  assert.deepEqual(BENCH_KERNELS.sparse_crossover.kinds, ["sparse"]);
  assert.equal(BENCH_KERNELS.sparse_crossover.crossover, true);
  assert.deepEqual(BENCH_KERNELS.sparse_crossover.headCounts, [128]);
  assert.ok(Object.values(BENCH_KERNELS).filter((k) => k.kinds.includes("dense")).length >= 3);
});

test("defaultBenchKernel() gives dense and sparse cases the API's own choice", () => {
  assert.equal(DEFAULT_BENCH_KERNEL, "dense");
  assert.deepEqual(DEFAULT_BENCH_KERNELS, { dense: "dense", sparse: "sparse" });
  assert.equal(defaultBenchKernel("dense").name, "dense");
  assert.equal(defaultBenchKernel("sparse").name, "sparse");
  // What `flashmla bench --all` runs: every case with a kernel that can run it.
  for (const c of BENCH_CASES) assert.equal(benchKernelUnsupported(defaultBenchKernel(c.kind), c), undefined, c.name);
});

test("benchKernelUnsupported() says why a kernel cannot run a case, naming the one to try", () => {
  const h16 = { kind: "sparse" as const, h_q: 16 };
  assert.equal(
    benchKernelUnsupported(BENCH_KERNELS.dense_seesaw, h16),
    "not available: kernel dense_seesaw does not do sparse decode (try --kernel sparse)",
  );
  assert.equal(
    benchKernelUnsupported(BENCH_KERNELS.sparse_v1, { kind: "dense", h_q: 128 }),
    "not available: kernel sparse_v1 does not do dense decode (try --kernel dense)",
  );
  assert.match(benchKernelUnsupported(BENCH_KERNELS.sparse_crossover, h16)!, /^not available: kernel sparse_crossover runs h_q = 128 only \(a cluster of the two 64-head CTAs of a query token\); this case has h_q = 16$/);
  assert.equal(benchKernelUnsupported(BENCH_KERNELS.sparse_crossover, { kind: "sparse", h_q: 128 }), undefined);
  assert.equal(benchKernelUnsupported(BENCH_KERNELS.sparse_v1, h16), undefined);
  const crossoverCases = BENCH_CASES.filter((c) => benchKernelUnsupported(BENCH_KERNELS.sparse_crossover, c) === undefined).map((c) => c.name);
  assert.deepEqual(crossoverCases, ["sparse-v32", "sparse-long-topk"]);
});

test("benchKernelUnsupported() refuses dense_h16 past 16 query rows per KV head, with the count", () => {
  assert.equal(benchKernelUnsupported(BENCH_KERNELS.dense_h16, { kind: "dense", h_q: 16, s_q: 1, h_kv: 1 }), undefined);
  assert.equal(benchKernelUnsupported(BENCH_KERNELS.dense_h16, { kind: "dense", h_q: 64, s_q: 1, h_kv: 4 }), undefined);
  assert.equal(
    benchKernelUnsupported(BENCH_KERNELS.dense_h16, { kind: "dense", h_q: 16, s_q: 4, h_kv: 1 }),
    "not available: kernel dense_h16 runs at most 16 query rows per KV head (s_q · h_q / h_kv); this case has 64",
  );
});
