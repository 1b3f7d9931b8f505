import { test } from "node:test";
import assert from "node:assert/strict";
import { MlaSchedMeta } from "../../../../src/mla/sched/MlaSchedMeta.js";
import { computeSchedule, scheduleMaxPieces } from "../../../../src/mla/sched/schedule.js";

// What the host reads from a schedule's split prefix sums (num_splits, [b + 1]) before it may leave the
// combine out: only well-formed sums count, and the most pieces a request has says whether the combine
// has work (more than 1, or more than 2 where the main kernel merges pairs).

test("prefix sums with every request in one piece give 1", () => {
  assert.equal(scheduleMaxPieces(Int32Array.from([0, 1, 2, 3])), 1);
  assert.equal(scheduleMaxPieces(Int32Array.from([0, 1, 1, 2])), 1);  // a request without a piece
});

test("the largest piece count wins", () => {
  assert.equal(scheduleMaxPieces(Int32Array.from([0, 1, 3, 4])), 2);
  assert.equal(scheduleMaxPieces(Int32Array.from([0, 2, 5, 7])), 3);
  assert.equal(scheduleMaxPieces(Int32Array.from([0, 66])), 66);
});

test("the CPU twin's schedules: dense-compute's shape splits requests in two at most, one long request many ways", () => {
  // 128 requests of 8,192 tokens over 66 parts (h_q 128: two m-blocks per part) and one of 65,536 over 132.
  assert.equal(scheduleMaxPieces(computeSchedule(new Int32Array(128).fill(8192), 66).numSplits), 2);
  assert.equal(scheduleMaxPieces(computeSchedule(new Int32Array(128).fill(1024), 132).numSplits), 1);
  assert.ok(scheduleMaxPieces(computeSchedule(Int32Array.from([65536]), 132).numSplits)! > 2);
});

test("words that are not such sums (not yet written: -1, or decreasing) say nothing", () => {
  assert.equal(scheduleMaxPieces(Int32Array.from([-1, -1, -1])), undefined);
  assert.equal(scheduleMaxPieces(Int32Array.from([0, 2, 1])), undefined);
  assert.equal(scheduleMaxPieces(Int32Array.from([0])), undefined);
  assert.equal(scheduleMaxPieces([]), undefined);
});

test("unfilled metadata does not claim to know the schedule", () => {
  const meta = new MlaSchedMeta();
  assert.equal(meta.knownMaxPieces(), undefined);
  assert.equal(meta.workspace, undefined);
  assert.equal(meta.deviceOrdinal, undefined);
  meta.dispose();
  assert.equal(meta.knownMaxPieces(), undefined);
});
