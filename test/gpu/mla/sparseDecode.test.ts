import { test } from "node:test";
import assert from "node:assert/strict";
import { getMlaMetadata } from "../../../src/mla/MlaSchedMeta.js";
import { mlaDecodeReference } from "../../../src/mla/mlaDecodeReference.js";
import { sparseDecodeGpu } from "../../../src/mla/sparseDecodeGpu.js";
import { mlaSparseReferenceGpu } from "../../../src/mla/mlaSparseReferenceGpu.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { assertClose, SPARSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeSparseCase, type SparseCaseOptions } from "../../helpers/makeDecodeCase.js";
import { checkSparseAgainstCpu as check } from "../../helpers/sparseCheck.js";

describeGpu("sparseDecodeGpu() (sparse FP8 decode, first kernel) on the GPU", () => {
  test("matches the CPU reference on FlashMLA's sparse grid shapes (d_qk 576), small b", () => {
    let n = 0;
    for (const h_q of [64, 128]) for (const [s_k, topk, pageBlockSize] of [[512, 64, 2], [512, 64, 64], [512, 64, 69], [1024, 576, 2], [1024, 576, 61], [2046, 2048, 64]] as const) for (const s_q of [1, 3]) {
      check({ seed: 300 + n, b: 4, s_q, h_q, s_k, topk, pageBlockSize, varlen: true, sink: n % 2 === 0, topkLength: n % 3 === 0 }, topk > 576 ? 24 : 0);
      n++;
    }
  });

  test("runs 8, 16 and 32 heads natively", () => {
    for (const [i, h_q] of [8, 16, 32].entries()) check({ seed: 400 + i, b: 3, s_q: 2, h_q, s_k: 700, topk: 200, pageBlockSize: 64, sink: true });
  });

  test("handles invalid, repeated and out-of-range indices, topk not a multiple of 64, all-invalid rows and ±inf sinks", () => {
    check({ seed: 500, b: 4, s_q: 3, h_q: 64, s_k: 300, topk: 100, pageBlockSize: 61, invalidFraction: 0.3, repeat: 0.2, sink: true });
    check({ seed: 501, b: 4, s_q: 2, h_q: 128, s_k: 90, topk: 130, pageBlockSize: 2, invalidFraction: 1, sink: true });
    check({ seed: 502, b: 5, s_q: 1, h_q: 64, s_k: 1000, topk: 1, pageBlockSize: 64, topkLength: true });
    check({ seed: 503, b: 2, s_q: 2, h_q: 128, s_k: 400, topk: 333, pageBlockSize: 53, blockPadTokens: 3, repeat: 0.5 });
  });

  test("splits a long top-k list over many parts (b = 1) and merges it in the combine", () => {
    check({ seed: 600, b: 1, s_q: 2, h_q: 128, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true }, 16);
  });

  test("crossover (h_q = 128, clusters of two CTAs sharing the dequantization) matches the CPU reference", () => {
    let n = 0;
    for (const [s_k, topk, pageBlockSize] of [[512, 64, 2], [1024, 576, 61], [2046, 2048, 64]] as const) for (const s_q of [1, 3]) {
      check({ seed: 800 + n, b: 4, s_q, h_q: 128, s_k, topk, pageBlockSize, varlen: true, sink: true, invalidFraction: 0.1, topkLength: n % 2 === 0 }, topk > 576 ? 24 : 0, true);
      n++;
    }
    check({ seed: 850, b: 1, s_q: 2, h_q: 128, s_k: 40000, topk: 16384, pageBlockSize: 64 }, 16, true);
  });

  test("crossover gives bit-identical outputs to the build without it (dequantization is deterministic)", () => {
    const c = makeSparseCase({ seed: 900, b: 5, s_q: 2, h_q: 128, s_k: 3000, topk: 640, pageBlockSize: 64, sink: true, invalidFraction: 0.05 });
    const dev = { q: Tensor.toDevice(c.q), kCache: Tensor.toDevice(c.kCache), indices: Tensor.toDevice(c.indices), attnSink: Tensor.toDevice(c.attnSink!) };
    const metas = [getMlaMetadata(), getMlaMetadata()];
    try {
      // The same producer (v2) with and without the cluster.
      const plain = sparseDecodeGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: metas[0] }, { producer: "v2" });
      const xo = sparseDecodeGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: metas[1] }, { crossover: true, producer: "v2" });
      assert.deepEqual(xo.out.toHost().host, plain.out.toHost().host, "out differs");
      assert.deepEqual(xo.lse.toHost().host, plain.lse.toHost().host, "lse differs");
      for (const r of [plain, xo]) { r.out.dispose(); r.lse.dispose(); }
    } finally {
      for (const m of metas) m.dispose();
      for (const t of Object.values(dev)) t.dispose();
    }
  });

  test("the fp32 GPU sparse reference agrees with the float64 CPU reference, and the kernel agrees with it on every element of a large case", () => {
    for (const [i, opts] of ([
      { seed: 950, b: 3, s_q: 2, h_q: 16, s_k: 500, topk: 100, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true },
      { seed: 951, b: 2, s_q: 1, h_q: 128, s_k: 2000, topk: 640, pageBlockSize: 64, repeat: 0.3 },
    ] as SparseCaseOptions[]).entries()) {
      const c = makeSparseCase(opts);
      const dev = { q: Tensor.toDevice(c.q), kCache: Tensor.toDevice(c.kCache), indices: Tensor.toDevice(c.indices), topkLength: c.topkLength && Tensor.toDevice(c.topkLength), attnSink: c.attnSink && Tensor.toDevice(c.attnSink) };
      const ref = mlaSparseReferenceGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale });
      try {
        const cpu = mlaDecodeReference({ ...c });
        assertClose(ref.out.toHost().host as Float32Array, cpu.outF32, { abs: 1e-5, rel: 1e-4, cos: 1e-9 }, { name: `fp32 sparse reference out (case ${i})` });
        assertClose(ref.lse.toHost().host as Float32Array, cpu.lse.host as Float32Array, { abs: 1e-5, rel: 1e-6 }, { name: `fp32 sparse reference lse (case ${i})` });
      } finally {
        ref.out.dispose(); ref.lse.dispose();
        for (const t of Object.values(dev)) t?.dispose();
      }
    }
    // A large case: every element of the kernel's output against the fp32 GPU reference.
    const c = makeSparseCase({ seed: 960, b: 16, s_q: 2, h_q: 128, s_k: 8192, topk: 2048, pageBlockSize: 64, sink: true, invalidFraction: 0.02 });
    const dev = { q: Tensor.toDevice(c.q), kCache: Tensor.toDevice(c.kCache), indices: Tensor.toDevice(c.indices), attnSink: Tensor.toDevice(c.attnSink!) };
    try {
      const ref = mlaSparseReferenceGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale });
      for (const crossover of [false, true]) {
        const m2 = getMlaMetadata();
        const got = sparseDecodeGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: m2 }, { crossover });
        assertClose(bf16ArrayToF32(got.out.toHost().host as Uint16Array), ref.out.toHost().host as Float32Array, SPARSE_OUT_TOL, { shape: [16, 2, 128, 512], name: `out vs fp32 GPU reference (crossover ${crossover})`, roundReferenceTo: "bf16" });
        assertClose(got.lse.toHost().host as Float32Array, ref.lse.toHost().host as Float32Array, { abs: 1e-5, rel: 8.01 / 65536 }, { name: `lse vs fp32 GPU reference (crossover ${crossover})` });
        got.out.dispose(); got.lse.dispose(); m2.dispose();
      }
      ref.out.dispose(); ref.lse.dispose();
    } finally {
      for (const t of Object.values(dev)) t.dispose();
    }
  });

  test("gives bit-identical outputs from run to run", () => {
    const c = makeSparseCase({ seed: 700, b: 6, s_q: 2, h_q: 128, s_k: 5000, topk: 2048, pageBlockSize: 64, sink: true });
    const dev = { q: Tensor.toDevice(c.q), kCache: Tensor.toDevice(c.kCache), indices: Tensor.toDevice(c.indices), attnSink: Tensor.toDevice(c.attnSink!) };
    const meta = getMlaMetadata();
    try {
      const first = sparseDecodeGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: meta });
      const o1 = first.out.toHost().host;
      for (let k = 0; k < 3; k++) {
        const again = sparseDecodeGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: meta });
        assert.deepEqual(again.out.toHost().host, o1, `run ${k + 2} differs`);
        again.out.dispose();
        again.lse.dispose();
      }
      first.out.dispose();
      first.lse.dispose();
    } finally {
      meta.dispose();
      for (const t of Object.values(dev)) t.dispose();
    }
  });
});
