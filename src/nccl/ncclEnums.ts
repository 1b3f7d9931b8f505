/**
 * nccl.h's enum values (NCCL 2.28 header), names kept minus the `nccl` prefix. The values are the
 * ABI: they have not changed since they were introduced, only grown at the end.
 */

/** ncclResult_t, by code. ncclTimeout (8) appeared in 2.28; older libraries never return it. */
export const ncclResultNames: readonly string[] = [
  "ncclSuccess",
  "ncclUnhandledCudaError",
  "ncclSystemError",
  "ncclInternalError",
  "ncclInvalidArgument",
  "ncclInvalidUsage",
  "ncclRemoteError",
  "ncclInProgress",
  "ncclTimeout",
];

/** The nccl.h name of an ncclResult_t code, e.g. 4 -> "ncclInvalidArgument"; unknown codes read "ncclResult_t <code>". */
export function ncclResultName(code: number): string {
  return ncclResultNames[code] ?? `ncclResult_t ${code}`;
}

/** ncclResult_t codes the binding reacts to. */
export const NcclResult = {
  Success: 0,
  InProgress: 7,
} as const;

/**
 * ncclDataType_t. Int8 and Char, Int32 and Int, Float16 and Half, Float32 and Float, Float64 and Double
 * are the same codes under two names. The fp8 types appeared in NCCL 2.24.
 */
export const NcclDataType = {
  Int8: 0,
  Uint8: 1,
  Int32: 2,
  Uint32: 3,
  Int64: 4,
  Uint64: 5,
  Float16: 6,
  Float32: 7,
  Float64: 8,
  Bfloat16: 9,
  Float8e4m3: 10,
  Float8e5m2: 11,
} as const;

/** A reduction, as the collectives take it: NCCL's ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg (NCCL 2.10+). */
export type NcclReduceOp = "sum" | "prod" | "max" | "min" | "avg";

/** ncclRedOp_t of each reduction. */
export const ncclRedOp: Readonly<Record<NcclReduceOp, number>> = {
  sum: 0,
  prod: 1,
  max: 2,
  min: 3,
  avg: 4,
};

/** NCCL_UNIQUE_ID_BYTES: the size of an ncclUniqueId. */
export const NCCL_UNIQUE_ID_BYTES = 128;
