import { ArgumentError } from "../errors/ArgumentError.js";
import { D_NOPE, D_QK, FP8_TOKEN_BYTES } from "../numeric/kvCacheFp8.js";

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

/** A sparse FP8 decode call: each query token attends `topk` cached tokens. */
export interface SparseMlaShape {
  kind: "sparse";
  b: number;
  h_q: number;
  s_q: number;
  /** Indices per query token; N = b·s_q·topk unless `nAttended` is given. */
  topk?: number;
  /** Σ attended tokens over the whole call (the valid count). */
  nAttended?: number;
  /** Distinct cache tokens read. @default nAttended (no token is shared) */
  nUnique?: number;
  /** @default 576 */
  d_qk?: number;
  /** @default 512 */
  d_v?: number;
  /** @default 656 */
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
}

/**
 * FLOPs and bytes of one MLA decode call with FlashMLA's benchmark formulas, so figures compare
 * one to one with its published numbers:
 * - dense: FLOP = b·h_q·s_q·(2·d_qk·s̄ + 2·s̄·d_v), bytes = b·(s_q·h_q·d_qk·2 + s̄·h_kv·d_qk·2 + s_q·h_q·d_v·2);
 * - sparse: FLOP = 2·h_q·N·(d_qk + d_v), bytes = 2·b·s_q·h_q·d_qk + N_unique·656 + 2·b·s_q·h_q·d_v.
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
  const d_qk = shape.d_qk ?? D_QK;
  const d_v = shape.d_v ?? D_NOPE;
  const tokenBytes = shape.tokenBytes ?? FP8_TOKEN_BYTES;
  for (const [name, v] of [["b", b], ["h_q", h_q], ["s_q", s_q], ["d_qk", d_qk], ["d_v", d_v], ["tokenBytes", tokenBytes]] as const) {
    requirePositiveInteger(fn, name, v);
  }
  let nAttended: number;
  if (shape.nAttended !== undefined) {
    requirePositive(fn, "nAttended", shape.nAttended);
    nAttended = shape.nAttended;
  } else if (shape.topk !== undefined) {
    requirePositiveInteger(fn, "topk", shape.topk);
    nAttended = b * s_q * shape.topk;
  } else {
    throw new ArgumentError(fn, "topk", "topk or nAttended for a sparse shape", "neither");
  }
  const nUnique = shape.nUnique ?? nAttended;
  requirePositive(fn, "nUnique", nUnique);
  if (nUnique > nAttended) {
    throw new ArgumentError(fn, "nUnique", `at most nAttended (${nAttended})`, String(nUnique));
  }
  const flop = 2 * h_q * nAttended * (d_qk + d_v);
  const bytes = 2 * b * s_q * h_q * d_qk + nUnique * tokenBytes + 2 * b * s_q * h_q * d_v;
  return { flop, bytes, intensity: flop / bytes, nAttended, nUnique };
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
  return b * s_k * (1 - Math.pow(1 - topk / s_k, s_q));
}

function requirePositiveInteger(fn: string, name: string, v: number): void {
  if (!Number.isSafeInteger(v) || v <= 0) throw new ArgumentError(fn, name, "a positive integer", String(v));
}

function requirePositive(fn: string, name: string, v: number): void {
  if (!(typeof v === "number" && Number.isFinite(v) && v > 0)) {
    throw new ArgumentError(fn, name, "a positive finite number", String(v));
  }
}
