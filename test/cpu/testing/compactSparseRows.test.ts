import { test } from "node:test";
import assert from "node:assert/strict";
import { compactSparseRows, tokenCopyRuns } from "../../../src/testing/compactSparseRows.js";

import { mlaDecodeReference, type ReferenceRow } from "../../../src/mla/reference/mlaDecodeReference.js";
import { FP8_TOKEN_BYTES } from "../../../src/numeric/kvCacheFp8.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { makeSparseCase } from "../../../src/testing/sparseCase.js";

test("compactSparseRows() keeps the asked rows' entries in order, renumbered to distinct ascending tokens", () => {
  // b 3, s_q 2, topk 4; numSlots 100: 100 and -5 are invalid like -1.
  const indices = Int32Array.from([
    40, 7, 40, -1, /* */ 1, 2, 3, 4,
    99, 100, -5, 7, /* */ 8, 9, 10, 11,
    50, 51, 52, 53, /* */ 60, 61, 62, 63,
  ]);
  const sel = compactSparseRows({ b: 3, s_q: 2, topk: 4, numSlots: 100, indices }, [
    { batch: 1, token: 0, head: 3 },
    { batch: 0, token: 0, head: 0 },
    { batch: 0, token: 0, head: 1 },
  ]);
  assert.deepEqual(sel.requests, [0, 1]);
  assert.deepEqual([...sel.tokenIds], [7, 40, 99]);
  assert.deepEqual([...sel.indices], [
    1, 0, 1, -1, /* token 1 of request 0 was not asked for */ -1, -1, -1, -1,
    2, -1, -1, 0, /* */ -1, -1, -1, -1,
  ]);
  assert.deepEqual(sel.rows, [{ batch: 1, token: 0, head: 3 }, { batch: 0, token: 0, head: 0 }, { batch: 0, token: 0, head: 1 }]);
  assert.equal(sel.topkLength, undefined);
});

test("compactSparseRows() drops entries past topkLength and keeps the kept requests' lengths", () => {
  const indices = Int32Array.from([5, 6, 7, /* */ 8, 9, 10]); // b 2, s_q 1, topk 3
  const sel = compactSparseRows({ b: 2, s_q: 1, topk: 3, numSlots: 20, indices, topkLength: Int32Array.from([2, 0]) }, [
    { batch: 0, token: 0, head: 0 },
    { batch: 1, token: 0, head: 0 },
  ]);
  assert.deepEqual([...sel.tokenIds], [5, 6]);
  assert.deepEqual([...sel.indices], [0, 1, -1, -1, -1, -1]);
  assert.deepEqual([...sel.topkLength!], [2, 0]);
  assert.throws(() => compactSparseRows({ b: 2, s_q: 1, topk: 3, numSlots: 20, indices }, [{ batch: 2, token: 0, head: 0 }]), /compactSparseRows\(\): argument 'rows': expected integers batch < 2 and token < 1/);
});

test("the compact case gives the sampled rows exactly the reference output of the full case", () => {
  const c = makeSparseCase({ seed: 21, b: 5, s_q: 3, h_q: 8, s_k: 300, topk: 150, pageBlockSize: 61, varlen: true, sink: true, topkLength: true, invalidFraction: 0.1, repeat: 0.2, blockPadTokens: 2 });
  const rows: ReferenceRow[] = [{ batch: 4, token: 2, head: 7 }, { batch: 1, token: 0, head: 0 }, { batch: 1, token: 2, head: 5 }, { batch: 3, token: 1, head: 2 }];
  const full = mlaDecodeReference(c, { rows });
  const [numBlocks, pbs] = c.kCache.shape;
  const sel = compactSparseRows({ b: 5, s_q: 3, topk: 150, numSlots: numBlocks * pbs, indices: c.indices.host as Int32Array, topkLength: c.topkLength!.host as Int32Array }, rows);
  const bytes = c.kCache.host as Uint8Array;
  const cache = new Uint8Array(sel.tokenIds.length * FP8_TOKEN_BYTES);
  sel.tokenIds.forEach((id, n) => {
    const at = Math.floor(id / pbs) * c.kCache.strides[0] + (id % pbs) * FP8_TOKEN_BYTES;
    cache.set(bytes.subarray(at, at + FP8_TOKEN_BYTES), n * FP8_TOKEN_BYTES);
  });
  const qAll = c.q.host as Uint16Array;
  const qRow = 3 * 8 * 576;
  const q = new Uint16Array(sel.requests.length * qRow);
  sel.requests.forEach((i, r) => q.set(qAll.subarray(i * qRow, (i + 1) * qRow), r * qRow));
  const small = mlaDecodeReference(
    {
      q: Tensor.fromHost(q, [sel.requests.length, 3, 8, 576], "bf16"),
      kCache: Tensor.fromHost(cache, [sel.tokenIds.length, 1, 1, FP8_TOKEN_BYTES], "u8"),
      indices: Tensor.fromHost(sel.indices, [sel.requests.length, 3, 150], "i32"),
      topkLength: Tensor.fromHost(sel.topkLength!, [sel.requests.length], "i32"),
      attnSink: c.attnSink,
      isFp8Kvcache: true,
      headDimV: 512,
      softmaxScale: c.softmaxScale,
    },
    { rows: sel.rows },
  );
  rows.forEach((r, n) => {
    const cr = sel.rows[n];
    const at = ((r.batch * 3 + r.token) * 8 + r.head) * 512;
    const cat = ((cr.batch * 3 + cr.token) * 8 + cr.head) * 512;
    assert.deepEqual(small.outF32.subarray(cat, cat + 512), full.outF32.subarray(at, at + 512), `out row ${JSON.stringify(r)}`);
    assert.equal((small.lse.host as Float32Array)[(cr.batch * 8 + cr.head) * 3 + cr.token], (full.lse.host as Float32Array)[(r.batch * 8 + r.head) * 3 + r.token]);
  });
  // The sample reads far fewer tokens than the cache holds.
  assert.ok(sel.tokenIds.length < numBlocks * pbs / 2, `${sel.tokenIds.length} tokens`);
});

test("tokenCopyRuns() merges consecutive ids within a block and breaks at block edges and gaps", () => {
  const runs = tokenCopyRuns(Int32Array.from([3, 4, 5, 6, 7, 8, 12, 13, 64, 65]), 7);
  // Blocks of 7: [3..6] in block 0; [7, 8] and, after a gap, [12, 13] in block 1; [64, 65] in block 9.
  assert.deepEqual(runs, [
    { first: 0, count: 4, block: 0, offset: 3 },
    { first: 4, count: 2, block: 1, offset: 0 },
    { first: 6, count: 2, block: 1, offset: 5 },
    { first: 8, count: 2, block: 9, offset: 1 },
  ]);
  assert.deepEqual(tokenCopyRuns(new Int32Array(0), 64), []);
  assert.equal(tokenCopyRuns(Int32Array.from({ length: 256 }, (_, i) => i), 64).length, 4);
});
