import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { getMlaMetadata } from "../../../src/mla/MlaSchedMeta.js";
import { sparseDecodeGpu } from "../../../src/mla/sparseDecodeGpu.js";
import { describeGpu } from "../../helpers/gpu.js";
import { assertSparseKernelsAgree, checkSparseAgainstCpu as check, uploadSparseCase } from "../../helpers/sparseCheck.js";

// Producer "v3" (two producer warpgroups, 512 threads, P·V as two m64n128 wgmmas), written without a
// GPU: its own file, so a fault in it cannot stop the suites of the verified kernels.

describeGpu("sparse producer v3 (the default since the fourth session)", () => {
  test("v3 matches the CPU reference, every element, at 16, 64 and 128 heads", () => {
    check({ seed: 1100, b: 3, s_q: 2, h_q: 16, s_k: 700, topk: 200, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true }, 0, false, "v3");
    check({ seed: 1101, b: 2, s_q: 2, h_q: 64, s_k: 900, topk: 300, pageBlockSize: 69, sink: true, invalidFraction: 0.1, repeat: 0.2 }, 0, false, "v3");
    check({ seed: 1102, b: 2, s_q: 1, h_q: 128, s_k: 1500, topk: 700, pageBlockSize: 64, sink: true, topkLength: true, blockPadTokens: 3 }, 0, false, "v3");
  });

  test("v3 agrees with v2 on a long top-k list split over many parts (bits compared, tolerance asserted)", (t) => {
    const u = uploadSparseCase({ seed: 1103, b: 1, s_q: 2, h_q: 128, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true });
    try {
      assertSparseKernelsAgree(u, { producer: "v2" }, { producer: "v3" }, ["v2", "v3"], (m) => t.diagnostic(m));
    } finally {
      u.dispose();
    }
  });

  test("a bad producer option is refused before anything is allocated", () => {
    const u = uploadSparseCase({ seed: 1104, b: 1, s_q: 1, h_q: 128, s_k: 200, topk: 64, pageBlockSize: 64 });
    try {
      const meta = getMlaMetadata();
      try {
        const args = { ...u.dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: u.c.softmaxScale, schedMeta: meta };
        assert.throws(() => sparseDecodeGpu(args, { producer: "v4" as "v3" }), (e: unknown) => e instanceof ArgumentError && /"v1", "v2" or "v3"/.test(e.message));
        assert.equal(meta.initialized, false, "no metadata was filled by the refused calls");
      } finally {
        meta.dispose();
      }
    } finally {
      u.dispose();
    }
  });
});
