import { test } from "node:test";
import assert from "node:assert/strict";
import { bf16ArrayToF32, f32ArrayToBf16 } from "../../../src/numeric/bf16.js";
import { assertClose } from "../../../src/numeric/compare.js";
import { config } from "../../../src/config.js";
import { D_QK, D_V } from "../../../src/mla/contract/shape.js";
import { Rng } from "../../../src/numeric/random.js";
import { Module } from "../../../src/runtime/Module.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";

// The primitives of the heads-as-N designs (the sparse h16x consumers are built on them), written without a GPU:
// wgmma m64n16k16 with the K tiles as A (Sᵀ = K·Qᵀ), a Pᵀ tile stored with stmatrix .trans, and wgmma
// m64n16k16 reading the same K tiles transposed as A (Oᵀ = Vᵀ·Pᵀ). Each against float64 on the host.

const TOKENS = 64, HEADS = 16;
// sizeof(ProbeSmem) (three 1024-B aligned arrays: 73,728 + 18,432 + 2,048 B) + 1024 for the alignment.
const SMEM_BYTES = 73728 + 18432 + 2048 + 1024;

describeGpu("wgmma primitives of the transposed 16-head design", () => {
  test("Sᵀ = K·Qᵀ (m64n16k16), the Pᵀ tile (stmatrix .trans) and Oᵀ = Vᵀ·Pᵀ (m64n16k16, A read transposed) match the host", () => {
    const rng = new Rng(2024);
    const k = f32ArrayToBf16(Float32Array.from({ length: TOKENS * D_QK }, () => rng.normal()));
    const q = f32ArrayToBf16(Float32Array.from({ length: HEADS * D_QK }, () => rng.normal()));
    const p = Float32Array.from({ length: TOKENS * HEADS }, () => rng.uniform());
    const kf = bf16ArrayToF32(k), qf = bf16ArrayToF32(q), pb = bf16ArrayToF32(f32ArrayToBf16(p));
    const tensors = [
      Tensor.toDevice(Tensor.fromHost(k, [TOKENS, D_QK], "bf16")),
      Tensor.toDevice(Tensor.fromHost(q, [HEADS, D_QK], "bf16")),
      Tensor.toDevice(Tensor.fromHost(p, [TOKENS, HEADS], "f32")),
      Tensor.emptyDevice([TOKENS, HEADS], "f32"),
      Tensor.emptyDevice([D_V, HEADS], "f32"),
      Tensor.emptyDevice([HEADS, TOKENS], "bf16"),
    ];
    const mod = Module.load("wgmma_probe_sm90", { kernelDir: config.testKernelDir });
    try {
      const kernel = mod.getFunction("mla_wgmma_probe_h16");
      kernel.maxDynamicSharedMemory = SMEM_BYTES;
      kernel.launch({ grid: 1, block: 128, sharedMemBytes: SMEM_BYTES }, tensors.map((t) => ({ kind: "ptr" as const, value: t.ptr })));
      const [, , , sOut, oOut, ptOut] = tensors;

      const sRef = new Float64Array(TOKENS * HEADS);
      for (let t = 0; t < TOKENS; t++)
        for (let h = 0; h < HEADS; h++) {
          let acc = 0;
          for (let d = 0; d < D_QK; d++) acc += kf[t * D_QK + d] * qf[h * D_QK + d];
          sRef[t * HEADS + h] = acc;
        }
      assertClose(sOut.toHost().host as Float32Array, sRef, { abs: 1e-3, rel: 1e-4 }, { shape: [TOKENS, HEADS], name: "Sᵀ = K·Qᵀ" });

      const pt = ptOut.toHost().host as Uint16Array, ptWant = f32ArrayToBf16(p);
      const bad: string[] = [];
      for (let h = 0; h < HEADS; h++)
        for (let t = 0; t < TOKENS; t++)
          if (pt[h * TOKENS + t] !== ptWant[t * HEADS + h] && bad.length < 6) bad.push(`[head ${h}, token ${t}]: 0x${pt[h * TOKENS + t].toString(16)}, expected 0x${ptWant[t * HEADS + h].toString(16)}`);
      assert.deepEqual(bad, [], `Pᵀ tile: ${bad.join("; ")}`);

      const oRef = new Float64Array(D_V * HEADS);
      for (let d = 0; d < D_V; d++)
        for (let h = 0; h < HEADS; h++) {
          let acc = 0;
          for (let t = 0; t < TOKENS; t++) acc += kf[t * D_QK + d] * pb[t * HEADS + h];
          oRef[d * HEADS + h] = acc;
        }
      assertClose(oOut.toHost().host as Float32Array, oRef, { abs: 1e-3, rel: 1e-4 }, { shape: [D_V, HEADS], name: "Oᵀ = Vᵀ·Pᵀ" });
    } finally {
      for (const t of tensors) t.dispose();
      mod.dispose();
    }
  });
});
