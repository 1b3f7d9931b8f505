import { optionsObject } from "../../errors/ArgumentError.js";
import { bf16BitsToF32, f64ToBf16Bits } from "../../numeric/bf16.js";
import { f64ToFp16Bits, fp16BitsToF32 } from "../../numeric/fp16.js";
import { FP8_TOKEN_BYTES, dequantizeKvTokenV32 } from "../../numeric/kvCacheFp8.js";
import { Tensor } from "../../runtime/Tensor.js";
import { DENSE_PAGE_BLOCK_SIZE, D_QK } from "../contract/shape.js";
import { referenceArgs, type MlaDecodeReferenceArgs, type ReferenceArgs, type ReferenceRow } from "./referenceArgs.js";

export type { MlaDecodeReferenceArgs, ReferenceRow } from "./referenceArgs.js";

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
   * is NaN. Costs O(rows · s_k · 576), so large GPU runs can be checked on a sample.
   * @default all rows
   */
  rows?: ReadonlyArray<ReferenceRow>;
}

const NAN_BITS = { bf16: 0x7fc0, fp16: 0x7e00 } as const;

/**
 * FlashMLA's MLA decode (`flash_mla_with_kvcache`) on the CPU with float64 accumulation: the
 * reference the GPU kernels are checked against. Dense (paged bf16/fp16 KV cache, block table,
 * optional causal mask) when `indices` is absent; sparse (V32 FP8 KV cache addressed by physical
 * token ids, optional topk length and attention sink) when present. All arguments are checked
 * before any work; see {@link MlaDecodeReferenceArgs} for shapes and rules.
 *
 * For each row, scores s = softmax_scale · Σ_d q·k over the visible keys, lse = ln Σ exp(s) and
 * out = Σ exp(s − lse) · v. A row that sees no key gets out 0 and lse +inf.
 *
 * @example
 * const { out, lse } = mlaDecodeReference({ q, kCache, blockTable, cacheSeqlens, headDimV: 512, causal: true });
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

  const q_row = new Float64Array(D_QK);
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

/** The keys one row attends to: `count` keys, key k's dim d at `kv[offsets[k] + d·dimStride]` (bf16/fp16 bits). */
interface KeySet {
  kv: Uint16Array;
  offsets: Float64Array;
  count: number;
  dimStride: number;
}

/** Scores, lse and the weighted V sum of one query row, all in float64. Returns lse; writes out into o_row. */
function attendRow(q_row: Float64Array, keys: KeySet, toF64: Float64Array, softmax_scale: number, o_row: Float64Array): number {
  const { kv, offsets, count, dimStride } = keys;
  const d_v = o_row.length;
  o_row.fill(0);
  if (count === 0) return Infinity;

  const s = new Float64Array(count); // [s_k] scores of this row
  let max = -Infinity;
  for (let k = 0; k < count; k++) {
    const base = offsets[k];
    let dot = 0;
    for (let d = 0; d < D_QK; d++) dot += q_row[d] * toF64[kv[base + d * dimStride]];
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
 * Sparse: the valid tokens of indices[i][j] (in order, repeats kept), each dequantized from its
 * 656-byte FP8 form into 576 bf16 values first, then used like a dense bf16 key.
 */
function sparseKeys(p: ReferenceArgs, i: number, j: number): KeySet {
  const { s_q, topk, page_block_size, num_blocks, kCache } = p;
  const limit = p.topk_length !== undefined ? p.topk_length[i] : topk;
  const num_tokens = num_blocks * page_block_size;
  const ids: number[] = [];
  for (let k = 0; k < limit; k++) {
    const id = p.indices![(i * s_q + j) * topk + k];
    if (id >= 0 && id < num_tokens) ids.push(id);
  }
  const kv = new Uint16Array(ids.length * D_QK); // [n_valid, 576] bf16
  const offsets = new Float64Array(ids.length);
  const bytes = kCache.host as Uint8Array;
  ids.forEach((id, n) => {
    const block = Math.floor(id / page_block_size);
    const src = kCache.offset + block * kCache.strides[0] + (id % page_block_size) * FP8_TOKEN_BYTES;
    dequantizeKvTokenV32(bytes, src, kv, n * D_QK);
    offsets[n] = n * D_QK;
  });
  return { kv, offsets, count: ids.length, dimStride: 1 };
}

function readQRow(p: ReferenceArgs, i: number, j: number, h: number, toF64: Float64Array, q_row: Float64Array): void {
  const { q } = p;
  const base = q.offset + i * q.strides[0] + j * q.strides[1] + h * q.strides[2];
  const bits = q.host as Uint16Array;
  for (let d = 0; d < D_QK; d++) q_row[d] = toF64[bits[base + d * q.strides[3]]];
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
