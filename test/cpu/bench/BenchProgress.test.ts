import { test } from "node:test";
import assert from "node:assert/strict";
import { BenchProgress, progressMode } from "../../../src/bench/BenchProgress.js";

test("BenchProgress in lines mode logs the percentage and label, at most once per interval", () => {
  const lines: string[] = [];
  const every = new BenchProgress("lines", (l) => lines.push(l), 0);
  every.start(4, "dense-compute");
  every.tick();
  every.tick(1, "dense-b1: timing");
  every.stop();
  assert.deepEqual(lines, ["  … 25% dense-compute\n", "  … 50% dense-b1: timing\n"]);

  const rare: string[] = [];
  const slow = new BenchProgress("lines", (l) => rare.push(l), 60_000);
  slow.start(10, "x");
  for (let i = 0; i < 10; i++) slow.tick();
  assert.deepEqual(rare, []);
});

test("BenchProgress off writes nothing; progressMode() is off when disabled", () => {
  const lines: string[] = [];
  const p = new BenchProgress("off", (l) => lines.push(l), 0);
  p.start(2, "a");
  p.tick();
  p.label("b");
  p.stop();
  assert.deepEqual(lines, []);
  assert.equal(progressMode(false), "off");
  assert.equal(progressMode(true), process.stderr.isTTY === true ? "bar" : "lines");
});
