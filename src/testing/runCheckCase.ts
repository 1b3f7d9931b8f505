import { chooseKernel } from "../mla/chooseKernel.js";
import type { KernelName } from "../mla/contract/kernelRegistry.js";
import { D_V } from "../mla/contract/shape.js";
import { decodeWithOverrides, type DecodeOverrides } from "../mla/flashMlaWithKvcache.js";
import { getMlaMetadata, type MlaSchedMeta } from "../mla/sched/MlaSchedMeta.js";
import { Rng } from "../numeric/random.js";
import type { Stream } from "../runtime/Stream.js";
import type { Tensor } from "../runtime/Tensor.js";
import { checkDenseCase, type DenseCheckResult } from "./checkDenseCase.js";
import { checkCaseSeqlens, type AnyCheckCaseSpec, type CheckCaseSpec, type SparseCheckCaseSpec } from "./checkGrid.js";
import { checkSparseCase, type SparseCheckResult } from "./checkSparseCase.js";
import { makeGpuDenseCase, type GpuDenseCase } from "./gpuDenseCase.js";
import { makeGpuSparseCase, type GpuSparseCase } from "./gpuSparseCase.js";
import { sampleSparseRows } from "./sampleSparseRows.js";

/** One row of `flashmla check`. */
export interface CheckCaseResult {
  spec: AnyCheckCaseSpec;
  /** The main kernel that served the case. */
  kernel: KernelName;
  seqlens: { min: number; max: number; zeros: number };
  ok: boolean;
  /** Absent when the case threw before it could be compared. */
  check?: DenseCheckResult | SparseCheckResult;
  error?: string;
}

/** Cap on the float64 reference's work for a sampled sparse check case (a few tenths of a second). */
const SPARSE_SAMPLE_MACS = 5e7;

/** Options of {@link runCheckCase}. */
export interface RunCheckCaseOptions {
  stream: Stream;
  seed: number;
  /** A forced kernel choice (tests of one form or plan); the API's own choice without it. */
  overrides?: DecodeOverrides;
}

/**
 * Builds one check case on the GPU, runs flashMlaWithKvcache on it once and compares the output with the
 * references. Dense: every row, or sampled rows for large shapes, against the float64 CPU reference,
 * and every element against the fp32 GPU reference for large shapes. Sparse: every row against the
 * float64 CPU reference on small shapes, else sampled rows (from a compact host copy of the tokens
 * they read) and every element against the fp32 GPU sparse reference; the whole output is scanned
 * for values that cannot be right. Never throws.
 */
export function runCheckCase(spec: AnyCheckCaseSpec, opts: RunCheckCaseOptions): CheckCaseResult {
  const seqlens = checkCaseSeqlens(spec, opts.seed);
  const summary = { min: Math.min(...seqlens), max: Math.max(...seqlens), zeros: seqlens.filter((n) => n === 0).length };
  const kernel = chooseKernel(spec.kind === "sparse" ? { ...spec, kind: "sparse" } : { ...spec, kind: "dense", maxLen: summary.max }, opts.overrides);
  const owned: Array<{ dispose(): void } | undefined> = [];
  const meta = getMlaMetadata();
  try {
    const check = spec.kind === "sparse" ? sparseCheck(spec, seqlens, opts, meta, owned) : denseCheck(spec, seqlens, opts, meta, owned);
    return { spec, kernel, seqlens: summary, ok: check.ok, check };
  } catch (e) {
    return { spec, kernel, seqlens: summary, ok: false, error: e instanceof Error ? e.message : String(e) };
  } finally {
    try {
      opts.stream.synchronize();
    } catch {
      // A broken context: the error is already in the result.
    }
    for (const o of [...owned, meta]) {
      try {
        o?.dispose();
      } catch {
        // Cleanup must not hide the result.
      }
    }
  }
}

type Owned = Array<{ dispose(): void } | undefined>;

function denseCheck(spec: CheckCaseSpec, seqlens: number[], opts: RunCheckCaseOptions, meta: MlaSchedMeta, owned: Owned): DenseCheckResult {
  const gc: GpuDenseCase = makeGpuDenseCase({ ...spec, seqlens }, { seed: opts.seed, stream: opts.stream });
  owned.push(gc);
  const res = decodeWithOverrides({
    q: gc.q, kCache: gc.kCache, blockTable: gc.blockTable, cacheSeqlens: gc.cacheSeqlens, headDimV: D_V,
    schedMeta: meta, softmaxScale: gc.softmaxScale, causal: gc.causal, stream: opts.stream,
  }, opts.overrides ?? {});
  owned.push(res.out, res.lse);
  if (spec.allRows) return checkDenseCase(gc, res, { stream: opts.stream });
  // The longest request's last query token sees the most keys. Three rows keep the float64 CPU
  // share to milliseconds (the grid has 2336 cases); the fp32 GPU reference covers every element.
  const rng = new Rng(opts.seed + 1);
  const longest = seqlens.indexOf(Math.max(...seqlens));
  const heads = [...new Set([0, rng.int(0, spec.h_q), spec.h_q - 1])];
  return checkDenseCase(gc, res, { stream: opts.stream, requests: [longest], tokens: [spec.s_q - 1], heads, gpuReference: true });
}

function sparseCheck(spec: SparseCheckCaseSpec, seqlens: number[], opts: RunCheckCaseOptions, meta: MlaSchedMeta, owned: Owned): SparseCheckResult {
  const { b, s_q, h_q, topk } = spec;
  const gc: GpuSparseCase = makeGpuSparseCase(
    {
      b, s_q, h_q, topk, seqlens, pageBlockSize: spec.pageBlockSize, withSink: spec.withSink, withTopkLength: spec.withTopkLength,
      invalidFraction: spec.invalidFraction, blockPadTokens: spec.blockPadTokens,
    },
    { seed: opts.seed, stream: opts.stream },
  );
  owned.push(gc);
  const res: { out: Tensor; lse: Tensor } = decodeWithOverrides({
    q: gc.q, kCache: gc.kCache, indices: gc.indices, topkLength: gc.topkLength, attnSink: gc.attnSink, isFp8Kvcache: true, headDimV: D_V,
    schedMeta: meta, softmaxScale: gc.softmaxScale, stream: opts.stream,
  }, opts.overrides ?? {});
  owned.push(res.out, res.lse);
  if (spec.allRows) return checkSparseCase(gc, res, { stream: opts.stream });
  const longest = seqlens.indexOf(Math.max(...seqlens));
  const rows = sampleSparseRows({ b, s_q, h_q, topk, seed: opts.seed + 1, attnSink: gc.attnSinkHost, requests: [longest], maxMacs: SPARSE_SAMPLE_MACS });
  return checkSparseCase(gc, res, { stream: opts.stream, rows, gpuReference: true });
}
