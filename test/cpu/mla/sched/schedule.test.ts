import { test } from "node:test";
import assert from "node:assert/strict";
import { checkSchedule, computeSchedule, decodePart, DENSE_SCHED_FIXED_OVERHEAD, numKvBlocks, numSmPartsDense, SCHED_FIXED_OVERHEAD } from "../../../../src/mla/sched/schedule.js";
import { combineRowsPerCta, COMBINE_MAX_ROWS_PER_CTA } from "../../../../src/mla/combine/launchCombine.js";
import { Rng } from "../../../../src/numeric/random.js";

test("numSmPartsDense() gives about one CTA per SM, like FlashMLA", () => {
  assert.equal(numSmPartsDense(132, 1, 128, 1), 66); // 2 m-blocks
  assert.equal(numSmPartsDense(132, 1, 16, 1), 132);
  assert.equal(numSmPartsDense(132, 2, 128, 1), 33);
  assert.equal(numSmPartsDense(132, 1, 128, 8), 16);
  assert.equal(numSmPartsDense(1, 4, 128, 1), 1); // never 0
});

test("computeSchedule() splits one long request over every part", () => {
  const s = computeSchedule([32768], 132);
  checkSchedule([32768], s, 132);
  const used = Array.from({ length: 132 }, (_, p) => decodePart(s.schedMeta, p)).filter((p) => p.beginReq < 1);
  assert.ok(used.length > 100, `only ${used.length} parts used`);
  assert.equal(s.numSplits[1], used.length);
});

test("computeSchedule() keeps empty requests unsplit and gives each one block", () => {
  const lens = [0, 0, 100, 0];
  const s = computeSchedule(lens, 8);
  checkSchedule(lens, s, 8);
  assert.equal(numKvBlocks(0), 1);
  for (let i = 0; i < lens.length; i++) if (lens[i] === 0) assert.equal(s.numSplits[i + 1] - s.numSplits[i], 1);
});

test("computeSchedule() with more parts than work leaves trailing parts unused", () => {
  const s = computeSchedule([10], 16);
  checkSchedule([10], s, 16);
  const p15 = decodePart(s.schedMeta, 15);
  assert.equal(p15.beginReq, 1);
});

test("computeSchedule() satisfies the invariants on 400 seeded random batches, at each path's fixed overhead and others", () => {
  const rng = new Rng(1234);
  for (let c = 0; c < 400; c++) {
    const b = rng.int(1, 200);
    const parts = rng.int(1, 140);
    const mean = [1, 64, 500, 4096, 40000][rng.int(0, 5)];
    const overhead = [SCHED_FIXED_OVERHEAD, DENSE_SCHED_FIXED_OVERHEAD, 1, 12][c % 4];
    const lens = Array.from({ length: b }, () => (rng.uniform() < 0.2 ? 0 : Math.max(1, Math.round(mean * (0.5 + rng.uniform())))));
    const s = computeSchedule(lens, parts, overhead);
    assert.doesNotThrow(() => checkSchedule(lens, s, parts), `case ${c}: b=${b} parts=${parts} mean=${mean} overhead=${overhead}`);
  }
});

test("the dense path's fixed overhead gives dense-compute's 128 requests of 128 blocks two whole requests a part", () => {
  // FlashMLA's 5 cut 62 of them in two (248 blocks and three pieces in most parts); at 8 a piece's real
  // cost in our kernel (docs/dense-decode.md), 64 parts hold two each and two parts stay empty.
  const lens = Array(128).fill(8192);
  const five = computeSchedule(lens, 66);
  assert.equal(Array.from({ length: 128 }, (_, r) => five.numSplits[r + 1] - five.numSplits[r]).filter((n) => n === 2).length, 62);
  const dense = computeSchedule(lens, 66, DENSE_SCHED_FIXED_OVERHEAD);
  checkSchedule(lens, dense, 66);
  assert.equal(dense.numSplits[128], 128, "no request split");
  for (let p = 0; p < 66; p++) {
    const d = decodePart(dense.schedMeta, p);
    if (p < 64) assert.deepEqual([d.beginReq, d.endReq], [2 * p, 2 * p + 1], `part ${p}`);
    else assert.ok(d.beginReq >= 128, `part ${p} unused`);
  }
});

test("computeSchedule() rejects a fixed overhead that is not an integer >= 1", () => {
  for (const bad of [0, -5, 2.5, Number.NaN]) {
    assert.throws(() => computeSchedule([100], 4, bad), (e: Error) => /fixedOverhead/.test(e.message) && e.message.includes(String(bad)), `overhead ${bad}`);
  }
});

test("a request in two pieces ends one part (split 0) and begins the next (split 1), as the dense kernels' pair merge expects", () => {
  // The merge has split 0 prefetch split 1's partial before its last pair: that only pays if split 0 is
  // its part's last piece and split 1 its part's first. (The merge itself is correct in any order.)
  const rng = new Rng(99);
  let pairs = 0;
  for (let c = 0; c < 200; c++) {
    const b = rng.int(1, 160);
    const parts = rng.int(2, 133);
    const lens = Array.from({ length: b }, () => rng.int(0, 9000));
    const s = computeSchedule(lens, parts, c % 2 === 0 ? SCHED_FIXED_OVERHEAD : DENSE_SCHED_FIXED_OVERHEAD);
    for (let p = 0; p < parts; p++) {
      const d = decodePart(s.schedMeta, p);
      if (d.beginReq >= b) break;
      for (let r = d.beginReq; r <= d.endReq; r++) {
        if (s.numSplits[r + 1] - s.numSplits[r] !== 2) continue;
        const first = r === d.beginReq && d.beginBlock > 0;  // this part holds the request's second piece
        assert.ok(first || r === d.endReq, `case ${c}: request ${r} in two pieces sits inside part ${p}`);
        if (first) assert.equal(d.beginSplit, 1, `case ${c}: part ${p} begins with split 1 of request ${r}`);
        else { assert.ok(d.lastSplitted, `case ${c}: part ${p} ends with split 0 of request ${r}`); pairs++; }
      }
    }
  }
  assert.ok(pairs > 100, `only ${pairs} pairs drawn`);
});

test("checkSchedule() catches a block covered twice and a wrong numSplits", () => {
  const lens = [640, 640];
  const s = computeSchedule(lens, 4);
  const broken = { schedMeta: s.schedMeta.slice(), numSplits: s.numSplits.slice() };
  broken.schedMeta[8 + 2] = 0; // part 1 restarts its first request at block 0
  assert.throws(() => checkSchedule(lens, broken, 4), /covered twice|bad block range|never scheduled|pieces/);
  const wrong = { schedMeta: s.schedMeta.slice(), numSplits: s.numSplits.slice() };
  wrong.numSplits[2] += 1;
  assert.throws(() => checkSchedule(lens, wrong, 4), /pieces|slot/);
});

test("combineRowsPerCta() leaves at least two combine CTAs per SM where the rows allow, 1 to 16 rows each", () => {
  // dense-b1 (128 rows), dense-uneven (256), dense-short-h16 (2,048), dense-compute (16,384), sparse-v32 (32,768) on 132 SMs.
  assert.deepEqual([128, 256, 2048, 16384, 32768].map((rows) => combineRowsPerCta(rows, 132)), [1, 1, 7, 16, 16]);
  for (const smCount of [1, 66, 132, 144]) {
    for (let rows = 1; rows <= 40000; rows += 97) {
      const r = combineRowsPerCta(rows, smCount);
      assert.ok(Number.isInteger(r) && r >= 1 && r <= COMBINE_MAX_ROWS_PER_CTA, `rows ${rows}, SMs ${smCount}: ${r}`);
      if (r > 1) assert.ok(Math.ceil(rows / r) >= 2 * smCount, `rows ${rows}, SMs ${smCount}: ${r} rows a CTA leaves ${Math.ceil(rows / r)} CTAs`);
    }
  }
});
