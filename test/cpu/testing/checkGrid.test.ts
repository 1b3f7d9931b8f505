import { test } from "node:test";
import assert from "node:assert/strict";
import { CHECK_GRID_KINDS, checkCaseSeqlens, checkGrid, FLASHMLA_HEAD_PAIRS, FLASHMLA_SPARSE_TRIPLES, SPARSE_ALL_ROWS_MAX_MACS, SPARSE_CHECK_HEADS } from "../../../src/testing/checkGrid.js";
import { REFERENCE_MACS_PER_KEY } from "../../../src/testing/sampleSparseRows.js";

test("FLASHMLA_HEAD_PAIRS lists FlashMLA's 16 (h_q, h_kv) pairs, each h_kv dividing h_q", () => {
  assert.equal(FLASHMLA_HEAD_PAIRS.length, 16);
  assert.ok(FLASHMLA_HEAD_PAIRS.every(([h_q, h_kv]) => h_q % h_kv === 0));
  assert.deepEqual(FLASHMLA_HEAD_PAIRS.filter(([h_q]) => h_q === 128), [[128, 1], [128, 2], [128, 8]]);
});

test("checkGrid('flashmla') is FlashMLA's 2304 correctness cases plus its 32 corner cases", () => {
  const g = checkGrid("flashmla");
  assert.equal(g.length, 2304 + 32);
  assert.equal(new Set(g.map((c) => c.name)).size, g.length);
  const corner = g.filter((c) => c.zeroFraction > 0);
  assert.equal(corner.length, 32);
  assert.ok(corner.every((c) => c.b === 128 && c.s_q === 2 && c.s_k === 4096 && c.varlen));
  assert.ok(g.every((c) => c.dtype === "bf16" && !c.allRows));
  assert.ok(checkGrid("flashmla", "fp16").every((c) => c.dtype === "fp16"));
});

test("checkGrid('small') covers one head, GQA, s_q up to 4, zero lengths and fp16, every row checked", () => {
  const g = checkGrid("small");
  assert.equal(g.length, 11);
  assert.ok(g.every((c) => c.allRows));
  assert.ok(g.some((c) => c.h_q === 1));
  assert.ok(g.some((c) => c.h_kv > 1));
  assert.ok(g.some((c) => c.s_q === 4 && c.causal));
  assert.ok(g.some((c) => c.zeroFraction > 0));
  assert.equal(g.filter((c) => c.dtype === "fp16").length, 1);
  assert.ok(checkGrid("small", "bf16").every((c) => c.dtype === "bf16"));
});

test("checkCaseSeqlens() draws FlashMLA's varlen lengths from the seed, with zeros when asked", () => {
  const [corner] = checkGrid("flashmla").filter((c) => c.zeroFraction > 0);
  const a = checkCaseSeqlens(corner, 3);
  assert.deepEqual(checkCaseSeqlens(corner, 3), a);
  const zeros = a.filter((n) => n === 0).length;
  // About half of 128: a binomial(128, 0.5) lies in [40, 88] with overwhelming probability.
  assert.ok(zeros > 40 && zeros < 88, `${zeros} zeros`);
  assert.ok(a.every((n) => n === 0 || n >= corner.s_q));
  const fixed = checkGrid("small")[0];
  assert.deepEqual(checkCaseSeqlens(fixed, 1), [20]);
});

test("checkGrid('sparse') is FlashMLA's d_qk = 576 sparse grid at h_q 8..128 plus its corner cases", () => {
  const g = checkGrid("sparse");
  assert.equal(g.length, 5 * 8 * 8 + 48);
  assert.equal(new Set(g.map((c) => c.name)).size, g.length);
  assert.ok(g.every((c) => c.kind === "sparse"));
  const main = g.filter((c) => c.b !== 8);
  assert.equal(main.length, 320);
  assert.deepEqual([...new Set(main.map((c) => c.h_q))], [...SPARSE_CHECK_HEADS]);
  assert.deepEqual(SPARSE_CHECK_HEADS, [8, 16, 32, 64, 128]);
  assert.deepEqual(new Set(main.map((c) => `${c.s_k}/${c.topk}/${c.pageBlockSize}`)), new Set(FLASHMLA_SPARSE_TRIPLES.map((t) => t.join("/"))));
  assert.equal(FLASHMLA_SPARSE_TRIPLES.length, 8);
  assert.deepEqual(new Set(main.map((c) => c.b)), new Set([4, 74, 321]));
  assert.deepEqual(new Set(main.map((c) => c.s_q)), new Set([1, 3]));
  assert.ok(main.every((c) => c.withSink && c.invalidFraction === 0 && c.zeroFraction === 0));
  // Fixed lengths only at b = 74 (FlashMLA's non-varlen cases), topkLength on the varlen b = 74 ones.
  assert.ok(main.filter((c) => !c.varlen).every((c) => c.b === 74 && c.blockPadTokens === 0));
  assert.equal(main.filter((c) => !c.varlen).length, 80);
  assert.ok(main.filter((c) => c.withTopkLength).every((c) => c.b === 74 && c.varlen));
  assert.equal(main.filter((c) => c.withTopkLength).length, 80);
  const corners = g.filter((c) => c.b === 8);
  assert.ok(corners.every((c) => c.s_q === 3 && ((c.s_k === 512 && c.topk === 64 && c.pageBlockSize === 61) || (c.s_k === 650 && c.topk === 576 && c.pageBlockSize === 53))));
  assert.equal(corners.filter((c) => c.invalidFraction === 1 && c.zeroFraction > 0 && c.withSink).length, 6);
  assert.ok(corners.some((c) => !c.withSink));
});

test("checkGrid('sparse') checks every row where the float64 reference stays cheap, sampled rows elsewhere", () => {
  const g = checkGrid("sparse");
  for (const c of g) {
    const macs = c.b * c.s_q * c.h_q * c.topk * REFERENCE_MACS_PER_KEY;
    assert.equal(c.allRows, macs <= SPARSE_ALL_ROWS_MAX_MACS, c.name);
  }
  assert.ok(g.some((c) => c.allRows) && g.some((c) => !c.allRows));
  assert.ok(g.find((c) => c.name === "sparse-b4-sq1-h8-sk512v-topk64-pbs2-sink")?.allRows);
  assert.equal(g.find((c) => c.name === "sparse-b321-sq3-h128-sk2046v-topk2048-pbs576-sink")?.allRows, false);
  // The dense grids are unchanged by the sparse one.
  assert.ok(checkGrid("small").every((c) => c.kind === undefined));
  assert.equal(CHECK_GRID_KINDS.sparse, "sparse");
  assert.equal(CHECK_GRID_KINDS.flashmla, "dense");
});

test("checkCaseSeqlens() draws a sparse case's lengths with zeros when asked", () => {
  const corner = checkGrid("sparse").find((c) => c.zeroFraction > 0 && c.h_q === 128)!;
  const a = checkCaseSeqlens(corner, 9);
  assert.equal(a.length, 8);
  assert.deepEqual(checkCaseSeqlens(corner, 9), a);
  const many = Array.from({ length: 40 }, (_, s) => checkCaseSeqlens(corner, s)).flat();
  const zeros = many.filter((n) => n === 0).length;
  assert.ok(zeros > 110 && zeros < 210, `${zeros} zeros of 320`);
});
