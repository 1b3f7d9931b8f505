import { test } from "node:test";
import assert from "node:assert/strict";
import { MIN_NVML_SAMPLES, summarizeNvmlSamples } from "../../../src/bench/summarizeNvmlSamples.js";

test("summarizeNvmlSamples() gives the median clock and power and the union of the reasons seen", () => {
  const s = summarizeNvmlSamples([
    { smClockMhz: 1740, powerW: 690.2, reasons: 0x4n },
    { smClockMhz: 1710, powerW: 700.0, reasons: 0x0n },
    { smClockMhz: 1980, powerW: 650.5, reasons: 0x4n | 0x80n },
    { smClockMhz: 1725, powerW: 695.0, reasons: 0x4n },
  ]);
  assert.deepEqual(s, { samples: 4, smClockMhz: 1732.5, powerW: 692.6, clockReasons: ["sw-power-cap", "hw-power-brake"] });
});

test("summarizeNvmlSamples() gives nothing for fewer than 3 samples (a run too short to sample)", () => {
  assert.equal(MIN_NVML_SAMPLES, 3);
  assert.equal(summarizeNvmlSamples([]), undefined);
  assert.equal(summarizeNvmlSamples([{ smClockMhz: 1700 }, { smClockMhz: 1710 }]), undefined);
  assert.deepEqual(summarizeNvmlSamples([{ smClockMhz: 1700 }, { smClockMhz: 1710 }, { smClockMhz: 1705 }]), { samples: 3, smClockMhz: 1705 });
});

test("summarizeNvmlSamples() takes power and reasons from the samples that have them, and [] when no reason was set", () => {
  const s = summarizeNvmlSamples([{ smClockMhz: 1980, reasons: 0n }, { smClockMhz: 1980, powerW: 400 }, { smClockMhz: 1965, reasons: 0n }]);
  assert.deepEqual(s, { samples: 3, smClockMhz: 1980, powerW: 400, clockReasons: [] });
});
