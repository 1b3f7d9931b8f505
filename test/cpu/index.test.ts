import { test } from "node:test";
import assert from "node:assert/strict";
import * as root from "../../src/index.js";
import * as runtime from "../../src/runtime/index.js";

// The package's public values, pinned: a new export is a decision (README's API section and this list
// change together), not something that leaks in with a refactor. Types are erased and not listed.

test("the package root exports exactly what a user calls", () => {
  assert.deepEqual(Object.keys(root).sort(), [
    "ArgumentError",
    "CudaError",
    "Device",
    "Event",
    "Graph",
    "NoGpuError",
    "Stream",
    "Tensor",
    "bf16ArrayToF32",
    "dequantizeKvCacheModel1",
    "dequantizeKvCacheV32",
    "f32ArrayToBf16",
    "f32ArrayToFp16",
    "flashMlaWithKvcache",
    "fp16ArrayToF32",
    "getMlaMetadata",
    "gpuStatus",
    "mlaDecodeReference",
    "model1PageBytes",
    "quantizeKvCacheFp8",
    "quantizeKvCacheModel1",
    "quantizeKvCacheV32",
    "writeKvCacheFp8",
    "writeKvCacheModel1",
  ]);
});

test("flashmla-ts/runtime exports the CUDA runtime layer", () => {
  assert.deepEqual(Object.keys(runtime).sort(), [
    "DTYPES",
    "Device",
    "DeviceBuffer",
    "Event",
    "Graph",
    "Kernel",
    "Module",
    "Stream",
    "Tensor",
    "TensorMap",
    "allocHostArray",
    "contiguousStrides",
    "dtypeSize",
    "hopperSupport",
    "hostArrayMatches",
    "kernelArgSize",
    "normalizeLaunchConfig",
    "numelOf",
    "packKernelArgs",
    "readKernelManifest",
    "readVerifiedCubin",
  ]);
});

test("flashmla-ts/dcp exports decode context parallelism", async () => {
  const dcp = await import("../../src/dcp/index.js");
  assert.deepEqual(Object.keys(dcp).sort(), [
    "DcpStep",
    "dcpCausalForm",
    "dcpDecode",
    "dcpFlattenBlockTable",
    "dcpGlobalPosition",
    "dcpHeadSlice",
    "dcpLocalLength",
    "dcpMerge",
    "dcpMergeModel",
    "dcpOwner",
    "dcpPageMapFromRequests",
    "dcpPageMapRoundRobin",
    "dcpRescale",
    "dcpRescaleModel",
    "dcpVisibleLengths",
    "planDcpShards",
    "shardDenseCacheHost",
    "shardSparseCacheHost",
    "shardSparseIndicesHost",
  ]);
});

test("the root's classes are the runtime's, so values cross between the two entry points", () => {
  for (const name of ["Device", "Event", "Graph", "Stream", "Tensor"] as const) assert.equal(root[name], runtime[name], name);
});
