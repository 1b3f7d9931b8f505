import type { Stream } from "../runtime/Stream.js";
import type { Tensor } from "../runtime/Tensor.js";
import type { MlaSchedMeta } from "./sched/MlaSchedMeta.js";

/** Arguments of `flashMlaWithKvcache` (FlashMLA's `flash_mla_with_kvcache`, camelCased). */
export interface FlashMlaWithKvcacheArgs {
  /**
   * [b, s_q, h_q, d_qk] on the GPU; last dim contiguous, strides multiples of 8 elements. Dense: bf16 or
   * fp16, d_qk 576 (DeepSeek-V3's head, V the first 512 dims) or 512 (DeepSeek-V4's, V the whole row).
   * Sparse: bf16, d_qk 576 (DeepSeek-V3.2: the V32 cache) or 512 (DeepSeek-V4: the MODEL1 cache).
   */
  q: Tensor;
  /**
   * Dense: [num_blocks, 64, h_kv, d_qk] in q's dtype, d_qk q's (576 or 512; page size 64); last dim contiguous.
   * Sparse V32 (q's d_qk 576): [num_blocks, page_block_size, 1, 656] u8 or fp8_e4m3 (token stride 656 bytes).
   * Sparse MODEL1 (q's d_qk 512): [num_blocks, page_block_size, 1, 584] u8 or fp8_e4m3 with strides
   * (S, 584, 584, 1): a page holds its tokens' 576 data bytes, then their 8-byte scale records, from
   * `block · S` (S ≥ page_block_size · 584, a multiple of 16; `model1PageBytes` is FlashMLA's padding).
   */
  kCache: Tensor;
  /** Dense: [b, max_blocks_per_seq] int32, the physical block of each 64-token page of each request. */
  blockTable?: Tensor;
  /** Dense: [b] int32, tokens in each request's cache (0 gives out 0 and lse +inf). Ignored on the sparse path. */
  cacheSeqlens?: Tensor;
  /** Must be 512. */
  headDimV: number;
  /** From getMlaMetadata(): filled by the first call of a decode step and reused by its layers. */
  schedMeta: MlaSchedMeta;
  /** @default 1 / sqrt(d_qk): 1 / sqrt(576), or 1 / sqrt(512) for a 512-wide q (dense, or the MODEL1 cache) */
  softmaxScale?: number;
  /** Dense: with s_q > 1, query token j sees keys [0, s_k - (s_q - 1 - j)). Ignored when s_q = 1. @default false */
  causal?: boolean;
  /**
   * Sparse FP8 decode (DeepSeek Sparse Attention): with `indices` the call reads the V32 FP8 cache and
   * must set this true. blockTable, cacheSeqlens and causal belong to the dense path.
   */
  isFp8Kvcache?: boolean;
  /**
   * Sparse: [b, s_q, topk] int32 physical token ids (block · page_block_size + offset); -1, or any id
   * outside the cache, marks an entry to skip. Its presence selects the sparse path.
   */
  indices?: Tensor;
  /** Sparse, optional: [b] int32, request i attends the first topkLength[i] entries (clamped to [0, topk]). */
  topkLength?: Tensor;
  /** Sparse, optional: [h_q] f32, out *= 1 / (1 + exp(sink − lse)); lse is unchanged. */
  attnSink?: Tensor;
  /**
   * Sparse, optional: a second cache in kCache's format, with its own page size (DeepSeek-V4's sliding
   * window beside its compressed cache). The tokens extraIndices selects join those indices selects in
   * one softmax. Needs extraIndices.
   */
  extraKCache?: Tensor;
  /** [b, s_q, extra_topk] int32 with extraKCache: physical token ids into it, invalid ones as in `indices`. */
  extraIndices?: Tensor;
  /** Optional with extraKCache: [b] int32, request i attends the first extraTopkLength[i] entries of extraIndices (clamped to [0, extra_topk]). */
  extraTopkLength?: Tensor;
  /** Stream to enqueue on. @default the legacy default stream */
  stream?: Stream;
  /** Preallocated [b, s_q, h_q, 512] output in q's dtype (needed inside CUDA graph capture). */
  out?: Tensor;
  /** Preallocated [b, h_q, s_q] f32 output. */
  lse?: Tensor;
}

/** Results of `flashMlaWithKvcache`; `out.toFloat32()` reads the output back as numbers. */
export interface FlashMlaResult {
  /** [b, s_q, h_q, 512], q's dtype. */
  out: Tensor<"bf16" | "fp16">;
  /** [b, h_q, s_q] f32, natural log (+inf for a row that sees no key). */
  lse: Tensor<"f32">;
}
