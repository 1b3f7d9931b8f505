import { test } from "node:test";
import assert from "node:assert/strict";
import { DcpStep } from "../../../src/dcp/DcpStep.js";
import { dcpDecode, type DcpRankArgs } from "../../../src/dcp/dcpDecode.js";
import { dcpMerge, dcpRescale } from "../../../src/dcp/merge.js";
import { dcpMergeModel, dcpRescaleModel } from "../../../src/dcp/mergeModel.js";
import { dcpPageMapRoundRobin, shardSparseCacheHost, shardSparseIndicesHost } from "../../../src/dcp/shard.js";
import { D_V } from "../../../src/mla/contract/shape.js";
import { getMlaMetadata, type MlaSchedMeta } from "../../../src/mla/sched/MlaSchedMeta.js";
import { bf16ArrayToF32, f32ArrayToBf16 } from "../../../src/numeric/bf16.js";
import { assertClose, SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { fp16ArrayToF32, f32ArrayToFp16 } from "../../../src/numeric/fp16.js";
import { Rng } from "../../../src/numeric/random.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { checkDenseCase } from "../../../src/testing/checkDenseCase.js";
import { UNUSED_BLOCK_ID } from "../../../src/testing/denseCase.js";
import { makeDenseCaseGpu, type GpuDenseCase } from "../../../src/testing/gpuDenseCase.js";
import { uploadSparseCase } from "../../../src/testing/gpuSparseCase.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { ncclAvailable, NcclComm, ncclGroup } from "../../../src/nccl/index.js";
import { describeGpu } from "../../helpers/gpu.js";

// Decode context parallelism on one GPU: N virtual ranks, each decoding its share of every request's
// cache, merged by the same kernel the all-gather form runs; and the merge kernel against the float64
// model of dcp/mergeModel.ts. (NCCL with two ranks needs two GPUs: test/gpu/nccl and the two-GPU run.)

const PAGE = 64;

/** Rank r's block table under the token rule, its pages taken from the global case's table in order. */
function localBlockTable(gc: GpuDenseCase, rank: number, ranks: number, interleave: number): Int32Array {
  const pagesPerRun = interleave / PAGE;
  // Request i's pages k (0-based in its global order) that hold rank `rank`'s tokens, in order.
  const rows = gc.seqlens.map((len) => Array.from({ length: Math.ceil(len / PAGE) }, (_, k) => k).filter((k) => Math.floor(k / pagesPerRun) % ranks === rank));
  const width = Math.max(1, ...rows.map((r) => r.length));
  const table = new Int32Array(gc.b * width).fill(UNUSED_BLOCK_ID);
  rows.forEach((ks, i) => ks.forEach((k, c) => (table[i * width + c] = gc.blockTableHost[i * gc.maxBlocks + k])));
  return table;
}

/** The case decoded by N virtual ranks (one call), the steps disposed. */
function decodeVirtual(gc: GpuDenseCase, ranks: number, interleave: number, stream: Stream): { out: Tensor; lse: Tensor; forms: string[] } {
  const cacheSeqlens = Int32Array.from(gc.seqlens);
  const steps = Array.from({ length: ranks }, (_, r) => DcpStep.dense({ rank: r, ranks, interleave, cacheSeqlens, blockTable: localBlockTable(gc, r, ranks, interleave), sQ: gc.s_q, causal: gc.causal, stream }));
  const metas: MlaSchedMeta[] = steps.map(() => getMlaMetadata());
  try {
    const args: DcpRankArgs[] = steps.map((step, r) => ({ step, q: gc.q, kCache: gc.kCache, schedMeta: metas[r], headDimV: D_V, softmaxScale: gc.softmaxScale, stream }));
    const [res] = dcpDecode(args, { form: "allGather" });
    stream.synchronize();
    return { ...res, forms: steps.map((s) => s.form) };
  } finally {
    steps.forEach((s) => s.dispose());
    metas.forEach((m) => m.dispose());
  }
}

describeGpu("decode context parallelism on one GPU (virtual ranks)", () => {
  const stream = Stream.create();

  test("dcpMerge equals the float64 merge model: poisoned empty shards, +-inf lse, sinks of +-inf, NaN shards, bf16 and fp16", () => {
    const rng = new Rng(7101);
    for (const [dtype, ranks, b, s_q, h_q] of [["bf16", 1, 2, 1, 16], ["bf16", 3, 3, 2, 32], ["fp16", 4, 2, 1, 64], ["bf16", 8, 1, 2, 128]] as const) {
      const rows = b * s_q * h_q;
      const toBits = dtype === "bf16" ? f32ArrayToBf16 : f32ArrayToFp16;
      const toF32 = dtype === "bf16" ? bf16ArrayToF32 : fp16ArrayToF32;
      const outs: Float32Array[] = [], lses: Float32Array[] = [];
      for (let r = 0; r < ranks; r++) {
        const o = Float32Array.from({ length: rows * D_V }, () => rng.normal());
        const l = Float32Array.from({ length: rows }, () => 2 + 6 * rng.normal());
        // Row k of rank r is empty for some (r, k): its lse +-inf and its out NaN (never read).
        for (let k = 0; k < rows; k++) {
          if (rng.nextU32() % 5 !== 0) continue;
          l[(Math.floor(k / h_q / s_q) * h_q + (k % h_q)) * s_q + (Math.floor(k / h_q) % s_q)] = rng.nextU32() % 2 ? Infinity : -Infinity;
          o.fill(NaN, k * D_V, (k + 1) * D_V);
        }
        outs.push(toF32(toBits(o)));
        lses.push(l);
      }
      // One row NaN in one rank's lse: that row is NaN, the others are not.
      if (ranks > 2) lses[1][0] = NaN;
      const sink = Float32Array.from({ length: h_q }, (_, h) => (h % 7 === 0 ? Infinity : h % 7 === 1 ? -Infinity : rng.normal()));
      const outParts = Tensor.toDevice(Tensor.fromHost(concat16(outs.map((o) => toBits(o))), [ranks, b, s_q, h_q, D_V], dtype));
      const lseParts = Tensor.toDevice(Tensor.fromHost(concatF32(lses), [ranks, b, h_q, s_q], "f32"));
      const attnSink = Tensor.toDevice(Tensor.fromHost(sink, [h_q], "f32"));
      try {
        for (const withSink of [false, true]) {
          const got = dcpMerge({ outParts, lseParts, attnSink: withSink ? attnSink : undefined, stream });
          const want = dcpMergeModel({ outs, lses, dims: { b, s_q, h_q }, attnSink: withSink ? sink : undefined });
          const gotOut = toF32(got.out.toHost(stream).host as Uint16Array), gotLse = got.lse.toHost(stream).host as Float32Array;
          got.out.dispose(), got.lse.dispose();
          const label = `${dtype} ranks ${ranks} b ${b} s_q ${s_q} h_q ${h_q} sink ${withSink}`;
          // The kernel weighs in f32 and rounds once: one rounding of the output dtype plus f32 sums.
          assertClose(gotOut, Float32Array.from(want.out), { abs: 1e-5, rel: dtype === "bf16" ? 2 ** -7 : 2 ** -10, cos: 1e-6 }, { name: `out (${label})`, roundReferenceTo: dtype, shape: [b, s_q, h_q, D_V] });
          assertClose(gotLse, Float32Array.from(want.lse), { abs: 1e-5, rel: 1e-5 }, { name: `lse (${label})`, shape: [b, h_q, s_q] });
        }
      } finally {
        outParts.dispose(), lseParts.dispose(), attnSink.dispose();
      }
    }
  });

  test("dcpRescale's terms, summed over the ranks, equal the merge; both layouts; the merged lse on every rank", () => {
    const rng = new Rng(7202);
    const [ranks, b, s_q, h_q] = [4, 2, 2, 64];
    const rows = b * s_q * h_q;
    const outs = Array.from({ length: ranks }, () => bf16ArrayToF32(f32ArrayToBf16(Float32Array.from({ length: rows * D_V }, () => rng.normal()))));
    const lses = Array.from({ length: ranks }, () => Float32Array.from({ length: rows }, () => (rng.nextU32() % 6 === 0 ? Infinity : 4 * rng.normal())));
    const sink = Float32Array.from({ length: h_q }, () => rng.normal());
    const lseParts = Tensor.toDevice(Tensor.fromHost(concatF32(lses), [ranks, b, h_q, s_q], "f32"));
    const attnSink = Tensor.toDevice(Tensor.fromHost(sink, [h_q], "f32"));
    const merged = dcpMergeModel({ outs, lses, dims: { b, s_q, h_q }, attnSink: sink });
    try {
      for (const layout of ["heads", "headChunks"] as const) {
        const sum = new Float64Array(rows * D_V), sumAbs = new Float64Array(rows * D_V);
        for (let r = 0; r < ranks; r++) {
          const own = Tensor.toDevice(Tensor.fromHost(f32ArrayToBf16(outs[r]), [b, s_q, h_q, D_V], "bf16"));
          const { term, lse } = dcpRescale({ out: own, lseParts, rank: r, layout, attnSink, stream });
          const t = bf16ArrayToF32(term.toHost(stream).host as Uint16Array);
          const want = dcpRescaleModel({ out: outs[r], lses, rank: r, dims: { b, s_q, h_q }, attnSink: sink });
          const asHeads = layout === "heads" ? t : unchunk(t, ranks, b, s_q, h_q);
          assertClose(asHeads, Float32Array.from(want.partial), { abs: 1e-5, rel: 2 ** -7, cos: 1e-6 }, { name: `term of rank ${r} (${layout})`, roundReferenceTo: "bf16" });
          assertClose(lse.toHost(stream).host as Float32Array, Float32Array.from(merged.lse), { abs: 1e-5, rel: 1e-5 }, { name: `lse of rank ${r}` });
          asHeads.forEach((v, i) => ((sum[i] += v), (sumAbs[i] += Math.abs(v))));
          own.dispose(), term.dispose(), lse.dispose();
        }
        // Each term is rounded to bf16 (half an ulp: up to 2^-8 of the value, 8 significant bits), so the
        // sum may be off by 2^-8 · Σ_r |term_r|: with terms of both signs, far more than 2^-8 of the sum.
        const off = [...sum.keys()].filter((i) => !(Math.abs(sum[i] - merged.out[i]) <= (2 ** -8 + 1e-5) * sumAbs[i] + 1e-6));
        assert.equal(off.length, 0, `Σ terms (${layout}) beyond the rounding of its terms at ${off.length} elements, first ${off[0]}: ${sum[off[0]]} vs ${merged.out[off[0]]}`);
      }
    } finally {
      lseParts.dispose(), attnSink.dispose();
    }
  });

  test("dense: N virtual ranks pass the unsharded decode's check (CPU and GPU references): s_q 1 and 2 causal, empty shards, empty requests", () => {
    const cases = [
      { seed: 7301, b: 4, s_q: 1, h_q: 128, seqlens: [700, 64, 1, 0], causal: false, ranks: 2, interleave: 64 },
      { seed: 7302, b: 3, s_q: 2, h_q: 64, seqlens: [513, 130, 65], causal: true, ranks: 3, interleave: 64 },
      { seed: 7303, b: 5, s_q: 2, h_q: 16, seqlens: [1000, 128, 129, 2, 300], causal: true, ranks: 4, interleave: 128 },
      { seed: 7304, b: 2, s_q: 2, h_q: 128, seqlens: [4096, 777], causal: false, ranks: 4, interleave: 64 },
      { seed: 7305, b: 2, s_q: 1, h_q: 64, seqlens: [63, 40], causal: false, ranks: 4, interleave: 64 },
      // Every request's last token on rank 1: rank 1 takes the kernel's own mask, rank 0 none.
      { seed: 7306, b: 2, s_q: 2, h_q: 128, seqlens: [128, 256], causal: true, ranks: 2, interleave: 64 },
    ];
    const formsSeen = new Set<string>();
    for (const c of cases) {
      const gc = makeDenseCaseGpu({ seed: c.seed, b: c.b, s_q: c.s_q, h_q: c.h_q, h_kv: 1, seqlens: c.seqlens, causal: c.causal, dtype: "bf16" });
      try {
        const { out, lse, forms } = decodeVirtual(gc, c.ranks, c.interleave, stream);
        forms.forEach((f) => formsSeen.add(f));
        const r = checkDenseCase(gc, { out, lse }, { stream, gpuReference: true });
        out.dispose(), lse.dispose();
        assert.ok(r.ok, `${JSON.stringify(c)} forms ${forms}: ${r.message}`);
      } finally {
        gc.dispose();
      }
    }
    assert.deepEqual([...formsSeen].sort(), ["causal", "flatten", "nonCausal"], "the cases cover the three causal forms");
  });

  test("dense at DeepSeek-V4's d_qk 512: N virtual ranks pass the unsharded decode's check (CPU and GPU references) in the three causal forms", () => {
    const cases = [
      { seed: 7351, b: 4, s_q: 1, h_q: 128, seqlens: [700, 64, 1, 0], causal: false, ranks: 2, interleave: 64 },
      { seed: 7352, b: 3, s_q: 2, h_q: 64, seqlens: [513, 130, 65], causal: true, ranks: 3, interleave: 64 },
      { seed: 7353, b: 2, s_q: 2, h_q: 16, seqlens: [128, 256], causal: true, ranks: 2, interleave: 64 },
    ];
    const formsSeen = new Set<string>();
    for (const c of cases) {
      const gc = makeDenseCaseGpu({ seed: c.seed, b: c.b, s_q: c.s_q, h_q: c.h_q, h_kv: 1, seqlens: c.seqlens, causal: c.causal, dtype: "bf16", d_qk: 512 });
      try {
        const { out, lse, forms } = decodeVirtual(gc, c.ranks, c.interleave, stream);
        forms.forEach((f) => formsSeen.add(f));
        const r = checkDenseCase(gc, { out, lse }, { stream, gpuReference: true });
        out.dispose(), lse.dispose();
        assert.ok(r.ok, `d_qk 512 ${JSON.stringify(c)} forms ${forms}: ${r.message}`);
      } finally {
        gc.dispose();
      }
    }
    assert.deepEqual([...formsSeen].sort(), ["causal", "flatten", "nonCausal"], "the cases cover the three causal forms");
  });

  test("dense: FlashMLA-grid shapes (b 16-128, 1K-8K tokens, h_q 16-128, s_q 1-2) on 2, 4 and 8 virtual ranks", () => {
    const cases = [
      { seed: 7401, b: 16, s_q: 1, h_q: 128, mean: 4096, causal: false, ranks: 2 },
      { seed: 7402, b: 32, s_q: 2, h_q: 128, mean: 2048, causal: true, ranks: 4 },
      { seed: 7403, b: 64, s_q: 1, h_q: 16, mean: 8192, causal: false, ranks: 8 },
      { seed: 7404, b: 128, s_q: 2, h_q: 64, mean: 1024, causal: true, ranks: 2 },
    ];
    for (const c of cases) {
      const gc = makeDenseCaseGpu({ seed: c.seed, b: c.b, s_q: c.s_q, h_q: c.h_q, h_kv: 1, seqlens: { mean: c.mean, varlen: true }, causal: c.causal, dtype: "bf16" });
      try {
        const { out, lse, forms } = decodeVirtual(gc, c.ranks, 64, stream);
        const r = checkDenseCase(gc, { out, lse }, { stream, gpuReference: true, requests: [0, c.b - 1] });
        out.dispose(), lse.dispose();
        assert.ok(r.ok, `${JSON.stringify(c)} forms ${forms}: ${r.message}`);
      } finally {
        gc.dispose();
      }
    }
  });

  test("sparse: N virtual ranks on their own caches (pages dealt round robin, indices translated) equal the unsharded reference; sink after the merge", () => {
    for (const [seed, ranks, h_q, s_q, pageBlockSize] of [[7501, 2, 128, 1, 64], [7502, 3, 64, 2, 2], [7503, 4, 16, 1, 64], [7504, 8, 128, 2, 64]] as const) {
      const opts = { seed, b: 3, s_q, h_q, s_k: 1024, topk: 512, pageBlockSize, topkLength: true, sink: true, invalidFraction: 0.05, repeat: 0.02 };
      const u = uploadSparseCase(opts);
      const { c } = u;
      const numPages = c.kCache.shape[0];
      const pageMap = dcpPageMapRoundRobin({ numPages, ranks, pageBlockSize });
      const indicesHost = c.indices.host as Int32Array;
      const local = shardSparseIndicesHost(pageMap, { indices: indicesHost, sQ: s_q, topk: opts.topk, topkLength: c.topkLength?.host as Int32Array });
      const caches = shardSparseCacheHost(pageMap, { kCache: c.kCache.host as Uint8Array, fill: 0xff });
      const owned: Tensor[] = [];
      const up = (t: Tensor) => (owned.push(Tensor.toDevice(t)), owned[owned.length - 1]);
      const steps = Array.from({ length: ranks }, (_, r) => DcpStep.sparse({ rank: r, ranks }));
      const metas = steps.map(() => getMlaMetadata());
      try {
        const args: DcpRankArgs[] = steps.map((step, r) => ({
          step, q: u.dev.q, schedMeta: metas[r], headDimV: D_V, softmaxScale: c.softmaxScale, stream, isFp8Kvcache: true,
          kCache: up(Tensor.fromHost(caches[r], [pageMap.localNumPages[r], pageBlockSize, 1, 656], "u8")),
          indices: up(Tensor.fromHost(local[r], [opts.b, s_q, opts.topk], "i32")),
          topkLength: u.dev.topkLength, attnSink: u.dev.attnSink,
        }));
        const [res] = dcpDecode(args, { form: "allGather" });
        const got = bf16ArrayToF32(res.out.toHost(stream).host as Uint16Array), gotLse = res.lse.toHost(stream).host as Float32Array;
        res.out.dispose(), res.lse.dispose();
        const ref = mlaDecodeReference({ ...c });
        const label = JSON.stringify(opts) + ` ranks ${ranks}`;
        assertClose(got, ref.outF32, SPARSE_OUT_TOL, { shape: [opts.b, s_q, h_q, D_V], name: `out (${label})`, roundReferenceTo: "bf16" });
        assertClose(gotLse, ref.lse.host as Float32Array, SPARSE_LSE_TOL, { shape: [opts.b, h_q, s_q], name: `lse (${label})` });
      } finally {
        steps.forEach((s) => s.dispose());
        metas.forEach((m) => m.dispose());
        owned.forEach((t) => t.dispose());
        u.dispose();
      }
    }
  });

  test("through NCCL with a one-rank communicator, every form passes the unsharded decode's check (NCCL refuses two ranks on one GPU)", (t) => {
    const nccl = ncclAvailable();
    if (!nccl.ok) return t.skip(`NCCL not found: ${nccl.reason.split("\n")[0]}`);
    const [comm] = NcclComm.initAll([0]);
    const gc = makeDenseCaseGpu({ seed: 7601, b: 6, s_q: 2, h_q: 64, h_kv: 1, seqlens: { mean: 900, varlen: true }, causal: true, dtype: "bf16" });
    const step = DcpStep.dense({ rank: 0, ranks: 1, interleave: 64, cacheSeqlens: Int32Array.from(gc.seqlens), blockTable: gc.blockTableHost, sQ: 2, causal: true, stream });
    const meta = getMlaMetadata();
    try {
      for (const form of ["allGather", "allReduce", "reduceScatter"] as const) {
        const [res] = dcpDecode([{ step, comm, q: gc.q, kCache: gc.kCache, schedMeta: meta, headDimV: D_V, softmaxScale: gc.softmaxScale, stream }], { form, group: ncclGroup });
        const r = checkDenseCase(gc, res, { stream, gpuReference: true });
        res.out.dispose(), res.lse.dispose();
        assert.ok(r.ok, `${form}: ${r.message}`);
      }
      assert.equal(comm.asyncError(), undefined, "no asynchronous NCCL error");
    } finally {
      meta.dispose();
      step.dispose();
      gc.dispose();
      comm.dispose();
    }
  });

  test("dcpDecode and dcpMerge name a wrong argument", () => {
    const step = DcpStep.sparse({ rank: 0, ranks: 2 });
    try {
      assert.throws(() => dcpDecode([], { form: "allGather" }), /ranks/);
      assert.throws(() => dcpDecode([{ step } as DcpRankArgs], { form: "allGather" }), /ranks.*all 2 ranks|q/);
      assert.throws(() => dcpDecode([{ step } as DcpRankArgs], { form: "bogus" as "allGather" }), /opts\.form/);
      assert.throws(() => DcpStep.dense({ rank: 2, ranks: 2, interleave: 64, cacheSeqlens: Int32Array.of(5), blockTable: Int32Array.of(0), sQ: 1, causal: false }), /rank/);
      assert.throws(() => DcpStep.dense({ rank: 0, ranks: 2, interleave: 64, cacheSeqlens: Int32Array.of(500), blockTable: Int32Array.of(0), sQ: 1, causal: false }), /blockTable.*pages/);
    } finally {
      step.dispose();
    }
  });
});

/** [ranks, b, s_q, h_q/ranks, 512] → [b, s_q, h_q, 512]. */
function unchunk(t: Float32Array, ranks: number, b: number, s_q: number, h_q: number): Float32Array {
  const hc = h_q / ranks, out = new Float32Array(t.length);
  for (let c = 0; c < ranks; c++)
    for (let tok = 0; tok < b * s_q; tok++)
      for (let hh = 0; hh < hc; hh++) out.set(t.subarray(((c * b * s_q + tok) * hc + hh) * D_V, ((c * b * s_q + tok) * hc + hh + 1) * D_V), (tok * h_q + c * hc + hh) * D_V);
  return out;
}

function concat16(parts: Uint16Array[]): Uint16Array {
  const out = new Uint16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), (at += p.length);
  return out;
}

function concatF32(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), (at += p.length);
  return out;
}
