import { test } from "node:test";
import assert from "node:assert/strict";
import { checkCaseSeqlens, checkGrid, FLASHMLA_HEAD_PAIRS } from "../../../src/bench/checkGrid.js";

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
