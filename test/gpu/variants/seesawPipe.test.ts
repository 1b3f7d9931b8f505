import { test } from "node:test";
import assert from "node:assert/strict";
import { BENCH_KERNELS } from "../../../src/bench/benchKernels.js";
import { checkGrid } from "../../../src/bench/checkGrid.js";
import { runCheckCase } from "../../../src/bench/runCheckCase.js";
import { mlaDecodeReference } from "../../../src/mla/mlaDecodeReference.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { fp16ArrayToF32 } from "../../../src/numeric/fp16.js";
import { assertClose, DENSE_LSE_TOL, DENSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { Rng } from "../../../src/numeric/random.js";
import { Stream } from "../../../src/runtime/Stream.js";
import type { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeDenseCase } from "../../helpers/makeDecodeCase.js";
import { makeDenseCaseGpu, runDenseKernel, uploadDenseCase } from "../../helpers/gpuDecodeCase.js";

// (Its lazy running max is tested with the other seesaw kernels in test/gpu/mla/lazyMax.test.ts.)
// seesaw_pipe (first run here; now in DENSE_KERNELS, so the dense suite, fuzz and soak run it too, and
// the API's default for compute-bound batches): seesaw_fast with the loop rotated (each warpgroup queues its
// next Q·Kᵀ behind its last P·V, the request's last pair its own copy without it). What can go wrong
// there: a request boundary inside a CTA's piece (the next request's Q), a piece of one pair, an odd
// block count, a partial last block (its V rows zeroed while the other warpgroup's next Q·Kᵀ may run),
// empty requests. W1 sums its Q·Kᵀ tiles in another order than seesaw_fast and the exponent is one fma,
// so outputs are compared with the dense tolerance, not bit for bit.

const run = runDenseKernel;

const toF32 = (t: Tensor) => (t.dtype === "bf16" ? bf16ArrayToF32 : fp16ArrayToF32)(t.toHost().host as Uint16Array);

describeGpu("seesaw_pipe (FlashMLA's rotated loop)", () => {
  test("seesaw_pipe matches the CPU reference on many short requests per CTA (request boundaries, one-pair pieces, odd and partial blocks, empty requests)", () => {
    const rng = new Rng(4242);
    for (let i = 0; i < 24; i++) {
      const h_kv = [1, 1, 2][rng.int(0, 3)];
      const h_q = h_kv * [1, 16, 64, 128 / h_kv][rng.int(0, 4)];
      const b = rng.int(1, 40), s_q = rng.int(1, 3);
      const lens = Array.from({ length: b }, () => [0, 1, rng.int(2, 64), 64, 128, rng.int(65, 400), rng.int(400, 1500)][rng.int(0, 7)]);
      const dtype = i % 4 === 3 ? "fp16" : "bf16";
      const host = makeDenseCase({ seed: 9400 + i, b, s_q, h_q, h_kv, seqlens: lens, causal: rng.uniform() < 0.5, dtype, extraBlocks: 1 });
      const c = uploadDenseCase(host);
      const label = `#${i} b=${b} s_q=${s_q} h_q=${h_q} h_kv=${h_kv} ${dtype} lens=${lens.join(",")}`;
      const r = run(c, "seesaw_pipe");
      try {
        const ref = mlaDecodeReference(host);
        assertClose(toF32(r.out), ref.outF32, DENSE_OUT_TOL, { shape: [b, s_q, h_q, 512], name: `seesaw_pipe out (${label})`, roundReferenceTo: dtype });
        assertClose(r.lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { shape: [b, h_q, s_q], name: `seesaw_pipe lse (${label})` });
      } finally {
        r.out.dispose(); r.lse.dispose(); r.meta.dispose();
        c.dispose();
      }
    }
  });

  test("seesaw_pipe agrees with seesaw_fast on long requests (many pairs per piece, splits) within the dense tolerance", () => {
    const specs = [
      { b: 1, s_q: 1, h_q: 128, h_kv: 1, mean: 32768, dtype: "bf16" },
      { b: 16, s_q: 2, h_q: 128, h_kv: 1, mean: 4000, dtype: "bf16" },
      { b: 7, s_q: 1, h_q: 64, h_kv: 1, mean: 2500, dtype: "fp16" },
      { b: 64, s_q: 1, h_q: 16, h_kv: 1, mean: 1500, dtype: "bf16" },
    ] as const;
    for (const [i, spec] of specs.entries()) {
      const c = makeDenseCaseGpu({ seed: 9500 + i, b: spec.b, s_q: spec.s_q, h_q: spec.h_q, h_kv: spec.h_kv, seqlens: { mean: spec.mean, varlen: spec.b > 1, zeroFraction: spec.b > 1 ? 0.1 : 0 }, causal: true, dtype: spec.dtype });
      const a = run(c, "seesaw_fast");
      const f = run(c, "seesaw_pipe");
      try {
        const name = JSON.stringify(spec);
        assertClose(toF32(f.out), toF32(a.out), DENSE_OUT_TOL, { shape: [spec.b, spec.s_q, spec.h_q, 512], name: `seesaw_pipe vs seesaw_fast out ${name}` });
        assertClose(f.lse.toHost().host as Float32Array, a.lse.toHost().host as Float32Array, DENSE_LSE_TOL, { name: `seesaw_pipe vs seesaw_fast lse ${name}` });
      } finally {
        for (const r of [a, f]) { r.out.dispose(); r.lse.dispose(); r.meta.dispose(); }
        c.dispose();
      }
    }
  });

  test("seesaw_pipe passes FlashMLA's dense grid and corner cases (every 12th grid case and all corner cases)", () => {
    const cases = checkGrid("flashmla").filter((c, i) => i % 12 === 0 || c.zeroFraction > 0);
    const stream = Stream.create();
    const failures: string[] = [];
    try {
      cases.forEach((spec, i) => {
        const r = runCheckCase(spec, { kernel: BENCH_KERNELS.dense_seesaw_pipe, stream, seed: 21000 + i });
        if (!r.ok) failures.push(`${spec.name} (seed ${21000 + i}): ${r.error ?? r.check?.message}`);
      });
    } finally {
      stream.dispose();
    }
    console.log(`# seesaw_pipe on FlashMLA's dense grid: ${cases.length} cases, ${failures.length} failed`);
    assert.ok(cases.length > 200, `expected the quick grid (about 220 cases), got ${cases.length}`);
    assert.deepEqual(failures, [], failures.slice(0, 5).join("\n"));
  });
});
