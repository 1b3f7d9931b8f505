import { test } from "node:test";
import assert from "node:assert/strict";
import { ncuSourceSummaryText, splitCsvLine, summarizeNcuSource } from "../../../src/bench/ncuSourceSummary.js";

// The shape of ncu's source page CSV: the kernel line, the header, one line per SASS instruction.
const HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)", "stall_barrier", "stall_long_sb", "stall_wait", "stall_barrier (Not Issued)", "stall_long_sb (Not Issued)"];
const q = (fields: Array<string | number>): string => fields.map((f) => `"${String(f).replace(/"/g, '""')}"`).join(",");
function csv(rows: Array<[string, number, number, number, number]>): string {
  const lines = [`"Kernel Name","mla_probe_kernel",`, q(HEADER)];
  rows.forEach(([sass, all, barrier, longSb, wait], i) => lines.push(q([`0x${(i * 16).toString(16)}`, sass, all, all, barrier, longSb, wait, barrier, longSb])));
  return `${lines.join("\n")}\n`;
}

test("splitCsvLine() keeps commas and doubled quotes inside quoted fields", () => {
  assert.deepEqual(splitCsvLine(`"a","LDG.E R3, desc[UR18][R8.64]","say ""hi""",`), ["a", "LDG.E R3, desc[UR18][R8.64]", 'say "hi"', ""]);
});

test("summarizeNcuSource() adds the samples per window and names the leading stalls and notable opcodes", () => {
  const text = csv([
    ["SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR17+0x38380], R3", 10, 0, 9, 1],
    ["@!P0  BRA 0x7f00", 500, 0, 495, 5],
    ["HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24", 40, 0, 0, 40],
    ["BAR.SYNC.DEFER_BLOCKING 0x2, 0x100", 300, 290, 0, 10],
    ["F2FP.F16.E4M3.UNPACK_B R73, R78", 5, 0, 0, 5],
  ]);
  const s = summarizeNcuSource(text, { window: 3, minWindowSamples: 0, top: 2 });
  assert.equal(s.kernel, "mla_probe_kernel");
  assert.equal(s.totalSamples, 855);
  assert.equal(s.instructions.length, 5);
  assert.deepEqual(s.instructions[1].stalls, { long_sb: 495, wait: 5 });
  assert.deepEqual(s.windows.map((w) => [w.first, w.last, w.samples]), [[0, 2, 550], [3, 4, 305]]);
  assert.deepEqual(s.windows[0].stalls[0], ["long_sb", 504]);
  assert.deepEqual(s.windows[0].opcodes, ["SYNCS.PHASECHK.TRANS64.TRYWAIT", "HGMMA.64x64x16.F32.BF16"]);
  assert.deepEqual(s.windows[1].opcodes, ["BAR.SYNC.DEFER_BLOCKING", "F2FP.F16.E4M3.UNPACK_B"]);
  // The two hottest, in program order.
  assert.deepEqual(s.hottest.map((x) => x.index), [1, 3]);
  const out = ncuSourceSummaryText(s);
  assert.match(out, /^mla_probe_kernel: 855 warp samples over 5 SASS instructions$/m);
  assert.match(out, /^ {2}0-2: 550 \(64\.3 %\) long_sb 504, wait 46; SYNCS\.PHASECHK\.TRANS64\.TRYWAIT HGMMA\.64x64x16\.F32\.BF16$/m);
  assert.match(out, /^ {2}1: 500 \(58\.5 %\) @!P0 {2}BRA 0x7f00 \| long_sb 495, wait 5$/m);
  // Windows under the sample floor are left out.
  assert.equal(summarizeNcuSource(text, { window: 3, minWindowSamples: 400 }).windows.length, 1);
});

test("summarizeNcuSource() says what is missing from a file that is not ncu's source page", () => {
  assert.throws(() => summarizeNcuSource("a,b\n1,2\n"), /not an ncu source page: the first line should start with "Kernel Name", got "a"/);
  assert.throws(() => summarizeNcuSource(`"Kernel Name","k"\n"Address","Source"\n`), /not an ncu source page: no "Warp Stall Sampling \(All Samples\)" column/);
});
