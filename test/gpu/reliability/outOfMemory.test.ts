import { test } from "node:test";
import assert from "node:assert/strict";
import { CudaError } from "../../../src/errors/CudaError.js";
import { flashMlaWithKvcache } from "../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeDenseCaseGpu } from "../../../src/testing/gpuDenseCase.js";

// Out of device memory in the middle of a decode call: the call throws CUDA_ERROR_OUT_OF_MEMORY, frees
// whatever it had allocated (a server retries such calls; each retry must not leak), and the same
// metadata object works once memory is back.

const TOLERANCE = 4 * 2 ** 20;

describeGpu("out of device memory during a decode call", (device) => {
  test("a call that cannot allocate its split-KV workspace throws OUT_OF_MEMORY, leaks nothing, and succeeds after memory is freed", () => {
    // Workspace: (b + parts) = 161 slots x 256 rows x 512 f32, about 80 MiB; out is 32 MiB.
    const c = makeDenseCaseGpu({ seed: 930, b: 128, s_q: 2, h_q: 128, h_kv: 1, seqlens: { mean: 256, varlen: true }, causal: true, dtype: "bf16" });
    const meta = getMlaMetadata();
    try {
      // Warm the kernels so module loading is not part of the accounting.
      const warm = getMlaMetadata();
      const w = flashMlaWithKvcache({ ...c, schedMeta: warm });
      device.synchronize();
      w.out.dispose(); w.lse.dispose(); warm.dispose();

      const before = device.memInfo().free;
      // Leave about 24 MiB: the metadata's small tensors fit, its 80 MiB workspace does not.
      const filler = DeviceBuffer.alloc(Math.max(1, before - 24 * 2 ** 20));
      try {
        for (let attempt = 0; attempt < 3; attempt++) {
          assert.throws(() => flashMlaWithKvcache({ ...c, schedMeta: meta }), (e: unknown) => {
            assert.ok(e instanceof CudaError, `attempt ${attempt}: expected a CudaError, got ${String(e)}`);
            assert.equal(e.errorName, "CUDA_ERROR_OUT_OF_MEMORY");
            return true;
          });
          assert.equal(meta.initialized, false, "the metadata stays unfilled");
          assert.equal(meta.workspace, undefined, "and holds no half-allocated workspace");
        }
      } finally {
        filler.dispose();
      }
      device.synchronize();
      const after = device.memInfo().free;
      assert.ok(Math.abs(after - before) <= TOLERANCE, `three failed calls changed free memory by ${after - before} bytes`);

      const fresh = getMlaMetadata();
      const ok = flashMlaWithKvcache({ ...c, schedMeta: meta });
      const again = flashMlaWithKvcache({ ...c, schedMeta: fresh });
      try {
        assert.deepEqual(ok.out.toHost().host, again.out.toHost().host, "the retried metadata gives the same result as fresh metadata");
      } finally {
        for (const t of [ok.out, ok.lse, again.out, again.lse]) t.dispose();
        fresh.dispose();
      }
    } finally {
      meta.dispose();
      c.dispose();
    }
  });
});
