import { getMlaMetadata } from "../mla/MlaSchedMeta.js";
import { Rng } from "../numeric/random.js";
import type { Stream } from "../runtime/Stream.js";
import type { Tensor } from "../runtime/Tensor.js";
import type { BenchKernel } from "./benchKernels.js";
import { checkDenseCase, type DenseCheckResult } from "./checkDenseCase.js";
import { checkCaseSeqlens, type CheckCaseSpec } from "./checkGrid.js";
import { makeGpuDenseCase, type GpuDenseCase } from "./makeGpuDenseCase.js";

/** One row of `flashmla check`. */
export interface CheckCaseResult {
  spec: CheckCaseSpec;
  seqlens: { min: number; max: number; zeros: number };
  ok: boolean;
  /** Absent when the case threw before it could be compared. */
  check?: DenseCheckResult;
  error?: string;
}

/**
 * Builds one check case on the GPU, runs `kernel` on it once and compares the output with the
 * references (every row, or sampled rows for large shapes, against the float64 CPU reference; every
 * element against the fp32 GPU reference for large shapes). Never throws.
 */
export function runCheckCase(spec: CheckCaseSpec, opts: { kernel: BenchKernel; stream: Stream; seed: number }): CheckCaseResult {
  const seqlens = checkCaseSeqlens(spec, opts.seed);
  const summary = { min: Math.min(...seqlens), max: Math.max(...seqlens), zeros: seqlens.filter((n) => n === 0).length };
  let gc: GpuDenseCase | undefined;
  let res: { out: Tensor; lse: Tensor } | undefined;
  const meta = getMlaMetadata();
  try {
    gc = makeGpuDenseCase({ ...spec, seqlens }, { seed: opts.seed, stream: opts.stream });
    res = opts.kernel.run({
      q: gc.q, kCache: gc.kCache, blockTable: gc.blockTable, cacheSeqlens: gc.cacheSeqlens, headDimV: 512,
      schedMeta: meta, softmaxScale: gc.softmaxScale, causal: gc.causal, stream: opts.stream,
    });
    let check: DenseCheckResult;
    if (spec.allRows) {
      check = checkDenseCase(gc, res, { stream: opts.stream });
    } else {
      // The longest request's last query token sees the most keys. Three rows keep the float64 CPU
      // share to milliseconds (the grid has 2336 cases); the fp32 GPU reference covers every element.
      const rng = new Rng(opts.seed + 1);
      const longest = seqlens.indexOf(summary.max);
      const heads = [...new Set([0, rng.int(0, spec.h_q), spec.h_q - 1])];
      check = checkDenseCase(gc, res, { stream: opts.stream, requests: [longest], tokens: [spec.s_q - 1], heads, gpuReference: true });
    }
    return { spec, seqlens: summary, ok: check.ok, check };
  } catch (e) {
    return { spec, seqlens: summary, ok: false, error: e instanceof Error ? e.message : String(e) };
  } finally {
    try {
      opts.stream.synchronize();
    } catch {
      // A broken context: the error is already in the result.
    }
    for (const f of [() => res?.out.dispose(), () => res?.lse.dispose(), () => gc?.dispose(), () => meta.dispose()]) {
      try {
        f();
      } catch {
        // Cleanup must not hide the result.
      }
    }
  }
}
