import { test } from "node:test";
import assert from "node:assert/strict";
import { loadKernel } from "../../../src/mla/contract/kernelRegistry.js";
import { chooseSparseKernel, type SparsePlan } from "../../../src/mla/sparse/chooseSparseKernel.js";
import { numSmPartsSparse } from "../../../src/mla/sched/schedule.js";
import { Device } from "../../../src/runtime/Device.js";
import { decodeWithOverrides, flashMlaWithKvcache } from "../../../src/mla/flashMlaWithKvcache.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { mlaSparseReferenceGpu } from "../../../src/mla/reference/mlaSparseReferenceGpu.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { assertClose, SPARSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { uploadSparseCase } from "../../../src/testing/gpuSparseCase.js";
import type { SparseCaseOptions } from "../../../src/testing/sparseCase.js";
import { describeGpu } from "../../helpers/gpu.js";
import { checkSparseAgainstCpu as check, sparseBits } from "../../helpers/sparseCheck.js";

/** The 64-row consumer (m64, which runs every head count) and, where it differs, the plan the API picks. */
function checkM64AndApi(opts: SparseCaseOptions, sampleRows = 0): void {
  const plans: SparsePlan[] = ["m64"];
  if (chooseSparseKernel(opts.h_q) !== "m64") plans.push(chooseSparseKernel(opts.h_q));
  for (const plan of plans) check(opts, sampleRows, plan);
}

describeGpu("sparse FP8 decode on the GPU", () => {
  test("matches the CPU reference on FlashMLA's sparse grid shapes (d_qk 576), small b", () => {
    let n = 0;
    for (const h_q of [64, 128]) for (const [s_k, topk, pageBlockSize] of [[512, 64, 2], [512, 64, 64], [512, 64, 69], [1024, 576, 2], [1024, 576, 61], [2046, 2048, 64]] as const) for (const s_q of [1, 3]) {
      checkM64AndApi({ seed: 300 + n, b: 4, s_q, h_q, s_k, topk, pageBlockSize, varlen: true, sink: n % 2 === 0, topkLength: n % 3 === 0 }, topk > 576 ? 24 : 0);
      n++;
    }
  });

  test("runs 8, 16 and 32 heads natively", () => {
    for (const [i, h_q] of [8, 16, 32].entries()) checkM64AndApi({ seed: 400 + i, b: 3, s_q: 2, h_q, s_k: 700, topk: 200, pageBlockSize: 64, sink: true });
  });

  test("handles invalid, repeated and out-of-range indices, topk not a multiple of 64, all-invalid rows and ±inf sinks", () => {
    checkM64AndApi({ seed: 500, b: 4, s_q: 3, h_q: 64, s_k: 300, topk: 100, pageBlockSize: 61, invalidFraction: 0.3, repeat: 0.2, sink: true });
    checkM64AndApi({ seed: 501, b: 4, s_q: 2, h_q: 128, s_k: 90, topk: 130, pageBlockSize: 2, invalidFraction: 1, sink: true });
    checkM64AndApi({ seed: 502, b: 5, s_q: 1, h_q: 64, s_k: 1000, topk: 1, pageBlockSize: 64, topkLength: true });
    checkM64AndApi({ seed: 503, b: 2, s_q: 2, h_q: 128, s_k: 400, topk: 333, pageBlockSize: 53, blockPadTokens: 3, repeat: 0.5 });
  });

  test("splits a long top-k list over many parts (b = 1) and merges it in the combine", () => {
    checkM64AndApi({ seed: 600, b: 1, s_q: 2, h_q: 128, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true }, 16);
  });

  test("m64 matches the CPU reference, every element, at 16, 64 and 128 heads", () => {
    check({ seed: 1100, b: 3, s_q: 2, h_q: 16, s_k: 700, topk: 200, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true }, 0, "m64");
    check({ seed: 1101, b: 2, s_q: 2, h_q: 64, s_k: 900, topk: 300, pageBlockSize: 69, sink: true, invalidFraction: 0.1, repeat: 0.2 }, 0, "m64");
    check({ seed: 1102, b: 2, s_q: 1, h_q: 128, s_k: 1500, topk: 700, pageBlockSize: 64, sink: true, topkLength: true, blockPadTokens: 3 }, 0, "m64");
  });

  test("h128x (h_q = 128, clusters of two CTAs sharing the dequantization) matches the CPU reference", () => {
    let n = 0;
    for (const [s_k, topk, pageBlockSize] of [[512, 64, 2], [1024, 576, 61], [2046, 2048, 64]] as const) for (const s_q of [1, 3]) {
      check({ seed: 800 + n, b: 4, s_q, h_q: 128, s_k, topk, pageBlockSize, varlen: true, sink: true, invalidFraction: 0.1, topkLength: n % 2 === 0 }, topk > 576 ? 24 : 0, "h128x");
      n++;
    }
    check({ seed: 850, b: 1, s_q: 2, h_q: 128, s_k: 40000, topk: 16384, pageBlockSize: 64 }, 16, "h128x");
    // Every element, s_q 1 and 3, top-k lengths, invalid and repeated ids.
    check({ seed: 1200, b: 3, s_q: 1, h_q: 128, s_k: 700, topk: 200, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true }, 0, "h128x");
    check({ seed: 1201, b: 2, s_q: 3, h_q: 128, s_k: 1500, topk: 640, pageBlockSize: 64, sink: true, invalidFraction: 0.1, repeat: 0.2 }, 0, "h128x");
    check({ seed: 1202, b: 4, s_q: 2, h_q: 128, s_k: 512, topk: 64, pageBlockSize: 2, varlen: true, topkLength: true }, 0, "h128x");
  });

  test("h128x gives bit-identical outputs to m64 (dequantization is deterministic), a long list split over many parts included", () => {
    for (const opts of [
      { seed: 900, b: 5, s_q: 2, h_q: 128, s_k: 3000, topk: 640, pageBlockSize: 64, sink: true, invalidFraction: 0.05 },
      { seed: 1203, b: 1, s_q: 2, h_q: 128, s_k: 40000, topk: 16384, pageBlockSize: 64, sink: true, invalidFraction: 0.05 },
    ]) {
      const u = uploadSparseCase(opts);
      try {
        const plain = sparseBits(u, { sparsePlan: "m64" });
        const xo = sparseBits(u, { sparsePlan: "h128x" });
        assert.deepEqual(xo.out, plain.out, `out differs (seed ${opts.seed})`);
        assert.deepEqual(xo.lse, plain.lse, `lse differs (seed ${opts.seed})`);
      } finally {
        u.dispose();
      }
    }
  });

  test("the fp32 GPU sparse reference agrees with the float64 CPU reference, and m64 and h128x agree with it on every element of a large case", () => {
    for (const [i, opts] of ([
      { seed: 950, b: 3, s_q: 2, h_q: 16, s_k: 500, topk: 100, pageBlockSize: 61, sink: true, invalidFraction: 0.2, topkLength: true },
      { seed: 951, b: 2, s_q: 1, h_q: 128, s_k: 2000, topk: 640, pageBlockSize: 64, repeat: 0.3 },
    ] as SparseCaseOptions[]).entries()) {
      const u = uploadSparseCase(opts);
      const ref = mlaSparseReferenceGpu(u.args);
      try {
        const cpu = mlaDecodeReference({ ...u.c });
        assertClose(ref.out.toHost().host as Float32Array, cpu.outF32, { abs: 1e-5, rel: 1e-4, cos: 1e-9 }, { name: `fp32 sparse reference out (case ${i})` });
        assertClose(ref.lse.toHost().host as Float32Array, cpu.lse.host as Float32Array, { abs: 1e-5, rel: 1e-6 }, { name: `fp32 sparse reference lse (case ${i})` });
      } finally {
        ref.out.dispose(); ref.lse.dispose();
        u.dispose();
      }
    }
    // A large case: every element of each plan's output against the fp32 GPU reference.
    const u = uploadSparseCase({ seed: 960, b: 16, s_q: 2, h_q: 128, s_k: 8192, topk: 2048, pageBlockSize: 64, sink: true, invalidFraction: 0.02 });
    try {
      const ref = mlaSparseReferenceGpu(u.args);
      for (const sparsePlan of ["m64", "h128x"] as const) {
        const m2 = getMlaMetadata();
        const got = decodeWithOverrides({ ...u.args, schedMeta: m2 }, { sparsePlan });
        assertClose(bf16ArrayToF32(got.out.toHost().host as Uint16Array), ref.out.toHost().host as Float32Array, SPARSE_OUT_TOL, { shape: [16, 2, 128, 512], name: `out vs fp32 GPU reference (${sparsePlan})`, roundReferenceTo: "bf16" });
        assertClose(got.lse.toHost().host as Float32Array, ref.lse.toHost().host as Float32Array, { abs: 1e-5, rel: 8.01 / 65536 }, { name: `lse vs fp32 GPU reference (${sparsePlan})` });
        got.out.dispose(); got.lse.dispose(); m2.dispose();
      }
      ref.out.dispose(); ref.lse.dispose();
    } finally {
      u.dispose();
    }
  });

  test("gives bit-identical outputs from run to run (m64 and the API's h128x)", () => {
    const u = uploadSparseCase({ seed: 700, b: 6, s_q: 2, h_q: 128, s_k: 5000, topk: 2048, pageBlockSize: 64, sink: true });
    try {
      for (const sparsePlan of ["m64", undefined] as const) {
        const meta = getMlaMetadata();
        try {
          const first = decodeWithOverrides({ ...u.args, schedMeta: meta }, { sparsePlan });
          const o1 = first.out.toHost().host;
          for (let k = 0; k < 3; k++) {
            const again = sparsePlan === undefined ? flashMlaWithKvcache({ ...u.args, schedMeta: meta }) : decodeWithOverrides({ ...u.args, schedMeta: meta }, { sparsePlan });
            assert.deepEqual(again.out.toHost().host, o1, `${sparsePlan ?? "API"}: run ${k + 2} differs`);
            again.out.dispose();
            again.lse.dispose();
          }
          first.out.dispose();
          first.lse.dispose();
        } finally {
          meta.dispose();
        }
      }
    } finally {
      u.dispose();
    }
  });

  // The main kernels are persistent (one CTA per SM part): every 2-CTA cluster of a launch must be
  // co-resident, or a second wave doubles the time.
  test("the driver fits h128x's 2-CTA clusters: a sparse-v32 launch's clusters are quoted beside", (t) => {
    const device = Device.get(0);
    const k = loadKernel(0, "sparse_h128x_bf16");
    const s_q = 2, h_q = 128;
    const parts = numSmPartsSparse(device.smCount, s_q, h_q);
    const fit = k.kernel.maxActiveClusters({ grid: [2, s_q, parts], block: k.row.threads, sharedMemBytes: k.smemBytes, cluster: [2, 1, 1] });
    t.diagnostic(`${fit ?? "unknown"} clusters of 2 CTAs fit at once on ${device.name} (${device.smCount} SMs); a sparse-v32 launch has ${s_q * parts}`);
    assert.ok(fit === undefined || fit > 0, `no cluster fits (${fit})`);
  });
});
