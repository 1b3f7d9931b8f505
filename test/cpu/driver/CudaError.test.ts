import { test } from "node:test";
import assert from "node:assert/strict";
import { cudaErrorFor } from "../../../src/driver/cudaErrorFor.js";
import { cuResultName } from "../../../src/driver/cuResultName.js";
import { CudaError } from "../../../src/errors/CudaError.js";
import { NoGpuError } from "../../../src/errors/NoGpuError.js";

test("CudaError message names the call, the CUresult name and code, and the description", () => {
  const e = new CudaError("cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory");
  assert.equal(e.message, "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
  assert.equal(e.name, "CudaError");
  assert.ok(e instanceof Error);
  assert.deepEqual([e.callName, e.code, e.errorName, e.errorString], ["cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"]);
});

test("cudaErrorFor() without a driver falls back to cuda.h names", () => {
  const e = cudaErrorFor(undefined, 700, "cuStreamSynchronize");
  assert.equal(e.errorName, "CUDA_ERROR_ILLEGAL_ADDRESS");
  assert.match(e.message, /^cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS \(700\): /);
});

test("cuResultName() knows cuda.h's codes and labels unknown ones", () => {
  assert.equal(cuResultName(0), "CUDA_SUCCESS");
  assert.equal(cuResultName(2), "CUDA_ERROR_OUT_OF_MEMORY");
  assert.equal(cuResultName(100), "CUDA_ERROR_NO_DEVICE");
  assert.equal(cuResultName(600), "CUDA_ERROR_NOT_READY");
  assert.equal(cuResultName(999), "CUDA_ERROR_UNKNOWN");
  assert.equal(cuResultName(123456), "CUresult 123456");
});

test("NoGpuError keeps the reason and points to the CPU reference", () => {
  const cause = new Error("dlopen failed");
  const e = new NoGpuError("libcuda.so.1 not found: no NVIDIA driver on this machine", { cause });
  assert.equal(e.name, "NoGpuError");
  assert.equal(e.reason, "libcuda.so.1 not found: no NVIDIA driver on this machine");
  assert.equal(e.message, "libcuda.so.1 not found: no NVIDIA driver on this machine; the CPU reference (mlaDecodeReference) works without a GPU");
  assert.equal(e.cause, cause);
});
