import { test } from "node:test";
import assert from "node:assert/strict";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { DENSE_FORMS } from "../../../src/mla/dense/chooseDenseKernel.js";
import { bf16ArrayToF32, f32ArrayToBf16 } from "../../../src/numeric/bf16.js";
import { f32ArrayToFp16, fp16ArrayToF32 } from "../../../src/numeric/fp16.js";
import { assertClose, DENSE_LSE_TOL, DENSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { Rng } from "../../../src/numeric/random.js";
import type { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeDenseCase } from "../../../src/testing/denseCase.js";
import { decodeDenseCase, uploadDenseCase } from "../../../src/testing/gpuDenseCase.js";

// The dense kernels keep a lazy running max (a row's max moves only when a block's row max exceeds it by
// more than τ = 8 log2 units, so P may reach 2^8). Random inputs
// never move the max by that much after the first block, so this case makes them: the rows must see both
// paths (a rescale mid-sequence, and a smaller rise that is kept), at both output types.


describeGpu("dense lazy running max", () => {
  for (const dtype of ["bf16", "fp16"] as const) {
    test(`${DENSE_FORMS.join(" and ")} match the CPU reference when block maxima jump up and down (${dtype})`, () => {
      // The RoPE dims (not part of V, so the outputs keep their usual size) of q ×30 and of each key block
      // ×e^U(0,5): block maxima from ~0.4 to ~50 log2 units.
      const rng = new Rng(4343);
      const seqlens = [1500, 900, 2000, 130];
      const host = makeDenseCase({ seed: 9450, b: seqlens.length, s_q: 2, h_q: 128, h_kv: 1, seqlens, causal: true, dtype });
      const [toF, fromF] = dtype === "bf16" ? [bf16ArrayToF32, f32ArrayToBf16] : [fp16ArrayToF32, f32ArrayToFp16];
      const q = host.q.host as Uint16Array, k = host.kCache.host as Uint16Array;
      q.set(fromF(toF(q).map((x, i) => (i % 576 >= 512 ? 30 * x : x))));
      const kf = toF(k), row = 576;
      for (let blk = 0; blk < kf.length / (64 * row); blk++) {
        const a = Math.exp(5 * rng.uniform());
        for (let i = blk * 64 * row; i < (blk + 1) * 64 * row; i++) if (i % row >= 512) kf[i] *= a;
      }
      k.set(fromF(kf));
      // Both paths reached: in some rows a later block's max exceeds the running max by more than 8, in
      // others by less (checked on heads 0-1, first query row).
      const qf = toF(q), table = host.blockTable.host as Int32Array, maxBlocks = table.length / seqlens.length;
      let jumps = 0, small = 0;
      seqlens.forEach((len, req) => {
        for (let head = 0; head < 2; head++) {
          let m = -Infinity;
          for (let blk = 0; blk * 64 < len - 1; blk++) {
            let bm = -Infinity;
            for (let t = blk * 64; t < Math.min(len - 1, blk * 64 + 64); t++) {
              const base = (table[req * maxBlocks + blk] * 64 + (t % 64)) * row, qb = (req * 2 * 128 + head) * row;
              let dot = 0;
              for (let d = 0; d < row; d++) dot += qf[qb + d] * kf[base + d];
              bm = Math.max(bm, dot * host.softmaxScale * Math.LOG2E);
            }
            if (blk > 0 && bm > m + 8) jumps++;
            else if (blk > 0 && bm > m) small++;
            if (blk === 0 || bm > m + 8) m = bm;
          }
        }
      });
      assert.ok(jumps > 0 && small > 0, `expected maxima that jump by > 8 and by less, got ${jumps} and ${small}`);
      const ref = mlaDecodeReference(host);
      const c = uploadDenseCase(host);
      const toF32 = (t: Tensor) => toF(t.toHost().host as Uint16Array);
      try {
        for (const denseForm of DENSE_FORMS) {
          const r = decodeDenseCase(c, { denseForm });
          try {
            const shape = [seqlens.length, 2, 128, 512];
            assertClose(toF32(r.out), ref.outF32, DENSE_OUT_TOL, { shape, name: `${denseForm} out, jumping maxima (${dtype})`, roundReferenceTo: dtype });
            assertClose(r.lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { name: `${denseForm} lse, jumping maxima (${dtype})` });
          } finally {
            r.out.dispose(); r.lse.dispose(); r.meta.dispose();
          }
        }
      } finally {
        c.dispose();
      }
    });
  }
});
