import assert from "node:assert/strict";
import { bf16BitsToF32, f32ToBf16Bits } from "../../../../src/numeric/bf16.js";
import { assertClose } from "../../../../src/numeric/compare.js";
import { fp16BitsToF32 } from "../../../../src/numeric/fp16.js";
import { fp8E4m3ToF32 } from "../../../../src/numeric/fp8e4m3.js";
import { mlaDecodeReference, type MlaDecodeReferenceArgs } from "../../../../src/mla/reference/mlaDecodeReference.js";
import type { Tensor } from "../../../../src/runtime/Tensor.js";
import { D_V } from "../../../../src/mla/contract/shape.js";

/** outF32 and lse are f64 results rounded once to f32: allow that rounding plus 1e-12 relative. */
const F64_AGREEMENT = { abs: 1e-15, rel: 2 ** -24 + 1e-12 };

/** Checks every output of the reference against the naive formulation. */
export function assertMatchesNaive(args: MlaDecodeReferenceArgs, label: string): void {
  const ref = mlaDecodeReference(args);
  const naive = naiveAttention(args);
  const [b, s_q, h_q] = args.q.shape;
  assert.deepEqual(ref.out.shape, [b, s_q, h_q, D_V]);
  assert.equal(ref.out.dtype, args.q.dtype);
  assert.deepEqual(ref.lse.shape, [b, h_q, s_q]);
  assert.equal(ref.lse.dtype, "f32");
  assertClose(ref.outF32, naive.out, F64_AGREEMENT, { shape: [b, s_q, h_q, D_V], name: `${label} outF32` });
  assertClose(ref.lse.host as Float32Array, naive.lse, F64_AGREEMENT, { shape: [b, h_q, s_q], name: `${label} lse` });
  // Rounded once from f64: bit-equal to the naive result rounded the same way.
  const dtype = args.q.dtype as "bf16" | "fp16";
  const decode = dtype === "bf16" ? bf16BitsToF32 : fp16BitsToF32;
  assertClose(Float64Array.from(ref.out.host as Uint16Array, decode), naive.out, { abs: 0, rel: 0 }, { roundReferenceTo: dtype, name: `${label} out` });
}

/** f64 results of {@link naiveAttention}: out [b, s_q, h_q, 512] and lse [b, h_q, s_q], row-major. */
export interface NaiveResult {
  out: Float64Array;
  lse: Float64Array;
}

/**
 * A second, deliberately different formulation of MLA decode for checking mlaDecodeReference: it
 * gathers each request's keys into a dense [s_k, d_qk] float64 matrix (sparse: every entry of both
 * index lists, the extra cache's after the main one's), materialises the whole score matrix with −inf
 * for masked entries, runs a two-pass softmax into a probability matrix and multiplies it by V (dims
 * 0..511). It decodes FP8 tokens itself from their bytes (V32: fp8 value × f32 scale, then bf16;
 * MODEL1: fp8 value × 2^(e8m0 − 127) read at the page's fixed offsets) and trusts its inputs: call it
 * only with arguments mlaDecodeReference accepts.
 */
export function naiveAttention(args: MlaDecodeReferenceArgs): NaiveResult {
  const [b, s_q, h_q, d_qk] = args.q.shape;
  const scale = args.softmaxScale ?? 1 / Math.sqrt(d_qk);
  const out = new Float64Array(b * s_q * h_q * D_V);
  const lse = new Float64Array(b * h_q * s_q);
  const decodeHalf = args.q.dtype === "fp16" ? fp16BitsToF32 : bf16BitsToF32;
  const q = elements(args.q, decodeHalf); // [b, s_q, h_q, d_qk]

  for (let i = 0; i < b; i++) {
    // Query rows of request i, numbered r = j·h_q + h, each with its own key matrix and mask.
    const perRow: { keys: Float64Array; mask: boolean[] }[] = [];
    if (args.indices === undefined) {
      const h_kv = args.kCache.shape[2];
      const len = elements(args.cacheSeqlens!, Number)[i];
      const keysPerKvHead = Array.from({ length: h_kv }, (_, g) => gatherDense(args, i, g, len, decodeHalf));
      for (let j = 0; j < s_q; j++) {
        // tril with diagonal s_k − s_q: key t is visible to query j when t ≤ j + s_k − s_q.
        const mask = Array.from({ length: len }, (_, t) => !(args.causal && s_q > 1) || t <= j + len - s_q);
        for (let h = 0; h < h_q; h++) perRow.push({ keys: keysPerKvHead[Math.floor((h * h_kv) / h_q)], mask });
      }
    } else {
      for (let j = 0; j < s_q; j++) {
        const { keys, mask } = gatherSparse(args, i, j);
        for (let h = 0; h < h_q; h++) perRow.push({ keys, mask });
      }
    }

    for (let r = 0; r < s_q * h_q; r++) {
      const j = Math.floor(r / h_q);
      const h = r % h_q;
      const { keys, mask } = perRow[r];
      const s_k = mask.length;
      const qOff = ((i * s_q + j) * h_q + h) * d_qk;
      // Score row, −inf where masked.
      const scores = new Float64Array(s_k);
      for (let t = 0; t < s_k; t++) {
        if (!mask[t]) {
          scores[t] = -Infinity;
          continue;
        }
        let dot = 0;
        for (let d = 0; d < d_qk; d++) dot += q[qOff + d] * keys[t * d_qk + d];
        scores[t] = dot * scale;
      }
      // Pass 1: max. Pass 2: exponentials and their sum; then normalise into probabilities.
      const rowMax = scores.reduce((m, x) => Math.max(m, x), -Infinity);
      const lseAt = (i * h_q + h) * s_q + j;
      const outOff = ((i * s_q + j) * h_q + h) * D_V;
      if (rowMax === -Infinity) {
        lse[lseAt] = Infinity;
        continue; // out stays 0
      }
      const probs = scores.map((x) => Math.exp(x - rowMax));
      const total = probs.reduce((a, x) => a + x, 0);
      for (let t = 0; t < s_k; t++) probs[t] /= total;
      lse[lseAt] = rowMax + Math.log(total);

      let weight = 1;
      if (args.attnSink !== undefined) {
        const sink = (args.attnSink.contiguousHost().host as Float32Array)[h];
        weight = sink === Infinity ? 0 : sink === -Infinity ? 1 : Math.exp(lse[lseAt]) / (Math.exp(lse[lseAt]) + Math.exp(sink));
      }
      // out = P · V, V being dims 0..511 of each key.
      for (let d = 0; d < D_V; d++) {
        let acc = 0;
        for (let t = 0; t < s_k; t++) acc += probs[t] * keys[t * d_qk + d];
        out[outOff + d] = acc * weight;
      }
    }
  }
  return { out, lse };
}

/** All elements of a host tensor in row-major order, decoded by `decode`. */
function elements(t: Tensor, decode: (x: number) => number): Float64Array {
  const host = t.contiguousHost().host!;
  return Float64Array.from(host, decode);
}

/** Request i's keys of kv head g as a dense [len, d_qk] matrix (d_qk: the cache's last dim, 576 or 512), found through the block table. */
function gatherDense(args: MlaDecodeReferenceArgs, i: number, g: number, len: number, decode: (x: number) => number): Float64Array {
  const table = args.blockTable!.contiguousHost();
  const max_blocks = table.shape[1];
  const blockIds = table.host as Int32Array;
  const [, page, h_kv, d_qk] = args.kCache.shape;
  const cache = args.kCache.contiguousHost().host as Uint16Array;
  const keys = new Float64Array(len * d_qk);
  for (let t = 0; t < len; t++) {
    const block = blockIds[i * max_blocks + Math.floor(t / page)];
    const src = ((block * page + (t % page)) * h_kv + g) * d_qk;
    for (let d = 0; d < d_qk; d++) keys[t * d_qk + d] = decode(cache[src + d]);
  }
  return keys;
}

/**
 * The token set of (request i, query token j) as a [topk + extra_topk, d_qk] matrix (zeros where
 * invalid) and its mask: the main cache's entries, then the extra cache's.
 */
function gatherSparse(args: MlaDecodeReferenceArgs, i: number, j: number): { keys: Float64Array; mask: boolean[] } {
  const d_qk = args.q.shape[3];
  const lists = [{ kCache: args.kCache, indices: args.indices!, topkLength: args.topkLength }];
  if (args.extraKCache !== undefined) lists.push({ kCache: args.extraKCache, indices: args.extraIndices!, topkLength: args.extraTopkLength });
  const keys: number[] = [];
  const mask: boolean[] = [];
  for (const { kCache, indices, topkLength } of lists) {
    const [, s_q, topk] = indices.shape;
    const ids = indices.contiguousHost().host as Int32Array;
    const [num_blocks, page] = kCache.shape;
    const limit = topkLength ? (topkLength.contiguousHost().host as Int32Array)[i] : topk;
    for (let k = 0; k < topk; k++) {
      const id = ids[(i * s_q + j) * topk + k];
      const valid = k < limit && id >= 0 && id < num_blocks * page;
      mask.push(valid);
      const key = new Float64Array(d_qk);
      if (valid) (d_qk === 512 ? decodeModel1Token : decodeFp8Token)(kCache, Math.floor(id / page), id % page, key, 0);
      keys.push(...key);
    }
  }
  return { keys: Float64Array.from(keys), mask };
}

/** V32 token → 576 values: e4m3 × its tile's f32 scale rounded to bf16 for dims 0..511, raw bf16 RoPE after. */
function decodeFp8Token(kCache: Tensor, block: number, row: number, dst: Float64Array, at: number): void {
  const bytes = kCache.host as Uint8Array;
  const base = kCache.offset + block * kCache.strides[0] + row * kCache.strides[1];
  const view = new DataView(bytes.buffer, bytes.byteOffset + base, 656);
  for (let d = 0; d < 512; d++) {
    const tileScale = view.getFloat32(512 + 4 * Math.floor(d / 128), true);
    dst[at + d] = bf16BitsToF32(f32ToBf16Bits(fp8E4m3ToF32(view.getUint8(d)) * tileScale));
  }
  for (let d = 0; d < 64; d++) dst[at + 512 + d] = bf16BitsToF32(view.getUint16(528 + 2 * d, true));
}

/**
 * MODEL1 token (block, row) → 512 values, read from the page at block · stride(0): e4m3 code d at
 * row · 576 + d times 2^(e − 127) of its tile's e8m0 byte at pbs · 576 + row · 8 + d / 64 (0xff: NaN)
 * for dims 0..447, the bf16 RoPE at row · 576 + 448 after.
 */
function decodeModel1Token(kCache: Tensor, block: number, row: number, dst: Float64Array, at: number): void {
  const bytes = kCache.host as Uint8Array;
  const pbs = kCache.shape[1];
  const page = new DataView(bytes.buffer, bytes.byteOffset + kCache.offset + block * kCache.strides[0], pbs * 584);
  for (let d = 0; d < 448; d++) {
    const e = page.getUint8(pbs * 576 + row * 8 + Math.floor(d / 64));
    dst[at + d] = fp8E4m3ToF32(page.getUint8(row * 576 + d)) * (e === 0xff ? NaN : 2 ** (e - 127));
  }
  for (let d = 0; d < 64; d++) dst[at + 448 + d] = bf16BitsToF32(page.getUint16(row * 576 + 448 + 2 * d, true));
}
