import { CStruct } from "./CStruct.js";

/** Mirrors of kernels/mla_decode/params.h: the one host/device contract. Keep the field order identical. */
export const SchedParamsStruct = new CStruct("SchedParams", [
  ["cache_seqlens", "ptr"],
  ["sched_meta", "ptr"],
  ["num_splits", "ptr"],
  ["b", "i32"],
  ["num_sm_parts", "i32"],
] as const);

export const DenseParamsStruct = new CStruct(
  "DenseParams",
  [
    ["tmap_kv", "tmap"],
    ["q", "ptr"],
    ["out", "ptr"],
    ["lse", "ptr"],
    ["o_accum", "ptr"],
    ["lse_accum", "ptr"],
    ["block_table", "ptr"],
    ["cache_seqlens", "ptr"],
    ["sched_meta", "ptr"],
    ["num_splits", "ptr"],
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
    ["pad0", "i32"],
  ] as const,
  128,
);

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
  ["pad0", "i32"],
] as const);

export const Fp8KvWriteParamsStruct = new CStruct("Fp8KvWriteParams", [
  ["kv", "ptr"],
  ["slot_mapping", "ptr"],
  ["cache", "ptr"],
  ["kv_stride", "i64"],
  ["cache_block_stride", "i64"],
  ["num_tokens", "i32"],
  ["page_block_size", "i32"],
  ["num_slots", "i32"],
  ["pad0", "i32"],
] as const);

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
