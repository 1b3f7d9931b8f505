// THE host<->device contract of the MLA decode kernels. src/mla/contract/params.ts mirrors these structs byte
// for byte and checks the layout at load time against the `*_layout` tables exported below
// (sizeof and the offset of every field), so a change here that is not made there fails loudly.
// Shapes use FlashMLA's words: b requests, s_q query tokens each, h_q query heads, h_kv KV heads,
// d_qk = 576 (512 latent + 64 RoPE), d_v = 512, page_block_size = 64 tokens per KV block.
#pragma once
#include <cstdint>
#include <cstddef>
#include <cuda.h>

namespace mla {

constexpr int D_QK = 576;
constexpr int D_V = 512;
constexpr int PAGE_BLOCK_SIZE = 64;
constexpr int BLOCK_M = 64;        // query rows per CTA tile
constexpr int BLOCK_N = 64;        // KV tokens per step (one page)
constexpr int SCHED_META_INTS = 8;       // ints per SM part record

// One SM part's slice of the work (FLASHMLA.md §2.1), 8 int32.
struct SchedMeta {
  int begin_req_idx;          // inclusive
  int end_req_idx;            // inclusive; begin_req_idx == b marks an unused part
  int begin_block_idx;        // first block of the first request (inclusive)
  int end_block_idx;          // end block of the last request (exclusive)
  int begin_split_idx;        // split ordinal of the first request's piece
  int is_first_req_splitted;  // the first request is shared with another part
  int is_last_req_splitted;   // the last request is shared with another part
  int pad;
};
static_assert(sizeof(SchedMeta) == 32, "8 ints per part");

// Inputs of the scheduler kernel.
struct SchedParams {
  const int* cache_seqlens;  // [b] lengths: tokens (dense) or valid top-k entries (sparse)
  int* sched_meta;           // [num_sm_parts, 8] out
  int* num_splits;           // [b + 1] out: prefix sum of pieces per request
  int* seqlens_used;         // [b] out (dense) or null: the lengths scheduled, which the main kernels read
  int* errors;               // [ERROR_WORDS] or null: the first invalid length is recorded here
  int b;
  int num_sm_parts;
  int max_len;               // > 0: lengths are clamped to [0, max_len] (sparse: topk); 0: no clamp
  int max_valid_len;         // > 0 (dense: 64 * max_blocks_per_seq): lengths outside [0, it] are errors,
                             // scheduled as empty (length 0)
  int fixed_overhead;        // >= 1: what a piece costs beyond its blocks, in blocks, when balancing parts
                             // (src/mla/schedule.ts: FlashMLA's 5 for sparse, 8 for our dense kernels)
  int extra_max_len;         // sparse with a second index list (DeepSeek-V4's extra cache): > 0, its topk; 0: none.
                             // A request's walk is its main list's blocks, then the extra list's
  const int* extra_lengths;  // [b] valid prefix of each extra list (clamped to [0, extra_max_len]), or null: all of it
};

// The device-side error record (MlaSchedMeta.checkErrors reads it): the first problem found since it was
// last cleared. Words: code, request, position, value, limit.
constexpr int ERROR_WORDS = 8;
enum : int { ERR_NONE = 0, ERR_NEGATIVE_LENGTH = 1, ERR_LENGTH_PAST_TABLE = 2, ERR_BLOCK_ID = 4 };

// Dense split-KV decode. One CTA tile = 64 rows of the flattened [s_q * h_q/h_kv] query rows of one
// (request, KV head); grid (num_m_blocks, h_kv, num_sm_parts).
struct alignas(128) DenseParams {
  CUtensorMap tmap_kv;         // paged cache [num_blocks, 64, h_kv, 576] (bf16|fp16), boxes of 64x64 SW128
  CUtensorMap tmap_q;          // q_tma only: q as {576, heads_per_kv, h_kv, s_q, b}, boxes of one m-block's 64 rows x 64 dims, SW128
  const void* q;               // [b, s_q, h_q, 576], last dim contiguous
  void* out;                   // [b, s_q, h_q, 512] contiguous, q's dtype
  float* lse;                  // [b, h_q, s_q] contiguous, natural log
  float* o_accum;              // [num_split_slots, h_kv, rows_per_kv, 512] fp32, rows already divided by L
  float* lse_accum;            // [num_split_slots, h_kv, rows_per_kv] fp32, log2 L + M (base 2)
  const int* block_table;      // [b, max_blocks_per_seq]
  const int* cache_seqlens;    // [b]
  const int* sched_meta;       // [num_sm_parts, 8]
  const int* num_splits;       // [b + 1]
  int* errors;                 // [ERROR_WORDS]: block ids outside the cache are recorded here (ERR_BLOCK_ID)
  int* merge_flags;            // [b, h_kv, num_m_blocks], 0 between calls: merge_pairs' count of finished pieces
  long long q_batch_stride;    // elements
  long long q_token_stride;
  long long q_head_stride;
  long long block_table_stride;
  int b;
  int s_q;
  int h_q;
  int h_kv;
  int heads_per_kv;            // h_q / h_kv
  int rows_per_kv;             // s_q * heads_per_kv
  int num_m_blocks;            // ceil(rows_per_kv / 64)
  int max_blocks_per_seq;
  int num_sm_parts;
  int num_blocks;              // physical KV blocks in the cache
  int causal;
  float softmax_scale;
  float scale_log2;            // softmax_scale * log2(e)
  int q_tma;                   // 1: tmap_q is valid (heads_per_kv divides 64 or is a multiple of it, strides TMA can take)
  int merge_pairs;             // seesaw kernels, 1: a request in exactly two pieces is merged by the piece that
                               // finishes second (merge_flags), not by the combine (CombineParams::skip_pairs)
};

// Sparse FP8 decode (DeepSeek Sparse Attention: the V32 cache of DeepSeek-V3.2, or the MODEL1 cache of
// DeepSeek-V4, one format per kernel). One CTA = 64 query heads of one query token of one request against
// the 64-index blocks of that request's walk its SM part was given: the blocks of its top-k list, then
// those of its extra list (a second cache, one softmax over both); grid (ceil(h_q / 64), s_q,
// num_sm_parts). Split partials use the dense layout with h_kv = 1 and rows_per_kv = s_q * h_q
// (row = s * h_q + head), so the dense combine merges them.
struct SparseParams {
  const void* q;               // [b, s_q, h_q, d_qk] bf16 (d_qk 576 V32, 512 MODEL1), last dim contiguous
  const uint8_t* kv;           // the FP8 cache, page `id / page_block_size` at kv + page * kv_block_stride (the format's struct places a token in it)
  const int* indices;          // [b, s_q, topk] physical token ids; -1 (or anything outside [0, num_slots)) is invalid
  const int* lengths;          // [b] valid prefix of each request's index rows (topk_length, or topk)
  const uint8_t* extra_kv;     // the second cache (same format), or null with extra_topk = 0
  const int* extra_indices;    // [b, s_q, extra_topk] token ids into extra_kv, invalid as in indices
  const int* extra_lengths;    // [b] valid prefix of each extra index row, or null: extra_topk
  const float* attn_sink;      // [h_q] or null
  void* out;                   // [b, s_q, h_q, 512] bf16
  float* lse;                  // [b, h_q, s_q]
  float* o_accum;              // [num_split_slots, s_q * h_q, 512]
  float* lse_accum;            // [num_split_slots, s_q * h_q]
  const int* sched_meta;       // [num_sm_parts, 8]
  const int* num_splits;       // [b + 1]
  long long q_batch_stride;    // elements
  long long q_token_stride;
  long long q_head_stride;
  long long indices_batch_stride;
  long long indices_token_stride;
  long long kv_block_stride;   // bytes
  long long extra_indices_batch_stride;
  long long extra_indices_token_stride;
  long long extra_kv_block_stride;  // bytes
  int b;
  int s_q;
  int h_q;
  int topk;
  int page_block_size;
  int num_slots;               // num_blocks * page_block_size
  int extra_topk;              // 0: no second cache
  int extra_page_block_size;
  int extra_num_slots;         // num_slots + extra_num_slots < 2^31 (the walk numbers both caches' slots in one int)
  int num_sm_parts;
  float softmax_scale;
  float scale_log2;            // softmax_scale * log2(e)
};

// Log-sum-exp merge of split partials (FLASHMLA.md §2.3). Grid (ceil(rows_per_kv / rows_per_cta), h_kv, b).
struct CombineParams {
  const float* o_accum;        // as DenseParams
  const float* lse_accum;
  const int* num_splits;       // [b + 1]
  void* out;                   // [b, s_q, h_q, 512]
  float* lse;                  // [b, h_q, s_q]
  const float* attn_sink;      // [h_q] or null
  int b;
  int s_q;
  int h_q;
  int h_kv;
  int heads_per_kv;
  int rows_per_kv;
  int num_split_slots;
  int rows_per_cta;            // rows of one request and KV head each combine CTA merges (host: from the grid size)
  int skip_pairs;              // 1: requests in exactly two pieces were merged by the main kernel (DenseParams::merge_pairs)
  int pad0;
};

// Decode context parallelism: the cross-rank log-sum-exp merge. Rank r decoded its share of every
// request's tokens into o_r [b, s_q, h_q, 512] and natural-log lse_r [b, h_q, s_q] (+-inf: saw no key).
// Per row (request, query token, head): L = ln Σ_r e^(lse_r), out = sink(L) · Σ_{r in the o set}
// e^(lse_r - L) · o_r with sink(L) = 1 / (1 + e^(attn_sink[h] - L)) (1 without a sink), lse_out = L.
// The o set is every rank (the all-gather form: out is the merged output) or rank `o_first` alone
// (reduce-scatter and all-reduce forms: out is that rank's term, the collective sums the terms).
// Grid ceil(b · s_q · h_q / 4), 256 threads: 64 threads per row, eight columns each.
struct DcpMergeParams {
  const void* o_parts;         // o_count parts, part i (rank o_first + i) at o_parts + i · o_part_stride, each [b, s_q, h_q, 512] contiguous
  const float* lse_parts;      // rank r's lse at lse_parts + r · lse_part_stride + i·lse_stride_b + h·lse_stride_h + s·lse_stride_s
  const float* attn_sink;      // [h_q] or null
  void* out;                   // head h of row (i, s) at out + (h / heads_per_chunk) · chunk_stride + ((i·s_q + s)·heads_per_chunk + h % heads_per_chunk) · 512
  float* lse;                  // [b, h_q, s_q] natural log (+inf where no rank saw a key), or null
  long long o_part_stride;     // elements
  long long lse_part_stride;   // elements
  long long lse_stride_b;
  long long lse_stride_h;
  long long lse_stride_s;
  long long chunk_stride;      // elements between head chunks of out (0 with one chunk)
  int b;
  int s_q;
  int h_q;
  int ranks;                   // lse parts
  int o_first;                 // first rank of the o set
  int o_count;                 // ranks in the o set
  int heads_per_chunk;         // h_q: out is [b, s_q, h_q, 512]; h_q / ranks: the reduce-scatter's layout
  int pad0;
};

// FP8 KV cache writer: bf16 tokens -> 656-byte V32 tokens at given slots of a paged cache.
struct Fp8KvWriteParams {
  const uint16_t* kv;          // [num_tokens, 576] bf16 bits, row stride kv_stride elements
  const int* slot_mapping;     // [num_tokens] physical slot = block * page_block_size + offset; -1 skips
  uint8_t* cache;              // [num_blocks, page_block_size, 656] bytes, block stride cache_block_stride
  long long kv_stride;         // elements between tokens of kv
  long long cache_block_stride;  // bytes between blocks of the cache
  int num_tokens;
  int page_block_size;
  int num_slots;               // num_blocks * page_block_size: slots outside [0, num_slots) are skipped
  int pad0;
};

// MODEL1 (DeepSeek-V4) KV cache writer: bf16 tokens -> 584-byte MODEL1 tokens at given slots of a paged
// cache. A page of page_block_size tokens holds the tokens' 576 data bytes first (token r at r * 576) and
// their 8-byte scale records after them (at page_block_size * 576 + r * 8); the padding after the records
// is the caller's (the writer never touches it).
struct Model1KvWriteParams {
  const uint16_t* kv;          // [num_tokens, 512] bf16 bits, row stride kv_stride elements
  const int* slot_mapping;     // [num_tokens] physical slot = block * page_block_size + offset; -1 skips
  uint8_t* cache;              // num_blocks pages of page_block_size tokens, block stride cache_block_stride
  long long kv_stride;         // elements between tokens of kv
  long long cache_block_stride;  // bytes between pages: >= page_block_size * 584, a multiple of 16
  int num_tokens;
  int page_block_size;
  int num_slots;               // num_blocks * page_block_size: slots outside [0, num_slots) are skipped
  int pad0;
};

// Simple fp32 GPU reference of dense decode (one CTA per output row), used by the tests to check large
// shapes fully, at either head: d_qk 576 (V the first 512 dims) or 512 (V the whole row).
struct RefParams {
  const void* q;               // [b, s_q, h_q, d_qk] contiguous
  const void* kv;              // [num_blocks, 64, h_kv, d_qk] contiguous
  const int* block_table;      // [b, max_blocks_per_seq]
  const int* cache_seqlens;    // [b]
  float* out;                  // [b, s_q, h_q, 512] fp32
  float* lse;                  // [b, h_q, s_q]
  int b;
  int s_q;
  int h_q;
  int h_kv;
  int d_qk;                    // 576 or 512: q's and each cached row's dims; V is dims 0..511 either way
  int max_blocks_per_seq;
  int causal;
  int is_fp16;
  float softmax_scale;
  int pad0;
};

// Simple fp32 GPU reference of sparse FP8 decode (one CTA per output row), for checking large shapes:
// either format, the second cache, the valid lengths and the sink.
struct SparseRefParams {
  const uint16_t* q;           // [b, s_q, h_q, d_qk] bf16, contiguous (d_qk 576 V32, 512 MODEL1)
  const uint8_t* kv;           // the FP8 cache, page `id / page_block_size` at kv + page * kv_block_stride
  const int* indices;          // [b, s_q, topk] contiguous
  const int* topk_length;      // [b] or null
  const uint8_t* extra_kv;     // the second cache, or null
  const int* extra_indices;    // [b, s_q, extra_topk] contiguous
  const int* extra_topk_length;  // [b] or null
  const float* attn_sink;      // [h_q] or null
  float* out;                  // [b, s_q, h_q, 512] fp32
  float* lse;                  // [b, h_q, s_q]
  long long kv_block_stride;   // bytes
  long long extra_kv_block_stride;
  int b;
  int s_q;
  int h_q;
  int topk;
  int page_block_size;
  int num_slots;
  int extra_topk;              // 0: no second cache
  int extra_page_block_size;
  int extra_num_slots;
  int model1;                  // 0: V32 (656-byte tokens), 1: MODEL1 (584-byte tokens in pages with a scale footer)
  float softmax_scale;
  int pad0;
};

}  // namespace mla

// Layout tables read by the host at module load: {sizeof, offsetof(field)...} in declaration order.
#define MLA_OFFSETS_DENSE(T, M)                                                                           \
  M(T, tmap_kv) M(T, tmap_q) M(T, q) M(T, out) M(T, lse) M(T, o_accum) M(T, lse_accum) M(T, block_table) M(T, cache_seqlens) M(T, sched_meta)      \
  M(T, num_splits) M(T, errors) M(T, merge_flags) M(T, q_batch_stride) M(T, q_token_stride) M(T, q_head_stride) M(T, block_table_stride) M(T, b) M(T, s_q)     \
  M(T, h_q) M(T, h_kv) M(T, heads_per_kv) M(T, rows_per_kv) M(T, num_m_blocks) M(T, max_blocks_per_seq) M(T, num_sm_parts)     \
  M(T, num_blocks) M(T, causal) M(T, softmax_scale) M(T, scale_log2) M(T, q_tma) M(T, merge_pairs)
#define MLA_OFFSETS_COMBINE(T, M)                                                                         \
  M(T, o_accum) M(T, lse_accum) M(T, num_splits) M(T, out) M(T, lse) M(T, attn_sink) M(T, b) M(T, s_q) M(T, h_q) M(T, h_kv)              \
  M(T, heads_per_kv) M(T, rows_per_kv) M(T, num_split_slots) M(T, rows_per_cta) M(T, skip_pairs)
#define MLA_OFFSETS_SPARSE(T, M)                                                                           \
  M(T, q) M(T, kv) M(T, indices) M(T, lengths) M(T, extra_kv) M(T, extra_indices) M(T, extra_lengths)          \
  M(T, attn_sink) M(T, out) M(T, lse) M(T, o_accum) M(T, lse_accum)                                             \
  M(T, sched_meta) M(T, num_splits) M(T, q_batch_stride) M(T, q_token_stride) M(T, q_head_stride)               \
  M(T, indices_batch_stride) M(T, indices_token_stride) M(T, kv_block_stride)                                   \
  M(T, extra_indices_batch_stride) M(T, extra_indices_token_stride) M(T, extra_kv_block_stride)                  \
  M(T, b) M(T, s_q) M(T, h_q) M(T, topk) M(T, page_block_size) M(T, num_slots) M(T, extra_topk)                  \
  M(T, extra_page_block_size) M(T, extra_num_slots) M(T, num_sm_parts) M(T, softmax_scale) M(T, scale_log2)
#define MLA_OFFSETS_SPARSE_REF(T, M)                                                                       \
  M(T, q) M(T, kv) M(T, indices) M(T, topk_length) M(T, extra_kv) M(T, extra_indices) M(T, extra_topk_length)    \
  M(T, attn_sink) M(T, out) M(T, lse) M(T, kv_block_stride) M(T, extra_kv_block_stride) M(T, b) M(T, s_q)       \
  M(T, h_q) M(T, topk) M(T, page_block_size) M(T, num_slots) M(T, extra_topk) M(T, extra_page_block_size)        \
  M(T, extra_num_slots) M(T, model1) M(T, softmax_scale)
#define MLA_OFFSETS_SCHED(T, M) \
  M(T, cache_seqlens) M(T, sched_meta) M(T, num_splits) M(T, seqlens_used) M(T, errors) M(T, b) M(T, num_sm_parts) M(T, max_len) M(T, max_valid_len) M(T, fixed_overhead) \
  M(T, extra_max_len) M(T, extra_lengths)
#define MLA_OFFSETS_DCP_MERGE(T, M)                                                                       \
  M(T, o_parts) M(T, lse_parts) M(T, attn_sink) M(T, out) M(T, lse) M(T, o_part_stride) M(T, lse_part_stride)      \
  M(T, lse_stride_b) M(T, lse_stride_h) M(T, lse_stride_s) M(T, chunk_stride) M(T, b) M(T, s_q) M(T, h_q)           \
  M(T, ranks) M(T, o_first) M(T, o_count) M(T, heads_per_chunk)
#define MLA_OFFSETS_FP8W(T, M)                                                                            \
  M(T, kv) M(T, slot_mapping) M(T, cache) M(T, kv_stride) M(T, cache_block_stride) M(T, num_tokens) M(T, page_block_size) M(T, num_slots)
#define MLA_OFFSETS_MODEL1W(T, M)                                                                         \
  M(T, kv) M(T, slot_mapping) M(T, cache) M(T, kv_stride) M(T, cache_block_stride) M(T, num_tokens) M(T, page_block_size) M(T, num_slots)
#define MLA_OFFSETS_REF(T, M)                                                                             \
  M(T, q) M(T, kv) M(T, block_table) M(T, cache_seqlens) M(T, out) M(T, lse) M(T, b) M(T, s_q) M(T, h_q) M(T, h_kv) M(T, d_qk)         \
  M(T, max_blocks_per_seq) M(T, causal) M(T, is_fp16) M(T, softmax_scale)

// Exports `name` = {sizeof(T), offsetof(T, field)...} for the host's layout check.
#define MLA_LAYOUT_OFFSET(T, f) static_cast<int>(offsetof(T, f)),
#define MLA_EXPORT_LAYOUT(name, T, LIST)                        \
  extern "C" __device__ const int name[] = {static_cast<int>(sizeof(T)), LIST(T, MLA_LAYOUT_OFFSET)};
