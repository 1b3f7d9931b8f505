import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { mlaDecodeReference, type MlaDecodeReferenceArgs, type MlaDecodeReferenceResult } from "../../../../src/mla/reference/mlaDecodeReference.js";
import { f64ToBf16Bits } from "../../../../src/numeric/bf16.js";
import { assertClose } from "../../../../src/numeric/compare.js";
import { MODEL1_D_QK, model1PageBytes, quantizeKvCacheModel1 } from "../../../../src/numeric/kvCacheModel1.js";
import { quantizeKvCacheV32 } from "../../../../src/numeric/kvCacheFp8.js";
import { Rng } from "../../../../src/numeric/random.js";
import { Tensor } from "../../../../src/runtime/Tensor.js";
import { makeModel1Case, type Model1CaseOptions } from "../../../../src/testing/model1Case.js";
import { makeSparseCase } from "../../../../src/testing/sparseCase.js";
import { D_V } from "../../../../src/mla/contract/shape.js";
import { assertMatchesNaive } from "./naiveAttention.js";
import { testRejections, type RejectionCase } from "./testRejections.js";

const i32 = (values: ArrayLike<number>, shape = [values.length]) => Tensor.fromHost(Int32Array.from(values), shape, "i32");
const f32 = (values: number[]) => Tensor.fromHost(Float32Array.from(values), [values.length], "f32");

/** 512 zeros with the given dims set. */
function vec512(entries: Record<number, number>): number[] {
  const v = new Array<number>(MODEL1_D_QK).fill(0);
  for (const [d, x] of Object.entries(entries)) v[Number(d)] = x;
  return v;
}

/**
 * A MODEL1 cache of `pageBlockSize`-token pages holding `tokens` at slots 0, 1, …, every other slot
 * 0xff (NaN). Values should be exact after quantization (small powers of two times e4m3 values).
 */
function model1Cache(tokens: number[][], pageBlockSize: number, numBlocks = Math.ceil(tokens.length / pageBlockSize) || 1): Tensor<"u8"> {
  const bytes = quantizeKvCacheModel1(Uint16Array.from(tokens.flat(), f64ToBf16Bits), { pageBlockSize, numBlocks, fill: 0xff });
  const stride = model1PageBytes(pageBlockSize);
  return Tensor.fromHost(bytes, [bytes.length], "u8").view([numBlocks, pageBlockSize, 1, 584], [stride, 584, 584, 1]);
}

/** b = s_q = 1, h_q heads sharing `query`, a MODEL1 cache of pages of 2 tokens, indices `ids`. */
function tinyModel1(query: number[], h_q: number, tokens: number[][], ids: number[], extra: Partial<MlaDecodeReferenceArgs> = {}): MlaDecodeReferenceArgs {
  return {
    q: Tensor.fromHost(Uint16Array.from(Array.from({ length: h_q }, () => query).flat(), f64ToBf16Bits), [1, 1, h_q, MODEL1_D_QK], "bf16"),
    kCache: model1Cache(tokens, 2),
    indices: i32(ids, [1, 1, ids.length]),
    isFp8Kvcache: true,
    headDimV: D_V,
    ...extra,
  };
}

function assertSameResult(actual: MlaDecodeReferenceResult, expected: MlaDecodeReferenceResult, label: string): void {
  assert.deepEqual(actual.outF32, expected.outF32, `${label}: outF32`);
  assert.deepEqual(actual.out.host, expected.out.host, `${label}: out`);
  assert.deepEqual(actual.lse.host, expected.lse.host, `${label}: lse`);
}

/** A slot of a MODEL1 cache whose scale record is all 0xff: a poisoned token no index references. */
function poisonedSlot(kCache: Tensor): number {
  const [num_blocks, pbs] = kCache.shape;
  const bytes = kCache.host as Uint8Array;
  for (let slot = 0; slot < num_blocks * pbs; slot++) {
    const record = kCache.offset + Math.floor(slot / pbs) * kCache.strides[0] + pbs * 576 + (slot % pbs) * 8;
    if (bytes.subarray(record, record + 7).every((x) => x === 0xff)) return slot;
  }
  throw new Error("no poisoned slot");
}

/**
 * The same tokens under another page size and order: slot s of `kCache` (V32 or MODEL1, told apart by
 * its last dim) becomes slot to[s] of a new cache of `numBlocks` pages of `pbs` tokens, 0xff elsewhere.
 */
function repage(kCache: Tensor, pbs: number, numBlocks: number, to: ArrayLike<number>): Tensor<"u8"> {
  const [fromBlocks, fromPbs, , tokenBytes] = kCache.shape;
  const bytes = kCache.host as Uint8Array;
  const model1 = tokenBytes === 584;
  const stride = model1 ? model1PageBytes(pbs) : pbs * 656;
  const out = new Uint8Array(numBlocks * stride).fill(0xff);
  for (let s = 0; s < fromBlocks * fromPbs; s++) {
    const from = kCache.offset + Math.floor(s / fromPbs) * kCache.strides[0];
    const page = Math.floor(to[s] / pbs) * stride;
    const [row, r] = [s % fromPbs, to[s] % pbs];
    if (model1) {
      out.set(bytes.subarray(from + row * 576, from + row * 576 + 576), page + r * 576);
      out.set(bytes.subarray(from + fromPbs * 576 + row * 8, from + fromPbs * 576 + row * 8 + 8), page + pbs * 576 + r * 8);
    } else {
      out.set(bytes.subarray(from + row * 656, from + row * 656 + 656), page + r * 656);
    }
  }
  return Tensor.fromHost(out, [out.length], "u8").view([numBlocks, pbs, 1, tokenBytes], [stride, tokenBytes, tokenBytes, 1]);
}

/**
 * One sparse call (no extra cache) rewritten as two caches' worth: entries [0, m) of each index row stay
 * in kCache, entries [m, topk) move into a copy of kCache's tokens under page size `pbs` and a random
 * slot order (ids out of the cache stay out of the copy), and topkLength L splits into min(L, m) and
 * max(L − m, 0). The union is the same token list in the same order.
 */
function splitIntoTwoCaches(c: MlaDecodeReferenceArgs, m: number, pbs: number, seed: number): MlaDecodeReferenceArgs {
  const [b, s_q, topk] = c.indices!.shape;
  const [num_blocks, page] = c.kCache.shape;
  const numSlots = num_blocks * page;
  const extraBlocks = Math.ceil(numSlots / pbs) + 1;
  const to = new Rng(seed).permutation(extraBlocks * pbs);
  const ids = c.indices!.host as Int32Array;
  const main: number[] = [];
  const extra: number[] = [];
  for (let row = 0; row < b * s_q; row++) {
    for (let k = 0; k < topk; k++) {
      const id = ids[row * topk + k];
      if (k < m) main.push(id);
      else extra.push(id < 0 ? id : id >= numSlots ? extraBlocks * pbs : to[id]);
    }
  }
  const lengths = c.topkLength === undefined ? undefined : Array.from(c.topkLength.host as Int32Array);
  return {
    ...c,
    indices: i32(main, [b, s_q, m]),
    extraKCache: repage(c.kCache, pbs, extraBlocks, to),
    extraIndices: i32(extra, [b, s_q, topk - m]),
    ...(lengths !== undefined
      ? { topkLength: i32(lengths.map((n) => Math.min(n, m))), extraTopkLength: i32(lengths.map((n) => Math.max(n - m, 0))) }
      : {}),
  };
}

/** Makes request b−1's last query row all invalid and puts out-of-range ids into the first row of each index list. */
function spoilIndices(c: MlaDecodeReferenceArgs): void {
  for (const [indices, cache] of [[c.indices!, c.kCache], [c.extraIndices, c.extraKCache]] as const) {
    if (indices === undefined || cache === undefined) continue;
    const ids = indices.host as Int32Array;
    const topk = indices.shape[2];
    ids.fill(-1, ids.length - topk);
    ids[ids.length - 1] = cache.shape[0] * cache.shape[1];
    ids[0] = 2147480000;
    if (topk > 1) ids[1] = -7;
  }
}

describe("mlaDecodeReference() MODEL1 cache", () => {
  const HEADS = [1, 8, 16, 64, 128];
  let caseNo = 0;
  for (const pageBlockSize of [2, 64, 256]) {
    test(`mlaDecodeReference() matches naive attention for MODEL1 page_block_size = ${pageBlockSize} over h_q, extra caches, lengths and sinks`, () => {
      for (const [s_k, topk, extra] of [
        [3, 5, undefined],
        [90, 40, { topk: 24, s_k: 30, pageBlockSize: [64, 2, 256][caseNo % 3], topkLengthRandom: true }],
        [150, 70, { topk: 6, s_k: 200, pageBlockSize: [2, 256, 64][caseNo % 3] }],
      ] as const) {
        const h_q = HEADS[caseNo % HEADS.length];
        const b = h_q >= 64 ? 1 + (caseNo % 2) : [1, 2, 3][caseNo % 3];
        const s_q = [1, 2][Math.floor(caseNo / 2) % 2];
        const opts: Model1CaseOptions = {
          seed: 300 + caseNo, b, s_q, h_q, s_k, topk, pageBlockSize, ...(extra ? { extra } : {}),
          topkLength: caseNo % 2 === 0, sink: caseNo % 4 < 2, invalidFraction: 0.2, repeat: 0.2, varlen: caseNo % 3 !== 1,
        };
        const c = makeModel1Case(opts);
        spoilIndices(c);
        assertMatchesNaive(c, `case ${caseNo} (b=${b}, s_q=${s_q}, h_q=${h_q}, s_k=${s_k}, topk=${topk}, extra=${JSON.stringify(extra)})`);
        caseNo++;
      }
    });
  }

  test("mlaDecodeReference() uses all 512 dims of a MODEL1 token as K and as V, and defaults the scale to 512^-0.5", () => {
    // Exact in the format: tile 0 amax 0.5 (scale 2^-9, code 256), tile 6 amax 1 (2^-8), RoPE any bf16.
    const token = vec512({ 0: 0.5, 1: -0.25, 400: 1, 448: 3, 511: -0.75 });
    const query = vec512({ 0: 1, 400: 0.5, 448: 0.25, 511: 1 });
    const { outF32, lse } = mlaDecodeReference(tinyModel1(query, 1, [token], [0]));
    // One key: out = V = the whole token, lse = its score (0.5 + 0.5 + 0.75 − 0.75) / sqrt(512).
    assert.deepEqual(Array.from(outF32), token);
    assert.equal((lse.host as Float32Array)[0], Math.fround(1 / Math.sqrt(512)));
  });

  test("mlaDecodeReference() counts a repeated id each time it appears, within a cache and across both", () => {
    const tokens = [vec512({ 0: 1, 500: 0.5 }), vec512({ 0: 0.5 })];
    // A zero query scores every key 0: out is the mean of the keys taken with their multiplicity.
    const args = tinyModel1(vec512({}), 1, tokens, [0, 1, 0], { extraKCache: model1Cache([tokens[0]], 1), extraIndices: i32([0], [1, 1, 1]) });
    const { outF32, lse } = mlaDecodeReference(args);
    assert.equal(outF32[0], (1 + 0.5 + 1 + 1) / 4);
    assert.equal(outF32[500], (0.5 + 0 + 0.5 + 0.5) / 4);
    assert.equal((lse.host as Float32Array)[0], Math.fround(Math.log(4)));
  });

  test("mlaDecodeReference() gives out 0 and lse +inf when both topk lengths are 0, whatever the sink", () => {
    const tokens = [vec512({ 0: 1 }), vec512({ 1: 1 })];
    const args = tinyModel1(vec512({ 0: 1 }), 3, tokens, [0, 1], {
      topkLength: i32([0]),
      extraKCache: model1Cache(tokens, 64),
      extraIndices: i32([1, 0, 1], [1, 1, 3]),
      extraTopkLength: i32([0]),
      attnSink: f32([0.5, Infinity, -Infinity]),
    });
    const { outF32, out, lse } = mlaDecodeReference(args);
    assert.ok(outF32.every((x) => x === 0));
    assert.ok((out.host as Uint16Array).every((x) => x === 0));
    assert.deepEqual(Array.from(lse.host as Float32Array), [Infinity, Infinity, Infinity]);
  });

  test("mlaDecodeReference() with an empty main list attends the extra cache alone", () => {
    const c = makeModel1Case({ seed: 41, b: 2, s_q: 2, h_q: 8, s_k: 60, topk: 20, pageBlockSize: 64, extra: { topk: 30, s_k: 40, pageBlockSize: 2 }, sink: true });
    const emptyMain = mlaDecodeReference({ ...c, topkLength: i32([0, 0]) });
    const extraAlone = mlaDecodeReference({ ...c, kCache: c.extraKCache!, indices: c.extraIndices!, extraKCache: undefined, extraIndices: undefined });
    assertSameResult(emptyMain, extraAlone, "topkLength 0");
    const noExtra = mlaDecodeReference({ ...c, extraTopkLength: i32([0, 0]) });
    const mainAlone = mlaDecodeReference({ ...c, extraKCache: undefined, extraIndices: undefined });
    assertSameResult(noExtra, mainAlone, "extraTopkLength 0");
  });

  test("mlaDecodeReference() never lets a NaN-poisoned MODEL1 token reach out or lse unless a valid entry points at it", () => {
    const c = makeModel1Case({
      seed: 42, b: 3, s_q: 2, h_q: 16, s_k: 80, topk: 40, pageBlockSize: 2, topkLength: true,
      extra: { topk: 30, s_k: 50, pageBlockSize: 64, topkLengthRandom: true }, sink: true, invalidFraction: 0.3, repeat: 0.2,
    });
    // Every entry past its row's length now points at a poisoned token.
    for (const [indices, lengths, cache] of [[c.indices, c.topkLength!, c.kCache], [c.extraIndices!, c.extraTopkLength!, c.extraKCache!]] as const) {
      const ids = indices.host as Int32Array;
      const limit = lengths.host as Int32Array;
      const [b, s_q, topk] = indices.shape;
      const poison = poisonedSlot(cache);
      for (let i = 0; i < b; i++) {
        for (let k = 0; k < s_q * topk; k++) {
          const at = i * s_q * topk + k;
          if (k % topk >= limit[i]) ids[at] = poison;
        }
      }
    }
    const { outF32, lse } = mlaDecodeReference(c);
    assert.ok(outF32.every(Number.isFinite), "out is finite");
    assert.ok(Array.from(lse.host as Float32Array).every((x) => Number.isFinite(x) || x === Infinity), "lse is finite or +inf");
    assertMatchesNaive(c, "poison past the lengths");

    // The poison is real: one entry within the length at it turns its row to NaN.
    (c.indices.host as Int32Array)[0] = poisonedSlot(c.kCache);
    (c.topkLength!.host as Int32Array)[0] = 1;
    assert.ok(Number.isNaN(mlaDecodeReference(c, { rows: [{ batch: 0, token: 0, head: 0 }] }).outF32[0]));
  });

  test("mlaDecodeReference() scales a MODEL1 row by its sink and leaves lse as it is", () => {
    const c = makeModel1Case({ seed: 43, b: 2, s_q: 1, h_q: 3, s_k: 30, topk: 16, pageBlockSize: 64, extra: { topk: 8, s_k: 20, pageBlockSize: 2 } });
    const attnSink = f32([Infinity, -Infinity, 0.25]);
    const withSink = mlaDecodeReference({ ...c, attnSink });
    const without = mlaDecodeReference(c);
    assert.deepEqual(withSink.lse.host, without.lse.host);
    const lse = without.lse.host as Float32Array;
    for (let i = 0; i < 2; i++) {
      const row = (h: number) => (i * 3 + h) * D_V;
      for (let d = 0; d < D_V; d++) {
        assert.ok(withSink.outF32[row(0) + d] === 0, "sink +inf: out ±0");
        assert.equal(withSink.outF32[row(1) + d], without.outF32[row(1) + d], "sink −inf: out unchanged");
      }
      const factor = 1 / (1 + Math.exp(0.25 - lse[i * 3 + 2]));
      const scaled = Array.from(without.outF32.subarray(row(2), row(2) + D_V), (x) => x * factor);
      assertClose(withSink.outF32.subarray(row(2), row(2) + D_V), scaled, { abs: 1e-7, rel: 2 ** -22 }, { name: `request ${i} head 2` });
    }
    assertMatchesNaive({ ...c, attnSink }, "sinks");
  });

  test("mlaDecodeReference() reads a MODEL1 cache at any block stride ≥ page_block_size · 584, inside a larger buffer, as u8 or fp8_e4m3", () => {
    const c = makeModel1Case({ seed: 44, b: 2, s_q: 2, h_q: 4, s_k: 50, topk: 24, pageBlockSize: 5 });
    const [num_blocks, pbs] = c.kCache.shape;
    const expected = mlaDecodeReference(c);
    const bytes = c.kCache.host as Uint8Array;
    const stride = c.kCache.strides[0];
    for (const [newStride, start] of [[pbs * 584, 0], [stride + 48, 100], [2 * stride, 7]]) {
      // The pages copied to `start` bytes into a buffer of 0xee bytes, each page's padding dropped or grown.
      const copy = new Uint8Array(start + num_blocks * newStride).fill(0xee);
      for (let blk = 0; blk < num_blocks; blk++) copy.set(bytes.subarray(blk * stride, blk * stride + pbs * 584), start + blk * newStride);
      for (const dtype of ["u8", "fp8_e4m3"] as const) {
        const kCache = Tensor.fromHost(copy.subarray(start), [copy.length - start], "u8").view([num_blocks, pbs, 1, 584], [newStride, 584, 584, 1], dtype);
        assertSameResult(mlaDecodeReference({ ...c, kCache }), expected, `stride ${newStride}, start ${start}, ${dtype}`);
      }
    }
  });

  test("mlaDecodeReference() computes the same MODEL1 rows with the rows option as in a full run", () => {
    const c = makeModel1Case({ seed: 45, b: 2, s_q: 2, h_q: 8, s_k: 70, topk: 30, pageBlockSize: 64, extra: { topk: 12, s_k: 30, pageBlockSize: 2 }, sink: true, topkLength: true });
    const rows = [{ batch: 1, token: 1, head: 7 }, { batch: 0, token: 1, head: 2 }];
    const full = mlaDecodeReference(c);
    const part = mlaDecodeReference(c, { rows });
    for (const { batch, token, head } of rows) {
      const base = ((batch * 2 + token) * 8 + head) * D_V;
      assert.deepEqual(part.outF32.subarray(base, base + D_V), full.outF32.subarray(base, base + D_V));
      const at = (batch * 8 + head) * 2 + token;
      assert.equal((part.lse.host as Float32Array)[at], (full.lse.host as Float32Array)[at]);
    }
    assert.ok(Number.isNaN(part.outF32[0]));
  });
});

describe("mlaDecodeReference() extra cache: one softmax over both token sets", () => {
  test("mlaDecodeReference() matches naive attention for V32 with an extra cache, lengths and sinks", () => {
    let caseNo = 0;
    for (const [pbs, extraPbs, h_q] of [[2, 64, 1], [64, 2, 8], [61, 256, 16], [256, 61, 64]] as const) {
      const b = 2;
      const s_q = 1 + (caseNo % 2);
      const main = makeSparseCase({ seed: 500 + caseNo, b, s_q, h_q, s_k: 90, topk: 40, pageBlockSize: pbs, topkLength: caseNo % 2 === 0, sink: true, invalidFraction: 0.2, repeat: 0.2, varlen: true });
      const second = makeSparseCase({ seed: 600 + caseNo, b, s_q, h_q, s_k: 50, topk: 20, pageBlockSize: extraPbs, topkLength: caseNo < 2, invalidFraction: 0.2, repeat: 0.2, blockPadTokens: caseNo % 2 });
      const c: MlaDecodeReferenceArgs = { ...main, extraKCache: second.kCache, extraIndices: second.indices, ...(second.topkLength ? { extraTopkLength: second.topkLength } : {}) };
      spoilIndices(c);
      assertMatchesNaive(c, `V32 case ${caseNo} (pbs ${pbs} + ${extraPbs}, h_q ${h_q})`);
      caseNo++;
    }
  });

  for (const format of ["V32", "MODEL1"] as const) {
    test(`mlaDecodeReference() gives one ${format} list split over two caches exactly the one-list result`, () => {
      for (const [seed, pageBlockSize, extraPbs, m, topkLength] of [[1, 64, 2, 10, false], [2, 2, 256, 1, true], [3, 256, 64, 29, true], [4, 5, 3, 15, false]] as const) {
        const shape = { seed: 700 + seed, b: 3, s_q: 2, h_q: 8, s_k: 60, topk: 30, pageBlockSize, topkLength, sink: true, invalidFraction: 0.15, repeat: 0.25 };
        const c: MlaDecodeReferenceArgs = format === "V32" ? makeSparseCase({ ...shape, varlen: true }) : makeModel1Case(shape);
        spoilIndices(c);
        const split = splitIntoTwoCaches(c, m, extraPbs, seed);
        const label = `${format} seed ${seed}, split at ${m}, pages ${pageBlockSize} and ${extraPbs}`;
        // Same keys in the same order: bit-identical.
        assertSameResult(mlaDecodeReference(split), mlaDecodeReference(c), label);
        // The caches swapped: the same set in another order, equal up to f64 summation order and one f32 rounding.
        const swapped: MlaDecodeReferenceArgs = {
          ...split,
          kCache: split.extraKCache!, indices: split.extraIndices!, topkLength: split.extraTopkLength,
          extraKCache: split.kCache, extraIndices: split.indices, extraTopkLength: split.topkLength,
        };
        const [a, r] = [mlaDecodeReference(swapped), mlaDecodeReference(c)];
        assertClose(a.outF32, r.outF32, { abs: 1e-12, rel: 2 ** -22 }, { name: `${label} swapped out` });
        assertClose(a.lse.host as Float32Array, r.lse.host as Float32Array, { abs: 1e-12, rel: 2 ** -22 }, { name: `${label} swapped lse` });
        assertMatchesNaive(split, label);
      }
    });
  }
});

describe("mlaDecodeReference() MODEL1 and extra-cache validation", () => {
  const model1 = (): MlaDecodeReferenceArgs => tinyModel1(vec512({}), 1, [vec512({}), vec512({})], [0, 1, -1]);
  const withExtra = (): MlaDecodeReferenceArgs => ({ ...model1(), extraKCache: model1Cache([vec512({})], 4), extraIndices: i32([0, 3], [1, 1, 2]) });
  const v32Cache = () => Tensor.fromHost(quantizeKvCacheV32(new Uint16Array(4 * 576)), [1, 4, 1, 656], "u8");
  const v32 = (): MlaDecodeReferenceArgs => ({
    q: Tensor.zerosHost([1, 1, 1, 576], "bf16"), kCache: v32Cache(), indices: i32([0, 1], [1, 1, 2]), isFp8Kvcache: true, headDimV: D_V,
  });
  const dense = (): MlaDecodeReferenceArgs => ({
    q: Tensor.zerosHost([1, 1, 1, 576], "bf16"), kCache: Tensor.zerosHost([1, 64, 1, 576], "bf16"),
    blockTable: i32([0], [1, 1]), cacheSeqlens: i32([1]), headDimV: D_V,
  });
  const pages = (numBlocks: number, pbs: number, stride: number) =>
    Tensor.zerosHost([(numBlocks - 1) * stride + pbs * 584], "u8").view([numBlocks, pbs, 1, 584], [stride, 584, 584, 1]);

  const cases: RejectionCase[] = [
    ["sparse q rank 3", () => ({ ...model1(), q: Tensor.zerosHost([1, 1, 512], "bf16") }), "argument 'q': expected rank 4 [b, s_q, h_q, 576 or 512], got shape [1, 1, 512]"],
    ["sparse q d_qk 500", () => ({ ...model1(), q: Tensor.zerosHost([1, 1, 1, 500], "bf16") }), "argument 'q': expected last dim d_qk = 576 (the V32 cache) or 512 (the MODEL1 cache) on the sparse path (indices given), got shape [1, 1, 1, 500]"],
    ["dense q d_qk 512 with a 576-wide kCache", () => ({ ...dense(), q: Tensor.zerosHost([1, 1, 1, 512], "bf16") }), "argument 'kCache': expected last dim 512 (q's d_qk), got shape [1, 64, 1, 576]"],
    ["a V32 cache with a 512-dim q", () => ({ ...model1(), kCache: v32Cache() }), "argument 'kCache': expected shape [num_blocks, page_block_size ≥ 1, 1, 584] (the MODEL1 format, which q's d_qk = 512 selects), got shape [1, 4, 1, 656]"],
    ["a MODEL1 cache with a 576-dim q", () => ({ ...v32(), kCache: model1Cache([vec512({})], 4) }), "argument 'kCache': expected shape [num_blocks, page_block_size ≥ 1, 1, 656] (the V32 format, which q's d_qk = 576 selects), got shape [1, 4, 1, 584]"],
    ["MODEL1 kCache bf16", () => ({ ...model1(), kCache: Tensor.zerosHost([1, 2, 1, 584], "bf16") }), "argument 'kCache': expected dtype u8 or fp8_e4m3 on the sparse path (indices given), got bf16"],
    ["MODEL1 kCache page size 0", () => ({ ...model1(), kCache: Tensor.zerosHost([1, 0, 1, 584], "u8") }), "argument 'kCache': expected shape [num_blocks, page_block_size ≥ 1, 1, 584] (the MODEL1 format, which q's d_qk = 512 selects), got shape [1, 0, 1, 584]"],
    ["MODEL1 kCache h_kv 2", () => ({ ...model1(), kCache: Tensor.zerosHost([1, 2, 2, 584], "u8") }), "argument 'kCache': expected shape [num_blocks, page_block_size ≥ 1, 1, 584] (the MODEL1 format, which q's d_qk = 512 selects), got shape [1, 2, 2, 584]"],
    ["MODEL1 kCache token stride", () => ({ ...model1(), kCache: Tensor.zerosHost([2 * 1728], "u8").view([2, 2, 1, 584], [1728, 576, 584, 1]) }), "argument 'kCache': expected token stride 584 and byte stride 1, got strides [1728, 576, 584, 1]"],
    ["MODEL1 kCache pages overlapping", () => ({ ...model1(), kCache: pages(2, 2, 1000) }), "argument 'kCache': expected a block stride ≥ page_block_size · 584 = 1168 bytes (model1PageBytes(2) = 1728), got strides [1000, 584, 584, 1]"],
    ["extraKCache without extraIndices", () => ({ ...withExtra(), extraIndices: undefined }), "argument 'extraIndices': expected a Tensor when extraKCache is given, got undefined"],
    ["extraIndices without extraKCache", () => ({ ...withExtra(), extraKCache: undefined }), "argument 'extraKCache': expected a Tensor when extraIndices is given, got undefined"],
    ["extraTopkLength without extraKCache", () => ({ ...model1(), extraTopkLength: i32([1]) }), "argument 'extraTopkLength': expected undefined without extraKCache, got a value"],
    ["extraKCache not a tensor", () => ({ ...withExtra(), extraKCache: new Uint8Array(584) as unknown as Tensor }), "argument 'extraKCache': expected a Tensor, got object"],
    ["extraKCache rank 3", () => ({ ...withExtra(), extraKCache: Tensor.zerosHost([4, 1, 584], "u8") }), "argument 'extraKCache': expected rank 4 [num_blocks, page_block_size, h_kv, d], got shape [4, 1, 584]"],
    ["extraKCache f32", () => ({ ...withExtra(), extraKCache: Tensor.zerosHost([1, 4, 1, 584], "f32") }), "argument 'extraKCache': expected dtype u8 or fp8_e4m3 on the sparse path (indices given), got f32"],
    ["extraKCache in the other format", () => ({ ...withExtra(), extraKCache: v32Cache() }), "argument 'extraKCache': expected shape [num_blocks, page_block_size ≥ 1, 1, 584] (the MODEL1 format, which q's d_qk = 512 selects), got shape [1, 4, 1, 656]"],
    ["V32 extraKCache in the other format", () => ({ ...v32(), extraKCache: model1Cache([vec512({})], 4), extraIndices: i32([0], [1, 1, 1]) }), "argument 'extraKCache': expected shape [num_blocks, page_block_size ≥ 1, 1, 656] (the V32 format, which q's d_qk = 576 selects), got shape [1, 4, 1, 584]"],
    ["extraKCache pages overlapping", () => ({ ...withExtra(), extraKCache: pages(3, 4, 2000) }), "argument 'extraKCache': expected a block stride ≥ page_block_size · 584 = 2336 bytes (model1PageBytes(4) = 2880), got strides [2000, 584, 584, 1]"],
    ["extraIndices f32", () => ({ ...withExtra(), extraIndices: Tensor.zerosHost([1, 1, 2], "f32") }), "argument 'extraIndices': expected i32 [b=1, s_q=1, extra_topk ≥ 1], got f32 [1, 1, 2]"],
    ["extraIndices shape", () => ({ ...withExtra(), extraIndices: i32([0, 0], [2, 1, 1]) }), "argument 'extraIndices': expected i32 [b=1, s_q=1, extra_topk ≥ 1], got i32 [2, 1, 1]"],
    ["extraIndices extra_topk 0", () => ({ ...withExtra(), extraIndices: i32([], [1, 1, 0]) }), "argument 'extraIndices': expected i32 [b=1, s_q=1, extra_topk ≥ 1], got i32 [1, 1, 0]"],
    ["extraTopkLength shape", () => ({ ...withExtra(), extraTopkLength: i32([1, 1]) }), "argument 'extraTopkLength': expected i32 [b] = [1], got i32 [2]"],
    ["extraTopkLength above extra_topk", () => ({ ...withExtra(), extraTopkLength: i32([3]) }), "argument 'extraTopkLength': expected values in [0, extra_topk=2], got extraTopkLength[0] = 3"],
    ["extraTopkLength negative", () => ({ ...withExtra(), extraTopkLength: i32([-1]) }), "argument 'extraTopkLength': expected values in [0, extra_topk=2], got extraTopkLength[0] = -1"],
    ["MODEL1 topkLength above topk", () => ({ ...model1(), topkLength: i32([4]) }), "argument 'topkLength': expected values in [0, topk=3], got topkLength[0] = 4"],
    ["MODEL1 attnSink shape", () => ({ ...model1(), attnSink: f32([0, 0]) }), "argument 'attnSink': expected f32 [h_q=1], got f32 [2]"],
    ["extraKCache on dense", () => ({ ...dense(), extraKCache: v32Cache() }), "argument 'extraKCache': expected undefined on the dense path (no indices), got a value"],
    ["extraIndices on dense", () => ({ ...dense(), extraIndices: i32([0], [1, 1, 1]) }), "argument 'extraIndices': expected undefined on the dense path (no indices), got a value"],
    ["extraTopkLength on dense", () => ({ ...dense(), extraTopkLength: i32([0]) }), "argument 'extraTopkLength': expected undefined on the dense path (no indices), got a value"],
  ];
  testRejections(cases);

  test("mlaDecodeReference() accepts MODEL1 and extra-cache arguments of any h_q, page sizes and a single page of any stride", () => {
    assert.doesNotThrow(() => mlaDecodeReference(model1()));
    assert.doesNotThrow(() => mlaDecodeReference(withExtra()));
    assert.doesNotThrow(() => mlaDecodeReference({ ...v32(), extraKCache: v32Cache(), extraIndices: i32([3], [1, 1, 1]), extraTopkLength: i32([1]) }));
    assert.doesNotThrow(() => mlaDecodeReference({ ...withExtra(), extraKCache: pages(1, 4, 100) }));
    for (const h_q of [3, 5, 200]) assert.doesNotThrow(() => mlaDecodeReference(tinyModel1(vec512({}), h_q, [vec512({})], [0])));
  });
});
