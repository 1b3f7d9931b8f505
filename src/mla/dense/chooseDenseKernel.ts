import { ArgumentError } from "../../errors/ArgumentError.js";
import { MODEL1_D_QK } from "../../numeric/kvCacheModel1.js";
import type { KernelName } from "../contract/kernelRegistry.js";
import { D_QK } from "../contract/shape.js";

/**
 * The two forms of the dense main kernel (kernels/sm90/decode/dense): "fast" runs the two warpgroups'
 * online softmax in lockstep with warp-uniform fast paths (no masks in full blocks, no rescale by 1);
 * "pipe" adds FlashMLA's rotated loop, each warpgroup queueing its next Q·Kᵀ behind its last P·V. Their
 * outputs may differ in the last bits (W1 sums its Q·Kᵀ tiles in another order).
 */
export type DenseForm = "fast" | "pipe";
export const DENSE_FORMS: readonly DenseForm[] = Object.freeze(["fast", "pipe"]);

/** The fewest blocks an SM part walks, on average at the block table's width, for "pipe" to pay. */
export const PIPE_MIN_BLOCKS_PER_PART = 16;

/**
 * The form a dense call runs: "pipe" where the work is compute-bound (at least 128 query rows per KV
 * head: h_q / h_kv · s_q) and each SM part walks enough blocks for its rotated loop's longer prologue and
 * epilogue to pay (`blocksPerPart` ≥ 16: b · max_blocks_per_seq / num_sm_parts, from the block table's
 * width, which the host knows without reading the lengths), "fast" elsewhere. H200, both forms in one
 * call each: long-b4-128k-mtp (248 blocks a part) 429.7 µs with pipe against 465.4 with fast,
 * long-b1-128k (31) 74.0 against 75.5, dense-b1 (one 32K request: 7.8) 34.5 against 32.9,
 * dense-compute-mtp 839 against 920; the memory-bound cases (fewer rows) 0–2 µs slower with pipe.
 */
export function chooseDenseKernel(rows_per_kv: number, blocksPerPart: number): DenseForm {
  return rows_per_kv >= 128 && blocksPerPart >= PIPE_MIN_BLOCKS_PER_PART ? "pipe" : "fast";
}

/** The blocks an SM part walks on average if every request filled its row of the block table. */
export function denseBlocksPerPart(b: number, maxBlocksPerSeq: number, numSmParts: number): number {
  return (b * maxBlocksPerSeq) / numSmParts;
}

/**
 * The registry row of a form at a dtype and head: d_qk 576 (DeepSeek-V3's head) the plain rows, 512
 * (DeepSeek-V4's, V the whole row) the `_d512` rows. The form rule is the same for both heads.
 */
export function denseKernelName(form: DenseForm, dtype: "bf16" | "fp16", d_qk: number): KernelName {
  if (d_qk === D_QK) return `dense_${form}_${dtype}`;
  if (d_qk === MODEL1_D_QK) return `dense_${form}_${dtype}_d512`;
  throw new ArgumentError("denseKernelName", "d_qk", `${D_QK} or ${MODEL1_D_QK}`, String(d_qk));
}

/** A forced form, checked (tests and A/B timing force one; the API never does). */
export function checkDenseForm(fn: string, form: unknown): DenseForm | undefined {
  if (form === undefined || DENSE_FORMS.includes(form as DenseForm)) return form as DenseForm | undefined;
  throw new ArgumentError(fn, "overrides.denseForm", DENSE_FORMS.map((f) => `"${f}"`).join(" or "), JSON.stringify(form));
}
