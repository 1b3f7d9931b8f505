import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { dcpCausalForm, dcpFlattenBlockTable } from "../../../src/dcp/causal.js";
import { dcpMergeModel, type DcpFloats } from "../../../src/dcp/mergeModel.js";
import { dcpPageMapFromRequests, dcpPageMapRoundRobin, planDcpShards, shardDenseCacheHost, shardSparseCacheHost, shardSparseIndicesHost, type DcpPageMap } from "../../../src/dcp/shard.js";
import { D_QK } from "../../../src/mla/contract/shape.js";
import { mlaDecodeReference, type MlaDecodeReferenceArgs } from "../../../src/mla/reference/mlaDecodeReference.js";
import { assertClose, type Tolerance } from "../../../src/numeric/compare.js";
import { FP8_TOKEN_BYTES } from "../../../src/numeric/kvCacheFp8.js";
import { Rng } from "../../../src/numeric/random.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { makeDenseCase, NAN_HALF_BITS, type DenseCase } from "../../../src/testing/denseCase.js";
import { makeSparseCase, type SparseCase } from "../../../src/testing/sparseCase.js";
import { drawSparseLayout } from "../../../src/testing/sparseCaseLayout.js";
import { naiveAttention } from "../mla/reference/naiveAttention.js";

/**
 * A decode on the host: out [b, s_q, h_q, 512] and lse [b, h_q, s_q]. "f64" is the float64 naive
 * formulation (results kept in float64); "reference" is mlaDecodeReference, whose outF32 and lse are
 * its float64 results rounded once to f32.
 */
type Decoder = (args: MlaDecodeReferenceArgs) => { out: DcpFloats; lse: DcpFloats };
const DECODERS: Record<"f64" | "reference", Decoder> = {
  f64: (args) => naiveAttention(args),
  reference: (args) => {
    const r = mlaDecodeReference(args);
    return { out: r.outF32, lse: r.lse.host as Float32Array };
  },
};

/**
 * Sharded f64 decode + merge against the unsharded f64 decode: only the order of summation differs.
 * Through mlaDecodeReference every shard's out and lse are rounded to f32 before the merge: an lse off
 * by |lse|·2⁻²⁴ (|lse| < 8 here, so ≤ 2⁻²¹) scales a weight by as much, and a few such terms add up.
 * Seen: ≤ 7.4e-9 abs, ≤ 4e-7 rel where |out| > 0.01; allowed 2⁻²⁴ abs or 2⁻¹⁹ rel. A lost or doubled
 * token, or a wrong weight, is orders of magnitude larger.
 */
const TOL: Record<keyof typeof DECODERS, Tolerance> = {
  f64: { abs: 1e-15, rel: 1e-12 },
  reference: { abs: 2 ** -24, rel: 2 ** -19 },
};

/** Rank results of the flattened form, [b·s_q, h_q, 1] lse, back in [b, h_q, s_q] order (out needs nothing). */
function unflattenLse(lse: DcpFloats, b: number, s_q: number, h_q: number): Float64Array {
  const back = new Float64Array(b * h_q * s_q);
  for (let i = 0; i < b; i++) {
    for (let j = 0; j < s_q; j++) {
      for (let h = 0; h < h_q; h++) back[(i * h_q + h) * s_q + j] = lse[(i * s_q + j) * h_q + h];
    }
  }
  return back;
}

/** Splits a dense case over `ranks`, decodes every shard in the form dcpCausalForm picks, and merges. */
function shardedDense(c: DenseCase, ranks: number, interleave: number, decode: Decoder) {
  const [b, s_q, h_q] = c.q.shape;
  const h_kv = c.kCache.shape[2];
  const cacheSeqlens = c.cacheSeqlens.host as Int32Array;
  const plan = planDcpShards({ cacheSeqlens, ranks, interleave, pageSize: 64, unusedBlockId: 2147480000 });
  const caches = shardDenseCacheHost(plan, { kCache: c.kCache.host as Uint16Array, blockTable: c.blockTable.host as Int32Array, tokenElements: h_kv * D_QK, fill: NAN_HALF_BITS });
  const forms: string[] = [];
  const results = plan.shards.map((shard, rank) => {
    const kCache = Tensor.fromHost(caches[rank], [shard.numBlocks, 64, h_kv, D_QK], c.kCache.dtype);
    const { form, localSeqlens, visibleLengths } = c.causal
      ? dcpCausalForm({ cacheSeqlens, sQ: s_q, rank, ranks, interleave })
      : { form: "nonCausal", localSeqlens: shard.localSeqlens, visibleLengths: undefined };
    forms.push(form);
    const common = { kCache, headDimV: c.headDimV, softmaxScale: c.softmaxScale };
    if (form !== "flatten") {
      const blockTable = Tensor.fromHost(shard.blockTable, [b, shard.maxBlocksPerSeq], "i32");
      return decode({ ...common, q: c.q, blockTable, cacheSeqlens: Tensor.fromHost(localSeqlens, [b], "i32"), causal: form === "causal" });
    }
    // b·s_q rows of one query token each, row i·s_q + j with its own length.
    const blockTable = Tensor.fromHost(dcpFlattenBlockTable(shard.blockTable, b, s_q), [b * s_q, shard.maxBlocksPerSeq], "i32");
    const q = c.q.reshape([b * s_q, 1, h_q, D_QK]);
    const r = decode({ ...common, q, blockTable, cacheSeqlens: Tensor.fromHost(visibleLengths!, [b * s_q], "i32") });
    return { out: r.out, lse: unflattenLse(r.lse, b, s_q, h_q) };
  });
  const merged = dcpMergeModel({ outs: results.map((r) => r.out), lses: results.map((r) => r.lse), dims: { b, s_q, h_q } });
  return { ...merged, forms };
}

function assertSameDecode(got: { out: DcpFloats; lse: DcpFloats }, want: { out: DcpFloats; lse: DcpFloats }, tol: Tolerance, dims: number[], what: string): void {
  const [b, s_q, h_q] = dims;
  assertClose(got.lse, want.lse, tol, { shape: [b, h_q, s_q], name: `lse (${what})` });
  assertClose(got.out, want.out, tol, { shape: [b, s_q, h_q, 512], name: `out (${what})` });
}

describe("dense DCP: shards decoded alone and merged equal the unsharded decode", () => {
  // Zero-length, one-token, page-edge and multi-page requests: with 4 ranks and interleave 128 most
  // requests leave most ranks empty.
  const SEQLENS = [0, 1, 2, 63, 64, 65, 129, 300];
  for (const s_q of [1, 2]) {
    test(`sharded decode + dcpMergeModel() equals the unsharded decode, s_q = ${s_q}${s_q > 1 ? ", causal" : ""}`, () => {
      const c = makeDenseCase({ seed: 50 + s_q, b: SEQLENS.length, s_q, h_q: 2, h_kv: 1, seqlens: SEQLENS, causal: s_q > 1, dtype: "bf16", extraBlocks: 1 });
      const formsSeen = new Set<string>();
      for (const [name, decode] of Object.entries(DECODERS) as [keyof typeof DECODERS, Decoder][]) {
        const whole = decode(c);
        for (const ranks of [1, 2, 3, 4]) {
          for (const interleave of [1, 64, 128]) {
            const sharded = shardedDense(c, ranks, interleave, decode);
            sharded.forms.forEach((f) => formsSeen.add(f));
            assertSameDecode(sharded, whole, TOL[name], c.q.shape as number[], `${name}, ${ranks} ranks, interleave ${interleave}`);
          }
        }
      }
      assert.deepEqual([...formsSeen].sort(), s_q > 1 ? ["causal", "flatten", "nonCausal"] : ["nonCausal"]);
    });
  }

  test("sharded decode + dcpMergeModel() equals the unsharded decode with h_kv = 2, fp16, non-causal s_q = 2", () => {
    const c = makeDenseCase({ seed: 60, b: 3, s_q: 2, h_q: 4, h_kv: 2, seqlens: [70, 0, 131], causal: false, dtype: "fp16" });
    const whole = naiveAttention(c);
    for (const [ranks, interleave] of [[2, 1], [3, 64], [4, 128]]) {
      assertSameDecode(shardedDense(c, ranks, interleave, DECODERS.f64), whole, TOL.f64, [3, 2, 4], `${ranks} ranks, interleave ${interleave}`);
    }
  });

  test("sharded decode + dcpMergeModel() gives 0/+inf where no rank holds a token, even with whole ranks empty", () => {
    const c = makeDenseCase({ seed: 61, b: 2, s_q: 2, h_q: 2, h_kv: 1, seqlens: [3, 0], causal: true, dtype: "bf16" });
    const sharded = shardedDense(c, 4, 64, DECODERS.f64); // ranks 1..3 hold nothing
    assertSameDecode(sharded, naiveAttention(c), TOL.f64, [2, 2, 2], "4 ranks, interleave 64");
    assert.deepEqual([...sharded.lse.subarray(4)], [Infinity, Infinity, Infinity, Infinity]);
    assert.ok(sharded.out.subarray(2 * 2 * 512).every((x) => x === 0));
  });
});

/** The case's global block table [b, max_blocks], rebuilt from its layout (drawSparseLayout is makeSparseCase's first draw). */
function sparseBlockTable(seed: number, c: SparseCase, opts: { s_k: number; varlen: boolean; pageBlockSize: number }) {
  const layout = drawSparseLayout(new Rng(seed), { b: c.seqlens.length, seqlens: { s_k: opts.s_k, varlen: opts.varlen }, pageBlockSize: opts.pageBlockSize });
  assert.deepEqual(layout.seqlens, c.seqlens);
  const pages = layout.seqlens.map((n) => Math.ceil(n / opts.pageBlockSize));
  const maxBlocks = Math.max(1, ...pages);
  const blockTable = new Int32Array(layout.seqlens.length * maxBlocks).fill(-1);
  pages.forEach((n, i) => {
    for (let k = 0; k < n; k++) blockTable[i * maxBlocks + k] = layout.physical[layout.firstBlock[i] + k];
  });
  return { blockTable, numPages: layout.numBlocks };
}

/** Shards a sparse case's cache and indices by `pageMap`, decodes each shard without the sink, merges, then sinks. */
function shardedSparse(c: SparseCase, indices: Tensor, pageMap: DcpPageMap, decode: Decoder) {
  const [b, s_q, h_q] = c.q.shape;
  const topk = indices.shape[2];
  const P = pageMap.pageBlockSize;
  const caches = shardSparseCacheHost(pageMap, { kCache: c.kCache.host!, blockStrideBytes: c.kCache.strides[0], fill: 0xff });
  const rankIndices = shardSparseIndicesHost(pageMap, { indices: indices.host as Int32Array, sQ: s_q, topk, topkLength: c.topkLength?.host as Int32Array | undefined });
  const results = caches.map((bytes, rank) =>
    decode({
      q: c.q,
      kCache: Tensor.fromHost(bytes, [pageMap.localNumPages[rank], P, 1, FP8_TOKEN_BYTES], "u8"),
      indices: Tensor.fromHost(rankIndices[rank], [b, s_q, topk], "i32"),
      topkLength: c.topkLength,
      isFp8Kvcache: true,
      headDimV: c.headDimV,
      softmaxScale: c.softmaxScale,
    }),
  );
  const attnSink = c.attnSink?.host as Float32Array | undefined;
  return dcpMergeModel({ outs: results.map((r) => r.out), lses: results.map((r) => r.lse), dims: { b, s_q, h_q }, attnSink });
}

describe("sparse DCP: index lists sharded by page, decoded alone and merged equal the unsharded decode", () => {
  const s_k = 150, pageBlockSize = 16, varlen = true;
  for (const s_q of [1, 2]) {
    test(`sharded sparse decode + dcpMergeModel() with the sink after the merge equals the unsharded decode, s_q = ${s_q}`, () => {
      const seed = 70 + s_q;
      const c = makeSparseCase({ seed, b: 3, s_q, h_q: 4, s_k, topk: 48, pageBlockSize, topkLength: true, sink: true, invalidFraction: 0.2, repeat: 0.1, varlen, blockPadTokens: 1 });
      // Out-of-range ids inside topkLength are skips like −1, on every rank.
      const ids = Int32Array.from(c.indices.host as Int32Array);
      const numTokens = c.kCache.shape[0] * pageBlockSize;
      const lengths = c.topkLength!.host as Int32Array;
      const i = lengths.findIndex((n) => n >= 2);
      assert.ok(i >= 0, `want a request with topkLength ≥ 2, got ${lengths}`);
      ids[i * s_q * 48] = numTokens + 3;
      ids[i * s_q * 48 + 1] = -5;
      const indices = Tensor.fromHost(ids, c.indices.shape, "i32");
      const sinks = [...(c.attnSink!.host as Float32Array)];
      assert.ok(sinks.some((x) => Number.isFinite(x)), `want a finite sink among ${sinks}`);
      const { blockTable, numPages } = sparseBlockTable(seed, c, { s_k, varlen, pageBlockSize });

      for (const [name, decode] of Object.entries(DECODERS) as [keyof typeof DECODERS, Decoder][]) {
        const whole = decode({ ...c, indices });
        for (const ranks of [1, 2, 3, 4]) {
          const maps: [string, DcpPageMap][] = [["round robin", dcpPageMapRoundRobin({ numPages, ranks, pageBlockSize })]];
          for (const interleave of [pageBlockSize, 2 * pageBlockSize]) {
            const plan = planDcpShards({ cacheSeqlens: Int32Array.from(c.seqlens), ranks, interleave, pageSize: pageBlockSize });
            maps.push([`token rule, interleave ${interleave}`, dcpPageMapFromRequests(plan, { blockTable, numPages })]);
          }
          for (const [mapName, pageMap] of maps) {
            assertSameDecode(shardedSparse(c, indices, pageMap, decode), whole, TOL[name], [3, s_q, 4], `${name}, ${ranks} ranks, ${mapName}`);
          }
        }
      }
    });
  }

  test("a sink applied per shard instead of once would not match: the model's sink is the global one", () => {
    const seed = 80;
    const c = makeSparseCase({ seed, b: 1, s_q: 1, h_q: 2, s_k: 64, topk: 32, pageBlockSize, sink: false });
    const sink = Float32Array.of(0.5, -0.25);
    const whole = naiveAttention({ ...c, attnSink: Tensor.fromHost(sink, [2], "f32") });
    const pageMap = dcpPageMapRoundRobin({ numPages: c.kCache.shape[0], ranks: 2, pageBlockSize });
    const merged = shardedSparse({ ...c, attnSink: Tensor.fromHost(sink, [2], "f32") }, c.indices, pageMap, DECODERS.f64);
    assertSameDecode(merged, whole, TOL.f64, [1, 1, 2], "sink once");
    // Sinking each shard first, then merging, scales every row by a different (wrong) factor.
    const perShard = shardedSparse(c, c.indices, pageMap, (args) => naiveAttention({ ...args, attnSink: Tensor.fromHost(sink, [2], "f32") }));
    assert.ok(Math.abs(perShard.out[0] - whole.out[0]) > 1e-6, "a per-shard sink differs");
  });
});
