import { test } from "node:test";
import assert from "node:assert/strict";
import { checkSparseCase, countSparseBadElements, type SparseCheckInput } from "../../../src/testing/checkSparseCase.js";

import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { makeSparseCase, type SparseCase, type SparseCaseOptions } from "../../../src/testing/sparseCase.js";

/** A host case as checkSparseCase sees a GPU one, and the reference's own output standing in for a kernel's. */
function caseAndOutput(opts: SparseCaseOptions): { c: SparseCase; input: SparseCheckInput; out: Tensor; lse: Tensor } {
  const c = makeSparseCase(opts);
  const input: SparseCheckInput = {
    b: opts.b, s_q: opts.s_q, h_q: opts.h_q, topk: opts.topk, q: c.q, kCache: c.kCache, softmaxScale: c.softmaxScale,
    indicesHost: c.indices.host as Int32Array,
    ...(c.topkLength ? { topkLengthHost: c.topkLength.host as Int32Array } : {}),
    ...(c.attnSink ? { attnSinkHost: c.attnSink.host as Float32Array } : {}),
  };
  const ref = mlaDecodeReference(c);
  return { c, input, out: ref.out, lse: ref.lse };
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
