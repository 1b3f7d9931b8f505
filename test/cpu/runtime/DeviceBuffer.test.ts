import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { DeviceBuffer, formatBytes, outOfMemoryDetail } from "../../../src/runtime/DeviceBuffer.js";
import { CudaError } from "../../../src/errors/CudaError.js";
import { Device } from "../../../src/runtime/Device.js";

// These run anywhere: argument checks come before any driver call.

test("DeviceBuffer.alloc() rejects 0 and non-integer sizes with an ArgumentError", () => {
  for (const size of [0, -1, 1.5, Number.NaN, 2 ** 60]) {
    assert.throws(() => DeviceBuffer.alloc(size), (e: unknown) => {
      assert.ok(e instanceof ArgumentError);
      assert.equal(e.message, `DeviceBuffer.alloc(): argument 'sizeBytes': expected a positive integer number of bytes, got ${size}`);
      return true;
    });
  }
});

test("Device.get() rejects a negative or fractional ordinal with an ArgumentError", () => {
  assert.throws(() => Device.get(-1), /Device\.get\(\): argument 'ordinal': expected a non-negative integer, got -1/);
  assert.throws(() => Device.get(0.5), ArgumentError);
});

test("outOfMemoryDetail() names the size asked for, the free memory and the remedy", () => {
  assert.equal(
    outOfMemoryDetail(84 * 2 ** 20, 0, { free: 23 * 2 ** 20, total: 140 * 2 ** 30 }),
    "requested 84.0 MiB on cuda:0, 23.0 MiB free of 140.0 GiB: dispose() tensors and metadata no longer needed, or decode a smaller batch",
  );
  // Without the driver's figures it still names the size and the remedy.
  assert.equal(outOfMemoryDetail(2 ** 40, 1), "requested 1.0 TiB on cuda:1: dispose() tensors and metadata no longer needed, or decode a smaller batch");
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(2 ** 50), "1024.0 TiB");
});

test("CudaError appends its detail after the driver's description", () => {
  const e = new CudaError("cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", "requested 1.0 TiB on cuda:0");
  assert.equal(e.message, "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory; requested 1.0 TiB on cuda:0");
  assert.equal(new CudaError("cuInit", 100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected").message, "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
});
