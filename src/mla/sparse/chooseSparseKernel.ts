import { ArgumentError } from "../../errors/ArgumentError.js";
import type { KernelName } from "../contract/kernelRegistry.js";
import type { SparseFormat } from "../contract/shape.js";

/**
 * The sparse kernels' head plans (kernels/sm90/decode/sparse), all with two producer warpgroups that
 * gather and dequantize the FP8 tokens: "m64", the 64-row consumers (any head count, rows past h_q
 * masked); "h128x", the same where the two 64-head CTAs of a query token form a cluster and share each
 * token's dequantization (h_q = 128); "h16x", tokens bulk-copied as stored and converted by the
 * consumers themselves into wgmma operands with the heads as N (h_q ≤ 16).
 */
export type SparsePlan = "m64" | "h128x" | "h16x";
export const SPARSE_PLANS: readonly SparsePlan[] = Object.freeze(["m64", "h128x", "h16x"]);

/** The most query heads h16x takes: its wgmma N. */
export const H16X_MAX_HEADS = 16;

/**
 * The plan a sparse call of `h_q` heads runs, in either format: h16x at h_q ≤ 16, h128x at 128, m64
 * otherwise. On the H200, sparse-v32 (128 heads) took 383.7 µs with h128x against 403.7 with m64 (one
 * call), and sparse-h16 109.8 µs with h16x where m64 had taken 186.6.
 */
export function chooseSparseKernel(h_q: number): SparsePlan {
  if (h_q === 128) return "h128x";
  return h_q <= H16X_MAX_HEADS ? "h16x" : "m64";
}

/**
 * The registry row of a plan for a format, with or without a second cache (extraKCache): a call with one
 * cache runs kernels compiled without the second list's bookkeeping (kernels/sm90/decode/sparse/cursor.cuh).
 */
export function sparseKernelName(plan: SparsePlan, format: SparseFormat = "V32", extra = false): KernelName {
  const base = format === "MODEL1" ? `sparse_${plan}_model1` : `sparse_${plan}_bf16`;
  return (extra ? `${base}_extra` : base) as KernelName;
}

/** A forced plan's value, checked before any tensor is looked at (tests and A/B timing force one; the API never does). */
export function checkSparsePlan(fn: string, plan: unknown): SparsePlan | undefined {
  if (plan === undefined || SPARSE_PLANS.includes(plan as SparsePlan)) return plan as SparsePlan | undefined;
  throw new ArgumentError(fn, "overrides.sparsePlan", SPARSE_PLANS.map((p) => `"${p}"`).join(", ") + " or undefined", JSON.stringify(plan));
}

/** Whether `plan` runs a call of `h_q` heads (m64 runs every native head count). */
export function planFitsHeads(plan: SparsePlan, h_q: number): boolean {
  return plan === "m64" || (plan === "h128x" ? h_q === 128 : h_q <= H16X_MAX_HEADS);
}

/** Refuses a forced plan the call's head count cannot run (every plan reads both formats). */
export function checkPlanFitsHeads(fn: string, plan: SparsePlan, h_q: number): void {
  if (plan === "h128x" && h_q !== 128) throw new ArgumentError(fn, "overrides.sparsePlan", '"h128x" only at h_q = 128 (a cluster of the two 64-head CTAs of a query token)', `h_q = ${h_q}`);
  if (plan === "h16x" && h_q > H16X_MAX_HEADS) throw new ArgumentError(fn, "overrides.sparsePlan", `"h16x" only at h_q <= ${H16X_MAX_HEADS} (the heads are wgmma's N)`, `h_q = ${h_q}`);
}
