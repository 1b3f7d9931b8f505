/**
 * flashmla-ts: FlashMLA-class MLA decoding for Node.js on NVIDIA Hopper GPUs, with a float64 CPU
 * reference that runs anywhere. Public API only; the layers live in driver/, runtime/, numeric/,
 * roofline/ and mla/ (docs/ARCHITECTURE.md).
 */
export { flashMlaWithKvcache, validateDenseArgs, type FlashMlaWithKvcacheArgs, type FlashMlaResult } from "./mla/flashMlaWithKvcache.js";
export { getMlaMetadata, MlaSchedMeta, type MlaSchedConfig } from "./mla/MlaSchedMeta.js";
export { mlaDecodeReference, type MlaDecodeReferenceArgs, type MlaDecodeReferenceOptions, type MlaDecodeReferenceResult } from "./mla/mlaDecodeReference.js";
export { mlaDecodeReferenceGpu } from "./mla/mlaDecodeReferenceGpu.js";
export { quantizeKvCacheFp8, writeKvCacheFp8, type WriteKvCacheFp8Args } from "./mla/kvCacheFp8Gpu.js";
export { computeSchedule, checkSchedule, numSmPartsDense, DENSE_SCHED_FIXED_OVERHEAD, SCHED_FIXED_OVERHEAD, type Schedule } from "./mla/schedule.js";
export * from "./runtime/index.js";
export * from "./numeric/index.js";
export { ArgumentError } from "./errors/ArgumentError.js";
export { CudaError } from "./errors/CudaError.js";
export { NoGpuError } from "./errors/NoGpuError.js";
