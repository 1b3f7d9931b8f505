import { ArgumentError } from "../errors/ArgumentError.js";
import { bf16BitsToF32, f32ToBf16Bits } from "./bf16.js";
import { checkTypedArray } from "./checkArrayArgument.js";
import { f32Bits, f32FromBits } from "./f32Bits.js";
import { FP8_E4M3_MAX, FP8_E4M3_NAN, f32ToFp8E4m3, fp8E4m3ToF32 } from "./fp8e4m3.js";

/** Dims of one K row in DeepSeek V3.x MLA: 512 latent (NoPE) dims + 64 RoPE dims. */
export const D_QK = 576;
/** Latent (NoPE) dims, the ones stored as e4m3 and also used as V. */
export const D_NOPE = 512;
/** RoPE dims, stored as raw bf16. */
export const D_ROPE = 64;
/** Dims that share one scale. */
export const FP8_TILE = 128;
/** Bytes per token of the V32 layout: 512 e4m3 + 4 f32 scales + 64 bf16. */
export const FP8_TOKEN_BYTES = 656;

const NUM_TILES = D_NOPE / FP8_TILE;
const SCALES_OFFSET = D_NOPE;
const ROPE_OFFSET = D_NOPE + 4 * NUM_TILES;
/** The scale floor, 2^-13: FlashMLA clamps amax/448 below at 1e-4, and 2^ceil(log2(1e-4)) = 2^-13. */
const MIN_SCALE = 2 ** -13;

/**
 * The V32 scale of one 128-dim tile whose largest magnitude is `amax`:
 * `max(2^-13, the smallest power of two p with p·448 >= amax)`.
 * This is FlashMLA's `2^ceil(log2(max(amax/448, 1e-4)))` evaluated exactly (no float log2, which
 * can be off by one at powers of two; the GPU quantizer implements the same definition).
 * amax = 0 gives 2^-13, NaN gives NaN, +inf gives +inf.
 */
export function fp8TileScale(amax: number): number {
  if (Number.isNaN(amax)) return NaN;
  if (!(amax >= 0)) throw new ArgumentError("fp8TileScale", "amax", "a magnitude >= 0 or NaN", String(amax));
  if (amax === Infinity) return Infinity;
  let scale = MIN_SCALE;
  // Products of 448 and a power of two are exact in f64, so each comparison is exact. The largest
  // bf16/f32 magnitude needs about 133 doublings at most.
  while (scale * FP8_E4M3_MAX < amax) scale *= 2;
  return scale;
}

function checkRange(fn: string, argument: string, length: number, offset: number, span: number): void {
  if (!Number.isInteger(offset) || offset < 0 || offset + span > length) {
    throw new ArgumentError(fn, argument, `an integer in [0, ${length - span}] (the array holds ${length})`, String(offset));
  }
}

/**
 * Quantizes one token of 576 bf16 values (`src[srcOffset..srcOffset+576)`, bit patterns) into the
 * 656-byte V32 layout at `dst[dstOffset..)` (FLASHMLA.md §3):
 * - bytes [0, 512): e4m3fn codes of dims 0..511, `q = f32ToFp8E4m3(x / s)` (exact division: s is a
 *   power of two), s being `fp8TileScale` of the tile's amax;
 * - bytes [512, 528): the 4 scales as little-endian f32, scale t covering dims [128t, 128t + 128);
 * - bytes [528, 656): dims 512..575 copied as raw bf16 (little endian), unchanged.
 * A tile holding a NaN gets the NaN scale 0x7fc00000 and all its codes 0x7f; a tile holding ±inf
 * gets an inf scale, so its finite values become ±0 and its infinities 0x7f (it dequantizes to NaN
 * throughout, as 0·inf is NaN). NaN codes are always written as 0x7f (positive), so the bytes do
 * not depend on how the host signs NaNs; kernels/kv_cache/fp8_kv_writer.cu writes the same bytes.
 */
export function quantizeKvTokenV32(src: Uint16Array, srcOffset: number, dst: Uint8Array, dstOffset: number): void {
  checkRange("quantizeKvTokenV32", "srcOffset", src.length, srcOffset, D_QK);
  checkRange("quantizeKvTokenV32", "dstOffset", dst.length, dstOffset, FP8_TOKEN_BYTES);
  for (let tile = 0; tile < NUM_TILES; tile++) {
    const tileStart = srcOffset + tile * FP8_TILE;
    let amax = 0;
    for (let i = 0; i < FP8_TILE; i++) {
      const magnitude = Math.abs(bf16BitsToF32(src[tileStart + i]));
      // Math.max would also propagate NaN; the explicit test keeps the rule visible.
      if (Number.isNaN(magnitude)) {
        amax = NaN;
        break;
      }
      if (magnitude > amax) amax = magnitude;
    }
    const scale = fp8TileScale(amax);
    const codeStart = dstOffset + tile * FP8_TILE;
    for (let i = 0; i < FP8_TILE; i++) {
      const quotient = bf16BitsToF32(src[tileStart + i]) / scale;
      dst[codeStart + i] = Number.isNaN(quotient) ? FP8_E4M3_NAN : f32ToFp8E4m3(quotient);
    }
    // The canonical quiet NaN, as the GPU writer stores it, whatever sign the host gives NaN.
    const scaleBits = Number.isNaN(scale) ? 0x7fc00000 : f32Bits(scale);
    const at = dstOffset + SCALES_OFFSET + 4 * tile;
    dst[at] = scaleBits & 0xff;
    dst[at + 1] = (scaleBits >>> 8) & 0xff;
    dst[at + 2] = (scaleBits >>> 16) & 0xff;
    dst[at + 3] = scaleBits >>> 24;
  }
  for (let i = 0; i < D_ROPE; i++) {
    const bits = src[srcOffset + D_NOPE + i];
    dst[dstOffset + ROPE_OFFSET + 2 * i] = bits & 0xff;
    dst[dstOffset + ROPE_OFFSET + 2 * i + 1] = bits >>> 8;
  }
}

/**
 * Dequantizes one 656-byte V32 token at `src[srcOffset..)` into 576 bf16 patterns at
 * `dst[dstOffset..)`: dim i < 512 becomes `f32ToBf16Bits(fp8E4m3ToF32(q) * s)` (exact for a
 * power-of-two s), dims 512..575 are the stored bf16 copied unchanged. NaN results are written
 * as 0x7fc0.
 */
export function dequantizeKvTokenV32(src: Uint8Array, srcOffset: number, dst: Uint16Array, dstOffset: number): void {
  checkRange("dequantizeKvTokenV32", "srcOffset", src.length, srcOffset, FP8_TOKEN_BYTES);
  checkRange("dequantizeKvTokenV32", "dstOffset", dst.length, dstOffset, D_QK);
  for (let tile = 0; tile < NUM_TILES; tile++) {
    const at = srcOffset + SCALES_OFFSET + 4 * tile;
    const scale = f32FromBits(src[at] | (src[at + 1] << 8) | (src[at + 2] << 16) | (src[at + 3] << 24));
    const codeStart = srcOffset + tile * FP8_TILE;
    const outStart = dstOffset + tile * FP8_TILE;
    for (let i = 0; i < FP8_TILE; i++) {
      const value = fp8E4m3ToF32(src[codeStart + i]) * scale;
      dst[outStart + i] = Number.isNaN(value) ? 0x7fc0 : f32ToBf16Bits(value);
    }
  }
  for (let i = 0; i < D_ROPE; i++) {
    const at = srcOffset + ROPE_OFFSET + 2 * i;
    dst[dstOffset + D_NOPE + i] = src[at] | (src[at + 1] << 8);
  }
}

/** Quantizes a `[numTokens, 576]` bf16 KV cache (row-major bit patterns) to `[numTokens, 656]` V32 bytes. */
export function quantizeKvCacheV32(kv: Uint16Array): Uint8Array {
  checkTypedArray("quantizeKvCacheV32", "kv", kv, Uint16Array, "bf16 bit patterns [numTokens, 576] (for a Tensor use quantizeKvCacheFp8)");
  if (kv.length % D_QK !== 0) {
    throw new ArgumentError("quantizeKvCacheV32", "kv", `a multiple of ${D_QK} bf16 elements ([numTokens, ${D_QK}])`, `${kv.length}`);
  }
  const numTokens = kv.length / D_QK;
  const out = new Uint8Array(numTokens * FP8_TOKEN_BYTES);
  for (let t = 0; t < numTokens; t++) quantizeKvTokenV32(kv, t * D_QK, out, t * FP8_TOKEN_BYTES);
  return out;
}

/** Dequantizes `[numTokens, 656]` V32 bytes back to a `[numTokens, 576]` bf16 KV cache. */
export function dequantizeKvCacheV32(bytes: Uint8Array): Uint16Array {
  checkTypedArray("dequantizeKvCacheV32", "bytes", bytes, Uint8Array, "V32 FP8 tokens [numTokens, 656]");
  if (bytes.length % FP8_TOKEN_BYTES !== 0) {
    throw new ArgumentError(
      "dequantizeKvCacheV32",
      "bytes",
      `a multiple of ${FP8_TOKEN_BYTES} bytes ([numTokens, ${FP8_TOKEN_BYTES}])`,
      `${bytes.length}`,
    );
  }
  const numTokens = bytes.length / FP8_TOKEN_BYTES;
  const out = new Uint16Array(numTokens * D_QK);
  for (let t = 0; t < numTokens; t++) dequantizeKvTokenV32(bytes, t * FP8_TOKEN_BYTES, out, t * D_QK);
  return out;
}
