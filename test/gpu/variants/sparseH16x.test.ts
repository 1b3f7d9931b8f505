import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { getMlaMetadata } from "../../../src/mla/MlaSchedMeta.js";
import { sparseDecodeGpu } from "../../../src/mla/sparseDecodeGpu.js";
import { describeGpu } from "../../helpers/gpu.js";
import { assertSparseKernelsAgree, checkSparseAgainstCpu as check, uploadSparseCase } from "../../helpers/sparseCheck.js";

// h16x (experimental, docs/sparse-decode.md §24): tokens by bulk copy, the FP8 bytes converted by two
// consumer warpgroups into wgmma's register operands, h_q <= 16.

describeGpu("sparse h16x consumers", () => {
  test("h16x matches the CPU reference, every element, at 16 and 8 heads", () => {
    const x = { h16x: true };
    check({ seed: 1300, b: 3, s_q: 2, h_q: 16, s_k: 700, topk: 200, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true }, 0, false, "v3", x);
    check({ seed: 1301, b: 2, s_q: 1, h_q: 8, s_k: 900, topk: 300, pageBlockSize: 64, sink: true, repeat: 0.2, blockPadTokens: 3 }, 0, false, "v3", x);
    check({ seed: 1302, b: 2, s_q: 3, h_q: 8, s_k: 500, topk: 130, pageBlockSize: 37, invalidFraction: 0.5, varlen: true }, 0, false, "v3", x);
    // A request of a single block: the second consumer warpgroup has nothing of it to merge.
    check({ seed: 1303, b: 4, s_q: 1, h_q: 16, s_k: 400, topk: 50, pageBlockSize: 64, sink: true }, 0, false, "v3", x);
    // Every index invalid: out 0, lse +inf (the sink cannot make an empty row non-empty).
    check({ seed: 1304, b: 2, s_q: 2, h_q: 16, s_k: 300, topk: 100, pageBlockSize: 64, sink: true, invalidFraction: 1 }, 0, false, "v3", x);
  });

  test("h16x agrees with v3 on a long top-k list split over many parts (tolerance asserted)", (t) => {
    const u = uploadSparseCase({ seed: 1305, b: 1, s_q: 2, h_q: 16, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true });
    try {
      assertSparseKernelsAgree(u, { producer: "v3" }, { producer: "v3", h16x: true }, ["v3", "h16x"], (m) => t.diagnostic(m));
    } finally {
      u.dispose();
    }
  });

  test("h16x where it cannot run is refused before anything is allocated", () => {
    const u = uploadSparseCase({ seed: 1306, b: 1, s_q: 1, h_q: 32, s_k: 200, topk: 64, pageBlockSize: 64 });
    const u16 = uploadSparseCase({ seed: 1307, b: 1, s_q: 1, h_q: 16, s_k: 200, topk: 64, pageBlockSize: 64 });
    try {
      const meta = getMlaMetadata();
      try {
        const args = (x: typeof u) => ({ ...x.dev, isFp8Kvcache: true as const, headDimV: 512, softmaxScale: x.c.softmaxScale, schedMeta: meta });
        const refused = (re: RegExp) => (e: unknown) => e instanceof ArgumentError && re.test(e.message);
        assert.throws(() => sparseDecodeGpu(args(u), { h16x: true }), refused(/h_q <= 16.*h_q = 32/));
        assert.throws(() => sparseDecodeGpu(args(u16), { h16x: true, h16: true }), refused(/no h16, no crossover/));
        assert.throws(() => sparseDecodeGpu(args(u16), { h16x: 1 as unknown as boolean }), refused(/true or false/));
        assert.equal(meta.initialized, false, "no metadata was filled by the refused calls");
      } finally {
        meta.dispose();
      }
    } finally {
      u.dispose();
      u16.dispose();
    }
  });
});
