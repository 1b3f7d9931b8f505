import { test } from "node:test";
import assert from "node:assert/strict";
import { mlaDecodeReference } from "../../../../src/mla/reference/mlaDecodeReference.js";
import { computeSchedule, decodePart, numSmPartsSparse, sparseScheduleLengths } from "../../../../src/mla/sched/schedule.js";
import { bf16BitsToF32 } from "../../../../src/numeric/bf16.js";
import { D_QK, dequantizeKvTokenV32, FP8_TOKEN_BYTES } from "../../../../src/numeric/kvCacheFp8.js";
import { Tensor } from "../../../../src/runtime/Tensor.js";
import { BLOCK_N } from "../../../../src/mla/contract/shape.js";
import { makeSparseCase, type SparseCase, type SparseCaseOptions } from "../../../../src/testing/sparseCase.js";
import { D_V } from "../../../../src/mla/contract/shape.js";

// What the sparse kernel and the combine will do, written out on the CPU in float64: each SM part
// attends the index entries [64·begin_block, 64·end_block) of its requests (cut by the true length),
// keeps a base-2 online softmax, and either finishes a request itself (sink in the epilogue) or leaves
// (o / L, log2 L + M) in a split slot for the combine (sink in the merge). It must equal the reference.
const LOG2E = Math.LOG2E;
const exp2 = (x: number): number => 2 ** x;

interface TwinResult {
  out: Float64Array; // [b, s_q, h_q, 512]
  lse: Float64Array; // [b, h_q, s_q]
  splitRequests: number;
  emptyRows: number;
}

function splitKvTwin(c: SparseCase, smCount: number): TwinResult {
  const [b, s_q, h_q] = c.q.shape;
  const topk = c.indices.shape[2];
  const [num_blocks, page_block_size] = c.kCache.shape;
  const q = c.q.host as Uint16Array;
  const indices = c.indices.host as Int32Array;
  const topkLength = c.topkLength?.host as Int32Array | undefined;
  const sink = c.attnSink?.host as Float32Array | undefined;
  const scaleLog2 = c.softmaxScale * LOG2E;

  const tokens = new Map<number, Float64Array>();
  const bits = new Uint16Array(D_QK);
  const token = (id: number): Float64Array => {
    let kv = tokens.get(id);
    if (kv === undefined) {
      const src = c.kCache.offset + Math.floor(id / page_block_size) * c.kCache.strides[0] + (id % page_block_size) * FP8_TOKEN_BYTES;
      dequantizeKvTokenV32(c.kCache.host as Uint8Array, src, bits, 0);
      kv = Float64Array.from(bits, bf16BitsToF32);
      tokens.set(id, kv);
    }
    return kv;
  };

  const parts = numSmPartsSparse(smCount, s_q, h_q);
  const lengths = sparseScheduleLengths(topk, topkLength, b);
  const { schedMeta, numSplits } = computeSchedule(lengths, parts);
  const slots = numSplits[b];
  const oAccum = new Float64Array(slots * s_q * h_q * D_V); // [slots, s_q·h_q, 512], rows divided by L
  const lseAccum = new Float64Array(slots * s_q * h_q); // [slots, s_q·h_q], log2 L + M (−inf when L = 0)
  const out = new Float64Array(b * s_q * h_q * D_V);
  const lse = new Float64Array(b * h_q * s_q);
  let emptyRows = 0;

  const o = new Float64Array(D_V);
  for (let part = 0; part < parts; part++) {
    const p = decodePart(schedMeta, part);
    for (let r = p.beginReq; r <= p.endReq && r < b; r++) {
      // The schedule raised an empty request to length 1; the kernel masks with the true length.
      const attended = Math.min(Math.max(topkLength?.[r] ?? topk, 0), topk);
      const first = (r === p.beginReq ? p.beginBlock : 0) * BLOCK_N;
      const end = Math.min((r === p.endReq ? p.endBlock : Math.ceil(lengths[r] / BLOCK_N)) * BLOCK_N, attended);
      const split = (r === p.beginReq && p.firstSplitted) || (r === p.endReq && p.lastSplitted);
      const slot = numSplits[r] + (r === p.beginReq ? p.beginSplit : 0);
      for (let j = 0; j < s_q; j++) {
        const row = (r * s_q + j) * topk;
        const valid: number[] = [];
        for (let e = first; e < end; e++) {
          const id = indices[row + e];
          if (id >= 0 && id < num_blocks * page_block_size) valid.push(id); // −1 and out-of-range ids are masked
        }
        for (let h = 0; h < h_q; h++) {
          const qBase = ((r * s_q + j) * h_q + h) * D_QK;
          const s2 = valid.map((id) => {
            const k = token(id);
            let dot = 0;
            for (let d = 0; d < D_QK; d++) dot += bf16BitsToF32(q[qBase + d]) * k[d];
            return dot * scaleLog2;
          });
          const m = Math.max(-Infinity, ...s2);
          let l = 0;
          o.fill(0);
          s2.forEach((s, n) => {
            const w = exp2(s - m);
            l += w;
            const v = token(valid[n]);
            for (let d = 0; d < D_V; d++) o[d] += w * v[d];
          });
          const rowIdx = j * h_q + h;
          if (split) {
            lseAccum[slot * s_q * h_q + rowIdx] = l === 0 ? -Infinity : Math.log2(l) + m;
            for (let d = 0; d < D_V; d++) oAccum[(slot * s_q * h_q + rowIdx) * D_V + d] = l === 0 ? 0 : o[d] / l;
          } else {
            if (l === 0) emptyRows++;
            // out = O / (L + e^sink · 2^-M) = (O / L) / (1 + e^(sink − lse)); 0 when no key is valid.
            const sinkTerm = sink === undefined ? 0 : exp2(sink[h] * LOG2E - m);
            lse[(r * h_q + h) * s_q + j] = l === 0 ? Infinity : (Math.log2(l) + m) * Math.LN2;
            for (let d = 0; d < D_V; d++) out[((r * s_q + j) * h_q + h) * D_V + d] = l === 0 ? 0 : o[d] / (l + sinkTerm);
          }
        }
      }
    }
  }

  let splitRequests = 0;
  for (let r = 0; r < b; r++) {
    const n = numSplits[r + 1] - numSplits[r];
    if (n === 1) continue;
    splitRequests++;
    for (let rowIdx = 0; rowIdx < s_q * h_q; rowIdx++) {
      const j = Math.floor(rowIdx / h_q), h = rowIdx % h_q;
      const lse2 = Array.from({ length: n }, (_, s) => lseAccum[(numSplits[r] + s) * s_q * h_q + rowIdx]);
      const maxLse = Math.max(...lse2);
      const m = maxLse === -Infinity ? 0 : maxLse;
      const sum = lse2.reduce((acc, x) => acc + exp2(x - m), 0);
      let g = sum === 0 ? Infinity : Math.log2(sum) + m;
      lse[(r * h_q + h) * s_q + j] = g * Math.LN2; // written before the sink, which leaves lse alone
      if (g === Infinity && lse2.every((x) => x === -Infinity)) emptyRows++;
      if (sink !== undefined) {
        const sink2 = sink[h] * LOG2E;
        g = Number.isFinite(g) ? g + Math.log2(1 + exp2(sink2 - g)) : sink2 === -Infinity ? Infinity : sink2;
      }
      const dst = ((r * s_q + j) * h_q + h) * D_V;
      for (let s = 0; s < n; s++) {
        const w = exp2(lse2[s] - g);
        if (w === 0) continue;
        const src = ((numSplits[r] + s) * s_q * h_q + rowIdx) * D_V;
        for (let d = 0; d < D_V; d++) out[dst + d] += w * oAccum[src + d];
      }
    }
  }
  return { out, lse, splitRequests, emptyRows };
}

function assertTwinMatchesReference(c: SparseCase, smCount: number): TwinResult {
  const twin = splitKvTwin(c, smCount);
  const ref = mlaDecodeReference({ q: c.q, kCache: c.kCache, indices: c.indices, topkLength: c.topkLength, attnSink: c.attnSink, softmaxScale: c.softmaxScale, isFp8Kvcache: true, headDimV: 512 });
  const refLse = ref.lse.host as Float32Array;
  assert.ok(!ref.outF32.some(Number.isNaN), "no poisoned token reaches the reference");
  for (let i = 0; i < refLse.length; i++) {
    if (!Number.isFinite(refLse[i])) assert.equal(twin.lse[i], refLse[i], `lse[${i}]`);
    else assert.ok(Math.abs(twin.lse[i] - refLse[i]) <= 1e-6 * Math.max(1, Math.abs(refLse[i])), `lse[${i}]: ${twin.lse[i]} vs ${refLse[i]}`);
  }
  for (let i = 0; i < ref.outF32.length; i++) {
    assert.ok(Math.abs(twin.out[i] - ref.outF32[i]) <= 1e-6, `out[${i}]: ${twin.out[i]} vs ${ref.outF32[i]}`);
  }
  return twin;
}

/** A makeSparseCase case with every index entry's token filled, then `topkLength` attached and `edit` applied. */
function sparseCase(opts: SparseCaseOptions, topkLength?: number[], edit?: (indices: Int32Array) => void): SparseCase {
  const c = makeSparseCase(opts);
  // Shortening rows or invalidating entries never exposes a poisoned token, so these edits keep the case clean.
  edit?.(c.indices.host as Int32Array);
  return topkLength === undefined ? c : { ...c, topkLength: Tensor.fromHost(Int32Array.from(topkLength), [topkLength.length], "i32") };
}

test("split-KV over the sparse schedule plus the combine equals the reference for one request split over 6 parts", () => {
  const c = sparseCase({ seed: 11, b: 1, s_q: 2, h_q: 8, s_k: 1200, topk: 1000, pageBlockSize: 64 });
  const twin = assertTwinMatchesReference(c, 16);
  assert.equal(twin.splitRequests, 1);
});

test("split-KV twin equals the reference with topkLength (0, 1, full), a masked tail, all-invalid rows, repeats and ±inf sinks", () => {
  const c = sparseCase(
    { seed: 12, b: 6, s_q: 2, h_q: 16, s_k: 400, topk: 130, pageBlockSize: 61, sink: true, invalidFraction: 0.2, repeat: 0.1, blockPadTokens: 1 },
    // Request 3 attends the full row: its last block holds 2 entries and 62 masked ones.
    [77, 0, 129, 130, 1, 64],
    (indices) => indices.fill(-1, (2 * 2 + 0) * 130, (2 * 2 + 1) * 130), // request 2, query token 0: nothing valid
  );
  const sink = c.attnSink!.host as Float32Array;
  assert.ok(sink.includes(Infinity) && sink.includes(-Infinity) && sink.some(Number.isFinite), "sinks of every kind");
  const twin = assertTwinMatchesReference(c, 12);
  assert.ok(twin.splitRequests >= 1, `split requests: ${twin.splitRequests}`);
  assert.ok(twin.emptyRows >= 2 * 16, `rows without a valid key: ${twin.emptyRows}`);
});

test("split-KV twin equals the reference when every request is cut into one-block pieces (32 heads, s_q 3)", () => {
  const c = sparseCase({ seed: 13, b: 3, s_q: 3, h_q: 32, s_k: 700, topk: 300, pageBlockSize: 2, sink: true, invalidFraction: 0.05 });
  const twin = assertTwinMatchesReference(c, 132);
  assert.equal(twin.splitRequests, 3);
});
