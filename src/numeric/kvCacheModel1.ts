import { ArgumentError, formatGot, optionsObject } from "../errors/ArgumentError.js";
import { bf16BitsToF32 } from "./bf16.js";
import { checkTypedArray } from "./checkArrayArgument.js";
import { f32Bits } from "./f32Bits.js";
import { FP8_E4M3_MAX, FP8_E4M3_NAN, f32ToFp8E4m3, fp8E4m3ToF32 } from "./fp8e4m3.js";

// DeepSeek-V4's "MODEL1" FP8 KV cache (FlashMLA's MODEL1_FP8Sparse, vLLM's fp8_ds_mla), byte for byte as
// ../shared/design/DEEPSEEK-V4.md gives it. A page of pbs tokens starts at block · S and holds
//   [0, pbs·576)          token r at r·576: 448 e4m3fn NoPE codes, then 64 bf16 RoPE values (little endian);
//   [pbs·576, pbs·584)    token r's scale record at pbs·576 + r·8: 7 e8m0 scales (tile t covers dims
//                         64t .. 64t+63), then one pad byte 0;
//   [pbs·584, S)          padding, S = ceil(pbs·584 / 576)·576.
// kernels/kv_cache/fp8_kv_writer_model1.cu writes the same bytes on the GPU.

/** Bytes per token: 448 e4m3 + 64·2 bf16 + 7 e8m0 scales + 1 pad byte. */
export const MODEL1_TOKEN_BYTES = 584;
/** NoPE dims, stored as e4m3fn codes with one power-of-two scale per 64 dims. */
export const MODEL1_D_NOPE = 448;
/** RoPE dims, stored as raw bf16. */
export const MODEL1_D_ROPE = 64;
/** Dims of one K row; V is the whole row (d_v = d_qk = 512). */
export const MODEL1_D_QK = 512;
/** NoPE tiles of 64 dims, one e8m0 scale each. */
export const MODEL1_TILES = 7;

const TILE = MODEL1_D_NOPE / MODEL1_TILES;
/** A token's data bytes at the front of its page: the NoPE codes and the RoPE values. */
const DATA_BYTES = MODEL1_D_NOPE + 2 * MODEL1_D_ROPE;
/** A token's scale record in the page's footer: the 7 scales and the pad byte. */
const RECORD_BYTES = MODEL1_TOKEN_BYTES - DATA_BYTES;
/** Pages are padded to a multiple of this many bytes. */
const PAGE_ALIGN = 576;
/** The e8m0 bias (byte = log2(s) + 127) and its NaN byte (e8m0 has no infinity). */
const E8M0_BIAS = 127;
const E8M0_NAN = 0xff;
/** FlashMLA's clamp of amax/448, as the f32 that torch compares with (9.99999974737875e-5). */
const MIN_SCALE_INV = Math.fround(1e-4);

/**
 * Bytes of one page of `pageBlockSize` tokens: `ceil(pageBlockSize · 584 / 576) · 576` (1,728 at 2,
 * 37,440 at 64, 149,760 at 256). The page's tensor view is `[num_blocks, pageBlockSize, 1, 584]` with
 * block stride this many bytes.
 */
export function model1PageBytes(pageBlockSize: number): number {
  checkPageBlockSize("model1PageBytes", "pageBlockSize", pageBlockSize);
  return pageBytes(pageBlockSize);
}

function pageBytes(pageBlockSize: number): number {
  return Math.ceil((pageBlockSize * MODEL1_TOKEN_BYTES) / PAGE_ALIGN) * PAGE_ALIGN;
}

/**
 * log2 of the scale of a tile whose largest magnitude is `amax`, FlashMLA's
 * `s = 2^ceil(log2(max(amax / 448, 1e-4)))` as torch evaluates it in f32: the quotient rounded to f32
 * (Math.fround of the f64 quotient is the correctly rounded f32 one here: a significand over 7 is exact
 * or never ends in binary, so it cannot sit on an f32 midpoint), the clamp at f32(1e-4), and then the
 * ceiling of log2 read exactly off the f32's bits, as the GPU writer does. The clamp gives s >= 2^-13.
 * NaN gives NaN and +inf gives +inf (torch's clamp and log2 keep both).
 */
function scaleLog2(amax: number): number {
  const ratio = Math.max(Math.fround(amax / FP8_E4M3_MAX), MIN_SCALE_INV); // Math.max keeps NaN
  if (!Number.isFinite(ratio)) return ratio;
  const bits = f32Bits(ratio);
  const exponent = (bits >>> 23) - E8M0_BIAS; // ratio >= 1e-4 is a normal f32
  return (bits & 0x7fffff) === 0 ? exponent : exponent + 1;
}

/**
 * Quantizes the 512 bf16 patterns `src[at..at+512)` into cache bytes: the 576 data bytes at
 * `dst[dataAt..)` and the 8-byte scale record at `dst[recordAt..)`. Per 64-dim NoPE tile:
 * - the scale s = 2^scaleLog2(amax), stored as e8m0 byte log2(s) + 127;
 * - each code e4m3fn(x / s), round to nearest even (the f32 quotient is exact: s is a power of two);
 * - a tile holding a NaN: s = NaN, scale byte 0xff, every code 0x7f;
 * - a tile holding ±inf (no NaN): s = inf, scale byte 0xff (e8m0 has no inf), finite values ±0 (0x00 /
 *   0x80) and the infinities 0x7f (inf / inf is NaN).
 * NaN codes are always 0x7f whatever the sign of the NaN, as the GPU's cvt writes them. The whole tile
 * then dequantizes to NaN. RoPE dims are copied bit for bit, NaN and inf included.
 */
function encodeToken(src: Uint16Array, at: number, dst: Uint8Array, dataAt: number, recordAt: number): void {
  for (let tile = 0; tile < MODEL1_TILES; tile++) {
    const tileAt = at + tile * TILE;
    let amax = 0;
    for (let i = 0; i < TILE; i++) {
      const magnitude = Math.abs(bf16BitsToF32(src[tileAt + i]));
      if (!(magnitude <= amax)) amax = magnitude; // a NaN replaces amax and then stays (NaN <= x is false)
      if (Number.isNaN(amax)) break;
    }
    const log2s = scaleLog2(amax);
    const s = 2 ** log2s; // NaN and Infinity map to themselves
    dst[recordAt + tile] = Number.isFinite(log2s) ? log2s + E8M0_BIAS : E8M0_NAN;
    for (let i = 0; i < TILE; i++) {
      const quotient = bf16BitsToF32(src[tileAt + i]) / s;
      dst[dataAt + tile * TILE + i] = Number.isNaN(quotient) ? FP8_E4M3_NAN : f32ToFp8E4m3(quotient);
    }
  }
  dst[recordAt + MODEL1_TILES] = 0;
  for (let i = 0; i < MODEL1_D_ROPE; i++) {
    const bits = src[at + MODEL1_D_NOPE + i];
    dst[dataAt + MODEL1_D_NOPE + 2 * i] = bits & 0xff;
    dst[dataAt + MODEL1_D_NOPE + 2 * i + 1] = bits >>> 8;
  }
}

/**
 * Quantizes one token of 512 bf16 values (bit patterns) by the MODEL1 rule: per 64-dim NoPE tile,
 * amax = max|x| / 448 in f32, s = 2^ceil(log2(max(amax, 1e-4))) (so s >= 2^-13), the code e4m3fn(x / s)
 * rounded to nearest even and the scale as the e8m0 byte log2(s) + 127; the 64 RoPE dims unchanged.
 * A tile holding NaN gets scale byte 0xff and codes 0x7f; one holding ±inf gets scale byte 0xff, codes
 * ±0 for its finite values and 0x7f for the infinities (it dequantizes to NaN).
 * @example quantizeTokenModel1(token).scales[0] // 119 when tile 0's amax is 1: s = 2^-8
 */
export function quantizeTokenModel1(token: Uint16Array): { nope: Uint8Array; rope: Uint16Array; scales: Uint8Array } {
  const fn = "quantizeTokenModel1";
  checkTypedArray(fn, "token", token, Uint16Array, `${MODEL1_D_QK} bf16 bit patterns`);
  if (token.length !== MODEL1_D_QK) throw new ArgumentError(fn, "token", `${MODEL1_D_QK} bf16 values`, `${token.length}`);
  const bytes = new Uint8Array(MODEL1_TOKEN_BYTES);
  encodeToken(token, 0, bytes, 0, DATA_BYTES);
  return { nope: bytes.slice(0, MODEL1_D_NOPE), rope: token.slice(MODEL1_D_NOPE), scales: bytes.slice(DATA_BYTES, DATA_BYTES + MODEL1_TILES) };
}

/** Options of {@link quantizeKvCacheModel1}. */
export interface QuantizeKvCacheModel1Options {
  /** Tokens per page (any size >= 1; 64 and 256 in the engines, 2 in FlashMLA's tests). */
  pageBlockSize: number;
  /** Pages in the cache: the result holds numBlocks · model1PageBytes(pageBlockSize) bytes. */
  numBlocks: number;
  /**
   * [n] int32: token i goes to physical slot `slotMapping[i]` = block · pageBlockSize + offset; -1 skips
   * it. Every other value must lie in [0, numBlocks · pageBlockSize). Of two tokens given the same slot,
   * the later one's bytes stay.
   * @default token i to slot i
   */
  slotMapping?: Int32Array;
  /**
   * The byte every byte the quantizer does not write holds: the rows and scale records of slots no token
   * goes to, and the padding at the end of each page.
   * @default 0
   */
  fill?: number;
}

/**
 * Quantizes `[n, 512]` bf16 tokens (bit patterns) into a whole MODEL1 cache of `numBlocks` pages of
 * `model1PageBytes(pageBlockSize)` bytes: token i's 576 data bytes at `block · S + offset · 576` and its
 * scale record (7 e8m0 bytes, pad byte 0) at `block · S + pageBlockSize · 576 + offset · 8`, where its slot
 * is `block · pageBlockSize + offset`. Per token the rule of {@link quantizeTokenModel1}.
 * @example quantizeKvCacheModel1(tokens, { pageBlockSize: 64, numBlocks: 4 }) // 4 · 37,440 bytes
 */
export function quantizeKvCacheModel1(tokens: Uint16Array, opts: QuantizeKvCacheModel1Options): Uint8Array {
  const fn = "quantizeKvCacheModel1";
  checkTypedArray(fn, "tokens", tokens, Uint16Array, `bf16 bit patterns [n, ${MODEL1_D_QK}]`);
  if (tokens.length % MODEL1_D_QK !== 0) {
    throw new ArgumentError(fn, "tokens", `a multiple of ${MODEL1_D_QK} bf16 elements ([n, ${MODEL1_D_QK}])`, `${tokens.length}`);
  }
  const n = tokens.length / MODEL1_D_QK;
  const o = requiredOptions(fn, opts);
  const pbs = checkPageBlockSize(fn, "opts.pageBlockSize", o.pageBlockSize);
  const numBlocks = checkCount(fn, "opts.numBlocks", o.numBlocks);
  const fill = o.fill === undefined ? 0 : checkByte(fn, "opts.fill", o.fill);
  const numSlots = numBlocks * pbs;
  const slots = o.slotMapping;
  if (slots === undefined) {
    if (n > numSlots) throw new ArgumentError(fn, "tokens", `at most numBlocks · pageBlockSize = ${numSlots} tokens without opts.slotMapping`, `${n}`);
  } else {
    checkTypedArray(fn, "opts.slotMapping", slots, Int32Array, "physical slots [n]");
    if (slots.length !== n) throw new ArgumentError(fn, "opts.slotMapping", `${n} slots (one per token)`, `${slots.length}`);
    for (let i = 0; i < n; i++) {
      if (slots[i] < -1 || slots[i] >= numSlots) throw new ArgumentError(fn, "opts.slotMapping", `-1 or a slot in [0, ${numSlots})`, `${slots[i]} at index ${i}`);
    }
  }
  const stride = pageBytes(pbs);
  const cache = new Uint8Array(numBlocks * stride);
  if (fill !== 0) cache.fill(fill);
  for (let i = 0; i < n; i++) {
    const slot = slots === undefined ? i : slots[i];
    if (slot < 0) continue;
    const base = Math.floor(slot / pbs) * stride;
    const row = slot % pbs;
    encodeToken(tokens, i * MODEL1_D_QK, cache, base + row * DATA_BYTES, base + pbs * DATA_BYTES + row * RECORD_BYTES);
  }
  return cache;
}

/** Options of {@link dequantizeTokenModel1}. */
export interface DequantizeTokenModel1Options {
  /** Tokens per page. */
  pageBlockSize: number;
  /**
   * Bytes from one page to the next, at least pageBlockSize · 584.
   * @default model1PageBytes(pageBlockSize)
   */
  blockStrideBytes?: number;
}

/**
 * The 512 values token `slot` (block · pageBlockSize + offset) of a MODEL1 cache holds, exactly: NoPE dim
 * d is `e4m3(code) · 2^(scale byte − 127)` of its tile (scale byte 0xff gives NaN), the RoPE dims are the
 * stored bf16 values. Exact in f32 except where a product leaves f32's range: a code near 448 with scale
 * byte 247 or more gives ±inf (the largest bf16 value, 2^127·(2 − 2^-7), quantizes to 256 · 2^120).
 */
export function dequantizeTokenModel1(cache: Uint8Array, slot: number, opts: DequantizeTokenModel1Options): Float32Array {
  const fn = "dequantizeTokenModel1";
  checkTypedArray(fn, "cache", cache, Uint8Array, "MODEL1 cache bytes");
  const o = requiredOptions(fn, opts);
  const pbs = checkPageBlockSize(fn, "opts.pageBlockSize", o.pageBlockSize);
  const stride = checkStride(fn, o.blockStrideBytes, pbs);
  if (!Number.isSafeInteger(slot) || slot < 0) throw new ArgumentError(fn, "slot", "an integer >= 0", formatGot(slot));
  const base = Math.floor(slot / pbs) * stride;
  if (base + pbs * MODEL1_TOKEN_BYTES > cache.length) {
    const numSlots = cache.length < pbs * MODEL1_TOKEN_BYTES ? 0 : (Math.floor((cache.length - pbs * MODEL1_TOKEN_BYTES) / stride) + 1) * pbs;
    throw new ArgumentError(fn, "slot", `a slot in [0, ${numSlots}) (whole pages of ${pbs} tokens in ${cache.length} bytes, block stride ${stride})`, `${slot}`);
  }
  const out = new Float32Array(MODEL1_D_QK);
  decodeToken(cache, base, slot % pbs, pbs, out, 0);
  return out;
}

function decodeToken(cache: Uint8Array, base: number, row: number, pbs: number, out: Float32Array, outAt: number): void {
  const dataAt = base + row * DATA_BYTES;
  const recordAt = base + pbs * DATA_BYTES + row * RECORD_BYTES;
  for (let tile = 0; tile < MODEL1_TILES; tile++) {
    const byte = cache[recordAt + tile];
    const s = byte === E8M0_NAN ? NaN : 2 ** (byte - E8M0_BIAS);
    for (let i = 0; i < TILE; i++) out[outAt + tile * TILE + i] = fp8E4m3ToF32(cache[dataAt + tile * TILE + i]) * s;
  }
  for (let i = 0; i < MODEL1_D_ROPE; i++) {
    const at = dataAt + MODEL1_D_NOPE + 2 * i;
    out[outAt + MODEL1_D_NOPE + i] = bf16BitsToF32(cache[at] | (cache[at + 1] << 8));
  }
}

/** Options of {@link dequantizeKvCacheModel1}. */
export interface DequantizeKvCacheModel1Options extends DequantizeTokenModel1Options {
  /** Pages to read: the cache must hold (numBlocks − 1) · blockStrideBytes + pageBlockSize · 584 bytes. */
  numBlocks: number;
}

/**
 * Every token of the first `numBlocks` pages of a MODEL1 cache, as {@link dequantizeTokenModel1} gives
 * it: `[numBlocks · pageBlockSize, 512]` f32, row `block · pageBlockSize + offset`.
 */
export function dequantizeKvCacheModel1(cache: Uint8Array, opts: DequantizeKvCacheModel1Options): Float32Array {
  const fn = "dequantizeKvCacheModel1";
  checkTypedArray(fn, "cache", cache, Uint8Array, "MODEL1 cache bytes");
  const o = requiredOptions(fn, opts);
  const pbs = checkPageBlockSize(fn, "opts.pageBlockSize", o.pageBlockSize);
  const stride = checkStride(fn, o.blockStrideBytes, pbs);
  const numBlocks = checkCount(fn, "opts.numBlocks", o.numBlocks);
  const needed = numBlocks === 0 ? 0 : (numBlocks - 1) * stride + pbs * MODEL1_TOKEN_BYTES;
  if (cache.length < needed) {
    throw new ArgumentError(fn, "cache", `at least ${needed} bytes (${numBlocks} pages of ${pbs} tokens, block stride ${stride})`, `${cache.length} bytes`);
  }
  const out = new Float32Array(numBlocks * pbs * MODEL1_D_QK);
  for (let block = 0; block < numBlocks; block++) {
    for (let row = 0; row < pbs; row++) decodeToken(cache, block * stride, row, pbs, out, (block * pbs + row) * MODEL1_D_QK);
  }
  return out;
}

// ---- argument checks ----------------------------------------------------------------------------

function requiredOptions<T extends object>(fn: string, opts: T): Partial<T> {
  if (opts === undefined) throw new ArgumentError(fn, "opts", "an options object", "undefined");
  return optionsObject(fn, "opts", opts);
}

function checkPageBlockSize(fn: string, argument: string, v: unknown): number {
  if (!Number.isSafeInteger(v) || (v as number) < 1) throw new ArgumentError(fn, argument, "an integer >= 1 (tokens per page)", formatGot(v));
  return v as number;
}

function checkCount(fn: string, argument: string, v: unknown): number {
  if (!Number.isSafeInteger(v) || (v as number) < 0) throw new ArgumentError(fn, argument, "an integer >= 0", formatGot(v));
  return v as number;
}

function checkByte(fn: string, argument: string, v: unknown): number {
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > 255) throw new ArgumentError(fn, argument, "a byte value, an integer in [0, 255]", formatGot(v));
  return v as number;
}

function checkStride(fn: string, v: unknown, pbs: number): number {
  if (v === undefined) return pageBytes(pbs);
  const least = pbs * MODEL1_TOKEN_BYTES;
  if (!Number.isSafeInteger(v) || (v as number) < least) throw new ArgumentError(fn, "opts.blockStrideBytes", `an integer >= pageBlockSize · 584 = ${least}`, formatGot(v));
  return v as number;
}
