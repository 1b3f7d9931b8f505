import { checkFloatValues, checkTypedArray, type FloatValues } from "./checkArrayArgument.js";
import { f32Bits } from "./f32Bits.js";

// f32 biased exponent of 2^-14, the smallest fp16 normal, and the rebias between the two formats.
const F32_EXP_FP16_MIN_NORMAL = 113;
const REBIAS = (127 - 15) << 23;

/** Drops the low `shift` bits (1..24) of `value` (< 2^31), nearest even, ties broken by `excess` as in bf16.ts. */
function roundShifted(value: number, shift: number, excess: number): number {
  const kept = value >>> shift;
  const dropped = value & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (dropped > half) return kept + 1;
  if (dropped < half) return kept;
  if (excess > 0) return kept + 1;
  if (excess < 0) return kept;
  return kept + (kept & 1);
}

/**
 * Rounds an f32 bit pattern to IEEE binary16, nearest even; `excess` breaks exact ties for f64
 * inputs (every fp16 value and every midpoint between neighbours, subnormal ones included, is an f32).
 */
function roundF32BitsToFp16(bits: number, excess: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;
  const exponent = abs >>> 23;
  if (exponent >= F32_EXP_FP16_MIN_NORMAL) {
    // Rebiasing the whole pattern keeps exponent and mantissa adjacent, so a mantissa carry moves
    // into the exponent and anything at or beyond 65520 lands on (or past) the inf pattern.
    const h = roundShifted(abs - REBIAS, 13, excess);
    return sign | (h >= 0x7c00 ? 0x7c00 : h);
  }
  // Below 2^-14 the result is a subnormal count of 2^-24 units: significand · 2^(exponent-150+24).
  // Under 2^-25 (f32 exponent < 102) it is below half a unit and rounds to zero.
  if (exponent < 102) return sign;
  const significand = (abs & 0x7fffff) | 0x800000;
  return sign | roundShifted(significand, 126 - exponent, excess);
}

/**
 * Rounds `x` to f32 (Math.fround) and then to IEEE half precision, nearest even, returning the
 * 16-bit pattern. Subnormals are produced; magnitudes of 65520 and above overflow to ±inf; ±inf and
 * ±0 are kept; NaN becomes the quiet NaN 0x7e00 with the same sign bit.
 */
export function f32ToFp16Bits(x: number): number {
  return roundF32BitsToFp16(f32Bits(x), 0);
}

/**
 * Rounds the f64 `x` directly to IEEE half (nearest even, one rounding), for references that
 * accumulate in f64; same rules as `f32ToFp16Bits` otherwise.
 */
export function f64ToFp16Bits(x: number): number {
  const rounded = Math.fround(x);
  const excess = rounded === x || rounded !== rounded ? 0 : Math.abs(x) > Math.abs(rounded) ? 1 : -1;
  return roundF32BitsToFp16(f32Bits(rounded), excess);
}

/** The exact value of the IEEE half pattern `bits` (low 16 bits used). NaN patterns give NaN. */
export function fp16BitsToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (0x400 + mantissa) * 2 ** (exponent - 25);
}

/** Rounds each element with `f32ToFp16Bits` (to f32, then to IEEE half, nearest even): fp16 bit patterns. */
export function f32ArrayToFp16(src: FloatValues): Uint16Array {
  checkFloatValues("f32ArrayToFp16", "src", src);
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = roundF32BitsToFp16(f32Bits(src[i]), 0);
  return out;
}

/** Decodes each IEEE half bit pattern exactly with `fp16BitsToF32`. */
export function fp16ArrayToF32(src: Uint16Array): Float32Array {
  checkTypedArray("fp16ArrayToF32", "src", src, Uint16Array, "fp16 bit patterns");
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = fp16BitsToF32(src[i]);
  return out;
}
