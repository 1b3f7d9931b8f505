import { after, test } from "node:test";
import assert from "node:assert/strict";
import { benchRecord, ceilingsLine, recordRoofs } from "../../../src/bench/benchRecord.js";
import { benchRooflineSvg } from "../../../src/bench/benchRooflineSvg.js";
import { benchTable } from "../../../src/bench/benchTable.js";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { CeilingsCache, type CeilingsRecord } from "../../../src/bench/CeilingsCache.js";
import type { GpuEnvironment } from "../../../src/bench/gpuEnvironment.js";
import { HEADLINE_CASES } from "../../../src/bench/headlineCases.js";
import { benchCaseByName } from "../../../src/bench/cases.js";
import { timingStats } from "../../../src/bench/timingStats.js";
import { registerStartCommand } from "../../../src/cli/commands/start.js";
import { ridgePoint } from "../../../src/roofline/roofline.js";
import { timedResult } from "../bench/fakeBenchResults.js";
import { runCommand, runRoofline as roofline } from "./runCommand.js";

const NO_GPU = { probeGpu: () => ({ ok: false as const, reason: "no device here (test)" }) };

// What one bench run on an H200 measured and cached: not the table's 767 TFLOPS and 4138 GB/s.
const MEASURED: CeilingsRecord = {
  gpuName: "NVIDIA H200",
  driverVersion: "580.159.04",
  measuredAt: "2026-12-02T17:39:06.119Z",
  gemmTflops: 876.2,
  readGbPerS: 4579.4,
  copyGbPerS: 3909.2,
  detail: { copyBytes: 2, readBytes: 1, wgmmaFlop: 1, copyUs: timingStats([1]), readUs: timingStats([1]), wgmmaUs: timingStats([1]) },
};
// The file a bench or ceilings run on that machine leaves behind.
const CACHE_DIR = mkdtempSync(path.join(os.tmpdir(), "flashmla-one-answer-"));
const CACHE = new CeilingsCache(path.join(CACHE_DIR, "ceilings.json"));
CACHE.put(MEASURED);
after(() => rmSync(CACHE_DIR, { recursive: true, force: true }));
const MEASURED_ROOFS = { tflops: MEASURED.gemmTflops, gbPerS: MEASURED.readGbPerS };

const GPU: GpuEnvironment = {
  name: "NVIDIA H200", ordinal: 0, computeCapability: "9.0", smCount: 132, maxSmClockMhz: 1980, smClockMhzNow: 1980,
  memoryClockMhz: 3201, memoryBusWidthBits: 6016, l2CacheBytes: 62914560, totalMemBytes: 150109880320,
  driverVersion: "580.159.04", cudaDriverVersion: "13.0",
};

/** A bench record as runBench() builds it from the cached ceilings above. */
function fakeRecord() {
  const reference = { label: "measured" as const, tflops: MEASURED.gemmTflops, gbPerS: MEASURED.readGbPerS, ridge: ridgePoint(MEASURED.gemmTflops, MEASURED.readGbPerS) };
  return benchRecord({
    gpu: GPU,
    commit: { commit: "0123456789abcdef0123456789abcdef01234567", dirty: false },
    kernel: "dense_pipe_bf16 + dense_fast_bf16",
    ceilings: MEASURED,
    ceilingsSource: "cache",
    reference,
    datasheet: { tflops: 989.4, gbPerS: 4800 },
    iters: 40,
    seed: 1,
    results: [timedResult("dense-compute", 446, MEASURED_ROOFS), timedResult("dense-b1", 33.1, MEASURED_ROOFS)],
    createdAt: new Date("2026-12-02T18:00:00Z"),
  });
}

function svgRoofs(svg: string): Array<{ label: string; tflops: number; gbPerS: number }> {
  return [...svg.matchAll(/<g class="roof" data-label="([^"]+)" data-tflops="([^"]+)" data-gbps="([^"]+)"/g)].map((m) => ({ label: m[1], tflops: Number(m[2]), gbPerS: Number(m[3]) }));
}

test("a bench run's plot, its ceilings line and flashmla roofline on that machine show the same measured roofs", async () => {
  const record = fakeRecord();
  const roofs = svgRoofs(benchRooflineSvg(record));
  const { reference, datasheet } = recordRoofs(record);
  assert.deepEqual(roofs, [
    { label: "datasheet", tflops: datasheet!.tflops, gbPerS: datasheet!.gbPerS },
    { label: "measured", tflops: 876.2, gbPerS: 4579.4 },
  ]);
  assert.equal(reference.tflops, 876.2);
  // The line above the bench table.
  const line = ceilingsLine(record);
  assert.match(line, /^ceilings \(cached, measured 2026-12-02T17:39:06\.119Z\): 876 TFLOPS bf16, 4579 GB\/s read, 3909 GB\/s copy; ridge 191\.3 FLOP\/B; datasheet 989 TFLOPS, 4800 GB\/s$/);
  // The plot's label of the same roof.
  assert.match(benchRooflineSvg(record), />measured: 876 TFLOPS, 4579 GB\/s</);
  // flashmla roofline and start (no GPU) on the machine that cached those ceilings: the same roofs,
  // not the table's 767 / 4138.
  const r = await roofline(["--case", "dense-compute"], { cache: CACHE });
  assert.match(r.out, /measured +│ 876 +│ 4579 +│ 191\.3 /);
  assert.doesNotMatch(r.out, /767|4138/);
  const start = await runCommand(registerStartCommand, ["start"], { ...NO_GPU, cache: CACHE });
  assert.match(start.out, /\(measured roofs 876 TFLOPS, 4579 GB\/s; ridge 191\.3 FLOP\/B\)/);
  const startJson = JSON.parse((await runCommand(registerStartCommand, ["start", "--json"], { ...NO_GPU, cache: CACHE })).out);
  assert.equal(startJson.roofline.roofs.tflops, 876.2);
  assert.equal(startJson.roofline.roofs.gbPerS, 4579.4);
});

test("the bench table's % ceil and bound, the record and the plot quote the same roofs", () => {
  const record = fakeRecord();
  const dc = record.results.find((r) => r.case === "dense-compute")!;
  assert.equal(dc.percentOfCeiling, (100 * dc.tflops!) / recordRoofs(record).reference.tflops);
  const table = benchTable([timedResult("dense-compute", 446, MEASURED_ROOFS), timedResult("dense-b1", 33.1, MEASURED_ROOFS)]);
  assert.match(table, new RegExp(`│ dense-compute .*│ ${dc.percentOfCeiling!.toFixed(1)} +│ ${dc.bound} +│`));
  assert.match(table, /│ dense-b1 .*│ compute +│/);
  // The plot colours each point by the bound the table prints (compute: orange).
  assert.match(benchRooflineSvg(record), /class="point measured" data-case="dense-b1"[^>]*fill="#d95f02"/);
});

test("npm start's table and flashmla roofline --case give every headline case the same bound, dense-b1 included", async () => {
  const start = JSON.parse((await runCommand(registerStartCommand, ["start", "--json"], NO_GPU)).out);
  const text = (await runCommand(registerStartCommand, ["start"], NO_GPU)).out;
  assert.deepEqual(start.roofline.cases.map((c: { case: string }) => c.case), [...HEADLINE_CASES]);
  for (const name of HEADLINE_CASES) {
    const r = JSON.parse((await roofline(["--case", name, "--json"])).out);
    const row = start.roofline.cases.find((c: { case: string }) => c.case === name);
    assert.equal(row.bound, r.bound, name);
    assert.equal(row.idealUs, r.ceilings.find((c: { label: string }) => c.label === r.reference).idealUs, name);
    assert.match(text, new RegExp(`│ ${name} +│ ${row.kernel} +│[^\\n]*│ ${r.bound} +│`), name);
  }
  assert.equal(start.roofline.cases.find((c: { case: string }) => c.case === "dense-b1").bound, "compute");
  // Under roofs with a ridge past its ≈ 240 FLOP/B, both say memory.
  const b1 = JSON.parse((await roofline(["--case", "dense-b1", "--json", "--gbps", "3000"])).out);
  assert.equal(b1.bound, "memory");
  assert.ok(benchCaseByName("dense-b1") !== undefined);
});
