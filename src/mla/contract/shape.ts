/**
 * The shapes the kernels are built for (kernels/mla/params.h), in one place: every size the host side
 * checks arguments against or sizes a launch with. The token dims come from the V32 cache format
 * (numeric/kvCacheFp8.ts), which the CPU reference shares.
 */
import { D_NOPE, D_QK, D_ROPE } from "../../numeric/kvCacheFp8.js";

export { D_QK, D_ROPE };
/** Dims of each output row: V is the latent (NoPE) part of every cached token. */
export const D_V = D_NOPE;
/** Tokens per page of the dense paged cache (FlashMLA's dense kernel takes 64 only). */
export const DENSE_PAGE_BLOCK_SIZE = 64;
/** Query rows of one KV head that one main-kernel CTA computes: wgmma's M. */
export const BLOCK_M = 64;
/** Keys per block of the split-KV walk: the scheduler's unit of work. */
export const BLOCK_N = 64;
/** Query heads one sparse CTA computes (the same M); h_q < 64 runs one tile with the rows past h_q masked. */
export const SPARSE_HEADS_PER_CTA = 64;
/** Query head counts the sparse kernels run natively. FlashMLA's sm90 kernel takes 64 and 128 only. */
export const SPARSE_HEAD_COUNTS: readonly number[] = Object.freeze([8, 16, 32, 64, 128]);
/** CUDA's limit on grid dimensions y and z. */
export const MAX_GRID_YZ = 65535;
/** int32 words of one SM part's record in the scheduler metadata (params.h SchedMeta). */
export const SCHED_META_INTS = 8;
/** int32 words of the device-side error record (params.h ERROR_WORDS). */
export const DEVICE_ERROR_WORDS = 8;

/**
 * The sparse FP8 cache formats: DeepSeek-V3.2's 656-byte tokens ("V32", d_qk 576, V the first 512
 * dims) and DeepSeek-V4's 584-byte tokens in pages with a scale footer ("MODEL1", d_qk 512, V the whole
 * row). q's last dim picks one.
 */
export type SparseFormat = "V32" | "MODEL1";
