import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { GPUS, getGpuSpec, gpuCeilings, gpuSpecFromName, mmaFlopPerClockPerSm, referenceCeiling } from "../../../src/roofline/gpus.js";

test("gpuSpecFromName() maps driver names to the table", () => {
  assert.equal(gpuSpecFromName("NVIDIA H200")?.key, "h200");
  assert.equal(gpuSpecFromName("NVIDIA H100 80GB HBM3")?.key, "h100");
  assert.equal(gpuSpecFromName("NVIDIA H800")?.key, "h800");
  assert.equal(gpuSpecFromName("  H200 ")?.key, "h200");
  assert.equal(gpuSpecFromName("h800")?.key, "h800");
});

test("gpuSpecFromName() refuses boards whose figures differ from the SXM table", () => {
  assert.equal(gpuSpecFromName("NVIDIA GH200 480GB"), undefined);
  assert.equal(gpuSpecFromName("NVIDIA H100 PCIe"), undefined);
  assert.equal(gpuSpecFromName("NVIDIA H200 NVL"), undefined);
  assert.equal(gpuSpecFromName("NVIDIA A100-SXM4-80GB"), undefined);
  assert.equal(gpuSpecFromName(""), undefined);
});

test("mmaFlopPerClockPerSm() gives the seed's 4096 for 989 TFLOPS / 1830 MHz / 132 SMs", () => {
  // The seed's own rounding: 989e12 / 1830e6 / 132 = 4094.2.
  assert.ok(Math.abs(mmaFlopPerClockPerSm({ datasheetTflops: 989, peakClockMhz: 1830, sms: 132 }) / 4096 - 1) < 1e-3);
  for (const spec of Object.values(GPUS)) {
    assert.ok(Math.abs(mmaFlopPerClockPerSm(spec) - 4096) < 0.5, spec.key);
  }
});

test("GPUS.h800 practical peak is 4096 FLOP/clk/SM at the throttled 1600 MHz", () => {
  const p = GPUS.h800.practical;
  assert.ok(p !== undefined);
  assert.equal(p.clockMhz, 1600);
  assert.equal(p.tflops, 865);
  assert.ok(Math.abs((4096 * 132 * 1600e6) / 1e12 - p.tflops) < 0.5);
});

test("gpuCeilings() gives the H200 ridges: 206 datasheet, 185 measured", () => {
  const roofs = gpuCeilings(GPUS.h200);
  assert.deepEqual(roofs.map((r) => r.label), ["datasheet", "measured"]);
  assert.equal(Math.round(roofs[0].ridge), 206);
  assert.equal(roofs[1].tflops, 767);
  assert.equal(roofs[1].gbPerS, 4138); // decode reads, so the read stream, not the copy
  assert.equal(Math.round(roofs[1].ridge), 185);
});

test("gpuCeilings() gives the seed's H800 ridge 865 / 3.35 ≈ 258", () => {
  const roofs = gpuCeilings(GPUS.h800);
  assert.deepEqual(roofs.map((r) => r.label), ["datasheet", "practical"]);
  assert.equal(Math.round(roofs[1].ridge), 258);
});

test("referenceCeiling() prefers measured, then practical, then datasheet", () => {
  assert.equal(referenceCeiling(GPUS.h200).label, "measured");
  assert.equal(referenceCeiling(GPUS.h800).label, "practical");
  assert.equal(referenceCeiling(GPUS.h100).label, "datasheet");
  assert.equal(referenceCeiling(GPUS.h100).gbPerS, 3350);
});

test("getGpuSpec() lays measured ceilings over the table's and leaves the table alone", () => {
  // FlashMLA's anchor run measured 795 TFLOPS and 4259 GB/s copy on its H200.
  const spec = getGpuSpec("h200", { gemmTflops: 795, copyGbPerS: 4259 });
  assert.equal(spec.measured?.gemmTflops, 795);
  assert.equal(spec.measured?.copyGbPerS, 4259);
  assert.equal(spec.measured?.readGbPerS, 4138);
  assert.equal(GPUS.h200.measured?.gemmTflops, 767);
  // A GPU with no table measurements gets a measured roof once one half is known.
  const h100 = getGpuSpec("h100", { readGbPerS: 3000 });
  assert.deepEqual(gpuCeilings(h100).map((r) => [r.label, r.tflops, r.gbPerS]), [
    ["datasheet", 989.4, 3350],
    ["measured", 989.4, 3000],
  ]);
});

test("getGpuSpec() rejects an unknown key and a non-positive measurement", () => {
  assert.throws(() => getGpuSpec("a100"), (e: unknown) => {
    assert.ok(e instanceof ArgumentError);
    assert.equal(e.message, `getGpuSpec(): argument 'key': expected one of h200, h100, h800, got "a100"`);
    return true;
  });
  assert.throws(() => getGpuSpec("h200", { gemmTflops: -1 }), /argument 'measured.gemmTflops': expected a positive finite number, got -1/);
});
