import { test } from "node:test";
import assert from "node:assert/strict";
import { countAttended, makeGpuSparseCase, referencedSlots, type SparseCaseSpec } from "../../../src/testing/gpuSparseCase.js";
import { drawAttnSink, drawSparseIndices, drawSparseLayout, physicalTokenId } from "../../../src/testing/sparseCaseLayout.js";
import { Rng } from "../../../src/numeric/random.js";
import type { Stream } from "../../../src/runtime/Stream.js";

test("drawSparseLayout() gives each request its own permuted blocks plus one spare block nobody owns", () => {
  const layout = drawSparseLayout(new Rng(1), { b: 3, seqlens: [130, 0, 64], pageBlockSize: 64 });
  assert.deepEqual(layout.seqlens, [130, 0, 64]);
  // 3 + 0 + 1 blocks owned, one spare.
  assert.equal(layout.numBlocks, 5);
  assert.deepEqual([...layout.physical].sort(), [0, 1, 2, 3, 4]);
  assert.deepEqual(layout.firstBlock, [0, 3, 3]);
  const owned = new Set<number>();
  for (const [i, len] of layout.seqlens.entries()) for (let pos = 0; pos < len; pos++) owned.add(Math.floor(physicalTokenId(layout, i, pos) / 64));
  assert.equal(owned.size, 4);
  // Position 65 of request 0 is row 1 of its second block.
  assert.equal(physicalTokenId(layout, 0, 65), layout.physical[1] * 64 + 1);
});

test("drawSparseLayout() draws FlashMLA's varlen lengths from the seed, at least 1", () => {
  const a = drawSparseLayout(new Rng(7), { b: 200, seqlens: { s_k: 512, varlen: true }, pageBlockSize: 2 });
  assert.deepEqual(drawSparseLayout(new Rng(7), { b: 200, seqlens: { s_k: 512, varlen: true }, pageBlockSize: 2 }).seqlens, a.seqlens);
  assert.ok(a.seqlens.every((n) => Number.isInteger(n) && n >= 1));
  assert.ok(new Set(a.seqlens).size > 100);
  const mean = a.seqlens.reduce((s, n) => s + n, 0) / a.seqlens.length;
  assert.ok(Math.abs(mean - 512) < 80, `mean ${mean}`);
  assert.deepEqual(drawSparseLayout(new Rng(7), { b: 2, seqlens: { s_k: 300, varlen: false }, pageBlockSize: 2 }).seqlens, [300, 300]);
  assert.throws(() => drawSparseLayout(new Rng(1), { b: 2, seqlens: [1], pageBlockSize: 2 }), /drawSparseLayout\(\): argument 'opts.seqlens': expected 2 integers >= 0/);
});

test("drawSparseIndices() fills each row with distinct in-request tokens, then −1, and marks what is read", () => {
  const rng = new Rng(3);
  const layout = drawSparseLayout(rng, { b: 3, seqlens: [50, 200, 0], pageBlockSize: 7 });
  const topk = 64;
  const d = drawSparseIndices(rng, layout, { s_q: 2, topk, topkLength: false, invalidFraction: 0, repeat: 0 });
  for (let i = 0; i < 3; i++) {
    const mine = new Set(Array.from({ length: layout.seqlens[i] }, (_, pos) => physicalTokenId(layout, i, pos)));
    for (let j = 0; j < 2; j++) {
      const row = [...d.indices.subarray((i * 2 + j) * topk, (i * 2 + j + 1) * topk)];
      const filled = Math.min(topk, layout.seqlens[i]);
      assert.ok(row.slice(0, filled).every((id) => mine.has(id)), `request ${i} reads only its own tokens`);
      assert.equal(new Set(row.slice(0, filled)).size, filled, "distinct");
      assert.ok(row.slice(filled).every((id) => id === -1));
    }
  }
  const marked = new Set(referencedSlots(d.referenced));
  assert.deepEqual(marked, new Set([...d.indices].filter((id) => id >= 0)));
  assert.equal(countAttended(d.indices, undefined, { b: 3, s_q: 2, topk, numSlots: layout.numBlocks * 7 }), 2 * 50 + 2 * 64);
});

test("drawSparseIndices() marks only entries inside topkLength, and invalidates or repeats on request", () => {
  const rng = new Rng(4);
  const layout = drawSparseLayout(rng, { b: 4, seqlens: { s_k: 300, varlen: false }, pageBlockSize: 64 });
  const d = drawSparseIndices(rng, layout, { s_q: 3, topk: 100, topkLength: true, invalidFraction: 0.3, repeat: 0.3 });
  assert.ok(d.topkLength !== undefined && d.topkLength.every((n) => n >= 0 && n <= 100));
  const inside = new Set<number>();
  let invalid = 0;
  let repeats = 0;
  for (let i = 0; i < 4; i++) {
    for (let j = 0; j < 3; j++) {
      const row = [...d.indices.subarray((i * 3 + j) * 100, (i * 3 + j + 1) * 100)];
      row.slice(0, d.topkLength![i]).forEach((id) => id >= 0 && inside.add(id));
      invalid += row.filter((id) => id === -1).length;
      repeats += row.filter((id) => id >= 0).length - new Set(row.filter((id) => id >= 0)).size;
    }
  }
  assert.deepEqual(new Set(referencedSlots(d.referenced)), inside);
  // 1200 entries: about 30% invalid and some repeats.
  assert.ok(invalid > 250 && invalid < 470, `${invalid} invalid`);
  assert.ok(repeats > 50, `${repeats} repeats`);
  const attended = countAttended(d.indices, d.topkLength, { b: 4, s_q: 3, topk: 100, numSlots: layout.numBlocks * 64 });
  let expected = 0;
  for (let i = 0; i < 4; i++) for (let j = 0; j < 3; j++) for (let k = 0; k < d.topkLength![i]; k++) if (d.indices[(i * 3 + j) * 100 + k] >= 0) expected++;
  assert.equal(attended, expected);
});

test("countAttended() treats ids outside [0, numSlots) as invalid and clamps topkLength to [0, topk]", () => {
  const indices = Int32Array.from([0, 5, -1, 9, 3, 3, 10, 2]); // [b 2, s_q 1, topk 4]
  assert.equal(countAttended(indices, undefined, { b: 2, s_q: 1, topk: 4, numSlots: 10 }), 2 + 1 + 2 + 1);
  assert.equal(countAttended(indices, Int32Array.from([9, -2]), { b: 2, s_q: 1, topk: 4, numSlots: 10 }), 3);
  assert.deepEqual([...referencedSlots(Uint8Array.from([0, 1, 1, 0, 1]))], [1, 2, 4]);
});

test("drawAttnSink() mixes +inf, −inf and finite sinks about 31/31/38", () => {
  const s = drawAttnSink(new Rng(5), 10_000);
  const pos = s.filter((x) => x === Infinity).length;
  const neg = s.filter((x) => x === -Infinity).length;
  assert.ok(Math.abs(pos - 3100) < 250 && Math.abs(neg - 3100) < 250, `${pos} +inf, ${neg} -inf`);
  assert.ok(s.every((x) => !Number.isNaN(x)));
});

test("makeGpuSparseCase() checks its spec before touching the GPU", () => {
  const stream = undefined as unknown as Stream;
  const spec: SparseCaseSpec = { b: 2, s_q: 1, h_q: 16, topk: 64, seqlens: [100, 100], pageBlockSize: 64, withSink: true, withTopkLength: false };
  for (const [bad, message] of [
    [{ topk: 0 }, /makeGpuSparseCase\(\): argument 'spec.topk': expected an integer >= 1, got 0/],
    [{ seqlens: [100] }, /argument 'spec.seqlens': expected 2 integers >= 0, got \[100\]/],
    [{ seqlens: [100, -1] }, /argument 'spec.seqlens'/],
    [{ invalidFraction: 1.5 }, /argument 'spec.invalidFraction': expected a probability in \[0, 1\]/],
    [{ blockPadTokens: -1 }, /argument 'spec.blockPadTokens'/],
    [{ seqlens: [2 ** 30, 2 ** 30], pageBlockSize: 1 }, /at most 2147483647 slots in all \(32-bit token ids\), got 2147483649 slots/],
  ] as const) {
    assert.throws(() => makeGpuSparseCase({ ...spec, ...bad } as SparseCaseSpec, { seed: 1, stream }), message);
  }
});
