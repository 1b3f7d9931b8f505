import type { KernelName } from "./contract/kernelRegistry.js";
import { DENSE_PAGE_BLOCK_SIZE, D_QK, type SparseFormat } from "./contract/shape.js";
import { chooseDenseKernel, denseBlocksPerPart, denseKernelName } from "./dense/chooseDenseKernel.js";
import { numSmPartsDense } from "./sched/schedule.js";
import { chooseSparseKernel, sparseKernelName } from "./sparse/chooseSparseKernel.js";
import type { DecodeOverrides } from "./flashMlaWithKvcache.js";

/** The SMs of an H100 or H200 SXM: what a report assumes when it names a kernel without a GPU. */
const H200_SM_COUNT = 132;

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
  /** Dense only: q's last dim, 576 (DeepSeek-V3's head) or 512 (DeepSeek-V4's). @default 576 */
  d_qk?: number;
  /** Sparse only: the cache format. @default "V32" */
  format?: SparseFormat;
  /** Sparse only: a second cache (extraKCache). @default false */
  extra?: boolean;
  /**
   * Dense only: the longest request's tokens, which set the block table's width (the dense form depends
   * on the blocks each SM part walks). @default unbounded: as if every part walked many blocks
   */
  maxLen?: number;
  /** Dense only: the GPU's SMs. @default 132 (H100 and H200 SXM) */
  smCount?: number;
}

/**
 * The main kernel (its registry name) flashMlaWithKvcache runs for a call of this shape, or the one
 * `overrides` force: what the benchmark and `flashmla check` report as the kernel that served a case.
 */
export function chooseKernel(shape: KernelChoiceShape, overrides: DecodeOverrides = {}): KernelName {
  if (shape.kind === "sparse") return sparseKernelName(overrides.sparsePlan ?? chooseSparseKernel(shape.h_q), shape.format, shape.extra ?? false);
  const h_kv = shape.h_kv ?? 1;
  const rows_per_kv = (shape.s_q * shape.h_q) / h_kv;
  const parts = numSmPartsDense(shape.smCount ?? H200_SM_COUNT, shape.s_q, shape.h_q, h_kv);
  const blocksPerPart = shape.maxLen === undefined ? Infinity : denseBlocksPerPart(shape.b, Math.max(1, Math.ceil(shape.maxLen / DENSE_PAGE_BLOCK_SIZE)), parts);
  return denseKernelName(overrides.denseForm ?? chooseDenseKernel(rows_per_kv, blocksPerPart), shape.dtype ?? "bf16", shape.d_qk ?? D_QK);
}
