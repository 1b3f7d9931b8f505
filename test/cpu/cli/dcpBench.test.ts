import { test } from "node:test";
import assert from "node:assert/strict";
import pc from "picocolors";
import { DCP_BENCH_CASES, DCP_COMM_MODEL, type DcpBenchRow } from "../../../src/bench/dcpBench.js";
import type { GpuEnvironment } from "../../../src/bench/gpuEnvironment.js";
import { timingStats } from "../../../src/bench/timingStats.js";
import { DCP_BENCH_RECORD_SCHEMA, dcpBenchRecord, dcpBenchText, registerDcpBenchCommand } from "../../../src/cli/commands/dcpBench.js";
import type { CliErrorJson } from "../../../src/cli/cliErrors.js";
import { runCommand } from "./runCommand.js";

const NO_GPU = { probeGpu: () => ({ ok: false as const, reason: "no device here (test)" }) };

test("flashmla dcp-bench without a GPU exits 1 with one clear 'no GPU' line and nothing on stdout", async () => {
  const r = await runCommand(registerDcpBenchCommand, ["dcp-bench"], NO_GPU);
  assert.equal(r.code, 1);
  assert.equal(r.out, "");
  assert.match(r.err, /^flashmla dcp-bench: no GPU: no device here \(test\)\n/);
  assert.match(r.err, /flashmla dcp-bench needs an NVIDIA Hopper GPU/);
});

test("flashmla dcp-bench --json FILE without a GPU prints { error } on stdout, exit 1, and writes no file", async () => {
  const r = await runCommand(registerDcpBenchCommand, ["dcp-bench", "--json", "/nonexistent/flashmla-test/dcp.json"], NO_GPU);
  assert.equal(r.code, 1);
  const j = JSON.parse(r.out) as CliErrorJson;
  assert.deepEqual(j.error, { kind: "no-gpu", message: "no GPU: no device here (test)", command: "flashmla dcp-bench", exitCode: 1 });
  assert.match(r.err, /^flashmla dcp-bench: no GPU: no device here \(test\)\n/);
});

test("flashmla dcp-bench checks its command line before looking for a GPU (exit 2, one line)", async () => {
  let probed = false;
  const probeGpu = () => ((probed = true), NO_GPU.probeGpu());
  const cases: Array<[string[], RegExp]> = [
    [["--case", "dcp-lng"], /^flashmla dcp-bench: option '--case <name>' argument 'dcp-lng' is invalid\. Allowed choices are dcp-long, dcp-long-mtp, dcp-sparse \(run flashmla dcp-bench --help\)\n$/],
    [["--ranks", "1,0"], /argument '1,0' is invalid\. expected comma-separated integers >= 1, e\.g\. 1,2,4,8/],
    [["--ranks", "1,two"], /expected comma-separated integers >= 1/],
    [["--ranks", "1,,2"], /expected comma-separated integers >= 1/],
    [["--ranks", "2,4"], /expected the list to include 1, the one-rank decode the speed-up is over/],
    [["--iters", "4"], /option '--iters <n>' argument '4' is invalid\. expected an integer >= 5/],
    [["--bogus"], /^flashmla dcp-bench: unknown option '--bogus' \(run flashmla dcp-bench --help\)\n$/],
  ];
  for (const [args, message] of cases) {
    const r = await runCommand(registerDcpBenchCommand, ["dcp-bench", ...args], { probeGpu });
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.err, message, args.join(" "));
    assert.equal(r.err.split("\n").length, 2, r.err);
    assert.equal(r.out, "", args.join(" "));
  }
  // Under --json the usage error is the JSON document on stdout, a --json without its FILE too.
  for (const [args, message] of [[["--json", "r.json", "--iters", "1"], /expected an integer >= 5/], [["--json"], /^option '--json <file>' argument missing$/]] as const) {
    const j = await runCommand(registerDcpBenchCommand, ["dcp-bench", ...args], { probeGpu });
    assert.equal(j.code, 2, args.join(" "));
    const e = (JSON.parse(j.out) as CliErrorJson).error;
    assert.equal(e.kind, "usage");
    assert.equal(e.command, "flashmla dcp-bench");
    assert.match(e.message, message);
    assert.equal(j.err.split("\n").length, 2, j.err);
  }
  assert.equal(probed, false);
});

test("flashmla dcp-bench accepts every case, rank lists in any order and --iters 5, then stops at the missing GPU", async () => {
  for (const args of [[], ...DCP_BENCH_CASES.map((c) => ["--case", c.name]), ["--ranks", "8,1,2,2"], ["--ranks", " 1, 3"], ["--iters", "5"]]) {
    const r = await runCommand(registerDcpBenchCommand, ["dcp-bench", ...args], NO_GPU);
    assert.equal(r.code, 1, args.join(" "));
    assert.match(r.err, /no GPU/);
  }
});

test("flashmla dcp-bench --help shows the options, their defaults, the cases, the model and the exit codes", async () => {
  const r = await runCommand(registerDcpBenchCommand, ["dcp-bench", "--help"], NO_GPU);
  assert.equal(r.code, 0);
  // The options' column wraps with the terminal's width: compare with the white space collapsed.
  const help = r.out.replace(/\s+/g, " ");
  for (const s of [
    "--case <name>", '(choices: "dcp-long", "dcp-long-mtp", "dcp-sparse", default: "dcp-long")', "--ranks <list>", "(default: 1,2,4,8)", "--iters <n>", "(default: 40)", "--json <file>",
    "Examples:", "$ flashmla dcp-bench --case dcp-long-mtp --ranks 1,2,4 --iters 100", "dcp-long b=16 h_q=128 s_q=1 s_k=131072", "dcp-long-mtp b=16 h_q=128 s_q=2 s_k=131072 causal", "dcp-sparse b=128 h_q=128 s_q=2 s_k=32768 topk=2048 sparse FP8",
    `each costs ${DCP_COMM_MODEL.latencyUs} µs plus its bytes at ${DCP_COMM_MODEL.busGBs} GB/s bus bandwidth`, 'stdout is { "error": … }', "Exit status: 0 ok, 1 no GPU or a failure, 2 bad command line",
  ]) {
    assert.ok(help.includes(s), s);
  }
  // No line of the text after the options is wider than the other commands' (105 columns).
  for (const line of r.out.slice(r.out.indexOf("Examples:")).split("\n")) assert.ok(line.length <= 105, line);
});

const GPU: GpuEnvironment = {
  name: "NVIDIA H200", ordinal: 0, computeCapability: "9.0", smCount: 132, maxSmClockMhz: 1980,
  memoryClockMhz: 3201, memoryBusWidthBits: 6016, l2CacheBytes: 62914560, totalMemBytes: 150109880320,
  driverVersion: "580.159.04", cudaDriverVersion: "13.0",
};

function row(ranks: number, decodeUs: number, mergeUs: number | undefined, speedup: number): DcpBenchRow {
  return {
    ranks, localTokens: 131072 / ranks, decodeUs: timingStats([decodeUs]), mergeUs: mergeUs === undefined ? undefined : timingStats([mergeUs]),
    commUs: { allGather: ranks === 1 ? 0 : 12.5, reduceScatter: ranks === 1 ? 0 : 21.25 }, stepUs: decodeUs / speedup, speedup, floorUs: 100 / ranks, kvBytes: 1,
  };
}

test("the dcp-bench table has one row per rank count, the modeled columns and the line saying what is modeled", () => {
  const record = dcpBenchRecord(GPU, DCP_BENCH_CASES[0], [row(1, 1000, undefined, 1), row(2, 500, 8, 1.9)], new Date("2026-12-02T18:00:00Z"));
  const text = dcpBenchText(record, pc.createColors(false));
  assert.match(text, /^flashmla dcp-bench: dcp-long \(b=16 h_q=128 s_q=1 s_k=131072\) on NVIDIA H200 \(132 SMs, driver 580\.159\.04\)\n/);
  // The header's two lines, cell by cell.
  const headLines = text.split("\n").slice(2, 4).map((l) => l.split("│").slice(1, -1).map((cell) => cell.trim()));
  const head = headLines[0].map((top, i) => `${top} ${headLines[1][i]}`.trim());
  assert.deepEqual(head, ["ranks", "tokens/rank", "decode µs (median)", "merge µs", "comm µs all-gather (modeled)", "comm µs reduce-scatter (modeled)", "step µs", "speed-up", "floor µs"]);
  assert.ok(text.split("\n").every((l) => !/^[┌│├└]/.test(l) || l.length <= 125), text);
  assert.match(text, /│ 1 +│ 131072 +│ 1000\.0 +│ - +│ 0\.0 +│ 0\.0 +│ 1000\.0 +│ 1\.00× +│ 100\.0 +│/);
  assert.match(text, /│ 2 +│ 65536 +│ 500\.0 +│ 8\.0 +│ 12\.5 +│ 21\.3 +│ 263\.2 +│ 1\.90× +│ 50\.0 +│/);
  const last = text.trimEnd().split("\n").at(-1)!;
  assert.equal(last, "communication is modeled on one GPU (10 µs latency + bytes at 360 GB/s bus bandwidth per collective); the two-GPU run measures it");
});

test("the dcp-bench record carries the schema, the GPU, the case, the flagged comm model and the rows", () => {
  const rows = [row(1, 1000, undefined, 1)];
  const record = JSON.parse(JSON.stringify(dcpBenchRecord(GPU, DCP_BENCH_CASES[1], rows, new Date("2026-12-02T18:00:00Z"))));
  assert.deepEqual(Object.keys(record), ["schema", "createdAt", "gpu", "case", "commModel", "rows"]);
  assert.equal(record.schema, DCP_BENCH_RECORD_SCHEMA);
  assert.equal(record.schema, "flashmla-dcp-bench/1");
  assert.equal(record.createdAt, "2026-12-02T18:00:00.000Z");
  assert.deepEqual(record.gpu, GPU);
  assert.deepEqual(record.case, DCP_BENCH_CASES[1]);
  assert.deepEqual(record.commModel, { latencyUs: 10, busGBs: 360, source: "modeled, not measured" });
  assert.deepEqual(record.rows, JSON.parse(JSON.stringify(rows)));
});
