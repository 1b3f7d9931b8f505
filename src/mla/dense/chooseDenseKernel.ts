import { ArgumentError } from "../../errors/ArgumentError.js";
import type { KernelName } from "../contract/kernelRegistry.js";

/**
 * The two forms of the dense main kernel (kernels/sm90/decode/dense): "fast" runs the two warpgroups'
 * online softmax in lockstep with warp-uniform fast paths (no masks in full blocks, no rescale by 1);
 * "pipe" adds FlashMLA's rotated loop, each warpgroup queueing its next Q·Kᵀ behind its last P·V. Their
 * outputs may differ in the last bits (W1 sums its Q·Kᵀ tiles in another order).
 */
export type DenseForm = "fast" | "pipe";
export const DENSE_FORMS: readonly DenseForm[] = Object.freeze(["fast", "pipe"]);

/**
 * The form a dense call runs: "pipe" where the work is compute-bound (at least 128 query rows per KV
 * head: h_q / h_kv · s_q), "fast" elsewhere. H200, one call each: dense-compute 522.2 µs with pipe
 * against 531.7 with fast, dense-compute-mtp 839 against 920; long-b4-128k-mtp (b 4) 429.7 against
 * 465.4 and long-b1-128k (b 1) 73.0 against 75.7; the memory-bound cases (fewer rows) 0–2 µs slower
 * with pipe.
 */
export function chooseDenseKernel(rows_per_kv: number): DenseForm {
  return rows_per_kv >= 128 ? "pipe" : "fast";
}

/** The registry row of a form at a dtype. */
export function denseKernelName(form: DenseForm, dtype: "bf16" | "fp16"): KernelName {
  return `dense_${form}_${dtype}`;
}

/** A forced form, checked (tests and A/B timing force one; the API never does). */
export function checkDenseForm(fn: string, form: unknown): DenseForm | undefined {
  if (form === undefined || DENSE_FORMS.includes(form as DenseForm)) return form as DenseForm | undefined;
  throw new ArgumentError(fn, "overrides.denseForm", DENSE_FORMS.map((f) => `"${f}"`).join(" or "), JSON.stringify(form));
}
