import type { DType } from "../runtime/dtype.js";
import { NcclDataType } from "./ncclEnums.js";

/** What a call does with the elements: "reduce" combines them (sum, max, ...), "copy" only moves them. */
export type NcclElementUse = "reduce" | "copy";

/**
 * The ncclDataType_t NCCL handles a tensor of `dtype` as: bf16 → ncclBfloat16 (9), fp16 → ncclFloat16
 * (6), f32 → ncclFloat32 (7), i32 → ncclInt32 (2), u8 → ncclUint8 (1). fp8_e4m3 is ncclFloat8e4m3 (10)
 * where it is reduced (NCCL 2.24 and newer, the caller checks the version) and ncclUint8 where it is
 * only moved: a byte is a byte, and every NCCL version moves uint8.
 */
export function ncclDataTypeOf(dtype: DType, use: NcclElementUse): number {
  switch (dtype) {
    case "bf16":
      return NcclDataType.Bfloat16;
    case "fp16":
      return NcclDataType.Float16;
    case "f32":
      return NcclDataType.Float32;
    case "i32":
      return NcclDataType.Int32;
    case "u8":
      return NcclDataType.Uint8;
    case "fp8_e4m3":
      return use === "reduce" ? NcclDataType.Float8e4m3 : NcclDataType.Uint8;
    default:
      return dtype satisfies never;
  }
}
