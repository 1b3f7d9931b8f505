import { test } from "node:test";
import { describeGpu } from "../../helpers/gpu.js";
import { assertSparseKernelsAgree, assertSparseOptionsRefused, checkSparseAgainstCpu as check, uploadSparseCase } from "../../helpers/sparseCheck.js";

// The h16 consumer (tokens as wgmma's M, h_q <= 16): flashMlaWithKvcache's sparse kernel at 8 and 16 heads
// until h16x (sparseH16x.test.ts); still selectable with { h16: true }.

describeGpu("sparse h16 consumer", () => {
  test("h16 matches the CPU reference, every element, at 16 and 8 heads", () => {
    const h16 = { h16: true };
    check({ seed: 1200, b: 3, s_q: 2, h_q: 16, s_k: 700, topk: 200, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true }, 0, false, "v3", h16);
    check({ seed: 1201, b: 2, s_q: 1, h_q: 8, s_k: 900, topk: 300, pageBlockSize: 64, sink: true, repeat: 0.2, blockPadTokens: 3 }, 0, false, "v3", h16);
    check({ seed: 1202, b: 2, s_q: 3, h_q: 8, s_k: 500, topk: 130, pageBlockSize: 37, invalidFraction: 0.5, varlen: true }, 0, false, "v3", h16);
    // Every index invalid: out 0, lse +inf (the sink cannot make an empty row non-empty).
    check({ seed: 1203, b: 2, s_q: 2, h_q: 16, s_k: 300, topk: 100, pageBlockSize: 64, sink: true, invalidFraction: 1 }, 0, false, "v3", h16);
  });

  test("h16 agrees with v3 on a long top-k list split over many parts (tolerance asserted)", (t) => {
    const u = uploadSparseCase({ seed: 1204, b: 1, s_q: 2, h_q: 16, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true });
    try {
      assertSparseKernelsAgree(u, { producer: "v3" }, { producer: "v3", h16: true }, ["v3", "h16"], (m) => t.diagnostic(m));
    } finally {
      u.dispose();
    }
  });

  test("h16 where it cannot run is refused before anything is allocated", () => {
    const u = uploadSparseCase({ seed: 1205, b: 1, s_q: 1, h_q: 64, s_k: 200, topk: 64, pageBlockSize: 64 });
    const u16 = uploadSparseCase({ seed: 1206, b: 1, s_q: 1, h_q: 16, s_k: 200, topk: 64, pageBlockSize: 64 });
    try {
      assertSparseOptionsRefused([
        { u, opts: { h16: true }, message: /h_q <= 16.*h_q = 64/ },
        { u: u16, opts: { h16: true, producer: "v2" }, message: /v3 producers without crossover/ },
        { u: u16, opts: { h16: "yes" as unknown as boolean }, message: /true, false or "auto"/ },
      ]);
    } finally {
      u.dispose();
      u16.dispose();
    }
  });
});
