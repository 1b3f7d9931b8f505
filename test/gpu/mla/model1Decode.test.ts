import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { decodeWithOverrides, flashMlaWithKvcache } from "../../../src/mla/flashMlaWithKvcache.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { mlaSparseReferenceGpu } from "../../../src/mla/reference/mlaSparseReferenceGpu.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { assertClose, SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { makeModel1Case, type Model1CaseOptions } from "../../../src/testing/model1Case.js";
import { uploadSparseCase } from "../../../src/testing/gpuSparseCase.js";
import { describeGpu } from "../../helpers/gpu.js";
import { checkModel1AgainstCpu as check, uploadModel1Case as uploadCase } from "../../helpers/model1Check.js";

/** m64 (every head count) and, where the API picks another plan (h128x at 128 heads, h16x at 16 or fewer), that one. */
function checkPlans(opts: Model1CaseOptions, sampleRows = 0): void {
  check(opts, sampleRows, "m64");
  if (opts.h_q === 128 || opts.h_q <= 16) check(opts, sampleRows);
}

describeGpu("DeepSeek-V4 (MODEL1) sparse decode on the GPU", () => {
  test("matches the CPU reference on FlashMLA's MODEL1 grid: page sizes, extra caches, valid lengths, sinks (h_q 64 and 128)", () => {
    let n = 0;
    // [s_k, topk, page] of the main cache, then the extra cache (or none) and whether it has valid lengths.
    const grid = [
      [[512, 128, 256], undefined],
      [[512, 128, 2], undefined],
      [[600, 100, 64], [[700, 192, 64], false]],
      [[512, 128, 256], [[900, 256, 2], true]],
      [[300, 64, 2], [[300, 64, 64], true]],
      [[1200, 1024, 64], [[400, 130, 61], false]],
    ] as const;
    for (const h_q of [64, 128]) for (const [[s_k, topk, pageBlockSize], extra] of grid) for (const s_q of [1, 2]) {
      const e = extra === undefined ? undefined : { s_k: extra[0][0], topk: extra[0][1], pageBlockSize: extra[0][2], topkLengthRandom: extra[1] };
      checkPlans({ seed: 700 + n, b: 3, s_q, h_q, s_k, topk, pageBlockSize, extra: e, sink: n % 2 === 0, topkLength: n % 3 === 0 }, topk >= 1024 ? 32 : 0);
      n++;
    }
  });

  test("runs 8, 16 and 32 heads natively (V4-Pro under tensor parallelism)", () => {
    for (const [i, h_q] of [8, 16, 32].entries()) {
      checkPlans({ seed: 800 + i, b: 3, s_q: 2, h_q, s_k: 700, topk: 200, pageBlockSize: 64, extra: { s_k: 300, topk: 96, pageBlockSize: 2, topkLengthRandom: true }, sink: true });
    }
  });

  test("handles invalid and repeated indices, empty lists and NaN-poisoned unreferenced tokens", () => {
    checkPlans({ seed: 900, b: 4, s_q: 2, h_q: 64, s_k: 300, topk: 100, pageBlockSize: 61, invalidFraction: 0.3, repeat: 0.2, sink: true, extra: { s_k: 200, topk: 70, pageBlockSize: 2 } });
    checkPlans({ seed: 901, b: 4, s_q: 2, h_q: 128, s_k: 90, topk: 130, pageBlockSize: 2, invalidFraction: 1, sink: true, extra: { s_k: 90, topk: 64, pageBlockSize: 64, topkLengthRandom: true } });
    // topkLength 0 and extraTopkLength 0 in some requests (drawn from U[0, topk]) with few entries.
    checkPlans({ seed: 902, b: 16, s_q: 1, h_q: 64, s_k: 40, topk: 3, pageBlockSize: 2, topkLength: true, extra: { s_k: 40, topk: 2, pageBlockSize: 2, topkLengthRandom: true } });
  });

  test("splits long walks across SM parts (both lists of one request in several pieces) and merges them", () => {
    checkPlans({ seed: 950, b: 2, s_q: 2, h_q: 128, s_k: 20000, topk: 8192, pageBlockSize: 64, extra: { s_k: 4000, topk: 1024, pageBlockSize: 2 }, sink: true }, 24);
    checkPlans({ seed: 951, b: 1, s_q: 1, h_q: 64, s_k: 40000, topk: 16384, pageBlockSize: 256 }, 24);
  });

  test("matches the reference at FlashMLA's v4-cfg3 shape (b 128, s_q 2, 64 heads, extra cache with page size 2), sampled rows", () => {
    checkPlans({ seed: 960, b: 128, s_q: 2, h_q: 64, s_k: 16384, topk: 128, pageBlockSize: 256, extra: { s_k: 16384, topk: 1024, pageBlockSize: 2, topkLengthRandom: true }, sink: true }, 48);
  });
});

describeGpu("the fp32 GPU reference over MODEL1 and a second cache", () => {
  test("matches the float64 reference (page sizes 2, 61, 256; valid lengths; sinks; invalid ids), and the kernels match it on a larger case", () => {
    const cases: Model1CaseOptions[] = [
      { seed: 1200, b: 3, s_q: 2, h_q: 64, s_k: 500, topk: 130, pageBlockSize: 256, extra: { s_k: 300, topk: 70, pageBlockSize: 2, topkLengthRandom: true }, sink: true, topkLength: true },
      { seed: 1201, b: 2, s_q: 1, h_q: 16, s_k: 200, topk: 64, pageBlockSize: 61, invalidFraction: 0.3, repeat: 0.2 },
    ];
    for (const [i, opts] of cases.entries()) {
      const c = makeModel1Case(opts);
      const u = uploadCase(c);
      const ref = mlaSparseReferenceGpu({ ...u.args, out: undefined, lse: undefined });
      try {
        const cpu = mlaDecodeReference(c);
        assertClose(ref.out.toHost().host as Float32Array, cpu.outF32, { abs: 1e-5, rel: 1e-4, cos: 1e-9 }, { name: `fp32 MODEL1 reference out (case ${i})` });
        assertClose(ref.lse.toHost().host as Float32Array, cpu.lse.host as Float32Array, { abs: 1e-5, rel: 1e-6 }, { name: `fp32 MODEL1 reference lse (case ${i})` });
      } finally {
        ref.out.dispose(); ref.lse.dispose();
        u.dispose();
      }
    }
    // Every element of each plan's output against the fp32 GPU reference: m64 and h128x at 128 heads,
    // m64 and h16x at 16 (and h16x at 8).
    const larger: [Model1CaseOptions, ("m64" | "h128x" | "h16x")[]][] = [
      [{ seed: 1210, b: 8, s_q: 2, h_q: 128, s_k: 4000, topk: 512, pageBlockSize: 64, extra: { s_k: 2000, topk: 256, pageBlockSize: 2, topkLengthRandom: true }, sink: true }, ["m64", "h128x"]],
      [{ seed: 1211, b: 16, s_q: 2, h_q: 16, s_k: 8000, topk: 1024, pageBlockSize: 256, extra: { s_k: 3000, topk: 320, pageBlockSize: 2, topkLengthRandom: true }, sink: true }, ["m64", "h16x"]],
      [{ seed: 1212, b: 5, s_q: 1, h_q: 8, s_k: 30000, topk: 8192, pageBlockSize: 64, invalidFraction: 0.05 }, ["h16x"]],
    ];
    for (const [opts, plans] of larger) {
      const c = makeModel1Case(opts);
      const u = uploadCase(c);
      const ref = mlaSparseReferenceGpu({ ...u.args, out: undefined, lse: undefined });
      try {
        for (const sparsePlan of plans) {
          const meta = getMlaMetadata();
          u.poison();
          const got = decodeWithOverrides({ ...u.args, schedMeta: meta }, { sparsePlan });
          const name = `${sparsePlan} at ${opts.h_q} heads`;
          assertClose(bf16ArrayToF32(got.out.toHost().host as Uint16Array), ref.out.toHost().host as Float32Array, SPARSE_OUT_TOL, { shape: [opts.b, opts.s_q, opts.h_q, 512], name: `out vs fp32 GPU reference (${name})`, roundReferenceTo: "bf16" });
          assertClose(got.lse.toHost().host as Float32Array, ref.lse.toHost().host as Float32Array, { abs: 1e-5, rel: 8.01 / 65536 }, { name: `lse vs fp32 GPU reference (${name})` });
          meta.dispose();
        }
      } finally {
        ref.out.dispose(); ref.lse.dispose();
        u.dispose();
      }
    }
  });
});

describeGpu("the second cache with the V32 format", () => {
  test("a V32 index list split over kCache and extraKCache (the same cache) decodes as the CPU reference of the split call", () => {
    for (const [i, [h_q, topk, cut]] of ([[64, 200, 70], [128, 256, 128], [16, 130, 1], [32, 100, 99]] as const).entries()) {
      const u = uploadSparseCase({ seed: 1000 + i, b: 3, s_q: 2, h_q, s_k: 500, topk, pageBlockSize: 61, sink: true, invalidFraction: 0.1 });
      const meta = getMlaMetadata();
      const held: Tensor[] = [];
      try {
        const { b, s_q } = { b: 3, s_q: 2 };
        const all = u.c.indices.contiguousHost().host as Int32Array;
        const part = (from: number, to: number) => {
          const a = new Int32Array(b * s_q * (to - from));
          for (let r = 0; r < b * s_q; r++) a.set(all.subarray(r * topk + from, r * topk + to), r * (to - from));
          return Tensor.fromHost(a, [b, s_q, to - from], "i32");
        };
        const first = part(0, cut), second = part(cut, topk);
        const dev = (t: Tensor) => {
          const d = Tensor.toDevice(t);
          held.push(d);
          return d;
        };
        const { out, lse } = flashMlaWithKvcache({ ...u.args, indices: dev(first), extraKCache: u.args.kCache, extraIndices: dev(second), schedMeta: meta });
        const ref = mlaDecodeReference({ ...u.c, indices: first, extraKCache: u.c.kCache, extraIndices: second });
        assertClose(bf16ArrayToF32(out.toHost().host as Uint16Array), ref.outF32, SPARSE_OUT_TOL, { name: `out h_q ${h_q} cut ${cut}`, roundReferenceTo: "bf16" });
        assertClose(lse.toHost().host as Float32Array, ref.lse.host as Float32Array, SPARSE_LSE_TOL, { name: `lse h_q ${h_q} cut ${cut}` });
        out.dispose();
        lse.dispose();
      } finally {
        held.forEach((t) => t.dispose());
        meta.dispose();
        u.dispose();
      }
    }
  });
});

describeGpu("MODEL1 argument checks on the GPU path", () => {
  test("refuses a second cache of the other format and extraTopkLength without extraKCache, by name", () => {
    const c = makeModel1Case({ seed: 1100, b: 2, s_q: 1, h_q: 16, s_k: 100, topk: 64, pageBlockSize: 64, extra: { s_k: 100, topk: 64, pageBlockSize: 64 } });
    const u = uploadCase(c);
    const meta = getMlaMetadata();
    const held: Tensor[] = [];
    try {
      const v32Cache = Tensor.toDevice(Tensor.zerosHost([2, 64, 1, 656], "u8"));
      const lengths = Tensor.toDevice(Tensor.fromHost(new Int32Array([5, 9]), [2], "i32"));
      held.push(v32Cache, lengths);
      const named = (arg: string, re: RegExp) => (e: unknown) => e instanceof ArgumentError && e.argument === arg && re.test(e.message);
      assert.throws(() => flashMlaWithKvcache({ ...u.args, extraKCache: v32Cache, schedMeta: meta }), named("extraKCache", /584/));
      assert.throws(() => flashMlaWithKvcache({ ...u.args, extraKCache: undefined, extraIndices: undefined, extraTopkLength: lengths, schedMeta: meta }), named("extraTopkLength", /without extraKCache/));
      assert.equal(meta.initialized, false);
    } finally {
      held.forEach((t) => t.dispose());
      meta.dispose();
      u.dispose();
    }
  });
});
