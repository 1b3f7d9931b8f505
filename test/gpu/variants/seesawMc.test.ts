import { test } from "node:test";
import assert from "node:assert/strict";
import { flashMlaWithKvcache, type DenseKernelName } from "../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata } from "../../../src/mla/MlaSchedMeta.js";
import { mlaDecodeReference } from "../../../src/mla/mlaDecodeReference.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { assertClose, DENSE_LSE_TOL, DENSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeDenseCase } from "../../helpers/makeDecodeCase.js";
import { makeDenseCaseGpu, runDenseKernel, uploadDenseCase, type GpuDenseCase } from "../../helpers/gpuDecodeCase.js";

// The dense variant not yet run on a GPU when it was written (EXPERIMENTAL_DENSE_KERNELS): its own file,
// so a fault in it (a hang, a sticky CUDA error) cannot stop the suites of the verified kernels. Once it
// passes here on the H200 it can join DENSE_KERNELS (and with it the fuzz, soak and sanitizer suites).

const run = (c: GpuDenseCase, _stream: undefined, kernel: DenseKernelName) => runDenseKernel(c, kernel);

describeGpu("seesaw_mc (experimental: K tiles multicast within 2-CTA clusters)", () => {
  test("seesaw_mc (K tiles multicast within 2-CTA clusters) gives bit-identical outputs to seesaw_pipe", () => {
    // Even m-block counts use the clusters (h_q 128 at s_q 1 and 2, h_q 64 at s_q 2, h_kv 2 with 128
    // heads); odd ones (h_q 64, s_q 1) fall back to seesaw_pipe. Splits, empty requests, causal tails,
    // two-piece requests (merged in the kernel), a long request over every SM.
    const specs = [
      { b: 16, s_q: 1, h_q: 128, h_kv: 1, mean: 3000, dtype: "bf16" },
      { b: 7, s_q: 2, h_q: 128, h_kv: 1, mean: 2500, dtype: "bf16" },
      { b: 9, s_q: 2, h_q: 64, h_kv: 1, mean: 1000, dtype: "fp16" },
      { b: 3, s_q: 1, h_q: 128, h_kv: 2, mean: 700, dtype: "bf16" },
      { b: 4, s_q: 1, h_q: 64, h_kv: 1, mean: 900, dtype: "bf16" },
      { b: 1, s_q: 1, h_q: 128, h_kv: 1, mean: 32768, dtype: "bf16" },
    ] as const;
    for (const [i, spec] of specs.entries()) {
      const c = makeDenseCaseGpu({ seed: 9200 + i, b: spec.b, s_q: spec.s_q, h_q: spec.h_q, h_kv: spec.h_kv, seqlens: { mean: spec.mean, varlen: spec.b > 1, zeroFraction: spec.b > 1 ? 0.1 : 0 }, causal: true, dtype: spec.dtype });
      const a = run(c, undefined, "seesaw_pipe");
      const f = run(c, undefined, "seesaw_mc");
      try {
        assert.deepEqual(f.out.toHost().host, a.out.toHost().host, `out differs (${JSON.stringify(spec)})`);
        assert.deepEqual(f.lse.toHost().host, a.lse.toHost().host, `lse differs (${JSON.stringify(spec)})`);
      } finally {
        for (const r of [a, f]) { r.out.dispose(); r.lse.dispose(); r.meta.dispose(); }
        c.dispose();
      }
    }
  });

  test("dense seesaw_mc at 128 heads (two-CTA clusters, multicast K tiles) against the CPU reference", () => {
    const host = makeDenseCase({ seed: 45, b: 2, s_q: 1, h_q: 128, h_kv: 1, seqlens: [700, 190], causal: false, dtype: "bf16", extraBlocks: 1 });
    const c = uploadDenseCase(host);
    const meta = getMlaMetadata();
    try {
      const { out, lse } = flashMlaWithKvcache({ ...c, schedMeta: meta, kernel: "seesaw_mc" });
      const ref = mlaDecodeReference(host);
      assertClose(bf16ArrayToF32(out.toHost().host as Uint16Array), ref.outF32, DENSE_OUT_TOL, { name: "seesaw_mc out", roundReferenceTo: "bf16" });
      assertClose(lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { name: "seesaw_mc lse" });
      out.dispose();
      lse.dispose();
    } finally {
      meta.dispose();
      c.dispose();
    }
  });

});
