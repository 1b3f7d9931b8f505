import type { KernelName } from "./contract/kernelRegistry.js";
import { chooseDenseKernel, denseKernelName } from "./dense/chooseDenseKernel.js";
import type { SparseFormat } from "./contract/shape.js";
import { chooseSparseKernel, sparseKernelName } from "./sparse/chooseSparseKernel.js";
import type { DecodeOverrides } from "./flashMlaWithKvcache.js";

/** The shape of a decode call, as far as the kernel choice needs it. */
export interface KernelChoiceShape {
  kind: "dense" | "sparse";
  b: number;
  s_q: number;
  h_q: number;
  /** Dense only. @default 1 */
  h_kv?: number;
  /** Dense only (sparse q is bf16). @default "bf16" */
  dtype?: "bf16" | "fp16";
  /** Sparse only: the cache format. @default "V32" */
  format?: SparseFormat;
  /** Sparse only: a second cache (extraKCache). @default false */
  extra?: boolean;
}

/**
 * The main kernel (its registry name) flashMlaWithKvcache runs for a call of this shape, or the one
 * `overrides` force: what the benchmark and `flashmla check` report as the kernel that served a case.
 */
export function chooseKernel(shape: KernelChoiceShape, overrides: DecodeOverrides = {}): KernelName {
  if (shape.kind === "sparse") return sparseKernelName(overrides.sparsePlan ?? chooseSparseKernel(shape.h_q, shape.format), shape.format, shape.extra ?? false);
  const rows_per_kv = (shape.s_q * shape.h_q) / (shape.h_kv ?? 1);
  return denseKernelName(overrides.denseForm ?? chooseDenseKernel(rows_per_kv), shape.dtype ?? "bf16");
}
