import { test } from "node:test";
import assert from "node:assert/strict";
import { timingStats } from "../../../src/bench/timingStats.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";

test("timingStats() gives the middle value as the median of an odd count", () => {
  const s = timingStats([5, 1, 4, 2, 3]);
  assert.equal(s.n, 5);
  assert.equal(s.median, 3);
  assert.equal(s.min, 1);
  assert.equal(s.max, 5);
  assert.equal(s.mean, 3);
});

test("timingStats() averages the middle two as the median of an even count", () => {
  assert.equal(timingStats([3, 1, 2, 10]).median, 2.5);
});

test("timingStats() interpolates the 10th and 90th percentiles between order statistics", () => {
  // 11 samples 0..100: p10 and p90 land exactly on the 2nd and 10th values.
  const s = timingStats([100, 0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
  assert.equal(s.p10, 10);
  assert.equal(s.p90, 90);
  // 4 samples: p90 sits 0.7 of the way from the 3rd to the 4th.
  const t = timingStats([1, 2, 3, 13]);
  assert.ok(Math.abs(t.p90 - 10) < 1e-12);
  assert.ok(Math.abs(t.p10 - 1.3) < 1e-12);
});

test("timingStats() of one sample is that sample everywhere", () => {
  assert.deepEqual(timingStats([7]), { n: 1, median: 7, min: 7, max: 7, mean: 7, p10: 7, p90: 7 });
});

test("timingStats() leaves its input unsorted", () => {
  const samples = [3, 1, 2];
  timingStats(samples);
  assert.deepEqual(samples, [3, 1, 2]);
});

test("timingStats() rejects an empty array and non-finite samples", () => {
  assert.throws(() => timingStats([]), ArgumentError);
  assert.throws(() => timingStats([1, NaN]), /samples\[1\]': expected a finite number, got NaN/);
  assert.throws(() => timingStats([Infinity]), ArgumentError);
});
