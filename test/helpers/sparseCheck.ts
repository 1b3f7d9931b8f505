import assert from "node:assert/strict";
import { ArgumentError } from "../../src/errors/ArgumentError.js";
import { D_V } from "../../src/mla/contract/shape.js";
import { decodeWithOverrides, type DecodeOverrides } from "../../src/mla/flashMlaWithKvcache.js";
import { mlaDecodeReference } from "../../src/mla/reference/mlaDecodeReference.js";
import { getMlaMetadata } from "../../src/mla/sched/MlaSchedMeta.js";
import type { SparsePlan } from "../../src/mla/sparse/chooseSparseKernel.js";
import { bf16ArrayToF32 } from "../../src/numeric/bf16.js";
import { assertClose, SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../src/numeric/compare.js";
import { Rng } from "../../src/numeric/random.js";
import { uploadSparseCase, type UploadedSparseCase } from "../../src/testing/gpuSparseCase.js";
import type { SparseCaseOptions } from "../../src/testing/sparseCase.js";

/**
 * Runs a sparse call on a host-made case (the plan flashMlaWithKvcache chooses, or `plan` forced) and
 * compares with the float64 CPU reference: every element when the case is small, else `sampleRows` seeded
 * rows (the reference costs O(rows · topk · 576)).
 */
export function checkSparseAgainstCpu(opts: SparseCaseOptions, sampleRows = 0, plan?: SparsePlan): void {
  const u = uploadSparseCase(opts);
  const meta = getMlaMetadata();
  const label = `${JSON.stringify(opts)}, plan ${plan ?? "the API's"}`;
  try {
    const { out, lse } = decodeWithOverrides({ ...u.args, schedMeta: meta }, { sparsePlan: plan });
    // Outputs in the unscaled case's units (kvScale, see makeSparseCase), so the tolerance means the same.
    const unit = opts.kvScale ?? 1;
    const got = bf16ArrayToF32(out.toHost().host as Uint16Array);
    if (unit !== 1) got.forEach((v, i, a) => (a[i] = v / unit));
    const gotLse = lse.toHost().host as Float32Array;
    out.dispose();
    lse.dispose();
    const { b, s_q, h_q } = opts;
    const rng = new Rng(opts.seed + 1);
    const rows = sampleRows > 0 ? Array.from({ length: sampleRows }, () => ({ batch: rng.int(0, b), token: rng.int(0, s_q), head: rng.int(0, h_q) })) : undefined;
    const ref = mlaDecodeReference({ ...u.c }, { rows });
    if (unit !== 1) ref.outF32.forEach((v, i, a) => (a[i] = v / unit));
    if (rows === undefined) {
      assertClose(got, ref.outF32, SPARSE_OUT_TOL, { shape: [b, s_q, h_q, D_V], name: `out (${label})`, roundReferenceTo: "bf16" });
      assertClose(gotLse, ref.lse.host as Float32Array, SPARSE_LSE_TOL, { shape: [b, h_q, s_q], name: `lse (${label})` });
    } else {
      for (const r of rows) {
        const base = ((r.batch * s_q + r.token) * h_q + r.head) * D_V;
        assertClose(got.subarray(base, base + D_V), ref.outF32.subarray(base, base + D_V), SPARSE_OUT_TOL, { name: `out row ${JSON.stringify(r)} (${label})`, roundReferenceTo: "bf16" });
        const li = (r.batch * h_q + r.head) * s_q + r.token;
        assertClose([gotLse[li]], [(ref.lse.host as Float32Array)[li]], SPARSE_LSE_TOL, { name: `lse row ${JSON.stringify(r)} (${label})` });
      }
    }
  } finally {
    meta.dispose();
    u.dispose();
  }
}

/** One sparse call on an uploaded case (its own metadata) with `overrides`; the output bits, on the host. */
export function sparseBits(u: UploadedSparseCase, overrides: DecodeOverrides = {}): { out: Uint16Array; lse: Float32Array } {
  const meta = getMlaMetadata();
  try {
    const r = decodeWithOverrides({ ...u.args, schedMeta: meta }, overrides);
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
export function assertSparseKernelsAgree(u: UploadedSparseCase, a: DecodeOverrides, b: DecodeOverrides, names: [string, string], diagnostic: (msg: string) => void): void {
  const ra = sparseBits(u, a);
  const rb = sparseBits(u, b);
  let differ = 0;
  for (let i = 0; i < ra.out.length; i++) if (ra.out[i] !== rb.out[i]) differ++;
  diagnostic(`${differ} of ${ra.out.length} out elements differ in their bits from ${names[0]}`);
  assertClose(bf16ArrayToF32(rb.out), bf16ArrayToF32(ra.out), SPARSE_OUT_TOL, { name: `${names[1]} out vs ${names[0]}` });
  assertClose(rb.lse, ra.lse, SPARSE_LSE_TOL, { name: `${names[1]} lse vs ${names[0]}` });
}

/**
 * Each call of `cases` is refused with an ArgumentError whose message matches, and none of them fills the
 * (shared, fresh) metadata: the overrides are checked before anything is allocated.
 */
export function assertSparseOverridesRefused(cases: ReadonlyArray<{ u: UploadedSparseCase; overrides: DecodeOverrides; message: RegExp }>): void {
  const meta = getMlaMetadata();
  try {
    for (const { u, overrides, message } of cases) {
      assert.throws(() => decodeWithOverrides({ ...u.args, schedMeta: meta }, overrides), (e: unknown) => e instanceof ArgumentError && message.test(e.message), `refused: ${JSON.stringify(overrides)}`);
    }
    assert.equal(meta.initialized, false, "no metadata was filled by the refused calls");
  } finally {
    meta.dispose();
  }
}
