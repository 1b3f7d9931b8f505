import { test } from "node:test";
import assert from "node:assert/strict";
import { getMlaMetadata } from "../../../src/mla/MlaSchedMeta.js";
import { sparseDecodeGpu } from "../../../src/mla/sparseDecodeGpu.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeSparseCase, type SparseCaseOptions } from "../../helpers/makeDecodeCase.js";
import { checkSparseAgainstCpu as check } from "../../helpers/sparseCheck.js";

// The sparse producer not yet run on a GPU when it was written (producer "v2"): its own file, so a fault
// in it cannot stop the suites of the verified kernels. Once it passes here it can become the default.

describeGpu("sparse producer v2 (experimental)", () => {
  test("the second producer (v2) gives bit-identical outputs to the first, plain and crossover", () => {
    const cases: SparseCaseOptions[] = [
      { seed: 1000, b: 3, s_q: 3, h_q: 16, s_k: 700, topk: 200, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true },
      { seed: 1001, b: 4, s_q: 2, h_q: 64, s_k: 3000, topk: 1100, pageBlockSize: 64, repeat: 0.3, blockPadTokens: 3 },
      { seed: 1002, b: 5, s_q: 2, h_q: 128, s_k: 3000, topk: 640, pageBlockSize: 2, sink: true, invalidFraction: 0.05 },
      { seed: 1003, b: 1, s_q: 2, h_q: 128, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true },
    ];
    for (const opts of cases) {
      const c = makeSparseCase(opts);
      const dev = { q: Tensor.toDevice(c.q), kCache: Tensor.toDevice(c.kCache), indices: Tensor.toDevice(c.indices), topkLength: c.topkLength && Tensor.toDevice(c.topkLength), attnSink: c.attnSink && Tensor.toDevice(c.attnSink) };
      try {
        for (const crossover of opts.h_q === 128 ? [false, true] : [false]) {
          const runs = (["v1", "v2"] as const).map((producer) => {
            const meta = getMlaMetadata();
            try {
              const r = sparseDecodeGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: meta }, { crossover, producer });
              const bits = { out: r.out.toHost().host, lse: r.lse.toHost().host };
              r.out.dispose();
              r.lse.dispose();
              return bits;
            } finally {
              meta.dispose();
            }
          });
          const label = `${JSON.stringify(opts)} crossover ${crossover}`;
          assert.deepEqual(runs[1].out, runs[0].out, `out differs (${label})`);
          assert.deepEqual(runs[1].lse, runs[0].lse, `lse differs (${label})`);
        }
      } finally {
        for (const t of Object.values(dev)) t?.dispose();
      }
    }
    // And v2 against the CPU reference on its own, every element.
    check({ seed: 1010, b: 2, s_q: 2, h_q: 64, s_k: 900, topk: 300, pageBlockSize: 69, sink: true, invalidFraction: 0.1 }, 0, false, "v2");
  });

  test("v2 with crossover matches the CPU reference at 128 heads", () => {
    check({ seed: 1011, b: 2, s_q: 2, h_q: 128, s_k: 1500, topk: 700, pageBlockSize: 61, sink: true, invalidFraction: 0.1, topkLength: true }, 0, true, "v2");
  });
});
