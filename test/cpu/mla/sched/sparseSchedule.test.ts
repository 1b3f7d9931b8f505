import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../../src/errors/ArgumentError.js";
import {
  checkSchedule, computeSchedule, decodePart, numKvBlocks, numSmPartsDense, numSmPartsSparse, numSplitSlots,
  SCHED_FIXED_OVERHEAD, sparseScheduleLengths, type Schedule,
} from "../../../../src/mla/sched/schedule.js";
import { Rng } from "../../../../src/numeric/random.js";

/** Cost of each used part as the scheduler counts it: its blocks plus the fixed overhead per piece. */
function partCosts(lengths: ArrayLike<number>, s: Schedule, parts: number): number[] {
  const costs: number[] = [];
  for (let p = 0; p < parts; p++) {
    const d = decodePart(s.schedMeta, p);
    if (d.beginReq >= lengths.length) continue;
    let cost = 0;
    for (let r = d.beginReq; r <= d.endReq; r++) {
      const start = r === d.beginReq ? d.beginBlock : 0;
      const end = r === d.endReq ? d.endBlock : numKvBlocks(lengths[r]);
      cost += end - start + SCHED_FIXED_OVERHEAD;
    }
    costs.push(cost);
  }
  return costs;
}

function payloadOf(lengths: ArrayLike<number>, parts: number): number {
  let total = 0;
  for (let i = 0; i < lengths.length; i++) total += numKvBlocks(lengths[i]) + SCHED_FIXED_OVERHEAD;
  return Math.ceil(total / parts) + SCHED_FIXED_OVERHEAD;
}

test("numSmPartsSparse() is FlashMLA's sm90 formula for 64 and 128 heads", () => {
  assert.equal(numSmPartsSparse(132, 2, 128), 33); // sparse-v32: grid (2, 2, 33) = 132 CTAs
  assert.equal(numSmPartsSparse(132, 2, 64), 66);
  assert.equal(numSmPartsSparse(132, 1, 128), 66);
  assert.equal(numSmPartsSparse(132, 3, 128), 22);
  assert.equal(numSmPartsSparse(1, 4, 128), 1); // never 0
  for (const sms of [1, 78, 114, 132]) {
    for (let s_q = 1; s_q <= 8; s_q++) {
      for (const h_q of [64, 128]) {
        const flashMla = Math.max(Math.trunc(Math.trunc(sms / s_q) / (h_q / 64)), 1);
        assert.equal(numSmPartsSparse(sms, s_q, h_q), flashMla, `sms ${sms}, s_q ${s_q}, h_q ${h_q}`);
      }
    }
  }
});

test("numSmPartsSparse() counts one 64-row tile for 8, 16 and 32 heads", () => {
  for (const h_q of [8, 16, 32]) {
    for (let s_q = 1; s_q <= 4; s_q++) assert.equal(numSmPartsSparse(132, s_q, h_q), numSmPartsSparse(132, s_q, 64));
  }
  assert.equal(numSmPartsSparse(132, 2, 16), 66); // sparse-h16: one CTA column per query token
  // The dense count packs s_q·h_q rows into the tiles; the sparse one cannot (each query token has its own keys).
  assert.equal(numSmPartsDense(132, 2, 16, 1), 132);
});

test("sparseScheduleLengths() gives topk, or topkLength clamped to [0, topk] with 0 raised to 1", () => {
  assert.deepEqual([...sparseScheduleLengths(2048, undefined, 3)], [2048, 2048, 2048]);
  assert.deepEqual([...sparseScheduleLengths(100, [0, 1, 64, 65, 100, 101, -5, 1 << 30])], [1, 1, 64, 65, 100, 100, 1, 100]);
  assert.deepEqual([...sparseScheduleLengths(1, Int32Array.from([0, 1]))], [1, 1]);
  assert.deepEqual([...sparseScheduleLengths(100, [7, 8], 2)], [7, 8]);
  // An empty request costs one block like a full 64-entry one, so it still gets a CTA that writes out 0.
  assert.equal(numKvBlocks(sparseScheduleLengths(100, [0])[0]), 1);
});

test("sparseScheduleLengths() names bad arguments", () => {
  const throwsArg = (f: () => unknown, argument: string, pattern: RegExp) =>
    assert.throws(f, (e: unknown) => e instanceof ArgumentError && e.argument === argument && pattern.test(e.message));
  throwsArg(() => sparseScheduleLengths(0, undefined, 2), "topk", /expected an integer >= 1, got 0/);
  throwsArg(() => sparseScheduleLengths(1.5, undefined, 2), "topk", /got 1.5/);
  throwsArg(() => sparseScheduleLengths(64), "b", /expected an integer >= 1 \(or topkLength\), got undefined/);
  throwsArg(() => sparseScheduleLengths(64, [], 0), "b", /got 0/);
  throwsArg(() => sparseScheduleLengths(64, [1, 2, 3], 2), "topkLength", /expected 2 lengths \(one per request\), got 3/);
  throwsArg(() => sparseScheduleLengths(64, [1, 2.5]), "topkLength", /expected integers, got topkLength\[1\] = 2.5/);
});

test("sparseScheduleLengths() with a second list walks the main list padded to whole 64-entry blocks, then the extra list", () => {
  // No extraTopkLength: every request walks all of both lists.
  assert.deepEqual([...sparseScheduleLengths(100, undefined, 2, { topk: 40 })], [128 + 40, 128 + 40]);
  assert.deepEqual([...sparseScheduleLengths(128, undefined, 1, { topk: 1 })], [129]);
  // Both clamped to [0, topk] first; 0 + 0 is raised to 1, an empty main list costs no padding.
  const main = [0, 1, 64, 65, 100, 200, -3, 0, 0];
  const extra = [0, 0, 0, 40, 41, -1, 7, 1 << 30, 2];
  assert.deepEqual([...sparseScheduleLengths(100, main, undefined, { topk: 40, topkLength: extra })], [1, 64, 64, 168, 168, 128, 7, 40, 2]);
  assert.deepEqual([...sparseScheduleLengths(100, undefined, 3, { topk: 40, topkLength: Int32Array.from([0, 5, 40]) })], [128, 133, 168]);
  assert.deepEqual([...sparseScheduleLengths(100, [0, 65], undefined, { topk: 40 })], [40, 168]);
});

test("sparseScheduleLengths() with a second list is 64·ceil(main / 64) + extra on 200 seeded random batches, blocks summing per list", () => {
  const rng = new Rng(4);
  const clamp = (v: number, topk: number) => Math.min(Math.max(v, 0), topk);
  for (let c = 0; c < 200; c++) {
    const b = rng.int(1, 40);
    const topk = [1, 63, 64, 65, 128, 512, 2048][rng.int(0, 7)];
    const extraTopk = [1, 63, 64, 65, 128, 512][rng.int(0, 6)];
    const draw = (max: number) => (rng.uniform() < 0.3 ? undefined : Int32Array.from({ length: b }, () => (rng.uniform() < 0.2 ? 0 : rng.int(-5, max + 6))));
    const topkLength = draw(topk);
    const extraLength = draw(extraTopk);
    const lengths = sparseScheduleLengths(topk, topkLength, b, { topk: extraTopk, topkLength: extraLength });
    for (let i = 0; i < b; i++) {
      const m = clamp(topkLength?.[i] ?? topk, topk);
      const e = clamp(extraLength?.[i] ?? extraTopk, extraTopk);
      const label = `case ${c}, request ${i}: main ${m} of ${topk}, extra ${e} of ${extraTopk}`;
      assert.equal(lengths[i], Math.max(64 * Math.ceil(m / 64) + e, 1), label);
      // The kernel walks each list's blocks in turn; the scheduler must count the same ones.
      assert.equal(numKvBlocks(lengths[i]), Math.max(numKvBlocks(m) * Number(m > 0) + numKvBlocks(e) * Number(e > 0), 1), label);
    }
    const parts = numSmPartsSparse(132, rng.int(1, 3), 64);
    assert.doesNotThrow(() => checkSchedule(lengths, computeSchedule(lengths, parts), parts), `case ${c}`);
  }
});

test("sparseScheduleLengths() names a bad second list", () => {
  const throwsArg = (f: () => unknown, argument: string, pattern: RegExp) =>
    assert.throws(f, (e: unknown) => e instanceof ArgumentError && e.argument === argument && pattern.test(e.message), argument);
  throwsArg(() => sparseScheduleLengths(64, undefined, 2, { topk: 0 }), "extra.topk", /expected an integer >= 1, got 0/);
  throwsArg(() => sparseScheduleLengths(64, undefined, 2, { topk: 2.5 }), "extra.topk", /got 2.5/);
  throwsArg(() => sparseScheduleLengths(64, undefined, 2, { topk: 8, topkLength: [1, 2, 3] }), "extra.topkLength", /expected 2 lengths \(one per request\), got 3/);
  throwsArg(() => sparseScheduleLengths(64, [1, 2], undefined, { topk: 8, topkLength: [1] }), "extra.topkLength", /expected 2 lengths/);
  throwsArg(() => sparseScheduleLengths(64, undefined, 2, { topk: 8, topkLength: [1, NaN] }), "extra.topkLength", /expected integers, got extra.topkLength\[1\] = NaN/);
  // The main list's errors keep their own name with a second list beside it.
  throwsArg(() => sparseScheduleLengths(64, [1, 2.5], undefined, { topk: 8 }), "topkLength", /expected integers, got topkLength\[1\] = 2.5/);
  throwsArg(() => sparseScheduleLengths(0, undefined, 2, { topk: 8 }), "topk", /got 0/);
  throwsArg(() => sparseScheduleLengths(64, undefined, undefined, { topk: 8, topkLength: [1, 2] }), "b", /got undefined/);
});

test("computeSchedule() on sparse-v32 (b 128, topk 2048, s_q 2, h_q 128) gives 32 of its 33 parts four whole requests each", () => {
  const parts = numSmPartsSparse(132, 2, 128);
  const lengths = sparseScheduleLengths(2048, undefined, 128);
  const s = computeSchedule(lengths, parts);
  checkSchedule(lengths, s, parts);
  // 128 requests of 32 blocks: total 128·37 = 4736, payload ceil(4736/33) + 5 = 149 per part. Four whole
  // requests cost 148 and the 1 block left is below the 5-block overhead, so nothing is split and the
  // last part idles: 128 of 132 CTAs work, 148 blocks each instead of a perfect 143.5 (FlashMLA does the same).
  assert.equal(payloadOf(lengths, parts), 149);
  assert.deepEqual(partCosts(lengths, s, parts), new Array(32).fill(148));
  for (let p = 0; p < 32; p++) {
    const d = decodePart(s.schedMeta, p);
    assert.deepEqual([d.beginReq, d.endReq, d.beginBlock, d.endBlock, d.firstSplitted, d.lastSplitted], [4 * p, 4 * p + 3, 0, 32, false, false]);
  }
  assert.equal(decodePart(s.schedMeta, 32).beginReq, 128, "the last part is unused");
  assert.equal(s.numSplits[128], 128);
});

test("computeSchedule() on sparse lengths satisfies the invariants on 300 seeded random batches", () => {
  const rng = new Rng(2025);
  let sawSplit = 0, sawEmpty = 0;
  for (let c = 0; c < 300; c++) {
    const b = rng.int(1, 160);
    const s_q = rng.int(1, 5);
    const h_q = [8, 16, 32, 64, 128][rng.int(0, 5)];
    const topk = [1, 63, 64, 65, 576, 2048, 2047, 32768][rng.int(0, 8)];
    const sms = [8, 78, 132][rng.int(0, 3)];
    // topkLength: none, or U[0, topk] with some forced zeros (FlashMLA's corner cases).
    const topkLength = rng.uniform() < 0.3 ? undefined : Int32Array.from({ length: b }, () => (rng.uniform() < 0.2 ? 0 : rng.int(0, topk + 1)));
    const lengths = sparseScheduleLengths(topk, topkLength, b);
    const parts = numSmPartsSparse(sms, s_q, h_q);
    const s = computeSchedule(lengths, parts);
    const label = `case ${c}: b=${b} s_q=${s_q} h_q=${h_q} topk=${topk} sms=${sms} topkLength=${topkLength !== undefined}`;
    assert.doesNotThrow(() => checkSchedule(lengths, s, parts), label);
    const payload = payloadOf(lengths, parts);
    for (const cost of partCosts(lengths, s, parts)) assert.ok(cost <= payload, `${label}: part cost ${cost} > payload ${payload}`);
    for (let i = 0; i < b; i++) {
      const pieces = s.numSplits[i + 1] - s.numSplits[i];
      if (topkLength !== undefined && topkLength[i] === 0) {
        sawEmpty++;
        assert.equal(pieces, 1, `${label}: empty request ${i} split`);
      }
      if (pieces > 1) sawSplit++;
    }
  }
  assert.ok(sawSplit > 100 && sawEmpty > 100, `the cases must exercise splits (${sawSplit}) and empty requests (${sawEmpty})`);
});
