import { test } from "node:test";
import assert from "node:assert/strict";
import { loadKernel } from "../../../src/mla/contract/kernelRegistry.js";
import { f32ToBf16Bits } from "../../../src/numeric/bf16.js";
import { fp8E4m3ToF32 } from "../../../src/numeric/fp8e4m3.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";

// The V32 tile scales are powers of two; these span tiny to large ones (the product stays a bf16 normal
// or subnormal, never past its range: e4m3's largest value is 448).
const SCALES = [2 ** -40, 2 ** -20, 2 ** -7, 0.5, 1, 2 ** 5, 2 ** 7, 2 ** 8, 2 ** 10, 2 ** 30];

describeGpu("sparse kernels' FP8 dequantization on the GPU", () => {
  test("every e4m3 code times every tile scale gives the exact bf16 of the product (NaN codes give NaN)", () => {
    const codes = new Uint8Array(256 * SCALES.length);
    for (let i = 0; i < codes.length; i++) codes[i] = i % 256;
    const chunks = codes.length / 16;
    const raw = Tensor.toDevice(Tensor.fromHost(codes, [codes.length], "u8"));
    const scales = Tensor.toDevice(Tensor.fromHost(Float32Array.from(SCALES), [SCALES.length], "f32"));
    const out = Tensor.emptyDevice([codes.length], "bf16");
    try {
      const selftest = loadKernel(0, "dequant_selftest");
      selftest.kernel.launch({ grid: Math.ceil(chunks / selftest.row.threads), block: selftest.row.threads }, [
        { kind: "ptr", value: raw.ptr }, { kind: "ptr", value: scales.ptr }, { kind: "ptr", value: out.ptr }, { kind: "i32", value: chunks },
      ]);
      const got = out.toHost().host as Uint16Array;
      const bad: string[] = [];
      for (let i = 0; i < codes.length; i++) {
        const scale = SCALES[Math.floor(i / 256)];
        const v = fp8E4m3ToF32(codes[i]) * scale;
        const isNan = (got[i] & 0x7f80) === 0x7f80 && (got[i] & 0x7f) !== 0;
        const ok = Number.isNaN(v) ? isNan : got[i] === f32ToBf16Bits(v);
        if (!ok && bad.length < 8) bad.push(`code 0x${codes[i].toString(16)} x ${scale}: got 0x${got[i].toString(16)}, expected ${Number.isNaN(v) ? "NaN" : `0x${f32ToBf16Bits(v).toString(16)}`}`);
      }
      assert.deepEqual(bad, [], bad.join("; "));
    } finally {
      raw.dispose();
      scales.dispose();
      out.dispose();
    }
  });
});
