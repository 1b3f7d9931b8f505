// The numerics layer: bit-exact conversions, the FP8 KV cache format, the shared comparator and seeded random data.
export { bf16ArrayToF32, bf16BitsToF32, f32ArrayToBf16, f32ToBf16Bits, f64ToBf16Bits } from "./bf16.js";
export { f32ArrayToFp16, f32ToFp16Bits, f64ToFp16Bits, fp16ArrayToF32, fp16BitsToF32 } from "./fp16.js";
export { FP8_E4M3_MAX, FP8_E4M3_NAN, f32ToFp8E4m3, fp8E4m3ToF32 } from "./fp8e4m3.js";
export {
  D_NOPE,
  D_QK,
  D_ROPE,
  FP8_TILE,
  FP8_TOKEN_BYTES,
  dequantizeKvCacheV32,
  dequantizeKvTokenV32,
  fp8TileScale,
  quantizeKvCacheV32,
  quantizeKvTokenV32,
} from "./kvCacheFp8.js";
export { Rng, randomBf16, randomFp16, type RandomHalfOptions } from "./random.js";
export {
  DENSE_LSE_TOL,
  DENSE_OUT_TOL,
  SPARSE_LSE_TOL,
  SPARSE_OUT_TOL,
  assertClose,
  compareTensors,
  type CompareOptions,
  type CompareResult,
  type Tolerance,
} from "./compare.js";
