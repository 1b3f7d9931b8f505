import { f32Bits } from "./f32Bits.js";

/** Largest finite e4m3fn magnitude: 1.75 · 2^8. */
export const FP8_E4M3_MAX = 448;

/** The NaN code of e4m3fn with a positive sign (S.1111.111); 0xff is the negative one. */
export const FP8_E4M3_NAN = 0x7f;

// f32 biased exponent of 2^-6, the smallest e4m3 normal, and the rebias between the two formats.
const F32_EXP_FP8_MIN_NORMAL = 121;
const REBIAS = (127 - 7) << 23;

function decodeCode(code: number): number {
  const sign = code & 0x80 ? -1 : 1;
  const exponent = (code >>> 3) & 0xf;
  const mantissa = code & 0x7;
  if (exponent === 0xf && mantissa === 0x7) return NaN;
  if (exponent === 0) return sign * mantissa * 2 ** -9;
  return sign * (8 + mantissa) * 2 ** (exponent - 10);
}

const DECODE_TABLE = Float32Array.from({ length: 256 }, (_, code) => decodeCode(code));

/**
 * The exact value of the OCP e4m3fn code `code` (low 8 bits used): bias 7, 3 mantissa bits,
 * subnormals down to 2^-9, largest finite ±448, no infinities, NaN for 0x7f and 0xff.
 */
export function fp8E4m3ToF32(code: number): number {
  return DECODE_TABLE[code & 0xff];
}

/** Decodes each e4m3fn code exactly with `fp8E4m3ToF32` (a table lookup). */
export function fp8E4m3ArrayToF32(codes: Uint8Array): Float32Array {
  const out = new Float32Array(codes.length);
  for (let i = 0; i < codes.length; i++) out[i] = DECODE_TABLE[codes[i]];
  return out;
}

/**
 * Rounds `x` to f32 (Math.fround) and then to an OCP e4m3fn code, nearest even, the way PyTorch's
 * c10 cast does (FLASHMLA.md §3), without saturation:
 * - |x| <= 464 rounds normally; (448, 464] rounds to ±448 (464 is the tie between 448 and the
 *   would-be 480, and 448's mantissa is even);
 * - |x| > 464, ±inf and NaN give the NaN code 0x7f with x's sign bit (0xff when negative);
 * - magnitudes up to 2^-10 (the tie with 2^-9, whose code is odd) give ±0, just above give ±2^-9.
 * The FP8 KV quantizer never reaches NaN from a finite input because it keeps |x/s| <= 448.
 */
export function f32ToFp8E4m3(x: number): number {
  const bits = f32Bits(x);
  const sign = (bits >>> 24) & 0x80;
  const abs = bits & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | FP8_E4M3_NAN;
  const exponent = abs >>> 23;
  let shift: number;
  let value: number;
  if (exponent >= F32_EXP_FP8_MIN_NORMAL) {
    // Rebiased, exponent and mantissa stay adjacent: a carry moves into the exponent, and a result
    // past 0x7e (448) is 0x7f (NaN) or beyond, which is exactly c10's no-saturation behaviour.
    value = abs - REBIAS;
    shift = 20;
  } else {
    // Subnormal result: a count of 2^-9 units, significand · 2^(exponent-150+9). Below 2^-10
    // (exponent < 117) that is under half a unit and rounds to zero.
    if (exponent < 117) return sign;
    value = (abs & 0x7fffff) | 0x800000;
    shift = 141 - exponent;
  }
  const kept = value >>> shift;
  const dropped = value & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  const code = dropped > half || (dropped === half && (kept & 1) === 1) ? kept + 1 : kept;
  return sign | (code >= FP8_E4M3_NAN ? FP8_E4M3_NAN : code);
}
