import { optionsObject } from "../../errors/ArgumentError.js";
import { bf16BitsToF32, f32ToBf16Bits, f64ToBf16Bits } from "../../numeric/bf16.js";
import { f64ToFp16Bits, fp16BitsToF32 } from "../../numeric/fp16.js";
import { FP8_TOKEN_BYTES, dequantizeKvTokenV32 } from "../../numeric/kvCacheFp8.js";
import { MODEL1_D_QK, dequantizeTokenModel1 } from "../../numeric/kvCacheModel1.js";
import { Tensor } from "../../runtime/Tensor.js";
import { DENSE_PAGE_BLOCK_SIZE } from "../contract/shape.js";
import { referenceArgs, type MlaDecodeReferenceArgs, type ReferenceArgs, type ReferenceRow, type SparseScope } from "./referenceArgs.js";

export type { MlaDecodeReferenceArgs, ReferenceRow, SparseFormat } from "./referenceArgs.js";

/** Results of {@link mlaDecodeReference}. */
export interface MlaDecodeReferenceResult {
  /** [b, s_q, h_q, d_v=512] in q's dtype, rounded once from the float64 result. */
  out: Tensor<"bf16" | "fp16">;
  /** [b, h_q, s_q] f32, natural log of the softmax denominator (+inf for a row that sees no key). */
  lse: Tensor<"f32">;
  /** [b, s_q, h_q, d_v] row-major: `out` before rounding to q's dtype (float64 rounded to f32 only). */
  outF32: Float32Array;
}

/** Options of {@link mlaDecodeReference}. */
export interface MlaDecodeReferenceOptions {
  /**
   * Compute only these (request, query token, head) rows; every other element of out, lse and outF32
   * is NaN. Costs O(rows · s_k · d_qk), so large GPU runs can be checked on a sample.
   * @default all rows
   */
  rows?: ReadonlyArray<ReferenceRow>;
}

const NAN_BITS = { bf16: 0x7fc0, fp16: 0x7e00 } as const;

/**
 * FlashMLA's MLA decode (`flash_mla_with_kvcache`) on the CPU with float64 accumulation: the
 * reference the GPU kernels are checked against. Dense (paged bf16/fp16 KV cache, block table,
 * optional causal mask) when `indices` is absent, with DeepSeek-V3.2's head (q's d_qk 576) or
 * DeepSeek-V4's (d_qk 512, the cache's rows as wide); sparse when present: an FP8 KV cache addressed by
 * physical token ids, in DeepSeek-V3.2's V32 format (q's d_qk 576) or DeepSeek-V4's MODEL1 format
 * (d_qk 512), with optional topk lengths, attention sink and a second cache (extraKCache,
 * extraIndices, extraTopkLength) whose tokens join the first cache's in one softmax. All arguments are
 * checked before any work; see {@link MlaDecodeReferenceArgs} for shapes and rules.
 *
 * For each row, scores s = softmax_scale · Σ_d q·k over the visible keys (d < d_qk), lse = ln Σ exp(s)
 * and out = Σ exp(s − lse) · v, v being dims 0..511 of each key (d_qk 576: its NoPE part; d_qk 512:
 * all of it). Sparse keys are the valid index entries of both caches, a repeated id once per appearance.
 * With a sink, out *= 1 / (1 + exp(sink − lse)) and lse stays. A row that sees no key gets out 0 and
 * lse +inf, whatever its sink.
 *
 * @example
 * const { out, lse } = mlaDecodeReference({ q, kCache, blockTable, cacheSeqlens, headDimV: 512, causal: true });
 * @example
 * // DeepSeek-V4 dense: q [b, s_q, h_q, 512], kCache [num_blocks, 64, h_kv, 512], both bf16 (or both fp16)
 * mlaDecodeReference({ q, kCache, blockTable, cacheSeqlens, headDimV: 512 });
 * @example
 * // DeepSeek-V4: q [b, s_q, h_q, 512]; both caches [num_blocks, pbs, 1, 584] with block stride model1PageBytes(pbs)
 * mlaDecodeReference({ q, kCache, indices, topkLength, extraKCache, extraIndices, extraTopkLength, attnSink, headDimV: 512, isFp8Kvcache: true });
 */
export function mlaDecodeReference(args: MlaDecodeReferenceArgs, opts?: MlaDecodeReferenceOptions): MlaDecodeReferenceResult {
  const p = referenceArgs(args, optionsObject("mlaDecodeReference", "opts", opts).rows);
  const { b, s_q, h_q, d_v, dtype } = p;

  const out = Tensor.zerosHost([b, s_q, h_q, d_v], dtype); // [b, s_q, h_q, d_v]
  const lse = Tensor.zerosHost([b, h_q, s_q], "f32"); // [b, h_q, s_q]
  const outF32 = new Float32Array(b * s_q * h_q * d_v); // [b, s_q, h_q, d_v]
  const outBits = out.host as Uint16Array;
  const lseHost = lse.host as Float32Array;
  if (p.rows !== undefined) {
    outBits.fill(NAN_BITS[dtype]);
    lseHost.fill(NaN);
    outF32.fill(NaN);
  }
  const roundToDtype = dtype === "bf16" ? f64ToBf16Bits : f64ToFp16Bits;
  const toF64 = conversionTable(dtype);

  const q_row = new Float64Array(p.d_qk);
  const o_row = new Float64Array(d_v);
  for (const [group, heads] of groupRows(p)) {
    const i = Math.floor(group / s_q);
    const j = group % s_q;
    const keys = p.sparse ? sparseKeys(p, i, j) : undefined;
    for (const h of heads) {
      readQRow(p, i, j, h, toF64, q_row);
      const keySet = keys ?? denseKeys(p, i, j, h);
      const row_lse = attendRow(q_row, keySet, toF64, p.softmax_scale, o_row);
      if (p.attn_sink !== undefined && keySet.count > 0) {
        const sinkScale = 1 / (1 + Math.exp(p.attn_sink[h] - row_lse));
        for (let d = 0; d < d_v; d++) o_row[d] *= sinkScale;
      }
      const base = ((i * s_q + j) * h_q + h) * d_v;
      for (let d = 0; d < d_v; d++) {
        outF32[base + d] = o_row[d];
        outBits[base + d] = roundToDtype(o_row[d]);
      }
      lseHost[(i * h_q + h) * s_q + j] = row_lse;
    }
  }
  return { out, lse, outF32 };
}

/** The keys one row attends to: `count` keys, key k's dim d < d_qk at `kv[offsets[k] + d·dimStride]` (bf16/fp16 bits). */
interface KeySet {
  kv: Uint16Array;
  offsets: Float64Array;
  count: number;
  dimStride: number;
}

/**
 * Scores, lse and the weighted V sum of one query row (q_row: d_qk dims; V: each key's first d_v =
 * o_row.length dims), all in float64. Returns lse; writes out into o_row.
 */
function attendRow(q_row: Float64Array, keys: KeySet, toF64: Float64Array, softmax_scale: number, o_row: Float64Array): number {
  const { kv, offsets, count, dimStride } = keys;
  const d_qk = q_row.length;
  const d_v = o_row.length;
  o_row.fill(0);
  if (count === 0) return Infinity;

  const s = new Float64Array(count); // [s_k] scores of this row
  let max = -Infinity;
  for (let k = 0; k < count; k++) {
    const base = offsets[k];
    let dot = 0;
    for (let d = 0; d < d_qk; d++) dot += q_row[d] * toF64[kv[base + d * dimStride]];
    s[k] = softmax_scale * dot;
    if (s[k] > max) max = s[k];
  }
  let sum = 0;
  for (let k = 0; k < count; k++) sum += Math.exp(s[k] - max);
  const lse = max + Math.log(sum);

  for (let k = 0; k < count; k++) {
    const weight = Math.exp(s[k] - lse);
    const base = offsets[k];
    for (let d = 0; d < d_v; d++) o_row[d] += weight * toF64[kv[base + d * dimStride]];
  }
  return lse;
}

/**
 * Dense: the keys request i's query token j may see, read in place through the block table
 * (token t lives in block block_table[i][t / 64], row t % 64). Slots past the visible length are
 * never touched, so poison there cannot leak in.
 */
function denseKeys(p: ReferenceArgs, i: number, j: number, h: number): KeySet {
  const { s_q, h_q, h_kv, causal, kCache, max_blocks } = p;
  const s_k = p.cache_seqlens![i];
  const visible = causal ? Math.max(0, s_k - (s_q - 1 - j)) : s_k;
  const h_k = Math.floor(h / (h_q / h_kv)); // query heads are grouped onto kv heads
  const [blockStride, rowStride, headStride, dimStride] = kCache.strides;
  const offsets = new Float64Array(visible);
  for (let t = 0; t < visible; t++) {
    const block = p.block_table![i * max_blocks + Math.floor(t / DENSE_PAGE_BLOCK_SIZE)];
    offsets[t] = kCache.offset + block * blockStride + (t % DENSE_PAGE_BLOCK_SIZE) * rowStride + h_k * headStride;
  }
  return { kv: kCache.host as Uint16Array, offsets, count: visible, dimStride };
}

/**
 * Sparse: the keys of (request i, query token j) in the kernel's order, one softmax over all of them:
 * the valid entries of indices[i][j] (the first topk_length[i]), then those of extra_indices[i][j]
 * (the first extra_topk_length[i]). An id < 0 or ≥ num_blocks · page_block_size of its cache is
 * skipped; a repeated id, within a cache or across the two, is a key each time it appears. Each token
 * is dequantized into d_qk bf16 values first and then used like a dense bf16 key.
 */
function sparseKeys(p: ReferenceArgs, i: number, j: number): KeySet {
  const { s_q, d_qk } = p;
  const picked: { scope: SparseScope; id: number }[] = [];
  for (const scope of p.scopes) {
    const limit = scope.topk_length !== undefined ? scope.topk_length[i] : scope.topk;
    const num_tokens = scope.num_blocks * scope.page_block_size;
    for (let k = 0; k < limit; k++) {
      const id = scope.indices[(i * s_q + j) * scope.topk + k];
      if (id >= 0 && id < num_tokens) picked.push({ scope, id });
    }
  }
  const gatherToken = p.format === "MODEL1" ? gatherTokenModel1 : gatherTokenV32;
  const kv = new Uint16Array(picked.length * d_qk); // [n_valid, d_qk] bf16
  const offsets = new Float64Array(picked.length);
  picked.forEach(({ scope, id }, n) => {
    gatherToken(scope, id, kv, n * d_qk);
    offsets[n] = n * d_qk;
  });
  return { kv, offsets, count: picked.length, dimStride: 1 };
}

/** V32: token `id` is 656 bytes at block · stride_kv_block + row · 656; 576 bf16 values out (dequantizeKvTokenV32). */
function gatherTokenV32(scope: SparseScope, id: number, dst: Uint16Array, at: number): void {
  const { kv, page_block_size } = scope;
  const src = kv.offset + Math.floor(id / page_block_size) * scope.stride_kv_block + (id % page_block_size) * FP8_TOKEN_BYTES;
  dequantizeKvTokenV32(kv.host as Uint8Array, src, dst, at);
}

/**
 * MODEL1: token `id` = block · page_block_size + row is read from its page base block · stride_kv_block
 * at fixed offsets (its 448 e4m3 codes and 64 bf16 RoPE values at row · 576, its 7 e8m0 scales at
 * page_block_size · 576 + row · 8; dequantizeTokenModel1), then taken to bf16 as the kernel's
 * bf16(e4m3) · bf16(2^(e − 127)) gives it (exact: the scale is a power of two); 512 values out.
 */
function gatherTokenModel1(scope: SparseScope, id: number, dst: Uint16Array, at: number): void {
  const { kv, page_block_size } = scope;
  const k = dequantizeTokenModel1((kv.host as Uint8Array).subarray(kv.offset), id, { pageBlockSize: page_block_size, blockStrideBytes: scope.stride_kv_block });
  for (let d = 0; d < MODEL1_D_QK; d++) dst[at + d] = f32ToBf16Bits(k[d]);
}

function readQRow(p: ReferenceArgs, i: number, j: number, h: number, toF64: Float64Array, q_row: Float64Array): void {
  const { q } = p;
  const base = q.offset + i * q.strides[0] + j * q.strides[1] + h * q.strides[2];
  const bits = q.host as Uint16Array;
  for (let d = 0; d < p.d_qk; d++) q_row[d] = toF64[bits[base + d * q.strides[3]]];
}

/** Rows to compute, grouped by (request, query token) so a sparse token set is dequantized once per group. */
function groupRows(p: ReferenceArgs): Map<number, number[]> {
  const groups = new Map<number, number[]>();
  if (p.rows === undefined) {
    const allHeads = Array.from({ length: p.h_q }, (_, h) => h);
    for (let g = 0; g < p.b * p.s_q; g++) groups.set(g, allHeads);
    return groups;
  }
  for (const { batch, token, head } of p.rows) {
    const g = batch * p.s_q + token;
    const heads = groups.get(g) ?? [];
    if (!heads.includes(head)) heads.push(head);
    groups.set(g, heads);
  }
  return groups;
}

const tables: Partial<Record<"bf16" | "fp16", Float64Array>> = {};

/** bits → value for all 65536 codes, so the inner loops read a table instead of decoding bits. */
function conversionTable(dtype: "bf16" | "fp16"): Float64Array {
  let table = tables[dtype];
  if (table === undefined) {
    const decode = dtype === "bf16" ? bf16BitsToF32 : fp16BitsToF32;
    table = new Float64Array(65536);
    for (let bits = 0; bits < 65536; bits++) table[bits] = decode(bits);
    tables[dtype] = table;
  }
  return table;
}
