import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { TensorMap, type TiledTensorMapOptions } from "../../../src/runtime/TensorMap.js";

// FlashMLA's dense KV cache [num_blocks, 64, h_kv, 576] bf16, innermost first.
const kvCache: TiledTensorMapOptions = {
  dataType: "bf16",
  globalAddress: 0x7f00_0000_0000n,
  globalDim: [576, 1, 64, 100],
  globalStrides: [1152, 1152, 73728],
  boxDim: [64, 1, 64, 1],
  swizzle: "128B",
  l2Promotion: "256B",
};

test("TensorMap.validateTiled() converts a valid map to the driver's arguments", () => {
  const a = TensorMap.validateTiled(kvCache);
  assert.equal(a.dataType, 9, "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16");
  assert.equal(a.elementSizeBytes, 2);
  assert.equal(a.rank, 4);
  assert.deepEqual([...a.globalDim], [576n, 1n, 64n, 100n]);
  assert.deepEqual([...a.globalStrides], [1152n, 1152n, 73728n]);
  assert.deepEqual([...a.boxDim], [64, 1, 64, 1]);
  assert.deepEqual([...a.elementStrides], [1, 1, 1, 1]);
  assert.deepEqual([a.interleave, a.swizzle, a.l2Promotion, a.oobFill], [0, 3, 3, 0]);
});

test("TensorMap.validateTiled() maps our dtypes and cuda.h names to CUtensorMapDataType", () => {
  const base = { globalAddress: 0x1000n, globalDim: [64], globalStrides: [], boxDim: [64] };
  assert.equal(TensorMap.validateTiled({ ...base, dataType: "fp8_e4m3" }).dataType, 0);
  assert.equal(TensorMap.validateTiled({ ...base, dataType: "fp16" }).dataType, 6);
  assert.equal(TensorMap.validateTiled({ ...base, dataType: "f32" }).dataType, 7);
  assert.equal(TensorMap.validateTiled({ ...base, dataType: "i32" }).dataType, 3);
  assert.equal(TensorMap.validateTiled({ ...base, dataType: "FLOAT32" }).dataType, 7);
  assert.equal(TensorMap.validateTiled({ ...base, dataType: "UINT64", boxDim: [2] }).elementSizeBytes, 8);
});

test("TensorMap.validateTiled() enforces the driver's rules, naming the field", () => {
  const bad: [Partial<TiledTensorMapOptions>, string, RegExp][] = [
    [{ dataType: "f64" as never }, "dataType", /one of UINT8/],
    [{ dataType: "toString" as never }, "dataType", /one of/],
    [{ globalAddress: 0x7f00_0000_0008n }, "globalAddress", /aligned to 16 bytes/],
    [{ globalAddress: 4096 as unknown as bigint }, "globalAddress", /bigint/],
    [{ globalDim: [576, 1, 64, 100, 2, 2], globalStrides: [1152, 1152, 73728, 16, 16], boxDim: [64, 1, 64, 1, 1, 1] }, "globalDim", /1\.\.5 extents/],
    [{ globalDim: [] }, "globalDim", /1\.\.5 extents/],
    [{ globalDim: [576, 0, 64, 100] }, "globalDim\\[1\\]", /\[1, 2\^32\]/],
    [{ globalDim: [576, 1, 64, 2 ** 32 + 1] }, "globalDim\\[3\\]", /\[1, 2\^32\]/],
    [{ globalStrides: [1152, 1152] }, "globalStrides", /3 byte strides/],
    [{ globalStrides: [1152, 1160, 73728] }, "globalStrides\\[1\\]", /multiple of 16/],
    [{ globalStrides: [1152, 1152, 2 ** 40] }, "globalStrides\\[2\\]", /below 2\^40/],
    [{ boxDim: [64, 1, 64] }, "boxDim", /4 box extents/],
    [{ boxDim: [64, 1, 257, 1] }, "boxDim\\[2\\]", /\[1, 256\]/],
    [{ boxDim: [64, 0, 64, 1] }, "boxDim\\[1\\]", /\[1, 256\]/],
    [{ boxDim: [128, 1, 64, 1] }, "boxDim\\[0\\]", /at most 128 bytes with swizzle 128B, got 128 \(256 bytes\)/],
    [{ boxDim: [4, 1, 64, 1], swizzle: "NONE" }, "boxDim\\[0\\]", /multiple of 16 bytes/],
    [{ boxDim: [32, 1, 64, 1], swizzle: "32B" }, "boxDim\\[0\\]", /at most 32 bytes with swizzle 32B/],
    [{ swizzle: "256B" as never }, "swizzle", /one of "NONE", "32B", "64B", "128B"/],
    [{ interleave: "32B" }, "swizzle", /swizzle "32B" with interleave "32B"/],
    [{ elementStrides: [1, 1, 9, 1] }, "elementStrides\\[2\\]", /\[1, 8\]/],
    [{ elementStrides: [1, 1] }, "elementStrides", /4 traversal strides/],
    [{ l2Promotion: "512B" as never }, "l2Promotion", /one of/],
    [{ dataType: "i32", boxDim: [32, 1, 64, 1], oobFill: "NAN_REQUEST_ZERO_FMA" }, "oobFill", /"NONE" for the integer type INT32/],
  ];
  for (const [patch, field, message] of bad) {
    assert.throws(
      () => TensorMap.validateTiled({ ...kvCache, ...patch }),
      (e: unknown) => {
        assert.ok(e instanceof ArgumentError, field);
        assert.match(e.message, new RegExp(`^TensorMap\\.encodeTiled\\(\\): argument '${field}': `));
        assert.match(e.message, message);
        return true;
      },
      field,
    );
  }
});

test("TensorMap.validateTiled() accepts interleave 32B with swizzle 32B and 32-byte alignment", () => {
  const a = TensorMap.validateTiled({ ...kvCache, interleave: "32B", swizzle: "32B", globalStrides: [1152, 1152, 73728], boxDim: [64, 1, 64, 1] });
  assert.equal(a.interleave, 2);
  assert.throws(() => TensorMap.validateTiled({ ...kvCache, interleave: "32B", swizzle: "32B", globalAddress: 0x1010n }), /aligned to 32 bytes/);
});
