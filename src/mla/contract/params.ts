import { CStruct } from "./CStruct.js";

/**
 * Mirrors of kernels/mla/params.h, the one host/device contract: keep the field order identical. Each
 * cubin exports the layout of the struct it takes, which the kernel registry checks at load.
 */

export const SchedParamsStruct = new CStruct("SchedParams", [
  ["cache_seqlens", "ptr"],
  ["sched_meta", "ptr"],
  ["num_splits", "ptr"],
  ["seqlens_used", "ptr"],
  ["errors", "ptr"],
  ["b", "i32"],
  ["num_sm_parts", "i32"],
  ["max_len", "i32"],
  ["max_valid_len", "i32"],
  ["fixed_overhead", "i32"],
  ["pad0", "i32"],
] as const);

export const DenseParamsStruct = new CStruct(
  "DenseParams",
  [
    ["tmap_kv", "tmap"],
    ["tmap_q", "tmap"],
    ["q", "ptr"],
    ["out", "ptr"],
    ["lse", "ptr"],
    ["o_accum", "ptr"],
    ["lse_accum", "ptr"],
    ["block_table", "ptr"],
    ["cache_seqlens", "ptr"],
    ["sched_meta", "ptr"],
    ["num_splits", "ptr"],
    ["errors", "ptr"],
    ["merge_flags", "ptr"],
    ["q_batch_stride", "i64"],
    ["q_token_stride", "i64"],
    ["q_head_stride", "i64"],
    ["block_table_stride", "i64"],
    ["b", "i32"],
    ["s_q", "i32"],
    ["h_q", "i32"],
    ["h_kv", "i32"],
    ["heads_per_kv", "i32"],
    ["rows_per_kv", "i32"],
    ["num_m_blocks", "i32"],
    ["max_blocks_per_seq", "i32"],
    ["num_sm_parts", "i32"],
    ["num_blocks", "i32"],
    ["causal", "i32"],
    ["softmax_scale", "f32"],
    ["scale_log2", "f32"],
    ["q_tma", "i32"],
    ["merge_pairs", "i32"],
  ] as const,
  128,
);

export const SparseParamsStruct = new CStruct("SparseParams", [
  ["q", "ptr"],
  ["kv", "ptr"],
  ["indices", "ptr"],
  ["lengths", "ptr"],
  ["attn_sink", "ptr"],
  ["out", "ptr"],
  ["lse", "ptr"],
  ["o_accum", "ptr"],
  ["lse_accum", "ptr"],
  ["sched_meta", "ptr"],
  ["num_splits", "ptr"],
  ["q_batch_stride", "i64"],
  ["q_token_stride", "i64"],
  ["q_head_stride", "i64"],
  ["indices_batch_stride", "i64"],
  ["indices_token_stride", "i64"],
  ["kv_block_stride", "i64"],
  ["b", "i32"],
  ["s_q", "i32"],
  ["h_q", "i32"],
  ["topk", "i32"],
  ["page_block_size", "i32"],
  ["num_slots", "i32"],
  ["num_sm_parts", "i32"],
  ["softmax_scale", "f32"],
  ["scale_log2", "f32"],
  ["pad0", "i32"],
] as const);

export const CombineParamsStruct = new CStruct("CombineParams", [
  ["o_accum", "ptr"],
  ["lse_accum", "ptr"],
  ["num_splits", "ptr"],
  ["out", "ptr"],
  ["lse", "ptr"],
  ["attn_sink", "ptr"],
  ["b", "i32"],
  ["s_q", "i32"],
  ["h_q", "i32"],
  ["h_kv", "i32"],
  ["heads_per_kv", "i32"],
  ["rows_per_kv", "i32"],
  ["num_split_slots", "i32"],
  ["rows_per_cta", "i32"],
  ["skip_pairs", "i32"],
  ["pad0", "i32"],
] as const);

export const DcpMergeParamsStruct = new CStruct("DcpMergeParams", [
  ["o_parts", "ptr"],
  ["lse_parts", "ptr"],
  ["attn_sink", "ptr"],
  ["out", "ptr"],
  ["lse", "ptr"],
  ["o_part_stride", "i64"],
  ["lse_part_stride", "i64"],
  ["lse_stride_b", "i64"],
  ["lse_stride_h", "i64"],
  ["lse_stride_s", "i64"],
  ["chunk_stride", "i64"],
  ["b", "i32"],
  ["s_q", "i32"],
  ["h_q", "i32"],
  ["ranks", "i32"],
  ["o_first", "i32"],
  ["o_count", "i32"],
  ["heads_per_chunk", "i32"],
  ["pad0", "i32"],
] as const);

/** The fields both KV cache writers take (Fp8KvWriteParams and Model1KvWriteParams in params.h). */
const KV_WRITE_FIELDS = [
  ["kv", "ptr"],
  ["slot_mapping", "ptr"],
  ["cache", "ptr"],
  ["kv_stride", "i64"],
  ["cache_block_stride", "i64"],
  ["num_tokens", "i32"],
  ["page_block_size", "i32"],
  ["num_slots", "i32"],
  ["pad0", "i32"],
] as const;

/** The V32 writer's: 656-byte tokens, each row's scales inside it. */
export const Fp8KvWriteParamsStruct = new CStruct("Fp8KvWriteParams", KV_WRITE_FIELDS);

/** The MODEL1 writer's: 584-byte tokens, the scale records in the page's footer. */
export const Model1KvWriteParamsStruct = new CStruct("Model1KvWriteParams", KV_WRITE_FIELDS);

export const RefParamsStruct = new CStruct("RefParams", [
  ["q", "ptr"],
  ["kv", "ptr"],
  ["block_table", "ptr"],
  ["cache_seqlens", "ptr"],
  ["out", "ptr"],
  ["lse", "ptr"],
  ["b", "i32"],
  ["s_q", "i32"],
  ["h_q", "i32"],
  ["h_kv", "i32"],
  ["max_blocks_per_seq", "i32"],
  ["causal", "i32"],
  ["is_fp16", "i32"],
  ["softmax_scale", "f32"],
] as const);

export const SparseRefParamsStruct = new CStruct("SparseRefParams", [
  ["q", "ptr"],
  ["kv", "ptr"],
  ["indices", "ptr"],
  ["topk_length", "ptr"],
  ["attn_sink", "ptr"],
  ["out", "ptr"],
  ["lse", "ptr"],
  ["kv_block_stride", "i64"],
  ["b", "i32"],
  ["s_q", "i32"],
  ["h_q", "i32"],
  ["topk", "i32"],
  ["page_block_size", "i32"],
  ["num_slots", "i32"],
  ["softmax_scale", "f32"],
  ["pad0", "i32"],
] as const);
