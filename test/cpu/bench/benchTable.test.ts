import { test } from "node:test";
import assert from "node:assert/strict";
import pc from "picocolors";
import { benchTable } from "../../../src/bench/benchTable.js";
import { notAvailableResult, timedResult } from "./fakeBenchResults.js";

test("benchTable() prints µs, TFLOPS, GB/s, % of ceiling, bound, FlashMLA's figure, targets and check per case", () => {
  const text = benchTable([timedResult("dense-compute", 452), timedResult("dense-b1", 65)]);
  const row = text.split("\n").find((l) => l.includes("dense-compute"))!;
  const cells = row.split("│").map((s) => s.trim()).filter((s) => s !== "");
  assert.deepEqual(cells, ["dense-compute", "452.0", "453.4", "646.1", "2751", "84.2", "compute", "452 µs, 646 TFLOPS", "≥ 646 TFLOPS met", "≥ 700 TFLOPS miss", "ok"]);
  const b1 = text.split("\n").find((l) => l.includes("dense-b1"))!;
  assert.match(b1, /│ memory +│ 43\.5 µs, 875 GB\/s +│ ≤ 43\.5 µs miss +│ ≤ 20 µs miss +│ ok/);
  assert.match(text, /% ceil: achieved TFLOPS \(compute-bound\) or GB\/s \(memory-bound\) over the measured roof/);
  assert.doesNotMatch(text, /\x1b\[/);
});

test("benchTable() shows a case without a kernel as not available, with its reason as a note", () => {
  const text = benchTable([notAvailableResult("sparse-v32")]);
  assert.match(text, /sparse-v32 +│ n\/a .*│ 364 µs, 401 TFLOPS +│ ≥ 401 TFLOPS +│ ≥ 450 TFLOPS +│ not available/);
  assert.match(text, /note: sparse-v32: not available: sparse GPU kernel not built yet/);
});

test("benchTable() marks a failed check and prints why", () => {
  const r = timedResult("dense-mem-h16", 300);
  r.status = "check-failed";
  r.check = { ...r.check!, ok: false, message: "out: 3 of 16384 elements outside tolerance" };
  r.reason = `check FAILED: ${r.check.message}`;
  const text = benchTable([r]);
  assert.match(text, /dense-mem-h16 .*│ FAILED/);
  assert.match(text, /note: dense-mem-h16: check FAILED: out: 3 of 16384/);
});

test("benchTable() colours only when given colours", () => {
  const r = timedResult("dense-compute", 452);
  assert.doesNotMatch(benchTable([r], { colors: pc.createColors(false) }), /\x1b\[/);
  assert.match(benchTable([r], { colors: pc.createColors(true) }), /\x1b\[32mmet\x1b\[39m/);
});
