import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeKernels } from "../../../src/mla/decodeKernels.js";
import { numSmPartsSparse } from "../../../src/mla/schedule.js";
import { Device } from "../../../src/runtime/Device.js";
import { describeGpu } from "../../helpers/gpu.js";

// Crossover measured 0.81× of the plain kernel on the H200 (docs/sparse-decode.md §13). One suspect is a
// second wave: the kernel is persistent (one CTA per SM part), so every 2-CTA cluster of a launch must be
// co-resident. This asks the driver how many fit and reports it beside the launch's count.

describeGpu("crossover clusters: co-residency of a sparse-v32 launch", () => {
  test("the driver reports how many 2-CTA crossover clusters fit; the launch's clusters are quoted beside", (t) => {
    const device = Device.get(0);
    const k = decodeKernels(0);
    const s_q = 2, h_q = 128;
    const parts = numSmPartsSparse(device.smCount, s_q, h_q);
    const clusters = (2 * s_q * parts) / 2;
    for (const [name, kernel] of [["crossover_v2", k.sparseCrossoverV2Bf16], ["crossover_v1", k.sparseCrossoverBf16]] as const) {
      const fit = kernel.maxActiveClusters({ grid: [2, s_q, parts], block: 384, sharedMemBytes: k.sparseSmemBytes, cluster: [2, 1, 1] });
      t.diagnostic(`${name}: ${fit ?? "unknown"} clusters of 2 CTAs fit at once on ${device.name} (${device.smCount} SMs); a sparse-v32 launch has ${clusters}`);
      assert.ok(fit === undefined || fit > 0, `${name}: no cluster fits (${fit})`);
    }
  });
});
