import { test } from "node:test";
import assert from "node:assert/strict";
import { describeGpu } from "../../helpers/gpu.js";
import { checkSparseAgainstCpu as check, sparseBits, uploadSparseCase } from "../../helpers/sparseCheck.js";

// Crossover with producer v3 (two producer warpgroups splitting the dims of the CTA's 32 tokens), written
// without a GPU: its own file, so a fault in it cannot stop the suites of the verified kernels.

describeGpu("sparse crossover with producer v3 (the default at h_q = 128)", () => {
  test("crossover v3 matches the CPU reference, every element (s_q 1 and 3, top-k lengths, invalid and repeated ids)", () => {
    check({ seed: 1200, b: 3, s_q: 1, h_q: 128, s_k: 700, topk: 200, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true }, 0, true, "v3");
    check({ seed: 1201, b: 2, s_q: 3, h_q: 128, s_k: 1500, topk: 640, pageBlockSize: 64, sink: true, invalidFraction: 0.1, repeat: 0.2 }, 0, true, "v3");
    check({ seed: 1202, b: 4, s_q: 2, h_q: 128, s_k: 512, topk: 64, pageBlockSize: 2, varlen: true, topkLength: true }, 0, true, "v3");
  });

  test("crossover v3 gives the plain v3 kernel's bits on a long list split over many parts", () => {
    const u = uploadSparseCase({ seed: 1203, b: 1, s_q: 2, h_q: 128, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true, invalidFraction: 0.05 });
    try {
      const plain = sparseBits(u, { producer: "v3" });
      const xo = sparseBits(u, { producer: "v3", crossover: true });
      assert.deepEqual(xo.out, plain.out, "out differs");
      assert.deepEqual(xo.lse, plain.lse, "lse differs");
    } finally {
      u.dispose();
    }
  });
});
