import { test } from "node:test";
import assert from "node:assert/strict";
import { combineRowsPerCta } from "../../../src/mla/combine/launchCombine.js";
import { D_V } from "../../../src/mla/contract/shape.js";
import { chooseDenseKernel, DENSE_FORMS, denseBlocksPerPart, type DenseForm } from "../../../src/mla/dense/chooseDenseKernel.js";
import { denseQTensorMapView } from "../../../src/mla/dense/denseTensorMaps.js";
import { decodeWithOverrides, flashMlaWithKvcache, type DecodeOverrides } from "../../../src/mla/flashMlaWithKvcache.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { mlaDecodeReferenceGpu } from "../../../src/mla/reference/mlaDecodeReferenceGpu.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { checkSchedule, computeSchedule, DENSE_SCHED_FIXED_OVERHEAD, numSmPartsDense, scheduleMaxPieces } from "../../../src/mla/sched/schedule.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { assertClose, DENSE_LSE_TOL, DENSE_OUT_TOL, type Tolerance } from "../../../src/numeric/compare.js";
import { fp16ArrayToF32 } from "../../../src/numeric/fp16.js";
import { Rng } from "../../../src/numeric/random.js";
import { Device } from "../../../src/runtime/Device.js";
import { Graph } from "../../../src/runtime/Graph.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { checkGrid } from "../../../src/testing/checkGrid.js";
import { makeDenseCase, NAN_HALF_BITS } from "../../../src/testing/denseCase.js";
import { decodeDenseCase, makeDenseCaseGpu, uploadDenseCase, type GpuDenseCase } from "../../../src/testing/gpuDenseCase.js";
import { runCheckCase } from "../../../src/testing/runCheckCase.js";
import { assertDecodeRowsClose } from "../../helpers/compareDecode.js";
import { describeGpu } from "../../helpers/gpu.js";
import { padded, uploadStorage } from "../../helpers/strided.js";
import { denseWorkspace } from "../../helpers/workspace.js";

/** FlashMLA's 16 (h_q, h_kv) pairs (FLASHMLA.md §4). */
const HEAD_PAIRS: Array<[number, number]> = [
  [1, 1], [3, 1], [3, 3], [9, 1], [9, 3], [63, 1], [63, 3], [64, 1], [64, 2], [64, 8], [126, 1], [126, 2], [126, 3], [128, 1], [128, 2], [128, 8],
];

/** FLASHMLA_DENSE_GRID=quick runs a reduced grid (for iterating on a kernel); the default is FlashMLA's. */
const QUICK = process.env.FLASHMLA_DENSE_GRID === "quick";
/** FLASHMLA_TEST_DENSE_FORM=fast or pipe forces that form wherever the API would choose; the default is the API's choice. */
const FORCED: DecodeOverrides = process.env.FLASHMLA_TEST_DENSE_FORM === undefined ? {} : { denseForm: process.env.FLASHMLA_TEST_DENSE_FORM as DenseForm };

function halfToF32(t: Tensor): Float32Array {
  const h = t.toHost();
  return t.dtype === "fp16" ? fp16ArrayToF32(h.host as Uint16Array) : bf16ArrayToF32(h.host as Uint16Array);
}

function run(c: GpuDenseCase, stream?: Stream, overrides: DecodeOverrides = FORCED) {
  return decodeDenseCase(c, overrides, stream);
}

/** Runs the call on `c` and checks every element against the float64 CPU reference (host cases). */
function checkAgainstCpu(c: GpuDenseCase, label: string, outTol: Tolerance = DENSE_OUT_TOL, overrides: DecodeOverrides = FORCED): void {
  const { out, lse, meta } = run(c, undefined, overrides);
  try {
    const ref = mlaDecodeReference(c.host!);
    const [b, s_q, h_q] = c.q.shape;
    assertClose(halfToF32(out), ref.outF32, outTol, { shape: [b, s_q, h_q, 512], name: `out (${label})`, roundReferenceTo: c.q.dtype as "bf16" | "fp16" });
    assertClose(lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { shape: [b, h_q, s_q], name: `lse (${label})` });
  } finally {
    out.dispose();
    lse.dispose();
    meta.dispose();
  }
}

describeGpu("flashMlaWithKvcache() dense decode on the GPU", () => {
  test("the scheduler kernel's metadata equals the CPU twin and satisfies the invariants", () => {
    const rng = new Rng(7);
    for (let i = 0; i < 40; i++) {
      const b = rng.int(1, 130);
      const lens = Array.from({ length: b }, () => (rng.uniform() < 0.2 ? 0 : rng.int(1, 20000)));
      const c = makeDenseCaseGpu({ seed: 100 + i, b, s_q: 1, h_q: [16, 64, 128][i % 3], h_kv: 1, seqlens: lens, causal: false, dtype: "bf16" });
      const { out, lse, meta } = run(c);
      try {
        Device.get().synchronize();
        const ws = denseWorkspace(meta);
        const gpu = { schedMeta: ws.schedMeta.toHost().host as Int32Array, numSplits: ws.numSplits.toHost().host as Int32Array };
        const cpu = computeSchedule(lens, ws.numSmParts, DENSE_SCHED_FIXED_OVERHEAD);
        assert.deepEqual(gpu.schedMeta, cpu.schedMeta, `case ${i}: sched_meta differs`);
        assert.deepEqual(gpu.numSplits, cpu.numSplits, `case ${i}: num_splits differs`);
        checkSchedule(lens, gpu, ws.numSmParts);
      } finally {
        out.dispose(); lse.dispose(); meta.dispose(); c.dispose();
      }
    }
  });

  test("matches the float64 CPU reference on every element of small shapes", () => {
    let n = 0;
    for (const b of [1, 2]) for (const s_q of [1, 2, 4]) for (const s_k of [1, 20, 140]) for (const [h_q, h_kv] of HEAD_PAIRS) for (const varlen of [false, true]) for (const causal of [false, true]) {
      if (QUICK && (h_q % 3 === 0 || (varlen && causal))) continue;
      const seed = 1000 + n;
      const host = makeDenseCase({ seed, b, s_q, h_q, h_kv, seqlens: { mean: s_k, varlen }, causal, dtype: "bf16", extraBlocks: 2 });
      const c = uploadDenseCase(host);
      try {
        checkAgainstCpu(c, `seed ${seed} b=${b} s_q=${s_q} s_k=${s_k} h_q=${h_q} h_kv=${h_kv} varlen=${varlen} causal=${causal}`);
      } finally {
        c.dispose();
      }
      n++;
    }
    console.log(`# small grid: ${n} cases checked element by element against the CPU reference`);
  });

  test("both dense forms (fast, pipe) match the CPU reference on odd block counts, splits and causal rows", () => {
    for (const denseForm of DENSE_FORMS) {
      for (const [i, lens] of [[1], [64], [65], [130, 3], [200, 0, 700, 64 * 9 + 5], Array.from({ length: 7 }, (_, j) => 97 * j + 1)].entries()) {
        const host = makeDenseCase({ seed: 6000 + i, b: lens.length, s_q: 2, h_q: 64, h_kv: 1, seqlens: lens, causal: true, dtype: "bf16", extraBlocks: 1 });
        const c = uploadDenseCase(host);
        try {
          checkAgainstCpu(c, `${denseForm} lens=${lens.join(",")}`, DENSE_OUT_TOL, { denseForm });
        } finally {
          c.dispose();
        }
      }
    }
  });

  test("flashMlaWithKvcache runs the form chooseDenseKernel picks: its bits are that form's, forced", () => {
    // pipe at 128 rows per KV head with many blocks per SM part (b 16), fast with few (b 2) or 64 rows.
    const lens = (b: number, longest: number) => Array.from({ length: b }, (_, j) => (j === 1 ? 0 : j === 0 ? longest : 1 + ((j * 7919) % longest)));
    const specs = [
      { s_q: 1, h_q: 128, lens: lens(16, 6000), form: "pipe" },
      { s_q: 1, h_q: 128, lens: lens(2, 3000), form: "fast" },
      { s_q: 2, h_q: 64, lens: lens(8, 12000), form: "pipe" },
      { s_q: 4, h_q: 16, lens: lens(5, 2000), form: "fast" },
    ] as const;
    for (const [i, spec] of specs.entries()) {
      const b = spec.lens.length;
      const c = makeDenseCaseGpu({ seed: 9100 + i, b, s_q: spec.s_q, h_q: spec.h_q, h_kv: 1, seqlens: spec.lens, causal: true, dtype: "bf16" });
      const parts = numSmPartsDense(Device.get(0).smCount, spec.s_q, spec.h_q, 1);
      const form = chooseDenseKernel(spec.s_q * spec.h_q, denseBlocksPerPart(b, c.maxBlocks, parts));
      assert.equal(form, spec.form, `case ${i}: the form for ${spec.s_q * spec.h_q} rows, ${b} × ${c.maxBlocks} blocks over ${parts} parts`);
      const api = run(c, undefined, {});
      const forced = run(c, undefined, { denseForm: form });
      try {
        assert.deepEqual(api.out.toHost().host, forced.out.toHost().host, `out differs from the forced ${form} (case ${i})`);
        assert.deepEqual(api.lse.toHost().host, forced.lse.toHost().host, `lse differs from the forced ${form} (case ${i})`);
      } finally {
        for (const r of [api, forced]) { r.out.dispose(); r.lse.dispose(); r.meta.dispose(); }
        c.dispose();
      }
    }
  });

  test("fp16 q and cache match the CPU reference", () => {
    let n = 0;
    for (const [h_q, h_kv] of [[1, 1], [64, 1], [128, 2], [126, 3]] as const) for (const s_q of [1, 2]) {
      const host = makeDenseCase({ seed: 5000 + n, b: 3, s_q, h_q, h_kv, seqlens: { mean: 300, varlen: true }, causal: true, dtype: "fp16" });
      const c = uploadDenseCase(host);
      try {
        checkAgainstCpu(c, `fp16 h_q=${h_q} h_kv=${h_kv} s_q=${s_q}`);
      } finally {
        c.dispose();
      }
      n++;
    }
  });

  test("seeded random shapes (s_k not a multiple of 64, s_k = 1, b = 1, h_q = 1) match the CPU reference", () => {
    const rng = new Rng(99);
    for (let i = 0; i < (QUICK ? 10 : 40); i++) {
      const h_kv = [1, 1, 2, 3][rng.int(0, 4)];
      const h_q = h_kv * rng.int(1, Math.floor(128 / h_kv) + 1);
      const b = rng.int(1, 5), s_q = rng.int(1, 5);
      const lens = Array.from({ length: b }, () => [0, 1, rng.int(1, 64), rng.int(65, 700)][rng.int(0, 4)]);
      const host = makeDenseCase({ seed: 7000 + i, b, s_q, h_q, h_kv, seqlens: lens, causal: rng.uniform() < 0.5, dtype: "bf16", extraBlocks: 1 });
      const c = uploadDenseCase(host);
      try {
        checkAgainstCpu(c, `random #${i} b=${b} s_q=${s_q} h_q=${h_q} h_kv=${h_kv} lens=${lens.join(",")}`);
      } finally {
        c.dispose();
      }
    }
  });

  test("the fp32 GPU reference agrees with the float64 CPU reference on small shapes", () => {
    for (const [i, [h_q, h_kv, s_q]] of ([[1, 1, 1], [64, 1, 2], [128, 2, 4], [9, 3, 2]] as const).entries()) {
      const host = makeDenseCase({ seed: 8000 + i, b: 2, s_q, h_q, h_kv, seqlens: { mean: 200, varlen: true }, causal: true, dtype: "bf16" });
      const c = uploadDenseCase(host);
      const ref = mlaDecodeReferenceGpu({ ...c });
      try {
        const cpu = mlaDecodeReference(host);
        assertClose(ref.out.toHost().host as Float32Array, cpu.outF32, { abs: 1e-5, rel: 1e-4, cos: 1e-9 }, { name: "fp32 GPU reference out" });
        assertClose(ref.lse.toHost().host as Float32Array, cpu.lse.host as Float32Array, { abs: 1e-5, rel: 1e-6 }, { name: "fp32 GPU reference lse" });
      } finally {
        ref.out.dispose(); ref.lse.dispose(); c.dispose();
      }
    }
  });

  test("FlashMLA's dense grid and corner cases (flashmla check's grid) with the API's forms: every element vs the fp32 GPU reference, sampled rows vs the CPU reference", () => {
    // The same cases and checks as `flashmla check --grid flashmla` (2,304 grid + 32 corner cases);
    // FLASHMLA_DENSE_GRID=quick takes every 12th case plus all corner cases.
    const grid = checkGrid("flashmla");
    const cases = QUICK ? grid.filter((c, i) => i % 12 === 0 || c.zeroFraction > 0) : grid;
    const stream = Stream.create();
    const t0 = Date.now();
    const failures: string[] = [];
    try {
      cases.forEach((spec, i) => {
        const r = runCheckCase(spec, { stream, seed: 20000 + i, overrides: FORCED });
        if (!r.ok) failures.push(`${spec.name} (seed ${20000 + i}): ${r.error ?? r.check?.message}`);
      });
    } finally {
      stream.dispose();
    }
    console.log(`# FlashMLA dense grid: ${cases.length} cases (${QUICK ? "quick" : "full"}), ${failures.length} failed, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    assert.deepEqual(failures, [], failures.slice(0, 5).join("\n"));
  });

  test("the combine's paths: a request split many ways (groups share a row), 8-16 splits (a row per group, two batches), 4-7 and 2-3 splits (rows merged per group), CTAs of several rows with a tail", () => {
    const smCount = Device.get(0).smCount;
    // h_q = 128, 66 SM parts. b = 1: the request is spread over every part (> 16 splits). b = 7: 8 or 9
    // splits each, 3 rows per CTA. b = 8: 4 to 7 splits each, 1,024 rows, 3 rows per CTA. b = 32 at 800
    // tokens: 2 or 3 splits each, 15 rows per CTA.
    const cases = [
      { b: 1, lens: [6000], splits: [17, Infinity] },
      { b: 7, lens: [4000, 4500, 3800, 4200, 4100, 4300, 3900], splits: [8, 16] },
      { b: 8, lens: [1000, 1200, 900, 1111, 1000, 1300, 700, 1000], splits: [4, 7] },
      { b: 32, lens: Array(32).fill(800), splits: [2, 3] },
    ];
    for (const [i, spec] of cases.entries()) {
      const host = makeDenseCase({ seed: 8800 + i, b: spec.b, s_q: 1, h_q: 128, h_kv: 1, seqlens: spec.lens, causal: false, dtype: "bf16" });
      const c = uploadDenseCase(host);
      try {
        const { out, lse, meta } = run(c);
        try {
          const ns = denseWorkspace(meta).numSplits.toHost().host as Int32Array;
          const splits = Array.from({ length: spec.b }, (_, r) => ns[r + 1] - ns[r]);
          assert.ok(splits.every((n) => n >= spec.splits[0] && n <= spec.splits[1]), `case ${i}: expected ${spec.splits.join("-")} splits per request, got ${splits.join(",")}`);
          const rowsPerCta = combineRowsPerCta(spec.b * 128, smCount);
          if (i > 0) assert.ok(rowsPerCta > 1 && 128 % rowsPerCta !== 0, `case ${i}: expected several rows per CTA and a tail, got ${rowsPerCta}`);
          const ref = mlaDecodeReference(host);
          assertClose(halfToF32(out), ref.outF32, DENSE_OUT_TOL, { shape: [spec.b, 1, 128, 512], name: `out (case ${i})`, roundReferenceTo: "bf16" });
          assertClose(lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { shape: [spec.b, 128, 1], name: `lse (case ${i})` });
        } finally {
          out.dispose(); lse.dispose(); meta.dispose();
        }
      } finally {
        c.dispose();
      }
    }
  });

  test("empty requests give out = 0 and lse = +inf exactly", () => {
    const host = makeDenseCase({ seed: 3, b: 4, s_q: 2, h_q: 16, h_kv: 1, seqlens: [0, 70, 0, 1], causal: true, dtype: "bf16" });
    const c = uploadDenseCase(host);
    const { out, lse, meta } = run(c);
    try {
      const o = out.toHost().host as Uint16Array, l = lse.toHost().host as Float32Array;
      for (const req of [0, 2]) {
        for (let i = 0; i < 2 * 16 * 512; i++) assert.equal(o[req * 2 * 16 * 512 + i], 0, `out of empty request ${req}`);
        for (let i = 0; i < 16 * 2; i++) assert.equal(l[req * 32 + i], Infinity, `lse of empty request ${req}`);
      }
      // Causal with s_q = 2 and one key: token 0 sees no key (seqlen - 1 = 0), token 1 sees it.
      for (let h = 0; h < 16; h++) {
        assert.equal(l[(3 * 16 + h) * 2 + 0], Infinity);
        assert.ok(Number.isFinite(l[(3 * 16 + h) * 2 + 1]));
      }
    } finally {
      out.dispose(); lse.dispose(); meta.dispose(); c.dispose();
    }
  });

  test("the same inputs give bit-identical outputs from run to run (split and unsplit requests)", () => {
    const c = makeDenseCaseGpu({ seed: 77, b: 9, s_q: 2, h_q: 128, h_kv: 1, seqlens: { mean: 6000, varlen: true }, causal: true, dtype: "bf16" });
    try {
      const first = run(c);
      const o1 = first.out.toHost().host as Uint16Array, l1 = first.lse.toHost().host as Float32Array;
      for (let k = 0; k < 5; k++) {
        const again = run(c);
        assert.deepEqual(again.out.toHost().host, o1, `out differs on run ${k + 2}`);
        assert.deepEqual(again.lse.toHost().host, l1, `lse differs on run ${k + 2}`);
        again.out.dispose(); again.lse.dispose(); again.meta.dispose();
      }
      first.out.dispose(); first.lse.dispose(); first.meta.dispose();
    } finally {
      c.dispose();
    }
  });

  test("work queued on the call's stream after it sees the finished out and lse (unsplit, pair-split and split calls); the combine left out once the host knows it has no work", () => {
    // The combine is launched with PDL and, for requests nothing split (or split in two and merged by
    // the main kernel), may leave before the main kernel ends; the stream must still order a later copy
    // behind the main kernel's stores. A copy queued at once (no synchronization in between) must equal
    // what the outputs hold once the whole device is idle, and hold no poison. The first call also
    // copies the schedule's split counts to the host without waiting; once landed, the later rounds
    // leave the combine out where no request has more than one piece, or two (merged by the main
    // kernel), with the first round's outputs.
    const shapes = [
      { label: "b 128, h_q 16, 4096 tokens each (nothing split)", b: 128, h_q: 16, seqlens: Array.from({ length: 128 }, () => 4096), pieces: 1 },
      { label: "b 96, h_q 128, 600-1099 tokens (requests in two pieces, merged by the main kernel)", b: 96, h_q: 128, seqlens: Array.from({ length: 96 }, (_, i) => 600 + ((i * 37) % 500)), pieces: 2 },
      { label: "b 2, h_q 128, 30000 tokens (split over the SMs)", b: 2, h_q: 128, seqlens: [30000, 29000], pieces: 32 },
    ];
    const stream = Stream.create();
    try {
      for (const [i, sh] of shapes.entries()) {
        const c = makeDenseCaseGpu({ seed: 900 + i, b: sh.b, s_q: 1, h_q: sh.h_q, h_kv: 1, seqlens: sh.seqlens, causal: false, dtype: "bf16" });
        const out = Tensor.emptyDevice([sh.b, 1, sh.h_q, 512], "bf16");
        const lse = Tensor.emptyDevice([sh.b, sh.h_q, 1], "f32");
        const meta = getMlaMetadata();
        try {
          let first: { out: Uint16Array; lse: Float32Array } | undefined;
          for (let k = 0; k < 4; k++) {
            out.buffer!.memset8(0xff, 0, undefined, stream);  // NaN in bf16 and f32
            lse.buffer!.memset8(0xff, 0, undefined, stream);
            flashMlaWithKvcache({ ...c, schedMeta: meta, stream, out, lse });
            const early = new Uint16Array(out.numel), earlyLse = new Float32Array(lse.numel);
            out.buffer!.copyToHost(early, 0, stream);  // queued behind the call, then waited for
            lse.buffer!.copyToHost(earlyLse, 0, stream);
            Device.get().synchronize();
            const late = out.toHost().host as Uint16Array, lateLse = lse.toHost().host as Float32Array;
            const nanAt = bf16ArrayToF32(late).findIndex((v) => Number.isNaN(v));
            assert.equal(nanAt, -1, `${sh.label}: out holds NaN at ${nanAt} after the device is idle`);
            assert.deepEqual(early, late, `${sh.label}, round ${k}: the stream-ordered copy of out differs from the finished out`);
            assert.deepEqual(earlyLse, lateLse, `${sh.label}, round ${k}: the stream-ordered copy of lse differs from the finished lse`);
            if (first === undefined) {
              first = { out: late, lse: lateLse };
              assert.equal(scheduleMaxPieces(denseWorkspace(meta).numSplits.toHost().host as Int32Array), sh.pieces, `${sh.label}: the schedule's most pieces per request`);
              assert.equal(meta.knownMaxPieces(), sh.pieces, `${sh.label}: knownMaxPieces() once the first call is done`);
            } else {
              assert.deepEqual(late, first.out, `${sh.label}, round ${k}: out differs from the first round's (with the combine)`);
              assert.deepEqual(lateLse, first.lse, `${sh.label}, round ${k}: lse differs from the first round's`);
            }
          }
        } finally {
          meta.dispose(); out.dispose(); lse.dispose(); c.dispose();
        }
      }
    } finally {
      stream.dispose();
    }
  });

  test("requests split in two are merged by the main kernels themselves, with the combine's bits (mergeSplitPairs), and every element matches the CPU reference", () => {
    // Seeds and shapes whose schedules (the CPU twin's) hold pairs whose second-piece CTA goes on to
    // another request (the count deferred to its next request's top) and pairs where it ends its part,
    // beside requests in 3-5 pieces (seed 4, 6) that the combine still merges. The merged outputs must
    // equal those of the same kernel leaving every split to the combine, bit for bit, on every round
    // (the flags go back to 0 for the next call; from the second round the host leaves the combine out
    // where no request has more than two pieces).
    const shapes = [
      { seed: 3, b: 96, s_q: 1, h_q: 128, mean: 800, causal: false, dtype: "bf16" as const },
      { seed: 4, b: 40, s_q: 1, h_q: 128, mean: 3000, causal: false, dtype: "bf16" as const },
      { seed: 5, b: 128, s_q: 2, h_q: 128, mean: 2000, causal: true, dtype: "fp16" as const },
      { seed: 6, b: 60, s_q: 1, h_q: 64, mean: 3000, causal: false, dtype: "bf16" as const },
    ];
    for (const sh of shapes) {
      const c = makeDenseCaseGpu({ seed: sh.seed, b: sh.b, s_q: sh.s_q, h_q: sh.h_q, h_kv: 1, seqlens: { mean: sh.mean, varlen: true }, causal: sh.causal, dtype: sh.dtype });
      try {
        for (const denseForm of DENSE_FORMS) {
          const label = `seed ${sh.seed}, b ${sh.b}, s_q ${sh.s_q}, h_q ${sh.h_q}, ${denseForm}`;
          const plainMeta = getMlaMetadata(), meta = getMlaMetadata();
          try {
            const plain = decodeWithOverrides({ ...c, schedMeta: plainMeta }, { denseForm, mergeSplitPairs: false });
            const po = plain.out.toHost().host as Uint16Array, pl = plain.lse.toHost().host as Float32Array;
            plain.out.dispose(); plain.lse.dispose();
            const counts: number[] = [];
            for (let round = 0; round < 3; round++) {
              const merged = decodeWithOverrides({ ...c, schedMeta: meta }, { denseForm });
              Device.get().synchronize();
              if (round === 0) {
                const ns = denseWorkspace(meta).numSplits.toHost().host as Int32Array;
                for (let i = 0; i < sh.b; i++) counts.push(ns[i + 1] - ns[i]);
                assert.ok(counts.includes(2), `${label}: the schedule has pairs`);
              }
              assert.deepEqual(merged.out.toHost().host, po, `${label}, round ${round}: out differs from the combine's`);
              assert.deepEqual(merged.lse.toHost().host, pl, `${label}, round ${round}: lse differs from the combine's`);
              merged.out.dispose(); merged.lse.dispose();
            }
            const flags = denseWorkspace(meta).mergeFlags.toHost().host as Int32Array;
            assert.equal(flags.findIndex((f) => f !== 0), -1, `${label}: every merge flag back to 0`);
          } finally {
            plainMeta.dispose(); meta.dispose();
          }
        }
      } finally {
        c.dispose();
      }
    }
    // Every element against the CPU reference where the rows are few: 110 one-head requests of ~160
    // tokens over 132 parts (16 pairs).
    const host = makeDenseCase({ seed: 2, b: 110, s_q: 1, h_q: 1, h_kv: 1, seqlens: { mean: 160, varlen: true }, causal: false, dtype: "bf16" });
    const twin = computeSchedule(host.seqlens, numSmPartsDense(Device.get().smCount, 1, 1, 1), DENSE_SCHED_FIXED_OVERHEAD).numSplits;
    assert.ok(host.seqlens.some((_, i) => twin[i + 1] - twin[i] === 2), "the one-head shape has pairs");
    const small = uploadDenseCase(host);
    try {
      for (const denseForm of DENSE_FORMS) checkAgainstCpu(small, `pairs merged, ${denseForm}`, DENSE_OUT_TOL, { denseForm });
    } finally {
      small.dispose();
    }
  });

  test("a 60-layer decode step captured as a CUDA graph gives the eager outputs", () => {
    const layers = 60;
    const c = makeDenseCaseGpu({ seed: 11, b: 16, s_q: 2, h_q: 128, h_kv: 1, seqlens: { mean: 2000, varlen: true }, causal: true, dtype: "bf16" });
    const stream = Stream.create();
    // Each layer has its own queries (same lengths); the cache is shared to keep memory small.
    const others = Array.from({ length: layers - 1 }, (_, i) => makeDenseCaseGpu({ seed: 500 + i, b: 16, s_q: 2, h_q: 128, h_kv: 1, seqlens: c.seqlens, causal: true, dtype: "bf16" }));
    const qs = [c.q, ...others.map((o) => o.q)];
    const outs = qs.map(() => Tensor.emptyDevice([16, 2, 128, 512], "bf16"));
    const lses = qs.map(() => Tensor.emptyDevice([16, 128, 2], "f32"));
    const meta = getMlaMetadata();
    try {
      // Eager run (also fills the metadata, so the capture allocates nothing).
      const step = () => {
        for (let i = 0; i < layers; i++) flashMlaWithKvcache({ ...c, q: qs[i], schedMeta: meta, stream, out: outs[i], lse: lses[i] });
      };
      step();
      stream.synchronize();
      const eager = outs.map((o) => o.toHost().host as Uint16Array);
      const eagerLse = lses.map((l) => l.toHost().host as Float32Array);
      for (const o of outs) o.buffer!.memset8(0xff);
      for (const l of lses) l.buffer!.memset8(0xff);
      stream.synchronize();
      const graph = Graph.capture(stream, step);
      try {
        graph.launch(stream);
        graph.launch(stream);
        stream.synchronize();
        outs.forEach((o, i) => assert.deepEqual(o.toHost().host, eager[i], `layer ${i}: graph out differs from eager`));
        lses.forEach((l, i) => assert.deepEqual(l.toHost().host, eagerLse[i], `layer ${i}: graph lse differs from eager`));
      } finally {
        graph.dispose();
      }
    } finally {
      meta.dispose();
      stream.dispose();
      for (const t of [...outs, ...lses]) t.dispose();
      for (const o of others) o.dispose();
      c.dispose();
    }
  });
  // pipe against fast and the reference where their loops differ: a request boundary inside a CTA's piece
  // (the next request's Q), a piece of one pair, an odd block count, a partial last block (its V rows
  // zeroed while the other warpgroup's next Q·Kᵀ may run), empty requests. pipe's W1 sums its Q·Kᵀ tiles
  // in another order than fast's and the exponent is one fma, so the two agree within the tolerance, not
  // bit for bit.
  test("pipe matches the CPU reference on many short requests per CTA (request boundaries, one-pair pieces, odd and partial blocks, empty requests)", () => {
    const rng = new Rng(4242);
    for (let i = 0; i < 24; i++) {
      const h_kv = [1, 1, 2][rng.int(0, 3)];
      const h_q = h_kv * [1, 16, 64, 128 / h_kv][rng.int(0, 4)];
      const b = rng.int(1, 40), s_q = rng.int(1, 3);
      const lens = Array.from({ length: b }, () => [0, 1, rng.int(2, 64), 64, 128, rng.int(65, 400), rng.int(400, 1500)][rng.int(0, 7)]);
      const dtype = i % 4 === 3 ? "fp16" : "bf16";
      const host = makeDenseCase({ seed: 9400 + i, b, s_q, h_q, h_kv, seqlens: lens, causal: rng.uniform() < 0.5, dtype, extraBlocks: 1 });
      const c = uploadDenseCase(host);
      const label = `#${i} b=${b} s_q=${s_q} h_q=${h_q} h_kv=${h_kv} ${dtype} lens=${lens.join(",")}`;
      const r = run(c, undefined, { denseForm: "pipe" });
      try {
        const ref = mlaDecodeReference(host);
        assertClose(halfToF32(r.out), ref.outF32, DENSE_OUT_TOL, { shape: [b, s_q, h_q, 512], name: `pipe out (${label})`, roundReferenceTo: dtype });
        assertClose(r.lse.toHost().host as Float32Array, ref.lse.host as Float32Array, DENSE_LSE_TOL, { shape: [b, h_q, s_q], name: `pipe lse (${label})` });
      } finally {
        r.out.dispose(); r.lse.dispose(); r.meta.dispose();
        c.dispose();
      }
    }
  });

  test("pipe agrees with fast on long requests (many pairs per piece, splits) within the dense tolerance", () => {
    const specs = [
      { b: 1, s_q: 1, h_q: 128, h_kv: 1, mean: 32768, dtype: "bf16" },
      { b: 16, s_q: 2, h_q: 128, h_kv: 1, mean: 4000, dtype: "bf16" },
      { b: 7, s_q: 1, h_q: 64, h_kv: 1, mean: 2500, dtype: "fp16" },
      { b: 64, s_q: 1, h_q: 16, h_kv: 1, mean: 1500, dtype: "bf16" },
    ] as const;
    for (const [i, spec] of specs.entries()) {
      const c = makeDenseCaseGpu({ seed: 9500 + i, b: spec.b, s_q: spec.s_q, h_q: spec.h_q, h_kv: spec.h_kv, seqlens: { mean: spec.mean, varlen: spec.b > 1, zeroFraction: spec.b > 1 ? 0.1 : 0 }, causal: true, dtype: spec.dtype });
      const a = run(c, undefined, { denseForm: "fast" });
      const f = run(c, undefined, { denseForm: "pipe" });
      try {
        const name = JSON.stringify(spec);
        assertClose(halfToF32(f.out), halfToF32(a.out), DENSE_OUT_TOL, { shape: [spec.b, spec.s_q, spec.h_q, 512], name: `pipe vs fast out ${name}` });
        assertClose(f.lse.toHost().host as Float32Array, a.lse.toHost().host as Float32Array, DENSE_LSE_TOL, { name: `pipe vs fast lse ${name}` });
      } finally {
        for (const r of [a, f]) { r.out.dispose(); r.lse.dispose(); r.meta.dispose(); }
        c.dispose();
      }
    }
  });

  test("pipe and fast, each forced, pass FlashMLA's dense grid and corner cases (every 12th grid case and all corner cases)", () => {
    const cases = checkGrid("flashmla").filter((c, i) => i % 12 === 0 || c.zeroFraction > 0);
    const stream = Stream.create();
    const failures: string[] = [];
    try {
      for (const denseForm of DENSE_FORMS) {
        cases.forEach((spec, i) => {
          const r = runCheckCase(spec, { stream, seed: 21000 + i, overrides: { denseForm } });
          if (!r.ok) failures.push(`${spec.name} ${denseForm} (seed ${21000 + i}): ${r.error ?? r.check?.message}`);
        });
      }
    } finally {
      stream.dispose();
    }
    console.log(`# pipe and fast on FlashMLA's dense grid: ${cases.length} cases each, ${failures.length} failed`);
    assert.ok(cases.length > 200, `expected the quick grid (about 220 cases), got ${cases.length}`);
    assert.deepEqual(failures, [], failures.slice(0, 5).join("\n"));
  });
});

// DeepSeek-V4's head on the dense path: q and each cached row 512 wide, Q·Kᵀ over eight 64-dim tiles,
// V the whole row (the _d512 kernels). The same checks as at 576: every element against the float64
// CPU reference with the dense tolerances, outputs NaN-poisoned before the call, NaN in every cache slot
// and unused block no request owns, poison ids in unused table entries.

/** DeepSeek-V4's d_qk. */
const D512 = 512;

/** The GPU arguments of one dense call. */
type DenseTensors = { q: Tensor; kCache: Tensor; blockTable: Tensor; cacheSeqlens: Tensor; causal: boolean; softmaxScale: number };

/**
 * One call on `args` with `overrides` forced, into out and lse filled with NaN first (an element the
 * kernels leave unwritten then fails the comparison); a valid call leaves no device error. Returns the
 * outputs on the host and each request's piece count in the schedule the GPU wrote.
 */
function decodePoisoned(args: DenseTensors, overrides: DecodeOverrides): { out: Float32Array; lse: Float32Array; pieces: number[] } {
  const [b, s_q, h_q] = args.q.shape;
  const out = Tensor.emptyDevice([b, s_q, h_q, D512], args.q.dtype);
  const lse = Tensor.emptyDevice([b, h_q, s_q], "f32");
  const meta = getMlaMetadata();
  try {
    out.buffer!.memset8(0xff);  // NaN in bf16, fp16 and f32
    lse.buffer!.memset8(0xff);
    decodeWithOverrides({ ...args, headDimV: D_V, schedMeta: meta, out, lse }, overrides);
    meta.checkErrors();
    const ns = denseWorkspace(meta).numSplits.toHost().host as Int32Array;
    return { out: halfToF32(out), lse: lse.toHost().host as Float32Array, pieces: Array.from({ length: b }, (_, i) => ns[i + 1] - ns[i]) };
  } finally {
    out.dispose(); lse.dispose(); meta.dispose();
  }
}

/** Every element of `got` against the float64 CPU reference `ref` of a call on `q`, with the dense tolerances. */
function assertMatchesReference(got: { out: Float32Array; lse: Float32Array }, ref: ReturnType<typeof mlaDecodeReference>, q: Tensor, label: string): void {
  const [b, s_q, h_q] = q.shape;
  assertDecodeRowsClose(got, { out: ref.outF32, lse: ref.lse.host as Float32Array }, {
    dims: { b, s_q, h_q }, rows: undefined, tol: { out: DENSE_OUT_TOL, lse: DENSE_LSE_TOL }, label, roundReferenceTo: q.dtype as "bf16" | "fp16",
  });
}

/** Each request's piece count in the CPU twin of the schedule a call of this shape gets on this GPU. */
function twinPieces(seqlens: readonly number[], s_q: number, h_q: number, h_kv: number): number[] {
  const ns = computeSchedule(seqlens, numSmPartsDense(Device.get().smCount, s_q, h_q, h_kv), DENSE_SCHED_FIXED_OVERHEAD).numSplits;
  return seqlens.map((_, i) => ns[i + 1] - ns[i]);
}

describeGpu("flashMlaWithKvcache() dense decode at d_qk 512 (DeepSeek-V4's head) on the GPU", () => {
  test("both forms, bf16 and fp16, s_q 1 and 2 causal, h_q 16, 64 and 128: lengths 0, 1, 63, 64, 65 and two split over many SM parts match the CPU reference", () => {
    const lens = [0, 1, 63, 64, 65, 1000, 2500];
    let n = 0;
    for (const dtype of ["bf16", "fp16"] as const) for (const s_q of [1, 2]) for (const h_q of [16, 64, 128]) {
      const host = makeDenseCase({ seed: 12000 + n++, b: lens.length, s_q, h_q, h_kv: 1, seqlens: lens, causal: s_q > 1, dtype, extraBlocks: 2, d_qk: D512 });
      const c = uploadDenseCase(host);
      try {
        const ref = mlaDecodeReference(host);
        const label = `d_qk 512 ${dtype} s_q=${s_q} h_q=${h_q}`;
        const twin = twinPieces(lens, s_q, h_q, 1);
        assert.ok(twin[5] >= 3 && twin[6] >= 3, `${label}: the long requests are split over several SM parts (${twin.join(",")})`);
        for (const denseForm of DENSE_FORMS) {
          const r = decodePoisoned(c, { denseForm });
          assert.deepEqual(r.pieces, twin, `${label} ${denseForm}: the GPU's schedule is the twin's`);
          assertMatchesReference(r, ref, c.q, `${label} ${denseForm}`);
        }
        // The API's own choice is one of the forced forms' _d512 kernels, bit for bit.
        const form = chooseDenseKernel(s_q * h_q, denseBlocksPerPart(lens.length, c.maxBlocks, numSmPartsDense(Device.get().smCount, s_q, h_q, 1)));
        const api = decodePoisoned(c, {}), forced = decodePoisoned(c, { denseForm: form });
        assert.deepEqual(api.out, forced.out, `${label}: the API's out is the forced ${form}'s`);
        assert.deepEqual(api.lse, forced.lse, `${label}: the API's lse is the forced ${form}'s`);
      } finally {
        c.dispose();
      }
    }
  });

  test("two KV heads (h_q 128, h_kv 2, s_q 2 causal): both forms match the CPU reference", () => {
    const lens = [0, 1, 63, 64, 65, 1300];
    for (const dtype of ["bf16", "fp16"] as const) {
      const host = makeDenseCase({ seed: dtype === "bf16" ? 12100 : 12101, b: lens.length, s_q: 2, h_q: 128, h_kv: 2, seqlens: lens, causal: true, dtype, extraBlocks: 1, d_qk: D512 });
      const c = uploadDenseCase(host);
      try {
        const ref = mlaDecodeReference(host);
        for (const denseForm of DENSE_FORMS) assertMatchesReference(decodePoisoned(c, { denseForm }), ref, c.q, `d_qk 512 h_kv 2 ${dtype} ${denseForm}`);
      } finally {
        c.dispose();
      }
    }
  });

  test("requests split in two are merged by the main kernels (mergeSplitPairs) with the combine's bits, and both match the CPU reference", () => {
    const shapes = [
      { seed: 3, b: 40, s_q: 1, h_q: 64, mean: 300, dtype: "bf16" as const },
      { seed: 1, b: 24, s_q: 2, h_q: 64, mean: 400, dtype: "fp16" as const },
    ];
    for (const sh of shapes) {
      const host = makeDenseCase({ seed: sh.seed, b: sh.b, s_q: sh.s_q, h_q: sh.h_q, h_kv: 1, seqlens: { mean: sh.mean, varlen: true, zeroFraction: 0.1 }, causal: sh.s_q > 1, dtype: sh.dtype, d_qk: D512 });
      const label = `d_qk 512 seed ${sh.seed} b ${sh.b} s_q ${sh.s_q} h_q ${sh.h_q} ${sh.dtype}`;
      const twin = twinPieces(host.seqlens, sh.s_q, sh.h_q, 1);
      assert.ok(twin.includes(2) && twin.some((p) => p >= 3) && host.seqlens.includes(0), `${label}: pairs, requests in 3+ pieces and empty requests (${twin.join(",")})`);
      const c = uploadDenseCase(host);
      try {
        const ref = mlaDecodeReference(host);
        for (const denseForm of DENSE_FORMS) {
          const merged = decodePoisoned(c, { denseForm });
          const combined = decodePoisoned(c, { denseForm, mergeSplitPairs: false });
          assert.deepEqual(merged.out, combined.out, `${label} ${denseForm}: out with the pairs merged in the main kernel differs from the combine's`);
          assert.deepEqual(merged.lse, combined.lse, `${label} ${denseForm}: lse differs`);
          assertMatchesReference(merged, ref, c.q, `${label} ${denseForm}`);
        }
      } finally {
        c.dispose();
      }
    }
  });

  test("a strided q: padded heads (TMA takes the strides) and one q broadcast over the batch (stride 0: no TMA map, Q read with ld.global)", () => {
    for (const [i, [h_q, s_q, dtype]] of ([[16, 2, "bf16"], [128, 1, "fp16"], [64, 2, "bf16"]] as const).entries()) {
      const lens = [65, 0, 700, 1];
      const host = makeDenseCase({ seed: 12200 + i, b: lens.length, s_q, h_q, h_kv: 1, seqlens: lens, causal: s_q > 1, dtype, extraBlocks: 1, d_qk: D512 });
      const row = D512 + 64;  // each head's 512 dims, then 64 elements of NaN
      const padded_ = padded(host.q, D512, 64, [s_q * h_q * row, h_q * row, row, 1], NAN_HALF_BITS);
      // Request 0's queries for every request: the batch stride is 0.
      const first = padded(host.q.view([1, s_q, h_q, D512]).contiguousHost(), D512, 64, [s_q * h_q * row, h_q * row, row, 1], NAN_HALF_BITS);
      const broadcast = first.view([lens.length, s_q, h_q, D512], [0, h_q * row, row, 1]);
      const c = uploadDenseCase(host);
      try {
        for (const [name, qHost, tma] of [["padded", padded_, true], ["broadcast", broadcast, false]] as const) {
          const view = denseQTensorMapView({ b: lens.length, s_q, h_kv: 1, d_qk: D512 }, h_q, qHost.strides, 2);
          assert.equal(view !== undefined, tma, `${name} q: ${tma ? "a" : "no"} TMA map`);
          const q = uploadStorage(qHost);
          try {
            const ref = mlaDecodeReference({ ...host, q: qHost });
            for (const denseForm of DENSE_FORMS) {
              assertMatchesReference(decodePoisoned({ ...c, q }, { denseForm }), ref, q, `d_qk 512 ${name} q h_q=${h_q} s_q=${s_q} ${dtype} ${denseForm}`);
            }
          } finally {
            q.dispose();
          }
        }
      } finally {
        c.dispose();
      }
    }
  });

  test("the fp32 GPU reference at d_qk 512 agrees with the float64 CPU reference", () => {
    for (const [i, [h_q, h_kv, s_q, dtype]] of ([[64, 1, 2, "bf16"], [9, 3, 2, "fp16"]] as const).entries()) {
      const host = makeDenseCase({ seed: 12300 + i, b: 2, s_q, h_q, h_kv, seqlens: { mean: 200, varlen: true }, causal: true, dtype, d_qk: D512 });
      const c = uploadDenseCase(host);
      const ref = mlaDecodeReferenceGpu({ ...c });
      try {
        const cpu = mlaDecodeReference(host);
        assertClose(ref.out.toHost().host as Float32Array, cpu.outF32, { abs: 1e-5, rel: 1e-4, cos: 1e-9 }, { name: `fp32 GPU reference out (d_qk 512, ${dtype})` });
        assertClose(ref.lse.toHost().host as Float32Array, cpu.lse.host as Float32Array, { abs: 1e-5, rel: 1e-6 }, { name: `fp32 GPU reference lse (d_qk 512, ${dtype})` });
      } finally {
        ref.out.dispose(); ref.lse.dispose(); c.dispose();
      }
    }
  });
});
