import { test } from "node:test";
import assert from "node:assert/strict";
import { CudaError } from "../../../src/errors/CudaError.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { describeGpu } from "../../helpers/gpu.js";

describeGpu(
  "device memory accounting",
  (device) => {
    test("allocating and freeing 10,000 buffers leaves free device memory unchanged (within 4 MiB)", (t) => {
      // Warm up the allocator so its first-use pools are not counted as a leak.
      DeviceBuffer.alloc(1 << 20).dispose();
      device.synchronize();
      const before = device.memInfo().free;
      const sizes = [256, 4096, 65536, 1 << 20, 3 << 20];
      const live: DeviceBuffer[] = [];
      for (let i = 0; i < 10_000; i++) {
        live.push(DeviceBuffer.alloc(sizes[i % sizes.length]));
        // Keep up to 64 alive so frees interleave with allocations.
        if (live.length > 64) live.shift()!.dispose();
      }
      for (const b of live) b.dispose();
      device.synchronize();
      const after = device.memInfo().free;
      const delta = after - before;
      t.diagnostic(`free before ${before} B, after ${after} B, delta ${delta} B`);
      assert.ok(Math.abs(delta) < 4 * 2 ** 20, `free memory changed by ${delta} bytes`);
    });

    test("allocating 1 TiB throws CUDA_ERROR_OUT_OF_MEMORY and the process stays usable", () => {
      assert.throws(
        () => DeviceBuffer.alloc(2 ** 40),
        (e: unknown) => {
          assert.ok(e instanceof CudaError);
          assert.equal(e.code, 2);
          assert.equal(e.errorName, "CUDA_ERROR_OUT_OF_MEMORY");
          assert.equal(e.callName, "cuMemAlloc_v2");
          assert.match(e.message, /^cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY \(2\): out of memory; requested 1\.0 TiB on cuda:0, \d+\.\d [KMGT]iB free of \d+\.\d GiB: dispose\(\) tensors and metadata no longer needed, or decode a smaller batch$/);
          return true;
        },
      );
      using buf = DeviceBuffer.alloc(1 << 20);
      const src = new Uint32Array(1 << 18).map((_, i) => i * 2654435761);
      buf.copyFromHost(src);
      const back = new Uint32Array(1 << 18);
      buf.copyToHost(back);
      assert.deepEqual(back, src);
    });
  },
  { needsKernels: false },
);
