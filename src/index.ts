/**
 * flashmla-ts: FlashMLA-class MLA decoding for Node.js on NVIDIA Hopper GPUs, with a float64 CPU
 * reference that runs anywhere. What a user calls; the CUDA runtime layer (modules, kernels, tensor
 * maps, buffers) is the subpath "flashmla-ts/runtime". test/cpu/index.test.ts pins this list.
 */
export { flashMlaWithKvcache } from "./mla/flashMlaWithKvcache.js";
export type { FlashMlaWithKvcacheArgs, FlashMlaResult } from "./mla/args.js";
export { getMlaMetadata, type MlaSchedMeta, type MlaSchedConfig } from "./mla/sched/MlaSchedMeta.js";
export {
  mlaDecodeReference,
  type MlaDecodeReferenceArgs,
  type MlaDecodeReferenceOptions,
  type MlaDecodeReferenceResult,
  type ReferenceRow,
} from "./mla/reference/mlaDecodeReference.js";
export { quantizeKvCacheFp8, writeKvCacheFp8, type WriteKvCacheFp8Args } from "./mla/kvCache/writeKvCacheFp8.js";
export { dequantizeKvCacheV32, quantizeKvCacheV32 } from "./numeric/kvCacheFp8.js";
export { writeKvCacheModel1, type WriteKvCacheModel1Args } from "./mla/kvCache/writeKvCacheModel1.js";
export { dequantizeKvCacheModel1, model1PageBytes, quantizeKvCacheModel1 } from "./numeric/kvCacheModel1.js";
export { bf16ArrayToF32, f32ArrayToBf16 } from "./numeric/bf16.js";
export { f32ArrayToFp16, fp16ArrayToF32 } from "./numeric/fp16.js";
export {
  gpuStatus,
  type GpuDeviceSummary,
  type GpuStatus,
  type GpuStatusOptions,
  type KernelStatus,
} from "./mla/gpuStatus.js";
export { Device } from "./runtime/Device.js";
export { Event } from "./runtime/Event.js";
export { Graph } from "./runtime/Graph.js";
export { Stream } from "./runtime/Stream.js";
export { Tensor, type DeviceName, type FloatDType } from "./runtime/Tensor.js";
export type { DType, HostArray, HostArrayOf } from "./runtime/dtype.js";
export type { FloatValues } from "./numeric/checkArrayArgument.js";
export { ArgumentError } from "./errors/ArgumentError.js";
export { CudaError } from "./errors/CudaError.js";
export { NoGpuError } from "./errors/NoGpuError.js";
