import { test } from "node:test";
import assert from "node:assert/strict";
import { MlaSchedMeta, scheduleHasSplits } from "../../../src/mla/MlaSchedMeta.js";

// What the host reads from a schedule's split prefix sums (num_splits, [b + 1]) before it may leave the
// combine out: only well-formed sums with every request in one piece say "nothing split".

test("prefix sums with every request in one piece (or none) say nothing is split", () => {
  assert.equal(scheduleHasSplits(Int32Array.from([0, 1, 2, 3])), false);
  assert.equal(scheduleHasSplits(Int32Array.from([0, 1, 1, 2])), false);  // an empty request: no piece
});

test("a request with two or more pieces is a split", () => {
  assert.equal(scheduleHasSplits(Int32Array.from([0, 1, 3, 4])), true);
  assert.equal(scheduleHasSplits(Int32Array.from([0, 66])), true);
});

test("words that are not such sums (not yet written: -1, or decreasing) say nothing either way", () => {
  assert.equal(scheduleHasSplits(Int32Array.from([-1, -1, -1])), undefined);
  assert.equal(scheduleHasSplits(Int32Array.from([0, 2, 1])), undefined);
  assert.equal(scheduleHasSplits(Int32Array.from([0])), undefined);
  assert.equal(scheduleHasSplits([]), undefined);
});

test("unfilled metadata does not claim that nothing is split", () => {
  const meta = new MlaSchedMeta();
  assert.equal(meta.knownUnsplit(), false);
  meta.probeSplits();  // no workspace yet: nothing to copy, no GPU needed
  assert.equal(meta.knownUnsplit(), false);
  meta.dispose();
});
