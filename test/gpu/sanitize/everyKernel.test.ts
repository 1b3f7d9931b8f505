import { test } from "node:test";
import { DENSE_FORMS } from "../../../src/mla/dense/chooseDenseKernel.js";
import { decodeWithOverrides } from "../../../src/mla/flashMlaWithKvcache.js";
import type { SparsePlan } from "../../../src/mla/sparse/chooseSparseKernel.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { mlaDecodeReferenceGpu } from "../../../src/mla/reference/mlaDecodeReferenceGpu.js";
import { mlaSparseReferenceGpu } from "../../../src/mla/reference/mlaSparseReferenceGpu.js";
import { quantizeKvCacheFp8 } from "../../../src/mla/kvCache/writeKvCacheFp8.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { fp16ArrayToF32 } from "../../../src/numeric/fp16.js";
import { assertClose, DENSE_LSE_TOL, DENSE_OUT_TOL, SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { Rng, randomBf16 } from "../../../src/numeric/random.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { checkModel1AgainstCpu } from "../../helpers/model1Check.js";
import { makeDenseCase } from "../../../src/testing/denseCase.js";
import { uploadDenseCase } from "../../../src/testing/gpuDenseCase.js";
import { makeSparseCase } from "../../../src/testing/sparseCase.js";

/**
 * Every kernel of the library once, on shapes small enough for compute-sanitizer (which slows kernels
 * many times): run directly, `compute-sanitizer --tool memcheck node dist/test/gpu/sanitize/everyKernel.test.js`.
 * The shapes still reach the edge cases that matter for memory safety: NaN in unused slots, split
 * requests (the combine and the split workspace), empty requests, partial blocks, invalid sparse ids,
 * crossover clusters. Each output is checked against the CPU reference, so it is a real test too.
 */
describeGpu("every kernel on small shapes (the compute-sanitizer suite)", () => {
  test("dense: both forms, bf16 and fp16, d_qk 576 and 512, split and unsplit requests, against the CPU reference", () => {
    for (const [i, denseForm] of DENSE_FORMS.entries()) {
      for (const [dtype, d_qk] of [["bf16", 576], ["fp16", 576], ["bf16", 512], ["fp16", 512]] as const) {
        const host = makeDenseCase({ seed: 40 + i, b: 3, s_q: 2, h_q: 16, h_kv: 1, seqlens: [0, 130, 1500], causal: true, dtype, extraBlocks: 2, d_qk });
        const c = uploadDenseCase(host);
        const meta = getMlaMetadata();
        try {
          const { out, lse } = decodeWithOverrides({ ...c, schedMeta: meta }, { denseForm });
          const ref = mlaDecodeReference(host);
          const o = out.toHost().host as Uint16Array;
          assertClose(dtype === "fp16" ? fp16ArrayToF32(o) : bf16ArrayToF32(o), ref.outF32, DENSE_OUT_TOL, { name: `${denseForm} ${dtype} d_qk ${d_qk} out`, roundReferenceTo: dtype });
          assertClose(lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { name: `${denseForm} ${dtype} d_qk ${d_qk} lse` });
          out.dispose();
          lse.dispose();
        } finally {
          meta.dispose();
          c.dispose();
        }
      }
    }
  });

  test("dense: requests split in two pieces, merged by the main kernels themselves (the merge flags, the other piece's partial), against the CPU reference", () => {
    // 140 requests of 60-239 tokens over 132 parts: 47 in two pieces.
    const seqlens = Array.from({ length: 140 }, (_, i) => 60 + ((i * 53) % 180));
    const host = makeDenseCase({ seed: 45, b: 140, s_q: 2, h_q: 16, h_kv: 1, seqlens, causal: true, dtype: "bf16", extraBlocks: 2 });
    const c = uploadDenseCase(host);
    try {
      const ref = mlaDecodeReference(host);
      for (const denseForm of DENSE_FORMS) {
        const meta = getMlaMetadata();
        try {
          for (let round = 0; round < 2; round++) {  // the second round without the combine (the host knows the schedule)
            const { out, lse } = decodeWithOverrides({ ...c, schedMeta: meta }, { denseForm });
            assertClose(bf16ArrayToF32(out.toHost().host as Uint16Array), ref.outF32, DENSE_OUT_TOL, { name: `${denseForm} out, round ${round}`, roundReferenceTo: "bf16" });
            assertClose(lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { name: `${denseForm} lse, round ${round}` });
            out.dispose();
            lse.dispose();
          }
        } finally {
          meta.dispose();
        }
      }
    } finally {
      c.dispose();
    }
  });

  test("dense fp32 GPU reference against the CPU reference", () => {
    const host = makeDenseCase({ seed: 50, b: 2, s_q: 1, h_q: 8, h_kv: 2, seqlens: [70, 0], causal: false, dtype: "bf16", extraBlocks: 1 });
    const c = uploadDenseCase(host);
    try {
      const ref = mlaDecodeReferenceGpu(c);
      const cpu = mlaDecodeReference(host);
      assertClose(ref.out.toHost().host as Float32Array, cpu.outF32, { abs: 1e-5, rel: 1e-4, cos: 1e-9 }, { name: "fp32 reference out" });
      ref.out.dispose();
      ref.lse.dispose();
    } finally {
      c.dispose();
    }
  });

  test("sparse: every plan (m64, h128x, h16x), split top-k lists, invalid ids, against the CPU reference", () => {
    // The h_q = 128 lists give each CTA one or two blocks; the h_q = 64 and 16 ones (long lists) give
    // most CTAs three or more, so their K buffers are reused.
    const configs: ReadonlyArray<readonly [SparsePlan, number]> = [["m64", 128], ["h128x", 128], ["m64", 64], ["m64", 16], ["h16x", 16]];
    for (const [sparsePlan, h_q] of configs) {
      const long = h_q < 128;
      const opts = { seed: 60, b: 2, s_q: 2, h_q, s_k: long ? 5000 : 600, topk: long ? 4000 : 1100, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true };
      const c = makeSparseCase(opts);
      const dev = { q: Tensor.toDevice(c.q), kCache: Tensor.toDevice(c.kCache), indices: Tensor.toDevice(c.indices), topkLength: c.topkLength && Tensor.toDevice(c.topkLength), attnSink: c.attnSink && Tensor.toDevice(c.attnSink) };
      const meta = getMlaMetadata();
      try {
        const { out, lse } = decodeWithOverrides({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: meta }, { sparsePlan });
        const ref = mlaDecodeReference({ ...c });
        assertClose(bf16ArrayToF32(out.toHost().host as Uint16Array), ref.outF32, SPARSE_OUT_TOL, { name: `sparse out (${sparsePlan}, h_q ${h_q})`, roundReferenceTo: "bf16" });
        assertClose(lse.toHost().host as Float32Array, ref.lse.host as Float32Array, SPARSE_LSE_TOL, { name: `sparse lse (${sparsePlan}, h_q ${h_q})` });
        out.dispose();
        lse.dispose();
        if (sparsePlan === "m64" && h_q === 128) {
          const r = mlaSparseReferenceGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale });
          assertClose(r.out.toHost().host as Float32Array, ref.outF32, { abs: 1e-5, rel: 1e-4, cos: 1e-9 }, { name: "fp32 sparse reference out" });
          r.out.dispose();
          r.lse.dispose();
        }
      } finally {
        meta.dispose();
        for (const t of Object.values(dev)) t?.dispose();
      }
    }
  });

  test("sparse MODEL1 (DeepSeek-V4): every plan (m64, h128x, h16x), a second cache, invalid ids, against the CPU reference", () => {
    const configs: ReadonlyArray<readonly [SparsePlan, number]> = [["m64", 128], ["h128x", 128], ["m64", 16], ["h16x", 16], ["h16x", 8]];
    for (const [i, [sparsePlan, h_q]] of configs.entries()) {
      checkModel1AgainstCpu({ seed: 70 + i, b: 2, s_q: 2, h_q, s_k: 3000, topk: h_q < 128 ? 1500 : 300, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true, extra: { s_k: 500, topk: 130, pageBlockSize: 2, topkLengthRandom: true } }, 0, sparsePlan);
    }
  });

  test("FP8 quantizer on the GPU gives the CPU's bytes", () => {
    const host = randomBf16(new Rng(70), 37 * 576, { std: 0.5 });
    const cpu = quantizeKvCacheFp8(Tensor.fromHost(host, [37, 576], "bf16"));
    const dev = Tensor.toDevice(Tensor.fromHost(host, [37, 576], "bf16"));
    const gpu = quantizeKvCacheFp8(dev);
    try {
      const a = gpu.toHost().host as Uint8Array, b = cpu.host as Uint8Array;
      const bad = a.findIndex((v, i) => v !== b[i]);
      if (bad !== -1) throw new Error(`byte ${bad} differs: GPU ${a[bad]}, CPU ${b[bad]}`);
    } finally {
      dev.dispose();
      gpu.dispose();
    }
  });
});
