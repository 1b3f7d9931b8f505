import { test } from "node:test";
import { mlaDecodeReference } from "../../../src/mla/mlaDecodeReference.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { fp16ArrayToF32 } from "../../../src/numeric/fp16.js";
import { assertClose, DENSE_LSE_TOL, DENSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { Rng } from "../../../src/numeric/random.js";
import type { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeDenseCase } from "../../helpers/makeDecodeCase.js";
import { runDenseKernel, uploadDenseCase } from "../../helpers/gpuDecodeCase.js";

// "h16" (written without a GPU; EXPERIMENTAL_DENSE_KERNELS, so only this file runs it): the transposed
// kernel for at most 16 query rows per KV head (docs/dense-decode.md §12), whose primitives
// test/gpu/mla/wgmmaProbe.test.ts checks first. What can go wrong beyond them: the column-wise softmax
// (maxima and sums across the four warps), rows past rows_per_kv, causal limits per row, partial and
// empty blocks (V tail rows zeroed), request boundaries inside a CTA's piece, splits (o_accum, lse_accum)
// and the two-stage refill across requests.

const toF32 = (t: Tensor) => (t.dtype === "bf16" ? bf16ArrayToF32 : fp16ArrayToF32)(t.toHost().host as Uint16Array);

function check(label: string, host: ReturnType<typeof makeDenseCase>, shape: number[]): void {
  const c = uploadDenseCase(host);
  const r = runDenseKernel(c, "h16");
  try {
    const ref = mlaDecodeReference(host);
    assertClose(toF32(r.out), ref.outF32, DENSE_OUT_TOL, { shape, name: `h16 out (${label})`, roundReferenceTo: host.q.dtype === "fp16" ? "fp16" : "bf16" });
    assertClose(r.lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { name: `h16 lse (${label})` });
  } finally {
    r.out.dispose(); r.lse.dispose(); r.meta.dispose();
    c.dispose();
  }
}

describeGpu("h16 (the transposed 16-row kernel, experimental)", () => {
  test("h16 matches the CPU reference on short requests (rows 1-16 per KV head, request boundaries, partial and empty blocks, causal)", () => {
    const rng = new Rng(1616);
    for (let i = 0; i < 20; i++) {
      const h_kv = [1, 1, 2][rng.int(0, 3)];
      const s_q = rng.int(1, 3);
      const hpk = [1, 2, 4, 8, 16 / s_q][rng.int(0, 5)];
      const h_q = h_kv * hpk, b = rng.int(1, 40);
      const lens = Array.from({ length: b }, () => [0, 1, rng.int(2, 64), 64, 128, rng.int(65, 400), rng.int(400, 1500)][rng.int(0, 7)]);
      const dtype = i % 4 === 3 ? "fp16" : "bf16";
      const host = makeDenseCase({ seed: 16000 + i, b, s_q, h_q, h_kv, seqlens: lens, causal: rng.uniform() < 0.5, dtype, extraBlocks: 1 });
      check(`#${i} b=${b} s_q=${s_q} h_q=${h_q} h_kv=${h_kv} ${dtype} lens=${lens.join(",")}`, host, [b, s_q, h_q, 512]);
    }
  });

  test("h16 matches the CPU reference on long requests split across SM parts (o_accum, lse_accum and the combine)", () => {
    for (const [i, seqlens] of [[5000, 9000, 3000], [20000], [1, 7000, 0, 6500]].entries()) {
      const b = seqlens.length;
      const host = makeDenseCase({ seed: 16100 + i, b, s_q: 1, h_q: 16, h_kv: 1, seqlens, causal: false, dtype: "bf16" });
      check(`long #${i} lens=${seqlens.join(",")}`, host, [b, 1, 16, 512]);
    }
  });
});
