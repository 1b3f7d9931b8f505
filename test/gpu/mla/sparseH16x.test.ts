import { test } from "node:test";
import assert from "node:assert/strict";
import { flashMlaWithKvcache } from "../../../src/mla/flashMlaWithKvcache.js";
import type { SparsePlan } from "../../../src/mla/sparse/chooseSparseKernel.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { uploadSparseCase } from "../../../src/testing/gpuSparseCase.js";
import { describeGpu } from "../../helpers/gpu.js";
import { assertSparseKernelsAgree, assertSparseOverridesRefused, checkSparseAgainstCpu as check, sparseBits } from "../../helpers/sparseCheck.js";

// h16x, flashMlaWithKvcache's sparse plan at 8 and 16 heads: tokens by bulk copy, the FP8 bytes converted
// by two consumer warpgroups into wgmma's register operands (the heads as N).

describeGpu("sparse h16x consumers", () => {
  test("h16x matches the CPU reference, every element, at 16 and 8 heads", () => {
    check({ seed: 1300, b: 3, s_q: 2, h_q: 16, s_k: 700, topk: 200, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true }, 0, "h16x");
    check({ seed: 1301, b: 2, s_q: 1, h_q: 8, s_k: 900, topk: 300, pageBlockSize: 64, sink: true, repeat: 0.2, blockPadTokens: 3 }, 0, "h16x");
    check({ seed: 1302, b: 2, s_q: 3, h_q: 8, s_k: 500, topk: 130, pageBlockSize: 37, invalidFraction: 0.5, varlen: true }, 0, "h16x");
    // A request of a single block: the second consumer warpgroup has nothing of it to merge.
    check({ seed: 1303, b: 4, s_q: 1, h_q: 16, s_k: 400, topk: 50, pageBlockSize: 64, sink: true }, 0, "h16x");
    // Every index invalid: out 0, lse +inf (the sink cannot make an empty row non-empty).
    check({ seed: 1304, b: 2, s_q: 2, h_q: 16, s_k: 300, topk: 100, pageBlockSize: 64, sink: true, invalidFraction: 1 }, 0, "h16x");
  });

  // Pᵀ holds p · scale · 2^64 and Oᵀ accumulates O · 2^-56, so KV far from FlashMLA's N(0, 0.01) must still
  // come out right (scales up to 2^56 stay finite); m64 on the same case as a control.
  test("h16x with KV 2^40 and 2^-40 times larger (the scores unchanged), every element, m64 beside it", () => {
    for (const kvScale of [2 ** 40, 2 ** -40]) {
      const c = { seed: 1310, b: 2, s_q: 2, h_q: 16, s_k: 600, topk: 256, pageBlockSize: 64, sink: true, invalidFraction: 0.1, kvScale };
      check(c, 0, "m64");
      check(c, 0, "h16x");
    }
  });

  test("h16x agrees with m64 on a long top-k list split over many parts (tolerance asserted)", (t) => {
    const u = uploadSparseCase({ seed: 1305, b: 1, s_q: 2, h_q: 16, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true });
    try {
      assertSparseKernelsAgree(u, { sparsePlan: "m64" }, { sparsePlan: "h16x" }, ["m64", "h16x"], (m) => t.diagnostic(m));
    } finally {
      u.dispose();
    }
  });

  test("flashMlaWithKvcache runs h16x at 16 and 8 heads (its bits, not m64's)", () => {
    for (const h_q of [16, 8]) {
      const u = uploadSparseCase({ seed: 1307 + h_q, b: 2, s_q: 2, h_q, s_k: 3000, topk: 1500, pageBlockSize: 64, sink: true, invalidFraction: 0.1, topkLength: true });
      const meta = getMlaMetadata();
      try {
        const forced = sparseBits(u, { sparsePlan: "h16x" });
        const m64 = sparseBits(u, { sparsePlan: "m64" });
        assert.ok(forced.out.some((v, i) => v !== m64.out[i]), `h16x and m64 differ somewhere at h_q = ${h_q}, so the bits below say which ran`);
        const r = flashMlaWithKvcache({ ...u.args, schedMeta: meta });
        try {
          assert.deepEqual(r.out.toHost().host as Uint16Array, forced.out, `out at h_q = ${h_q}`);
          assert.deepEqual(r.lse.toHost().host as Float32Array, forced.lse, `lse at h_q = ${h_q}`);
        } finally {
          r.out.dispose();
          r.lse.dispose();
        }
      } finally {
        meta.dispose();
        u.dispose();
      }
    }
  });

  test("a plan where it cannot run is refused before anything is allocated", () => {
    const u = uploadSparseCase({ seed: 1306, b: 1, s_q: 1, h_q: 32, s_k: 200, topk: 64, pageBlockSize: 64 });
    const u16 = uploadSparseCase({ seed: 1307, b: 1, s_q: 1, h_q: 16, s_k: 200, topk: 64, pageBlockSize: 64 });
    try {
      assertSparseOverridesRefused([
        { u, overrides: { sparsePlan: "h16x" }, message: /"h16x" only at h_q <= 16.*h_q = 32/ },
        { u: u16, overrides: { sparsePlan: "h128x" }, message: /"h128x" only at h_q = 128.*h_q = 16/ },
        { u: u16, overrides: { sparsePlan: 1 as unknown as SparsePlan }, message: /"m64", "h128x", "h16x" or undefined, got 1/ },
      ]);
    } finally {
      u.dispose();
      u16.dispose();
    }
  });
});
