import { test } from "node:test";
import assert from "node:assert/strict";

import { makeDenseCase, NAN_HALF_BITS, UNUSED_BLOCK_ID, type DenseCaseOptions } from "../../../src/testing/denseCase.js";
import { rejectsWithMessage } from "../../helpers/argumentError.js";

const OPTS: DenseCaseOptions = { seed: 31, b: 3, s_q: 2, h_q: 4, h_kv: 2, seqlens: [0, 65, 130], causal: true, dtype: "bf16", extraBlocks: 1 };

test("makeDenseCase() with d_qk 512 builds DeepSeek-V4's head: 512-wide q and cache rows, scale 512^-0.5, the same layout and poison", () => {
  const v3 = makeDenseCase(OPTS);
  const v4 = makeDenseCase({ ...OPTS, d_qk: 512 });
  assert.deepEqual(v4.q.shape, [3, 2, 4, 512]);
  assert.deepEqual(v4.kCache.shape, [v3.kCache.shape[0], 64, 2, 512]);
  assert.equal(v4.softmaxScale, 1 / Math.sqrt(512));
  assert.equal(v3.softmaxScale, 1 / 24);
  // The paging is drawn before the data, so both heads share the lengths and the block table.
  assert.deepEqual(v4.seqlens, v3.seqlens);
  assert.deepEqual(v4.blockTable.host, v3.blockTable.host);
  const table = v4.blockTable.host as Int32Array;
  const cache = v4.kCache.host as Uint16Array;
  const row = 2 * 512;
  const owned = new Set<number>();
  v4.seqlens.forEach((len, i) => {
    for (let t = 0; t < len; t++) owned.add(table[i * v4.blockTable.shape[1] + Math.floor(t / 64)] * 64 + (t % 64));
  });
  for (let slot = 0; slot < cache.length / row; slot++) {
    const bits = cache.subarray(slot * row, (slot + 1) * row);
    if (owned.has(slot)) assert.ok(bits.every((x) => x !== NAN_HALF_BITS), `owned slot ${slot} holds values`);
    else assert.ok(bits.every((x) => x === NAN_HALF_BITS), `slot ${slot}, owned by no request, is NaN`);
  }
  assert.ok(Array.from(table).includes(UNUSED_BLOCK_ID), "request 0 (empty) has only unused table entries");
});

test("makeDenseCase() refuses a d_qk other than 576 or 512", () => {
  rejectsWithMessage("d_qk 528", () => makeDenseCase({ ...OPTS, d_qk: 528 }), "makeDenseCase(): argument 'opts.d_qk': expected 576 or 512, got 528");
});
