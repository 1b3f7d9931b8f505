import { test } from "node:test";
import assert from "node:assert/strict";
import { REFERENCE_MACS_PER_KEY, sampleSparseRows } from "../../../src/testing/sampleSparseRows.js";

test("sampleSparseRows() takes the first, last and a random request, every token, and a finite-sink head first", () => {
  const sink = Float32Array.from({ length: 128 }, (_, h) => (h < 5 ? Infinity : h === 5 ? 0.3 : -Infinity));
  const rows = sampleSparseRows({ b: 128, s_q: 2, h_q: 128, topk: 2048, seed: 8, attnSink: sink, requests: [77] });
  assert.deepEqual(rows, sampleSparseRows({ b: 128, s_q: 2, h_q: 128, topk: 2048, seed: 8, attnSink: sink, requests: [77] }));
  const batches = new Set(rows.map((r) => r.batch));
  for (const i of [0, 77, 127]) assert.ok(batches.has(i), `request ${i}`);
  assert.deepEqual(new Set(rows.map((r) => r.token)), new Set([0, 1]));
  const heads = new Set(rows.map((r) => r.head));
  for (const h of [5, 0, 127]) assert.ok(heads.has(h), `head ${h}`);
  assert.ok(rows.every((r) => r.batch < 128 && r.token < 2 && r.head < 128));
  const sorted = [...rows].sort((x, y) => x.batch - y.batch || x.token - y.token || x.head - y.head);
  assert.deepEqual(rows, sorted);
  assert.equal(new Set(rows.map((r) => `${r.batch}/${r.token}/${r.head}`)).size, rows.length);
  assert.ok(rows.length * 2048 * REFERENCE_MACS_PER_KEY <= 2e8);
});

test("sampleSparseRows() sheds heads, then requests, then tokens to stay within maxMacs", () => {
  const perRow = 32768 * REFERENCE_MACS_PER_KEY;
  const three = sampleSparseRows({ b: 128, s_q: 2, h_q: 128, topk: 32768, seed: 1, maxMacs: 3 * perRow });
  assert.ok(three.length <= 3 && three.length >= 2, `${three.length} rows`);
  assert.equal(new Set(three.map((r) => r.head)).size, 1);
  const one = sampleSparseRows({ b: 128, s_q: 2, h_q: 128, topk: 32768, seed: 1, maxMacs: 1 });
  assert.equal(one.length, 1);
  // Tiny cases keep everything there is: one request, one token, one head.
  assert.deepEqual(sampleSparseRows({ b: 1, s_q: 1, h_q: 1, topk: 1, seed: 2 }), [{ batch: 0, token: 0, head: 0 }]);
  // Long MTP rows: the last, the first and a random query token.
  assert.ok(new Set(sampleSparseRows({ b: 2, s_q: 8, h_q: 8, topk: 64, seed: 3 }).map((r) => r.token)).has(7));
  assert.throws(() => sampleSparseRows({ b: 0, s_q: 1, h_q: 1, topk: 1, seed: 1 }), /sampleSparseRows\(\): argument 'opts.b': expected an integer >= 1, got 0/);
});
