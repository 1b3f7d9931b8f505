/**
 * The cuda.h enum values and flags the runtime layer passes to the driver (CUDA 13.0 header).
 * Only the members we use are listed; names keep cuda.h's spelling minus the common prefix.
 */

/** CUresult codes the runtime reacts to (all others are just reported). */
export const CUresult = {
  SUCCESS: 0,
  ERROR_INVALID_VALUE: 1,
  ERROR_OUT_OF_MEMORY: 2,
  ERROR_NOT_INITIALIZED: 3,
  ERROR_NO_DEVICE: 100,
  ERROR_NOT_FOUND: 500,
  ERROR_NOT_READY: 600,
} as const;

/** CUdevice_attribute. */
export const CUdeviceAttribute = {
  MAX_THREADS_PER_BLOCK: 1,
  CLOCK_RATE: 13,
  MULTIPROCESSOR_COUNT: 16,
  MEMORY_CLOCK_RATE: 36,
  GLOBAL_MEMORY_BUS_WIDTH: 37,
  L2_CACHE_SIZE: 38,
  COMPUTE_CAPABILITY_MAJOR: 75,
  COMPUTE_CAPABILITY_MINOR: 76,
  MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: 81,
  MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 97,
  CLUSTER_LAUNCH: 120,
} as const;

/** CUfunction_attribute. */
export const CUfunctionAttribute = {
  MAX_THREADS_PER_BLOCK: 0,
  SHARED_SIZE_BYTES: 1,
  CONST_SIZE_BYTES: 2,
  LOCAL_SIZE_BYTES: 3,
  NUM_REGS: 4,
  PTX_VERSION: 5,
  BINARY_VERSION: 6,
  MAX_DYNAMIC_SHARED_SIZE_BYTES: 8,
  NON_PORTABLE_CLUSTER_SIZE_ALLOWED: 14,
} as const;

/** CUlaunchAttributeID. */
export const CUlaunchAttributeID = {
  CLUSTER_DIMENSION: 4,
  PROGRAMMATIC_STREAM_SERIALIZATION: 6,
} as const;

/** CUstream_flags / CUevent_flags / CUstreamCaptureMode. */
export const CUflags = {
  STREAM_NON_BLOCKING: 0x1,
  EVENT_DEFAULT: 0x0,
  EVENT_BLOCKING_SYNC: 0x1,
  EVENT_DISABLE_TIMING: 0x2,
  STREAM_CAPTURE_MODE_GLOBAL: 0,
} as const;

/** CUtensorMapDataType, with each type's element size in bytes. */
export const CUtensorMapDataType = {
  UINT8: { value: 0, sizeBytes: 1, float: false },
  UINT16: { value: 1, sizeBytes: 2, float: false },
  UINT32: { value: 2, sizeBytes: 4, float: false },
  INT32: { value: 3, sizeBytes: 4, float: false },
  UINT64: { value: 4, sizeBytes: 8, float: false },
  INT64: { value: 5, sizeBytes: 8, float: false },
  FLOAT16: { value: 6, sizeBytes: 2, float: true },
  FLOAT32: { value: 7, sizeBytes: 4, float: true },
  FLOAT64: { value: 8, sizeBytes: 8, float: true },
  BFLOAT16: { value: 9, sizeBytes: 2, float: true },
  FLOAT32_FTZ: { value: 10, sizeBytes: 4, float: true },
  TFLOAT32: { value: 11, sizeBytes: 4, float: true },
  TFLOAT32_FTZ: { value: 12, sizeBytes: 4, float: true },
} as const;

/** CUtensorMapInterleave. */
export const CUtensorMapInterleave = { NONE: 0, "16B": 1, "32B": 2 } as const;

/** CUtensorMapSwizzle (the classic modes; span = bytes one swizzle pattern covers). */
export const CUtensorMapSwizzle = {
  NONE: { value: 0, spanBytes: 0 },
  "32B": { value: 1, spanBytes: 32 },
  "64B": { value: 2, spanBytes: 64 },
  "128B": { value: 3, spanBytes: 128 },
} as const;

/** CUtensorMapL2promotion. */
export const CUtensorMapL2promotion = { NONE: 0, "64B": 1, "128B": 2, "256B": 3 } as const;

/** CUtensorMapFloatOOBfill. */
export const CUtensorMapFloatOOBfill = { NONE: 0, NAN_REQUEST_ZERO_FMA: 1 } as const;

/** sizeof(CUtensorMap): CU_TENSOR_MAP_NUM_QWORDS (16) 64-bit words. */
export const CU_TENSOR_MAP_SIZE_BYTES = 128;
/** The driver requires the CUtensorMap it writes to be 64-byte aligned. */
export const CU_TENSOR_MAP_ALIGNMENT = 64;
