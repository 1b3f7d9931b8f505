import assert from "node:assert/strict";
import { ArgumentError } from "../../src/errors/ArgumentError.js";
import { getMlaMetadata } from "../../src/mla/MlaSchedMeta.js";
import { mlaDecodeReference } from "../../src/mla/mlaDecodeReference.js";
import { sparseDecodeGpu, type SparseDecodeOptions } from "../../src/mla/sparseDecodeGpu.js";
import { bf16ArrayToF32 } from "../../src/numeric/bf16.js";
import { assertClose, SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../src/numeric/compare.js";
import { Rng } from "../../src/numeric/random.js";
import { Tensor } from "../../src/runtime/Tensor.js";
import { makeSparseCase, type SparseCaseOptions } from "./makeDecodeCase.js";

/**
 * Runs the sparse kernel on a host-made case and compares with the float64 CPU reference: every element
 * when the case is small, else `sampleRows` seeded rows (the reference costs O(rows · topk · 576)).
 */
export function checkSparseAgainstCpu(opts: SparseCaseOptions, sampleRows = 0, crossover = false, producer: "v1" | "v2" | "v3" = "v1", extra: SparseDecodeOptions = {}): void {
  const c = makeSparseCase(opts);
  const dev = {
    q: Tensor.toDevice(c.q),
    kCache: Tensor.toDevice(c.kCache),
    indices: Tensor.toDevice(c.indices),
    topkLength: c.topkLength && Tensor.toDevice(c.topkLength),
    attnSink: c.attnSink && Tensor.toDevice(c.attnSink),
  };
  const meta = getMlaMetadata();
  const label = JSON.stringify(opts);
  try {
    const { out, lse } = sparseDecodeGpu({ ...dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: c.softmaxScale, schedMeta: meta }, { crossover, producer, ...extra });
    // Outputs in the unscaled case's units (kvScale, see makeHostSparseCase), so the tolerance means the same.
    const unit = opts.kvScale ?? 1;
    const got = bf16ArrayToF32(out.toHost().host as Uint16Array);
    if (unit !== 1) got.forEach((v, i, a) => (a[i] = v / unit));
    const gotLse = lse.toHost().host as Float32Array;
    out.dispose();
    lse.dispose();
    const { b, s_q, h_q } = opts;
    const rng = new Rng(opts.seed + 1);
    const rows = sampleRows > 0 ? Array.from({ length: sampleRows }, () => ({ batch: rng.int(0, b), token: rng.int(0, s_q), head: rng.int(0, h_q) })) : undefined;
    const ref = mlaDecodeReference({ ...c }, { rows });
    if (unit !== 1) ref.outF32.forEach((v, i, a) => (a[i] = v / unit));
    if (rows === undefined) {
      assertClose(got, ref.outF32, SPARSE_OUT_TOL, { shape: [b, s_q, h_q, 512], name: `out (${label})`, roundReferenceTo: "bf16" });
      assertClose(gotLse, ref.lse.host as Float32Array, SPARSE_LSE_TOL, { shape: [b, h_q, s_q], name: `lse (${label})` });
    } else {
      for (const r of rows) {
        const base = ((r.batch * s_q + r.token) * h_q + r.head) * 512;
        assertClose(got.subarray(base, base + 512), ref.outF32.subarray(base, base + 512), SPARSE_OUT_TOL, { name: `out row ${JSON.stringify(r)} (${label})`, roundReferenceTo: "bf16" });
        const li = (r.batch * h_q + r.head) * s_q + r.token;
        assertClose([gotLse[li]], [(ref.lse.host as Float32Array)[li]], SPARSE_LSE_TOL, { name: `lse row ${JSON.stringify(r)} (${label})` });
      }
    }
  } finally {
    meta.dispose();
    for (const t of Object.values(dev)) t?.dispose();
  }
}


/** A host-made sparse case and its device copies (dispose() frees them). */
export function uploadSparseCase(opts: SparseCaseOptions) {
  const c = makeSparseCase(opts);
  const dev = { q: Tensor.toDevice(c.q), kCache: Tensor.toDevice(c.kCache), indices: Tensor.toDevice(c.indices), topkLength: c.topkLength && Tensor.toDevice(c.topkLength), attnSink: c.attnSink && Tensor.toDevice(c.attnSink) };
  return { c, dev, dispose: () => Object.values(dev).forEach((t) => t?.dispose()) };
}

/** One sparseDecodeGpu call on an uploaded case (its own metadata); the output bits, on the host. */
export function sparseBits(u: ReturnType<typeof uploadSparseCase>, opts: SparseDecodeOptions): { out: Uint16Array; lse: Float32Array } {
  const meta = getMlaMetadata();
  try {
    const r = sparseDecodeGpu({ ...u.dev, isFp8Kvcache: true, headDimV: 512, softmaxScale: u.c.softmaxScale, schedMeta: meta }, opts);
    const bits = { out: r.out.toHost().host as Uint16Array, lse: r.lse.toHost().host as Float32Array };
    r.out.dispose();
    r.lse.dispose();
    return bits;
  } finally {
    meta.dispose();
  }
}

/**
 * Runs `a` and `b` on one uploaded case and asserts their outputs agree within the sparse tolerances,
 * reporting how many out elements differ in their bits (the two kernels may round differently).
 */
export function assertSparseKernelsAgree(u: ReturnType<typeof uploadSparseCase>, a: SparseDecodeOptions, b: SparseDecodeOptions, names: [string, string], diagnostic: (msg: string) => void): void {
  const ra = sparseBits(u, a);
  const rb = sparseBits(u, b);
  let differ = 0;
  for (let i = 0; i < ra.out.length; i++) if (ra.out[i] !== rb.out[i]) differ++;
  diagnostic(`${differ} of ${ra.out.length} out elements differ in their bits from ${names[0]}`);
  assertClose(bf16ArrayToF32(rb.out), bf16ArrayToF32(ra.out), SPARSE_OUT_TOL, { name: `${names[1]} out vs ${names[0]}` });
  assertClose(rb.lse, ra.lse, SPARSE_LSE_TOL, { name: `${names[1]} lse vs ${names[0]}` });
}

/**
 * Each sparseDecodeGpu call of `cases` is refused with an ArgumentError whose message matches, and none of
 * them fills the (shared, fresh) metadata: the options are checked before anything is allocated.
 */
export function assertSparseOptionsRefused(cases: ReadonlyArray<{ u: ReturnType<typeof uploadSparseCase>; opts: SparseDecodeOptions; message: RegExp }>): void {
  const meta = getMlaMetadata();
  try {
    for (const { u, opts, message } of cases) {
      const args = { ...u.dev, isFp8Kvcache: true as const, headDimV: 512, softmaxScale: u.c.softmaxScale, schedMeta: meta };
      assert.throws(() => sparseDecodeGpu(args, opts), (e: unknown) => e instanceof ArgumentError && message.test(e.message), `refused: ${JSON.stringify(opts)}`);
    }
    assert.equal(meta.initialized, false, "no metadata was filled by the refused calls");
  } finally {
    meta.dispose();
  }
}
