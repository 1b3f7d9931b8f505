import { checkFloatValues, checkTypedArray, type FloatValues } from "./checkArrayArgument.js";
import { f32Bits, f32FromBits } from "./f32Bits.js";

/**
 * Rounds an f32 bit pattern to bf16, nearest even, except that a tie is broken by `excess` when it is
 * not 0: +1 means the true value lies beyond the f32 (round away from zero), -1 short of it.
 * That lets an f64 be rounded in one step: every bf16 value and every midpoint between two
 * neighbouring bf16 values is an f32, so rounding to f32 first only loses information on an exact
 * midpoint, and there the sign of the f64's excess decides.
 */
function roundF32BitsToBf16(bits: number, excess: number): number {
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) & 0x8000) | 0x7fc0;
  const kept = bits >>> 16;
  const dropped = bits & 0xffff;
  if (dropped > 0x8000) return kept + 1;
  if (dropped < 0x8000) return kept;
  // A carry out of the mantissa bumps the exponent, and past the largest finite value gives inf: both correct.
  if (excess > 0) return kept + 1;
  if (excess < 0) return kept;
  return kept + (kept & 1);
}

/**
 * Rounds `x` to f32 (Math.fround) and then to bfloat16, nearest even, returning the 16-bit pattern.
 * NaN becomes a quiet NaN with the same sign bit (0x7fc0 / 0xffc0); ±inf and ±0 are kept; finite
 * values of magnitude at least (2 - 2^-8)·2^127 overflow to ±inf; bf16 subnormals are produced.
 */
export function f32ToBf16Bits(x: number): number {
  return roundF32BitsToBf16(f32Bits(x), 0);
}

/**
 * Rounds the f64 `x` directly to bfloat16 (nearest even, one rounding), for references that
 * accumulate in f64. Differs from `f32ToBf16Bits(x)` only when rounding x to f32 would land exactly
 * on a midpoint between two bf16 values (double rounding); same NaN/inf/overflow rules.
 */
export function f64ToBf16Bits(x: number): number {
  const rounded = Math.fround(x);
  const excess = rounded === x || rounded !== rounded ? 0 : Math.abs(x) > Math.abs(rounded) ? 1 : -1;
  return roundF32BitsToBf16(f32Bits(rounded), excess);
}

/** The exact value of the bfloat16 pattern `bits` (low 16 bits used). NaN patterns give NaN. */
export function bf16BitsToF32(bits: number): number {
  return f32FromBits((bits & 0xffff) << 16);
}

/** Rounds each element with `f32ToBf16Bits` (to f32, then to bf16, nearest even): bf16 bit patterns. */
export function f32ArrayToBf16(src: FloatValues): Uint16Array {
  checkFloatValues("f32ArrayToBf16", "src", src);
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = roundF32BitsToBf16(f32Bits(src[i]), 0);
  return out;
}

/** Decodes each bfloat16 bit pattern exactly with `bf16BitsToF32`. */
export function bf16ArrayToF32(src: Uint16Array): Float32Array {
  checkTypedArray("bf16ArrayToF32", "src", src, Uint16Array, "bf16 bit patterns");
  const out = new Float32Array(src.length);
  const outBits = new Uint32Array(out.buffer);
  for (let i = 0; i < src.length; i++) outBits[i] = src[i] << 16;
  return out;
}
