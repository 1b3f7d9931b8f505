import { test } from "node:test";
import assert from "node:assert/strict";
import { checkSparseCase, countSparseBadElements, type SparseCheckInput } from "../../../src/testing/checkSparseCase.js";

import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { model1PageBytes } from "../../../src/numeric/kvCacheModel1.js";
import { makeModel1Case, type Model1Case, type Model1CaseOptions } from "../../../src/testing/model1Case.js";
import { makeSparseCase, type SparseCase, type SparseCaseOptions } from "../../../src/testing/sparseCase.js";

/** A host case (V3.2's or DeepSeek-V4's) as checkSparseCase sees a GPU one: its tensors and host index lists. */
function checkInput(c: SparseCase | Model1Case): SparseCheckInput {
  const [b, s_q, h_q] = c.q.shape;
  const lengths = (t: Tensor | undefined) => (t !== undefined ? { topkLengthHost: t.host as Int32Array } : {});
  const m = c as Partial<Model1Case>;
  return {
    b, s_q, h_q, topk: c.indices.shape[2], q: c.q, kCache: c.kCache, softmaxScale: c.softmaxScale,
    indicesHost: c.indices.host as Int32Array,
    ...lengths(c.topkLength),
    ...(c.attnSink ? { attnSinkHost: c.attnSink.host as Float32Array } : {}),
    ...(m.extraKCache !== undefined && m.extraIndices !== undefined
      ? { extra: { topk: m.extraIndices.shape[2], kCache: m.extraKCache, indicesHost: m.extraIndices.host as Int32Array, ...lengths(m.extraTopkLength) } }
      : {}),
  };
}

/** A host case, its check input, and the reference's own output standing in for a kernel's. */
function caseAndOutput(opts: SparseCaseOptions): { c: SparseCase; input: SparseCheckInput; out: Tensor; lse: Tensor } {
  const c = makeSparseCase(opts);
  const ref = mlaDecodeReference(c);
  return { c, input: checkInput(c), out: ref.out, lse: ref.lse };
}

const OPTS: SparseCaseOptions = { seed: 31, b: 4, s_q: 2, h_q: 16, s_k: 200, topk: 96, pageBlockSize: 61, varlen: true, sink: true, topkLength: true, invalidFraction: 0.1, blockPadTokens: 1 };

test("checkSparseCase() passes the reference's own output on every row and on a sample", () => {
  const { input, out, lse } = caseAndOutput(OPTS);
  const all = checkSparseCase(input, { out, lse });
  assert.ok(all.ok, all.message);
  assert.equal(all.rows, 4 * 2 * 16);
  assert.equal(all.badElements, 0);
  // Only double rounding (f64 → bf16 against f64 → f32 → bf16) separates the two: one bf16 step at most.
  assert.equal(all.out.mismatches, 0);
  assert.ok(all.out.maxAbsError <= 2 ** -12, `${all.out.maxAbsError}`);
  const sample = checkSparseCase(input, { out, lse }, { rows: [{ batch: 3, token: 1, head: 15 }, { batch: 0, token: 0, head: 2 }] });
  assert.ok(sample.ok, sample.message);
  assert.equal(sample.rows, 2);
  assert.ok(sample.tokensCopied > 0 && sample.tokensCopied <= 2 * 96);
});

test("checkSparseCase() fails a wrong element in a checked row, naming out", () => {
  const { input, out, lse } = caseAndOutput(OPTS);
  const bits = out.host as Uint16Array;
  // Find a row with keys (nonzero output), then set one of its elements to 1.0.
  const f = bf16ArrayToF32(bits);
  const at = f.findIndex((v) => v !== 0 && Math.abs(v) < 0.5);
  assert.ok(at >= 0);
  bits[at] = 0x3f80;
  const row = Math.floor(at / 512);
  const head = row % 16, token = Math.floor(row / 16) % 2, batch = Math.floor(row / 32);
  const r = checkSparseCase(input, { out, lse }, { rows: [{ batch, token, head }] });
  assert.equal(r.ok, false);
  assert.equal(r.out.mismatches, 1);
  assert.match(r.message, /out: 1 of 512 elements outside tolerance/);
});

test("checkSparseCase() finds poison outside the sampled rows through the whole-output scan", () => {
  const { input, out, lse } = caseAndOutput({ ...OPTS, invalidFraction: 0, topkLength: false });
  (out.host as Uint16Array)[3 * 2 * 16 * 512 + 100] = 0x7fc0; // request 3, NaN
  (lse.host as Float32Array)[5] = NaN;
  const r = checkSparseCase(input, { out, lse }, { rows: [{ batch: 0, token: 0, head: 0 }] });
  assert.equal(r.ok, false);
  assert.equal(r.badElements, 2);
  assert.match(r.message, /2 output elements cannot be right/);
  assert.ok(r.out.ok && r.lse.ok);
});

test("countSparseBadElements() wants out 0 and lse +inf exactly in rows without a valid index, finite lse elsewhere", () => {
  // b 2, s_q 1, h_q 1, topk 2: request 0 reads slot 3; request 1 holds only an invalid id (9 ≥ numSlots 8).
  const src = { b: 2, s_q: 1, h_q: 1, topk: 2, numSlots: 8, indices: Int32Array.from([3, -1, 9, -1]) };
  const out = new Float32Array(2 * 512);
  out.fill(0.25, 0, 512);
  const lse = Float32Array.from([1.5, Infinity]);
  assert.equal(countSparseBadElements(src, out, lse), 0);
  out[512 + 7] = 1e-9;
  assert.equal(countSparseBadElements(src, out, lse), 1);
  out[512 + 7] = 0;
  assert.equal(countSparseBadElements(src, out, Float32Array.from([Infinity, 2])), 2);
  out[3] = -Infinity;
  assert.equal(countSparseBadElements(src, out, lse), 1);
  // topkLength 0 empties request 0 as well.
  out.fill(0);
  assert.equal(countSparseBadElements({ ...src, topkLength: Int32Array.from([0, 2]) }, out, Float32Array.from([Infinity, Infinity])), 0);
});

test("checkSparseCase() refuses the fp32 GPU reference for a case on the host", () => {
  const { input, out, lse } = caseAndOutput({ ...OPTS, b: 1, s_k: 50 });
  assert.throws(() => checkSparseCase(input, { out, lse }, { gpuReference: true }), /checkSparseCase\(\): argument 'opts.gpuReference': expected a case on the GPU \(with its indices tensor\), got a host case/);
});

/** caseAndOutput for a DeepSeek-V4 case: the MODEL1 cache and, with opts.extra, the second cache. */
function model1CaseAndOutput(opts: Model1CaseOptions): { c: Model1Case; input: SparseCheckInput; out: Tensor; lse: Tensor } {
  const c = makeModel1Case(opts);
  const ref = mlaDecodeReference(c);
  return { c, input: checkInput(c), out: ref.out, lse: ref.lse };
}

const MODEL1_OPTS: Model1CaseOptions = {
  seed: 12, b: 3, s_q: 2, h_q: 8, topk: 48, s_k: 90, pageBlockSize: 16, sink: true, topkLength: true, invalidFraction: 0.1,
  extra: { topk: 20, s_k: 40, pageBlockSize: 2, topkLengthRandom: true },
};

/** Where the scale record of the first token row (0, 0) reads from a list sits in its MODEL1 cache. */
function firstRecordByte(list: { indicesHost: Int32Array; topk: number; topkLengthHost?: Int32Array }, pageBlockSize: number): number {
  const limit = list.topkLengthHost?.[0] ?? list.topk;
  const id = Array.from(list.indicesHost.subarray(0, limit)).find((x) => x >= 0);
  assert.ok(id !== undefined, "row (0, 0) reads a token");
  return Math.floor(id / pageBlockSize) * model1PageBytes(pageBlockSize) + pageBlockSize * 576 + (id % pageBlockSize) * 8;
}

test("checkSparseCase() checks DeepSeek-V4's MODEL1 cache and its second cache, every row and a sample, copying whole pages", () => {
  const { c, input, out, lse } = model1CaseAndOutput(MODEL1_OPTS);
  const all = checkSparseCase(input, { out, lse });
  assert.ok(all.ok, all.message);
  assert.equal(all.rows, 3 * 2 * 8);
  assert.equal(all.badElements, 0);
  assert.equal(all.out.mismatches, 0);
  const rows = [{ batch: 2, token: 1, head: 7 }, { batch: 0, token: 0, head: 1 }];
  const sample = checkSparseCase(input, { out, lse }, { rows });
  assert.ok(sample.ok, sample.message);
  assert.equal(sample.rows, 2);
  // Both lists' distinct tokens of the two rows.
  const read = (ids: Int32Array, topk: number, lengths: Int32Array) =>
    rows.map((r) => Array.from(ids.subarray((r.batch * 2 + r.token) * topk, (r.batch * 2 + r.token) * topk + lengths[r.batch])).filter((x) => x >= 0));
  const tokens = new Set(read(input.indicesHost, 48, input.topkLengthHost!).flat()).size + new Set(read(input.extra!.indicesHost, 20, input.extra!.topkLengthHost!).flat()).size;
  assert.equal(sample.tokensCopied, tokens);

  // A token's scale record lives apart from its data: one byte of it changes what a checked row reads.
  for (const [cache, list, pbs] of [[c.kCache, input, 16], [c.extraKCache!, input.extra!, 2]] as const) {
    const bytes = cache.host as Uint8Array;
    const row = { batch: 0, token: 0, head: 1 };
    const recordByte = firstRecordByte(list, pbs);
    const saved = bytes[recordByte];
    bytes[recordByte] = saved + 1; // tile 0's scale doubles
    try {
      const r = checkSparseCase(input, { out, lse }, { rows: [row] });
      assert.equal(r.ok, false, `pages of ${pbs}`);
      assert.match(r.message, /^out: /);
    } finally {
      bytes[recordByte] = saved;
    }
  }
});

test("checkSparseCase() reads a MODEL1 cache whose pages are padded apart, and a sample without a valid entry", () => {
  const { c, input, out, lse } = model1CaseAndOutput({ ...MODEL1_OPTS, invalidFraction: 0, topkLength: false });
  // The same pages with 1,152 more bytes between them: the check copies them one by one.
  const pbs = 16;
  const pageBytes = model1PageBytes(pbs);
  const stride = pageBytes + 1152;
  const numBlocks = c.kCache.shape[0];
  const padded = new Uint8Array(numBlocks * stride).fill(0xff);
  for (let blk = 0; blk < numBlocks; blk++) padded.set((c.kCache.host as Uint8Array).subarray(blk * pageBytes, (blk + 1) * pageBytes), blk * stride);
  const kCache = Tensor.fromHost(padded, [padded.length], "u8").view([numBlocks, pbs, 1, 584], [stride, 584, 584, 1]);
  const r = checkSparseCase({ ...input, kCache }, { out, lse }, { rows: [{ batch: 1, token: 1, head: 3 }, { batch: 2, token: 0, head: 0 }] });
  assert.ok(r.ok, r.message);

  // Every entry of both lists invalid: the checked row reads no token at all (out 0, lse +inf).
  const empty = model1CaseAndOutput({ ...MODEL1_OPTS, invalidFraction: 1 });
  const none = checkSparseCase(empty.input, { out: empty.out, lse: empty.lse }, { rows: [{ batch: 0, token: 0, head: 0 }] });
  assert.ok(none.ok, none.message);
  assert.equal(none.tokensCopied, 0);
});

test("checkSparseCase() refuses a MODEL1 cache for q of 576 dims and a V32 cache for q of 512", () => {
  const { input, out, lse } = model1CaseAndOutput({ ...MODEL1_OPTS, extra: undefined });
  const v32 = caseAndOutput({ ...OPTS, b: 3, s_q: 2, h_q: 8, topk: 48 });
  assert.throws(() => checkSparseCase({ ...input, q: v32.c.q }, { out, lse }), /checkSparseCase\(\): argument 'c.kCache': expected a \[num_blocks, page_block_size, 1, 656\] byte tensor with token stride 656/);
  assert.throws(() => checkSparseCase({ ...v32.input, q: input.q }, { out, lse }), /checkSparseCase\(\): argument 'c.kCache': expected a \[num_blocks, page_block_size, 1, 584\] byte tensor with token stride 584/);
  assert.throws(() => checkSparseCase({ ...input, extra: { ...input, kCache: v32.c.kCache } }, { out, lse }), /argument 'c.extra.kCache'/);
});

test("countSparseBadElements() calls a row empty only when both lists are", () => {
  // b 1, s_q 2, h_q 1: token 0's main entry is invalid but its extra entry valid; token 1 has neither.
  const src = { b: 1, s_q: 2, h_q: 1, topk: 1, numSlots: 8, indices: Int32Array.from([-1, -1]), extra: { topk: 1, numSlots: 4, indices: Int32Array.from([2, 7]) } };
  const out = new Float32Array(2 * 512);
  out.fill(0.5, 0, 512);
  assert.equal(countSparseBadElements(src, out, Float32Array.from([1.25, Infinity])), 0);
  // The extra list's valid length 0 empties token 0 too.
  assert.equal(countSparseBadElements({ ...src, extra: { ...src.extra, topkLength: Int32Array.from([0]) } }, out, Float32Array.from([1.25, Infinity])), 512 + 1);
});
