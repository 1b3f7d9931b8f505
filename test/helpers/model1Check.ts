import type { FlashMlaWithKvcacheArgs } from "../../src/mla/args.js";
import { D_V } from "../../src/mla/contract/shape.js";
import { decodeWithOverrides } from "../../src/mla/flashMlaWithKvcache.js";
import { mlaDecodeReference } from "../../src/mla/reference/mlaDecodeReference.js";
import { getMlaMetadata } from "../../src/mla/sched/MlaSchedMeta.js";
import type { SparsePlan } from "../../src/mla/sparse/chooseSparseKernel.js";
import { bf16ArrayToF32 } from "../../src/numeric/bf16.js";
import { SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../src/numeric/compare.js";
import { Rng } from "../../src/numeric/random.js";
import { Tensor } from "../../src/runtime/Tensor.js";
import { NAN_HALF_BITS } from "../../src/testing/denseCase.js";
import { makeModel1Case, type Model1Case, type Model1CaseOptions } from "../../src/testing/model1Case.js";
import { assertDecodeRowsClose } from "./compareDecode.js";
import { uploadStorage } from "./strided.js";

/** A MODEL1 case's decode arguments on the GPU, with preallocated outputs full of NaN. */
export interface UploadedModel1Case {
  args: Omit<FlashMlaWithKvcacheArgs, "schedMeta">;
  /** Refills out and lse with NaN, so that the next decode into them shows any element it leaves unwritten. */
  poison(): void;
  dispose(): void;
}

/**
 * Uploads a host case (mlaDecodeReference's arguments, as makeModel1Case gives them) with every view kept:
 * a MODEL1 cache's pages are not its logical rows, and a strided q keeps its strides.
 */
export function uploadModel1Case(c: Model1Case): UploadedModel1Case {
  const held: Tensor[] = [];
  const up = <T extends Tensor>(t: T | undefined): T | undefined => {
    if (t === undefined) return undefined;
    const d = uploadStorage(t);
    held.push(d);
    return d;
  };
  const [b, s_q, h_q] = c.q.shape;
  const out = Tensor.emptyDevice([b, s_q, h_q, D_V], "bf16");
  const lse = Tensor.emptyDevice([b, h_q, s_q], "f32");
  held.push(out, lse);
  const poison = () => {
    out.buffer!.memset32(((NAN_HALF_BITS << 16) | NAN_HALF_BITS) >>> 0);
    lse.buffer!.memset32(0x7fc00000);
  };
  poison();
  const args = {
    q: up(c.q)!,
    kCache: up(c.kCache)!,
    indices: up(c.indices)!,
    topkLength: up(c.topkLength),
    extraKCache: up(c.extraKCache),
    extraIndices: up(c.extraIndices),
    extraTopkLength: up(c.extraTopkLength),
    attnSink: up(c.attnSink),
    softmaxScale: c.softmaxScale,
    isFp8Kvcache: true as const,
    headDimV: D_V,
    out,
    lse,
  };
  return { args, poison, dispose: () => held.forEach((t) => t.dispose()) };
}

/**
 * Decodes an uploaded case into its outputs, poisoned again first (the API's plan, or `plan` forced),
 * with its own metadata; out as f32 values and lse, on the host.
 */
export function decodeModel1(u: UploadedModel1Case, plan?: SparsePlan): { out: Float32Array; lse: Float32Array } {
  const meta = getMlaMetadata();
  try {
    u.poison();
    const { out, lse } = decodeWithOverrides({ ...u.args, schedMeta: meta }, { sparsePlan: plan });
    return { out: bf16ArrayToF32(out.toHost().host as Uint16Array), lse: lse.toHost().host as Float32Array };
  } finally {
    meta.dispose();
  }
}

/**
 * Decodes a MODEL1 case on the GPU (the API's plan, or `plan` forced) and compares it with the float64
 * CPU reference: every element, or `sampleRows` seeded rows of large cases (the reference costs
 * O(rows · topk · 512)).
 */
export function checkModel1AgainstCpu(opts: Model1CaseOptions, sampleRows = 0, plan?: SparsePlan): void {
  const c = makeModel1Case(opts);
  const u = uploadModel1Case(c);
  try {
    const got = decodeModel1(u, plan);
    const { b, s_q, h_q } = opts;
    const rng = new Rng(opts.seed + 1);
    const rows = sampleRows > 0 ? Array.from({ length: sampleRows }, () => ({ batch: rng.int(0, b), token: rng.int(0, s_q), head: rng.int(0, h_q) })) : undefined;
    const ref = mlaDecodeReference(c, { rows });
    const label = `${JSON.stringify(opts)}, plan ${plan ?? "the API's"}`;
    assertDecodeRowsClose(got, { out: ref.outF32, lse: ref.lse.host as Float32Array }, { dims: opts, rows, tol: { out: SPARSE_OUT_TOL, lse: SPARSE_LSE_TOL }, label });
  } finally {
    u.dispose();
  }
}
