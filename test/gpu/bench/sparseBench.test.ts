import { test } from "node:test";
import assert from "node:assert/strict";
import { benchCaseByName } from "../../../src/bench/cases.js";
import { checkGrid } from "../../../src/testing/checkGrid.js";
import { checkSparseCase } from "../../../src/testing/checkSparseCase.js";
import { countAttended, makeGpuSparseCase, SPARSE_FILL_CHUNK_TOKENS, type SparseCaseSpec } from "../../../src/testing/gpuSparseCase.js";
import { runBenchCase } from "../../../src/bench/runBenchCase.js";
import { runCheckCase } from "../../../src/testing/runCheckCase.js";
import { flashMlaWithKvcache } from "../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { D_QK, FP8_TOKEN_BYTES, dequantizeKvTokenV32 } from "../../../src/numeric/kvCacheFp8.js";
import { expectedUniqueTokens } from "../../../src/roofline/mlaCost.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { describeGpu } from "../../helpers/gpu.js";

/** FLASHMLA_SPARSE_GRID=quick: every 12th case of the sparse grid plus its corner cases. */
const QUICK = process.env.FLASHMLA_SPARSE_GRID === "quick";
const ROOFS = { tflops: 767, gbPerS: 4138 };

/** The whole cache buffer under a case's (possibly padded) kCache view, on the host. */
function cacheBytes(kCache: { buffer?: { sizeBytes: number; copyToHost(dst: ArrayBufferView): void } }): Uint8Array {
  const bytes = new Uint8Array(kCache.buffer!.sizeBytes);
  kCache.buffer!.copyToHost(bytes);
  return bytes;
}

describeGpu("sparse benchmark harness on the GPU", (device) => {
  test("makeGpuSparseCase() quantizes exactly the tokens an index entry reads and leaves 0xff everywhere else", () => {
    const stream = Stream.create(device.ordinal);
    const spec: SparseCaseSpec = { b: 3, s_q: 2, h_q: 16, topk: 100, seqlens: [300, 0, 90], pageBlockSize: 61, withSink: true, withTopkLength: true, invalidFraction: 0.1, blockPadTokens: 1 };
    const gc = makeGpuSparseCase(spec, { seed: 11, stream });
    try {
      const rowsPerBlock = 62;
      assert.deepEqual(gc.kCache.shape, [gc.numBlocks, 61, 1, FP8_TOKEN_BYTES]);
      assert.equal(gc.kCache.strides[0], rowsPerBlock * FP8_TOKEN_BYTES);
      const numSlots = gc.numBlocks * 61;
      const read = new Set<number>();
      for (let i = 0; i < 3; i++) {
        for (let j = 0; j < 2; j++) {
          for (let k = 0; k < gc.topkLengthHost![i]; k++) {
            const id = gc.indicesHost[(i * 2 + j) * 100 + k];
            if (id >= 0) read.add(id);
          }
        }
      }
      assert.equal(gc.nUnique, read.size);
      assert.equal(gc.nAttended, countAttended(gc.indicesHost, gc.topkLengthHost, { b: 3, s_q: 2, topk: 100, numSlots }));
      assert.deepEqual(gc.indices.toHost().host, gc.indicesHost);
      assert.deepEqual(gc.topkLength!.toHost().host, gc.topkLengthHost);
      assert.deepEqual(gc.attnSink!.toHost().host, gc.attnSinkHost);

      const bytes = cacheBytes(gc.kCache);
      const token = new Uint16Array(D_QK);
      let sumAbs = 0;
      for (let block = 0; block < gc.numBlocks; block++) {
        for (let row = 0; row < rowsPerBlock; row++) {
          const at = (block * rowsPerBlock + row) * FP8_TOKEN_BYTES;
          const t = bytes.subarray(at, at + FP8_TOKEN_BYTES);
          if (row < 61 && read.has(block * 61 + row)) {
            dequantizeKvTokenV32(bytes, at, token, 0);
            const v = bf16ArrayToF32(token);
            assert.ok(v.every((x) => Number.isFinite(x) && Math.abs(x) <= 1), `token ${block * 61 + row}`);
            for (const x of v) sumAbs += Math.abs(x);
          } else {
            assert.ok(t.every((x) => x === 0xff), `token row ${row} of block ${block} is poison`);
          }
        }
      }
      // N(0,1)/10 has mean |x| ≈ 0.08.
      const meanAbs = sumAbs / (read.size * D_QK);
      assert.ok(meanAbs > 0.06 && meanAbs < 0.1, `mean |kv| ${meanAbs}`);
      const q = bf16ArrayToF32(gc.q.toHost().host as Uint16Array);
      assert.ok(q.every((x) => Math.abs(x) <= 1));
      // N(0,1) clamped to [-1, 1]: P(|z| ≥ 1) ≈ 0.317 of the draws sit on the clamp.
      const clamped = q.filter((x) => Math.abs(x) === 1).length / q.length;
      assert.ok(clamped > 0.29 && clamped < 0.34, `${clamped} clamped`);
      assert.equal(gc.softmaxScale, 576 ** -0.55);
    } finally {
      gc.dispose();
      stream.dispose();
    }
  });

  test("makeGpuSparseCase() fills caches larger than one chunk, the same bytes for the same seed", () => {
    const stream = Stream.create(device.ordinal);
    const spec: SparseCaseSpec = { b: 2, s_q: 1, h_q: 64, topk: 200_000, seqlens: [200_000, 150_000], pageBlockSize: 64, withSink: false, withTopkLength: false };
    const a = makeGpuSparseCase(spec, { seed: 3, stream });
    const b = makeGpuSparseCase(spec, { seed: 3, stream });
    try {
      assert.ok(a.nUnique > SPARSE_FILL_CHUNK_TOKENS, `${a.nUnique} tokens`);
      assert.equal(a.nUnique, 350_000);
      const bytesA = cacheBytes(a.kCache);
      assert.deepEqual(cacheBytes(b.kCache), bytesA);
      // Every token of both requests was written (the spare block stays poison), chunk 2 included.
      let poisoned = 0;
      for (let t = 0; t < a.numBlocks * 64; t++) if (bytesA[t * FP8_TOKEN_BYTES + 512] === 0xff && bytesA[t * FP8_TOKEN_BYTES + 515] === 0xff) poisoned++;
      assert.equal(poisoned, a.numBlocks * 64 - 350_000);
    } finally {
      a.dispose();
      b.dispose();
      stream.dispose();
    }
  });

  test("checkSparseCase() passes flashMlaWithKvcache's output, sampled and whole, and fails it once one element is corrupted", () => {
    const stream = Stream.create(device.ordinal);
    const gc = makeGpuSparseCase({ b: 4, s_q: 2, h_q: 64, topk: 512, seqlens: [2000, 700, 64, 3000], pageBlockSize: 64, withSink: true, withTopkLength: false }, { seed: 5, stream });
    const meta = getMlaMetadata();
    const res = flashMlaWithKvcache({ q: gc.q, kCache: gc.kCache, indices: gc.indices, attnSink: gc.attnSink, isFp8Kvcache: true, headDimV: 512, schedMeta: meta, softmaxScale: gc.softmaxScale, stream });
    try {
      const all = checkSparseCase(gc, res, { stream, gpuReference: true });
      assert.ok(all.ok, all.message);
      assert.equal(all.rows, 4 * 2 * 64);
      assert.equal(all.badElements, 0);
      assert.ok(all.gpu?.out.ok && all.gpu.lse.ok);
      const sample = checkSparseCase(gc, res, { stream, rows: [{ batch: 3, token: 1, head: 7 }, { batch: 1, token: 0, head: 63 }] });
      assert.ok(sample.ok, sample.message);
      assert.ok(sample.tokensCopied > 0 && sample.tokensCopied <= 2 * 512);
      // Element [3, 1, 7, 9] set to 1.0 in bf16 (0x3f80).
      res.out.buffer!.copyFromHost(new Uint16Array([0x3f80]), (((3 * 2 + 1) * 64 + 7) * 512 + 9) * 2);
      const bad = checkSparseCase(gc, res, { stream, rows: [{ batch: 3, token: 1, head: 7 }] });
      assert.equal(bad.ok, false);
      assert.equal(bad.out.mismatches, 1);
    } finally {
      res.out.dispose();
      res.lse.dispose();
      meta.dispose();
      gc.dispose();
      stream.dispose();
    }
  });

  test("runBenchCase() times sparse-h16 (h16x) over >= 4 sets, counts N_unique as drawn and quotes the FP8 cache read", () => {
    const c = benchCaseByName("sparse-h16")!;
    const stream = Stream.create(device.ordinal);
    try {
      const r = runBenchCase(c, { device, stream, roofs: ROOFS, iters: 20 });
      assert.equal(r.status, "ok", r.reason);
      assert.equal(r.kernel, "sparse_h16x_bf16");
      assert.ok(r.sets! >= 4 && r.sets! * r.setBytes! > 2 * device.l2CacheBytes);
      // 128 requests × 32768 tokens × 656 B: each set holds the whole 2.7 GB cache.
      assert.ok(r.setBytes! > 128 * 32768 * 656);
      assert.equal(r.cost.nAttended, 128 * 2 * 2048);
      const expected = expectedUniqueTokens(128, 32768, 2, 2048);
      assert.ok(Math.abs(r.cost.nUnique! - expected) < 0.01 * expected, `N_unique ${r.cost.nUnique} vs ${expected}`);
      assert.equal(r.figures!.headline.metric, "cacheReadGbPerS");
      assert.ok(r.figures!.cacheReadGbPerS! > 100);
      assert.equal(r.cycleBudget?.usefulHeadsPerCta, 16);
      assert.equal(r.check!.ok, true);
      assert.equal(r.check!.badElements, 0);
    } finally {
      stream.dispose();
    }
  });

  test("runBenchCase() times sparse-v32 (h128x) and reports sparse-h16 as not available for a forced h128x", () => {
    const stream = Stream.create(device.ordinal);
    try {
      const r = runBenchCase(benchCaseByName("sparse-v32")!, { device, stream, roofs: ROOFS, iters: 20 });
      assert.equal(r.status, "ok", r.reason);
      assert.equal(r.kernel, "sparse_h128x_bf16");
      assert.equal(r.cycleBudget?.crossover, true);
      assert.ok(r.figures!.tflops > 50, `${r.figures!.tflops} TFLOPS`);
      const na = runBenchCase(benchCaseByName("sparse-h16")!, { overrides: { sparsePlan: "h128x" }, device, stream, roofs: ROOFS, iters: 20 });
      assert.equal(na.status, "not-available");
      assert.match(na.reason!, /"h128x" only at h_q = 128/);
    } finally {
      stream.dispose();
    }
  });

  test("the sparse check grid passes with the API's plans and, on its h_q = 128 cases, with m64 forced", () => {
    const grid = checkGrid("sparse");
    const stream = Stream.create(device.ordinal);
    const failures: string[] = [];
    const t0 = Date.now();
    let n = 0;
    try {
      grid.forEach((spec, i) => {
        if (QUICK && i % 12 !== 0 && spec.b !== 8) return;
        for (const overrides of [{}, ...(spec.h_q === 128 ? [{ sparsePlan: "m64" as const }] : [])]) {
          const r = runCheckCase(spec, { stream, seed: 30000 + i, overrides });
          n++;
          if (!r.ok) failures.push(`${spec.name} ${r.kernel} (seed ${30000 + i}): ${r.error ?? r.check?.message}`);
        }
      });
    } finally {
      stream.dispose();
    }
    console.log(`# sparse grid: ${n} case runs (${QUICK ? "quick" : "full"}), ${failures.length} failed, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    assert.deepEqual(failures, [], failures.slice(0, 5).join("\n"));
  });
});
