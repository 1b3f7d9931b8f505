/**
 * Element types a Tensor can hold, and the host array that stores each bit for bit:
 * - "bf16": bfloat16 (8 exponent bits, 7 mantissa bits), as 16-bit patterns in a Uint16Array;
 * - "fp16": IEEE binary16 half precision, as 16-bit patterns in a Uint16Array;
 * - "fp8_e4m3": OCP e4m3fn (bias 7, no infinities, max ±448), one code per byte in a Uint8Array;
 * - "f32": IEEE binary32 in a Float32Array;
 * - "i32": signed 32-bit integers in an Int32Array (block tables, lengths, token ids);
 * - "u8": raw bytes in a Uint8Array (the V32 FP8 KV cache: 656 bytes per token).
 * `Tensor.fromFloat32` builds bf16/fp16/f32 from numbers; `tensor.toFloat32()` reads any dtype back.
 */
export type DType = "bf16" | "fp16" | "fp8_e4m3" | "f32" | "i32" | "u8";

export const DTYPES: readonly DType[] = ["bf16", "fp16", "fp8_e4m3", "f32", "i32", "u8"];

/** Bytes per element. */
export function dtypeSize(dtype: DType): number {
  switch (dtype) {
    case "bf16":
    case "fp16":
      return 2;
    case "fp8_e4m3":
    case "u8":
      return 1;
    case "f32":
    case "i32":
      return 4;
    default:
      return dtype satisfies never;
  }
}

/** The host array type that stores elements of `dtype` bit for bit. */
export type HostArrayOf<D extends DType> = D extends "bf16" | "fp16"
  ? Uint16Array
  : D extends "fp8_e4m3" | "u8"
    ? Uint8Array
    : D extends "f32"
      ? Float32Array
      : Int32Array;

export type HostArray = Uint16Array | Uint8Array | Float32Array | Int32Array;

/** Allocates a zeroed host array for `count` elements of `dtype`. */
export function allocHostArray(dtype: DType, count: number): HostArray {
  switch (dtype) {
    case "bf16":
    case "fp16":
      return new Uint16Array(count);
    case "fp8_e4m3":
    case "u8":
      return new Uint8Array(count);
    case "f32":
      return new Float32Array(count);
    case "i32":
      return new Int32Array(count);
    default:
      return dtype satisfies never;
  }
}

/** True when `data` is the array type that stores `dtype`. */
export function hostArrayMatches(dtype: DType, data: ArrayBufferView): boolean {
  switch (dtype) {
    case "bf16":
    case "fp16":
      return data instanceof Uint16Array;
    case "fp8_e4m3":
    case "u8":
      return data instanceof Uint8Array;
    case "f32":
      return data instanceof Float32Array;
    case "i32":
      return data instanceof Int32Array;
    default:
      return dtype satisfies never;
  }
}
