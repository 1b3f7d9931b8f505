import { test } from "node:test";
import assert from "node:assert/strict";
import { mlaDecodeReference, type MlaDecodeReferenceArgs } from "../../../src/mla/reference/mlaDecodeReference.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { makeDenseCase, NAN_HALF_BITS } from "../../../src/testing/denseCase.js";
import { makeSparseCase } from "../../../src/testing/sparseCase.js";
import { D_QK, D_V } from "../../../src/mla/contract/shape.js";

// What the CPU reference does with out-of-range or non-finite data (docs/reliability.md): the
// contract the GPU kernels are checked against, and the behaviour users can rely on on the CPU.


/** A copy of a host tensor (same shape and dtype, fresh storage). */
function copyOf(t: Tensor): Tensor {
  const c = t.contiguousHost();
  return Tensor.fromHost(c.host!.slice(), c.shape, c.dtype);
}

/** Per row (request, token, head): whether out is all NaN, and the row's lse. */
function rows(args: MlaDecodeReferenceArgs): Array<{ key: string; allNaN: boolean; anyNaN: boolean; lse: number; out: Float32Array }> {
  const [b, s_q, h_q] = args.q.shape;
  const r = mlaDecodeReference(args);
  const lse = r.lse.host as Float32Array;
  const result = [];
  for (let i = 0; i < b; i++) for (let j = 0; j < s_q; j++) for (let h = 0; h < h_q; h++) {
    const base = ((i * s_q + j) * h_q + h) * D_V;
    const out = r.outF32.subarray(base, base + D_V);
    result.push({ key: `${i},${j},${h}`, allNaN: out.every(Number.isNaN), anyNaN: out.some(Number.isNaN), lse: lse[(i * h_q + h) * s_q + j], out });
  }
  return result;
}

test("sparse ids >= num_blocks * page_block_size or < -1 count as invalid: the same bits as -1", () => {
  const c = makeSparseCase({ seed: 71, b: 2, s_q: 2, h_q: 3, s_k: 90, topk: 40, pageBlockSize: 61, invalidFraction: 0.25 });
  const slots = c.kCache.shape[0] * c.kCache.shape[1];
  const ids = c.indices.host as Int32Array;
  const invalid = [...ids.keys()].filter((k) => ids[k] === -1);
  assert.ok(invalid.length >= 8, "the case has invalid entries to replace");
  const bad = [slots, slots + 1, 2 ** 31 - 1, -2, -7, -(2 ** 31), 2147480000, slots * 10];
  const replaced = Int32Array.from(ids);
  invalid.forEach((k, n) => (replaced[k] = bad[n % bad.length]));
  const clean = mlaDecodeReference(c);
  const dirty = mlaDecodeReference({ ...c, indices: Tensor.fromHost(replaced, c.indices.shape, "i32") });
  assert.deepEqual(dirty.out.host, clean.out.host);
  assert.deepEqual(dirty.outF32, clean.outF32);
  assert.deepEqual(dirty.lse.host, clean.lse.host);
});

test("NaN in one query row makes exactly that row's out NaN (all 512) and its lse NaN", () => {
  const c = makeDenseCase({ seed: 72, b: 2, s_q: 2, h_q: 4, h_kv: 2, seqlens: [100, 7], causal: true, dtype: "bf16" });
  const q = copyOf(c.q);
  const [, s_q, h_q] = q.shape;
  // Request 1, token 0, head 3, one element of the RoPE part.
  (q.host as Uint16Array)[((1 * s_q + 0) * h_q + 3) * D_QK + 540] = NAN_HALF_BITS;
  const clean = rows(c);
  const dirty = rows({ ...c, q });
  for (const [n, row] of dirty.entries()) {
    if (row.key === "1,0,3") {
      assert.ok(row.allNaN, "the poisoned row is NaN in every column");
      assert.ok(Number.isNaN(row.lse), "and its lse is NaN");
    } else {
      assert.deepEqual(row.out, clean[n].out, `row ${row.key} is unchanged`);
      assert.equal(row.lse, clean[n].lse, `lse ${row.key} is unchanged`);
    }
  }
});

test("NaN in a visible cache token reaches only the rows that attend to it", () => {
  // Causal, s_q = 2: token 0 sees keys [0, len-1), token 1 sees [0, len). Poison the last key of request 0
  // on KV head 1: only request 0, token 1, heads 2 and 3 (the heads of KV head 1) see it.
  const c = makeDenseCase({ seed: 73, b: 2, s_q: 2, h_q: 4, h_kv: 2, seqlens: [70, 70], causal: true, dtype: "bf16" });
  const kCache = copyOf(c.kCache);
  const table = c.blockTable.host as Int32Array;
  const maxBlocks = c.blockTable.shape[1];
  const last = 69;
  const block = table[0 * maxBlocks + Math.floor(last / 64)];
  const [, , h_kv] = kCache.shape;
  (kCache.host as Uint16Array)[((block * 64 + (last % 64)) * h_kv + 1) * D_QK + 3] = NAN_HALF_BITS;
  const clean = rows(c);
  const dirty = rows({ ...c, kCache });
  const hit = new Set(["0,1,2", "0,1,3"]);
  for (const [n, row] of dirty.entries()) {
    if (hit.has(row.key)) {
      assert.ok(row.allNaN, `row ${row.key} sees the NaN key: out NaN`);
      assert.ok(Number.isNaN(row.lse), `row ${row.key}: lse NaN`);
    } else {
      assert.ok(!row.anyNaN, `row ${row.key} does not see it`);
      assert.deepEqual(row.out, clean[n].out, `row ${row.key} is unchanged`);
    }
  }
});

test("NaN in cache slots past each length, in unused blocks and behind unused table entries is never read", () => {
  // makeDenseCase fills every slot no request owns with NaN and unused table entries with 2147480000.
  const c = makeDenseCase({ seed: 74, b: 3, s_q: 1, h_q: 2, h_kv: 1, seqlens: [1, 65, 0], causal: false, dtype: "fp16", extraBlocks: 2 });
  const wide = new Int32Array(3 * 5).fill(-123456);
  const table = c.blockTable.host as Int32Array;
  for (let i = 0; i < 3; i++) for (let k = 0; k < c.blockTable.shape[1]; k++) wide[i * 5 + k] = table[i * c.blockTable.shape[1] + k];
  for (const row of rows({ ...c, blockTable: Tensor.fromHost(wide, [3, 5], "i32") })) {
    assert.ok(!row.anyNaN, `row ${row.key} has no NaN`);
    if (row.key.startsWith("2,")) assert.equal(row.lse, Infinity, "the empty request's lse is +inf");
    else assert.ok(Number.isFinite(row.lse), `row ${row.key}: finite lse`);
  }
  assert.ok((c.kCache.host as Uint16Array).includes(NAN_HALF_BITS), "the case does hold poison");
});
