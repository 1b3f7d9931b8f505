import { ArgumentError } from "../errors/ArgumentError.js";
import { D_NOPE, D_QK, FP8_TOKEN_BYTES } from "../numeric/kvCacheFp8.js";
import { MODEL1_D_NOPE, MODEL1_D_QK, MODEL1_TOKEN_BYTES } from "../numeric/kvCacheModel1.js";

/** A dense bf16 decode call, as FlashMLA's benchmark counts it. */
export interface DenseMlaShape {
  kind: "dense";
  b: number;
  h_q: number;
  /** @default 1 */
  h_kv?: number;
  s_q: number;
  /** Mean cache length s̄ (causal masking is ignored, as FlashMLA does). */
  s_k: number;
  /** @default 576 */
  d_qk?: number;
  /** @default 512 */
  d_v?: number;
}

/** The FP8 token of a sparse cache: DeepSeek-V3.2's 656-byte token or DeepSeek-V4's 584-byte MODEL1 token. */
export type SparseFormat = "v32" | "model1";

/** What a sparse format fixes: the head dims, the bytes of one cached token, and its quantized dims. */
export interface SparseFormatDims {
  d_qk: number;
  d_v: number;
  tokenBytes: number;
  /** Dims stored as e4m3 and dequantized per token (the RoPE dims are bf16 in both formats). */
  quantizedDims: number;
}

/**
 * Each format's dims: V3.2's V is the first 512 of 576 dims; MODEL1's V is the whole 512-dim row
 * (docs/deepseek-v4.md §1).
 */
export const SPARSE_FORMATS: Readonly<Record<SparseFormat, Readonly<SparseFormatDims>>> = Object.freeze({
  v32: Object.freeze({ d_qk: D_QK, d_v: D_NOPE, tokenBytes: FP8_TOKEN_BYTES, quantizedDims: D_NOPE }),
  model1: Object.freeze({ d_qk: MODEL1_D_QK, d_v: MODEL1_D_QK, tokenBytes: MODEL1_TOKEN_BYTES, quantizedDims: MODEL1_D_NOPE }),
});

/** A second cache attended in the same softmax as the first (FlashMLA's extra_k_cache). */
export interface ExtraCacheShape {
  /** Tokens cached per request; with it, the cache's distinct tokens read are the expected count. */
  s_k?: number;
  /** Index entries per query token (extra_topk). */
  topk: number;
  /** Mean valid entries per query token (FlashMLA's extra_topk_length), from 0 to topk. @default topk */
  meanTopkLength?: number;
}

/** A sparse FP8 decode call: each query token attends `topk` cached tokens (and `extra.topk` more in a second cache). */
export interface SparseMlaShape {
  kind: "sparse";
  /** The token format; it sets the defaults of d_qk, d_v and tokenBytes. @default "v32" */
  format?: SparseFormat;
  b: number;
  h_q: number;
  s_q: number;
  /** Indices per query token; N = b·s_q·(topk + the extra cache's valid entries) unless `nAttended` is given. */
  topk?: number;
  /** Σ attended tokens over the whole call (the valid count). */
  nAttended?: number;
  /**
   * Distinct cache tokens read. @default per cache, the expected count for random distinct indices
   * where its s_k is given (as {@link expectedUniqueTokens}), else its attended entries (none shared)
   */
  nUnique?: number;
  /** Tokens cached per request in the main cache. */
  s_k?: number;
  /** A second cache in the same softmax (DeepSeek-V4's extra_k_cache). @default none */
  extra?: ExtraCacheShape;
  /** @default the format's: 576 (v32), 512 (model1) */
  d_qk?: number;
  /** @default 512 */
  d_v?: number;
  /** @default the format's: 656 (v32), 584 (model1) */
  tokenBytes?: number;
}

export type MlaShape = DenseMlaShape | SparseMlaShape;

/** FLOPs and bytes moved by one decode call. */
export interface MlaCost {
  flop: number;
  bytes: number;
  /** FLOP per byte. */
  intensity: number;
  /** Sparse only: Σ attended tokens and distinct tokens read. */
  nAttended?: number;
  nUnique?: number;
  /** Sparse only: the FP8 cache bytes read, N_unique · token bytes (the "cache read" figures divide this). */
  cacheBytes?: number;
}

/**
 * FLOPs and bytes of one MLA decode call with FlashMLA's benchmark formulas, so figures compare
 * one to one with its published numbers:
 * - dense: FLOP = b·h_q·s_q·(2·d_qk·s̄ + 2·s̄·d_v), bytes = b·(s_q·h_q·d_qk·2 + s̄·h_kv·d_qk·2 + s_q·h_q·d_v·2);
 * - sparse: FLOP = 2·h_q·N·(d_qk + d_v), bytes = 2·b·s_q·h_q·d_qk + N_unique·656 + 2·b·s_q·h_q·d_v;
 * - sparse MODEL1 (DeepSeek-V4): the same with d_qk = d_v = 512 and 584-byte tokens, N = b·s_q·(topk +
 *   extra_topk, or its mean valid length) over both caches, N_unique summed per cache
 *   (docs/deepseek-v4.md §3).
 *
 * @example mlaCost({ kind: "dense", b: 128, h_q: 128, s_q: 1, s_k: 8192 }).flop // 292057776128
 */
export function mlaCost(shape: MlaShape): MlaCost {
  return shape.kind === "dense" ? denseMlaCost(shape) : sparseMlaCost(shape);
}

function denseMlaCost(shape: DenseMlaShape): MlaCost {
  const fn = "mlaCost";
  const { b, h_q, s_q, s_k } = shape;
  const h_kv = shape.h_kv ?? 1;
  const d_qk = shape.d_qk ?? D_QK;
  const d_v = shape.d_v ?? D_NOPE;
  for (const [name, v] of [["b", b], ["h_q", h_q], ["h_kv", h_kv], ["s_q", s_q], ["d_qk", d_qk], ["d_v", d_v]] as const) {
    requirePositiveInteger(fn, name, v);
  }
  // s̄ is a mean, so it may be fractional; zero would make the call free and the intensity 0/0.
  requirePositive(fn, "s_k", s_k);
  if (h_q % h_kv !== 0) throw new ArgumentError(fn, "h_kv", `a divisor of h_q (${h_q})`, String(h_kv));
  const flop = b * h_q * s_q * (2 * d_qk * s_k + 2 * s_k * d_v);
  const bytes = b * (s_q * h_q * d_qk * 2 + s_k * h_kv * d_qk * 2 + s_q * h_q * d_v * 2);
  return { flop, bytes, intensity: flop / bytes };
}

function sparseMlaCost(shape: SparseMlaShape): MlaCost {
  const fn = "mlaCost";
  const { b, h_q, s_q } = shape;
  const { d_qk, d_v, tokenBytes } = sparseFormatDims(shape);
  for (const [name, v] of [["b", b], ["h_q", h_q], ["s_q", s_q], ["d_qk", d_qk], ["d_v", d_v], ["tokenBytes", tokenBytes]] as const) {
    requirePositiveInteger(fn, name, v);
  }
  const extra = shape.extra === undefined ? undefined : extraCache(fn, shape.extra);
  // Per cache: entries each query row attends, and the cache's length where known.
  const caches: Array<{ n: number; s_k?: number }> = [];
  if (shape.topk !== undefined) {
    requirePositiveInteger(fn, "topk", shape.topk);
    caches.push({ n: shape.topk, ...(shape.s_k !== undefined ? { s_k: cacheLength(fn, "s_k", shape.s_k, shape.topk) } : {}) });
  }
  if (extra !== undefined) caches.push(extra);
  let nAttended: number;
  if (shape.nAttended !== undefined) {
    requirePositive(fn, "nAttended", shape.nAttended);
    nAttended = shape.nAttended;
  } else if (shape.topk !== undefined) {
    nAttended = caches.reduce((sum, c) => sum + b * s_q * c.n, 0);
  } else {
    throw new ArgumentError(fn, "topk", "topk or nAttended for a sparse shape", "neither");
  }
  const expected = caches.every((c) => c.s_k !== undefined) && shape.nAttended === undefined;
  const nUnique = shape.nUnique ?? (expected ? caches.reduce((sum, c) => sum + distinctRead(b, c.s_k!, s_q, c.n), 0) : nAttended);
  requirePositive(fn, "nUnique", nUnique);
  if (nUnique > nAttended) {
    throw new ArgumentError(fn, "nUnique", `at most nAttended (${nAttended})`, String(nUnique));
  }
  const flop = 2 * h_q * nAttended * (d_qk + d_v);
  const cacheBytes = nUnique * tokenBytes;
  const bytes = 2 * b * s_q * h_q * d_qk + cacheBytes + 2 * b * s_q * h_q * d_v;
  return { flop, bytes, intensity: flop / bytes, nAttended, nUnique, cacheBytes };
}

/** The dims and token bytes of a sparse shape: its format's, each replaced where the shape gives it. */
export function sparseFormatDims(shape: Pick<SparseMlaShape, "format" | "d_qk" | "d_v" | "tokenBytes">): SparseFormatDims {
  const f = SPARSE_FORMATS[shape.format ?? "v32"];
  if (f === undefined) throw new ArgumentError("mlaCost", "format", `one of ${Object.keys(SPARSE_FORMATS).join(", ")}`, String(shape.format));
  return { d_qk: shape.d_qk ?? f.d_qk, d_v: shape.d_v ?? f.d_v, tokenBytes: shape.tokenBytes ?? f.tokenBytes, quantizedDims: f.quantizedDims };
}

/** The second cache's entries per query row (its mean valid length) and length, checked. */
function extraCache(fn: string, extra: ExtraCacheShape): { n: number; s_k?: number } {
  requirePositiveInteger(fn, "extra.topk", extra.topk);
  const n = extra.meanTopkLength ?? extra.topk;
  if (!(Number.isFinite(n) && n >= 0 && n <= extra.topk)) {
    throw new ArgumentError(fn, "extra.meanTopkLength", `a number from 0 to extra.topk (${extra.topk})`, String(n));
  }
  return { n, ...(extra.s_k !== undefined ? { s_k: cacheLength(fn, "extra.s_k", extra.s_k, extra.topk) } : {}) };
}

/** A cache length that holds `topk` distinct positions. */
function cacheLength(fn: string, name: string, s_k: number, topk: number): number {
  requirePositive(fn, name, s_k);
  if (topk > s_k) throw new ArgumentError(fn, name, `at least the entries per query token (${topk})`, String(s_k));
  return s_k;
}

/**
 * Expected count of distinct cache tokens read when each of the `s_q` query tokens of each of `b`
 * requests picks `topk` distinct random positions out of `s_k`: b·s_k·(1 − (1 − topk/s_k)^s_q).
 * Random indices are what FlashMLA's benchmark and ours feed the sparse kernel.
 */
export function expectedUniqueTokens(b: number, s_k: number, s_q: number, topk: number): number {
  const fn = "expectedUniqueTokens";
  requirePositiveInteger(fn, "b", b);
  requirePositiveInteger(fn, "s_k", s_k);
  requirePositiveInteger(fn, "s_q", s_q);
  requirePositiveInteger(fn, "topk", topk);
  if (topk > s_k) throw new ArgumentError(fn, "topk", `at most s_k (${s_k})`, String(topk));
  return distinctRead(b, s_k, s_q, topk);
}

/** b·s_k·(1 − (1 − n/s_k)^s_q): each of s_q rows reads n distinct random positions of s_k (n may be a mean). */
function distinctRead(b: number, s_k: number, s_q: number, n: number): number {
  return b * s_k * (1 - Math.pow(1 - n / s_k, s_q));
}

function requirePositiveInteger(fn: string, name: string, v: number): void {
  if (!Number.isSafeInteger(v) || v <= 0) throw new ArgumentError(fn, name, "a positive integer", String(v));
}

function requirePositive(fn: string, name: string, v: number): void {
  if (!(typeof v === "number" && Number.isFinite(v) && v > 0)) {
    throw new ArgumentError(fn, name, "a positive finite number", String(v));
  }
}
