// Pieces the dense (v1, seesaw) and sparse decode kernels share: tile geometry, the SW128 address rule,
// the scheduler's block count, FlashMLA's causal rule, the Q copy into SW128 tiles and the zeroing of
// V rows past a request's end.
#pragma once
#include <cuda/std/type_traits>

#include "../common/ptx.cuh"
#include "params.h"

namespace mla {

constexpr int NUM_TILES = D_QK / 64;              // 9 tiles of 64 dims; tiles 0..7 are also V
constexpr int TILE_BYTES = 64 * 128;              // 64 rows x 64 dims x 2 B, SW128
constexpr int QK_BYTES = NUM_TILES * TILE_BYTES;  // 73,728 B for Q or one K block
constexpr float MASKED = -INFINITY;
constexpr float M_INIT = -1e30f;                  // finite, so exp2(M_INIT - M_INIT) = 1 for empty rows
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.69314718055994530942f;

// MLA_PDL_EARLY_UNSPLIT (params.h): this CTA writes no partials, so the combine may launch now (its end
// still triggers as well; a second trigger does nothing).
__device__ __forceinline__ void pdl_launch_if_unsplit(const SchedMeta& meta) {
  if (MLA_PDL_EARLY_UNSPLIT && !meta.is_first_req_splitted && !meta.is_last_req_splitted) ptx::pdl_launch_dependents();
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a 1024-B aligned SW128 tile (HOPPER-NOTES §1.6).
__device__ __forceinline__ int sw128(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

// The kernel's shared-memory struct at the first 1024-B boundary of the dynamic shared memory (SW128
// tiles need it), reached by pointer arithmetic on the __shared__ array so the compiler still knows every
// access through it is a shared one (st.shared / ld.shared). Rounding through uintptr_t, as the kernels
// did before, lost that: every such access compiled to a generic ld/st.
template <typename S>
__device__ __forceinline__ S& smem_struct_1024(uint8_t* raw) {
  return *reinterpret_cast<S*>(raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u));
}

// Blocks the scheduler gives a request: an empty request still gets one (its CTA writes out 0, lse +inf).
// No `seqlen + 63`: it overflows int for lengths near 2^31.
__device__ __forceinline__ int num_kv_blocks(int seqlen) { return seqlen <= 0 ? 1 : seqlen / BLOCK_N + (seqlen % BLOCK_N != 0); }

// A part's piece of request req (its SchedMeta): blocks [piece_first_block, piece_end_block) of a request
// of len tokens (or top-k entries), and whether another part holds the rest (the piece then writes
// partials for the combine).
__device__ __forceinline__ int piece_first_block(const SchedMeta& meta, int req) { return req == meta.begin_req_idx ? meta.begin_block_idx : 0; }
__device__ __forceinline__ int piece_end_block(const SchedMeta& meta, int req, int len) {
  return req == meta.end_req_idx ? meta.end_block_idx : num_kv_blocks(len);
}
__device__ __forceinline__ bool piece_is_split(const SchedMeta& meta, int req) {
  return (req == meta.begin_req_idx && meta.is_first_req_splitted) || (req == meta.end_req_idx && meta.is_last_req_splitted);
}

// Keys visible to flattened row `flat` (row = s * heads_per_kv + head): FlashMLA's causal rule lets query
// token s of s_q see keys [0, seqlen - (s_q - 1 - s)).
__device__ __forceinline__ int dense_row_limit(const DenseParams& p, int flat, int seqlen) {
  if (!p.causal || flat >= p.rows_per_kv) return seqlen;
  return seqlen - (p.s_q - 1 - flat / p.heads_per_kv);
}

// The physical id of block `blk` of request `req`, read from the table only where the block holds a
// visible token (blk · 64 < seqlen; an empty request's row, or a column past its blocks, may hold
// anything), else -1. An id outside [0, num_blocks) is recorded in p.errors (the first one since the
// host last cleared it: MlaSchedMeta.checkErrors) and, like -1, reads as zeros by TMA's out-of-bounds fill.
__device__ __forceinline__ int table_block(const DenseParams& p, int req, int blk, int seqlen) {
  if (blk >= p.max_blocks_per_seq || blk * BLOCK_N >= seqlen) return -1;
  const int id = p.block_table[req * p.block_table_stride + blk];
  if ((id < 0 || id >= p.num_blocks) && p.errors != nullptr && atomicCAS(&p.errors[0], ERR_NONE, ERR_BLOCK_ID) == ERR_NONE) {
    p.errors[1] = req, p.errors[2] = blk, p.errors[3] = id, p.errors[4] = p.num_blocks;
  }
  return id;
}

// 16-byte chunk `chunk` (dims 8·chunk .. +7) of row `flat` of KV head hk's query rows (row = s_q index
// · heads_per_kv + head within the head group). The caller keeps flat < rows_per_kv.
__device__ __forceinline__ uint4 load_q_chunk(const DenseParams& p, int req, int hk, int flat, int chunk) {
  const uint16_t* q = static_cast<const uint16_t*>(p.q);
  const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
  return __ldg(reinterpret_cast<const uint4*>(q + req * p.q_batch_stride + s * p.q_token_stride + head * p.q_head_stride + chunk * 8));
}

// 16-byte chunks of an m-block's Q: 64 rows of 72.
constexpr int Q_CHUNKS = 64 * 72;

// `threads` threads copy a request's 64 Q rows (flattened s_q x heads_per_kv rows of KV head hk) into
// SW128 tiles at `q_smem` (the layout TMA would produce); rows past rows_per_kv are zero. Six 16-byte
// loads per thread are in flight at a time (Q is 72 KB: one at a time cost a memory round trip per
// 4 KB, several microseconds at the start of every request; that start is most of a short call).
__device__ __forceinline__ void load_q_dense(const DenseParams& p, uint8_t* q_smem, int req, int m_block, int hk, int tid, int threads) {
  constexpr int BATCH = 6;
  for (int base = tid; base < Q_CHUNKS; base += BATCH * threads) {
    uint4 v[BATCH];
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int c = base + j * threads, r = c / 72, chunk = c % 72;
      const int flat = m_block * BLOCK_M + r;
      v[j] = make_uint4(0, 0, 0, 0);
      if (c < Q_CHUNKS && flat < p.rows_per_kv) v[j] = load_q_chunk(p, req, hk, flat, chunk);
    }
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int c = base + j * threads, r = c / 72, chunk = c % 72;
      if (c < Q_CHUNKS) *reinterpret_cast<uint4*>(q_smem + (chunk / 8) * TILE_BYTES + sw128(r, chunk % 8)) = v[j];
    }
  }
}

// Rows [valid, 64) of a block hold tokens past the request (maybe NaN poison): zero the four V tiles
// from `first_tile` there, since P = 0 times NaN is NaN inside the MMA. One warpgroup (128 threads).
__device__ __forceinline__ void zero_tail_rows(uint8_t* kblock, int first_tile, int valid, int t128) {
  const int rows = 64 - valid;
  for (int c = t128; c < rows * 4 * 8; c += 128) {
    const int r = valid + c / 32, tile = first_tile + (c / 8) % 4, chunk = c % 8;
    *reinterpret_cast<uint4*>(kblock + tile * TILE_BYTES + r * 128 + (chunk << 4)) = make_uint4(0, 0, 0, 0);
  }
}

// ---- the online-softmax step on a 64x64 score tile in wgmma accumulator layout (shared by the seesaw
// and the sparse consumers): thread element i is row 16·warp + lane/4 + 8·((i >> 1) & 1), column
// 8·(i >> 2) + 2·(lane % 4) + (i & 1); a row's 64 scores live in the 4 lanes of a quad.

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
}

// The row's max over this thread's 16 scores, then over the quad. FAST: a 4-level tree instead of a
// 16-long dependent chain (max is exact and order-free, so the result is the same).
template <bool FAST>
__device__ __forceinline__ float row_max(const float (&s)[32], int half) {
  if constexpr (FAST) {
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = fmaxf(s[2 * half + 4 * j], s[2 * half + 4 * j + 1]);
#pragma unroll
    for (int w = 4; w > 0; w >>= 1)
#pragma unroll
      for (int j = 0; j < w; ++j) v[j] = fmaxf(v[j], v[j + w]);
    return quad_max(fmaxf(v[0], MASKED));
  } else {
    float mx = MASKED;
#pragma unroll
    for (int i = 2 * half; i < 32; i += 4) mx = fmaxf(mx, fmaxf(s[i], s[i + 1]));
    return quad_max(mx);
  }
}

// P = 2^(S - m) in place; returns this thread's partial row sum.
__device__ __forceinline__ float exponentiate(float (&s)[32], int half, float m) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 2 * half; i < 32; i += 4) {
    s[i] = ptx::exp2_approx(s[i] - m);
    s[i + 1] = ptx::exp2_approx(s[i + 1] - m);
    sum += s[i] + s[i + 1];
  }
  return sum;
}

// The same for S not yet in the log2 domain: P = 2^(S·sc - m) with one fma per element (sc = the softmax
// scale times log2 e), instead of a multiply when masking and a subtract here.
__device__ __forceinline__ float exponentiate_scaled(float (&s)[32], int half, float m, float sc) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 2 * half; i < 32; i += 4) {
    s[i] = ptx::exp2_approx(fmaf(s[i], sc, -m));
    s[i + 1] = ptx::exp2_approx(fmaf(s[i + 1], sc, -m));
    sum += s[i] + s[i + 1];
  }
  return sum;
}

// P (accumulator layout, f32) as wgmma A fragments: k-step j, register x = elements 8j + 2x, 8j + 2x + 1.
template <typename T>
__device__ __forceinline__ void pack_p(uint32_t (&a)[4][4], const float (&s)[32]) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int x = 0; x < 4; ++x) a[j][x] = ptx::pack2<T>(s[8 * j + 2 * x], s[8 * j + 2 * x + 1]);
}

// Stores P fragments as a 64x64 16-bit SW128 K-major tile for another warpgroup's SS wgmma, with four
// stmatrix.x4 per thread. Fragment a[j][x] holds accumulator elements 8j + 2x, 8j + 2x + 1, so
// a[j][0..3] are the 8x8 matrices (chunk 2j, rows 0-7), (2j, rows 8-15), (2j+1, rows 0-7), (2j+1, rows
// 8-15) of the warp's 16 rows, and lane l gives row l%8 of matrix l/8. Sixteen 32-bit stores (store_p_words)
// did the same 0.5-0.8 % slower (H200, two calls: dense-compute 500.7 vs 505.1 µs, sparse-v32 348.9 vs
// 352.7); the P hand-over is on the path of both kernels (dense: W0's sP0 before P0_READY).
__device__ __forceinline__ void store_p(uint8_t* tile, const uint32_t (&a)[4][4], int warp_in_wg, int lane) {
  const int g = lane / 8, r = 16 * warp_in_wg + lane % 8 + 8 * (g & 1);
  const uint32_t row = ptx::smem_addr(tile) + r * 128;
#pragma unroll
  for (int j = 0; j < 4; ++j) ptx::stmatrix_x4(row + (((2 * j + (g >> 1)) ^ (r & 7)) << 4), a[j][0], a[j][1], a[j][2], a[j][3]);
}

// The same tile with sixteen 32-bit stores per thread (the sparse kernel's, see there). Fragment a[j][x]:
// row 16w + l/4 + 8((i>>1)&1), 16-B chunk i>>2, i = 8j + 2x.
__device__ __forceinline__ void store_p_words(uint8_t* tile, const uint32_t (&a)[4][4], int warp_in_wg, int lane) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int i = 8 * j + 2 * x;
      const int r = 16 * warp_in_wg + lane / 4 + 8 * ((i >> 1) & 1);
      *reinterpret_cast<uint32_t*>(tile + r * 128 + (((i >> 2) ^ (r & 7)) << 4) + 4 * (lane % 4)) = a[j][x];
    }
}

// S (+)= Q·Kᵀ over 64-dim tile t: four wgmma m64n64k16 k-steps, both operands SW128 K-major in smem.
// `first`: the first tile of the block's sum, which overwrites S instead of adding to it.
// MLA_DESC_ADD (default 1; 0 for A/B): a wgmma's descriptor as its tile's base descriptor plus the
// part's offset (ptx::desc_advance: one add, the base shared by the unrolled k-steps) instead of built
// from its address (a chain of five uniform instructions before each wgmma, ~17 % of the h16x consumer's
// samples in ncu). H200 (`…-exp16c-*`): dense-compute 468.0-468.2 µs against 485.0-485.6, dense-compute-mtp
// 858.1-860.8 against 885.0-885.7, sparse-h16 (h16x) 109.5-110.3 against 112.0-112.6.
#ifndef MLA_DESC_ADD
#define MLA_DESC_ADD 1
#endif
// The SW128 descriptor (leading byte offset `lbo`) of base + off; ADD picks the form per call site where
// a kernel measured the other one faster (the sparse h16 consumer, sparse_decode_sm90.cu).
template <bool ADD = (MLA_DESC_ADD != 0)>
__device__ __forceinline__ uint64_t sw128_at(uint32_t base, uint32_t off, uint32_t lbo) {
  return ADD ? ptx::desc_advance(ptx::smem_desc_sw128(base, lbo, 1024), off) : ptx::smem_desc_sw128(base + off, lbo, 1024);
}

template <typename T>
__device__ __forceinline__ void qk_tile(float (&s)[32], uint32_t q_base, uint32_t k_base, int t, bool first) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    ptx::wgmma_m64n64k16_ss<T>(s, sw128_at(q_base, t * TILE_BYTES + kk * 32, 16), sw128_at(k_base, t * TILE_BYTES + kk * 32, 16), !first || kk != 0);
}

// S = Q·Kᵀ for one 64-token block: the 9 tiles over d_qk = 576. before_tile(t) runs before tile t's
// k-steps (e.g. a wait for its TMA load).
template <typename T, typename BeforeTile>
__device__ __forceinline__ void qk_block(float (&s)[32], uint32_t q_base, uint32_t k_base, BeforeTile&& before_tile) {
#pragma unroll
  for (int t = 0; t < NUM_TILES; ++t) {
    before_tile(t);
    if (t == 0) ptx::wgmma_fence();
    qk_tile<T>(s, q_base, k_base, t, t == 0);
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::fence_regs(s);
}


// ---- tokens as wgmma's M and at most 16 query rows as N (the h16 kernels, dense and sparse) ----------
// One warpgroup. Accumulator element e of an m64n16 tile: row (token) 16·warp + lane/4 + 8·((e>>1)&1),
// column (query row) 8·(e>>2) + 2·(lane%4) + (e&1). A thread holds 4 columns, j = 2·(e>>2) + (e&1), in 2
// rows. Q is 9 SW128 tiles of 16 rows (2 KB each), Pᵀ one tile of 16 rows x 64 tokens.
constexpr int H16_ROWS = 16;
constexpr int H16_TILE = H16_ROWS * 128;
__device__ __forceinline__ int h16_col(int lane, int j) { return 8 * (j >> 1) + 2 * (lane % 4) + (j & 1); }
__device__ __forceinline__ int h16_j(int e) { return 2 * (e >> 2) + (e & 1); }
__device__ __forceinline__ int h16_row(int warp, int lane, int e) { return 16 * warp + lane / 4 + 8 * ((e >> 1) & 1); }

// Column j of Oᵀ times inv into its output row `dst` (512 values: dims 64·mb + row): q's dtype for out,
// fp32 for a split partial.
template <typename T, typename Dst>
__device__ __forceinline__ void h16_store_col(Dst* dst, const float (&ot)[8][8], int j, float inv, int warp, int lane) {
#pragma unroll
  for (int mb = 0; mb < 8; ++mb)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (h16_j(e) != j) continue;
      if constexpr (cuda::std::is_same_v<Dst, float>) dst[64 * mb + h16_row(warp, lane, e)] = ot[mb][e] * inv;
      else dst[64 * mb + h16_row(warp, lane, e)] = static_cast<uint16_t>(ptx::pack2<T>(ot[mb][e] * inv, 0.0f) & 0xFFFFu);
    }
}

// A request's start: Oᵀ = 0, m = M_INIT, l = 0.
__device__ __forceinline__ void h16_init(float (&ot)[8][8], float (&m)[4], float (&l)[4]) {
#pragma unroll
  for (int mb = 0; mb < 8; ++mb)
#pragma unroll
    for (int e = 0; e < 8; ++e) ot[mb][e] = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) m[j] = M_INIT, l[j] = 0.0f;
}

// Sᵀ = K·Qᵀ for the 64 tokens of the block at k_base, waited for.
template <typename T, bool ADD = (MLA_DESC_ADD != 0)>
__device__ __forceinline__ void h16_qk(float (&st)[8], uint32_t k_base, uint32_t q_base) {
#pragma unroll
  for (int e = 0; e < 8; ++e) st[e] = 0.0f;
  ptx::wgmma_fence();
#pragma unroll
  for (int t = 0; t < NUM_TILES; ++t)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      ptx::wgmma_m64n16k16_ss<T, 0>(st, sw128_at<ADD>(k_base, t * TILE_BYTES + kk * 32, 16),
                                    sw128_at<ADD>(q_base, t * H16_TILE + kk * 32, 16), t != 0 || kk != 0);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::fence_regs(st);
}

// v[j] combined (op) over the warpgroup's 64 rows of column h16_col(lane, j): the thread's, the warp's
// 8 row groups (lanes of equal lane % 4), then the 4 warps through red (named barrier `bar`, 128 threads).
template <typename Op>
__device__ __forceinline__ void h16_col_reduce(float (&v)[4], float (&red)[4][H16_ROWS], int warp, int lane, uint32_t bar, Op op) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[j] = op(v[j], __shfl_xor_sync(0xFFFFFFFFu, v[j], 4));
    v[j] = op(v[j], __shfl_xor_sync(0xFFFFFFFFu, v[j], 8));
    v[j] = op(v[j], __shfl_xor_sync(0xFFFFFFFFu, v[j], 16));
    if (lane < 4) red[warp][h16_col(lane, j)] = v[j];
  }
  ptx::named_barrier_sync(bar, 128);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int c = h16_col(lane, j);
    v[j] = op(op(red[0][c], red[1][c]), op(red[2][c], red[3][c]));
  }
}

// The online-softmax step on a masked, log2-scaled Sᵀ block (mx: see below): the new column maxima (moved only by a rise
// of more than TAU, the lazy running max, if TAU > 0), Pᵀ = 2^(Sᵀ - m) in st, l and Oᵀ rescaled.
// mx: the thread's own column maxima of st (taken while masking).
template <int TAU>
__device__ __forceinline__ void h16_softmax(float (&st)[8], float (&mx)[4], float (&m)[4], float (&l)[4], float (&ot)[8][8], float (&red)[4][H16_ROWS],
                                            int warp, int lane, uint32_t bar) {
  h16_col_reduce(mx, red, warp, lane, bar, [](float a, float b) { return fmaxf(a, b); });
  float scale[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float m_new = TAU > 0 ? (mx[j] > m[j] + float(TAU) ? mx[j] : m[j]) : fmaxf(m[j], mx[j]);
    scale[j] = ptx::exp2_approx(m[j] - m_new);
    m[j] = m_new;
    l[j] *= scale[j];
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    st[e] = ptx::exp2_approx(st[e] - m[h16_j(e)]);
    l[h16_j(e)] += st[e];
  }
  if (!__all_sync(0xFFFFFFFFu, scale[0] == 1.0f && scale[1] == 1.0f && scale[2] == 1.0f && scale[3] == 1.0f)) {
#pragma unroll
    for (int mb = 0; mb < 8; ++mb)
#pragma unroll
      for (int e = 0; e < 8; ++e) ot[mb][e] *= scale[h16_j(e)];
  }
}

// Pᵀ into its SW128 tile (as in wgmma_probe_sm90.cu): register x holds elements 2x, 2x+1, the 8x8 matrix
// of tokens 16·warp + 8·(x&1) + 0..7 and rows 8·(x>>1) + 0..7; .trans stores its column i as the tile row
// of query row 8·(x>>1) + i, in 16-byte chunk 2·warp + (x&1). Fenced for the wgmma that reads it.
// FENCE = false: the caller fences once after several tiles.
template <typename T, bool FENCE = true>
__device__ __forceinline__ void h16_store_pt(const float (&st)[8], uint32_t pt_base, int warp, int lane) {
  const int g = lane / 8, r = 8 * (g >> 1) + lane % 8, chunk = 2 * warp + (g & 1);
  ptx::stmatrix_x4_trans(pt_base + r * 128 + ((chunk ^ (r & 7)) << 4), ptx::pack2<T>(st[0], st[1]), ptx::pack2<T>(st[2], st[3]),
                         ptx::pack2<T>(st[4], st[5]), ptx::pack2<T>(st[6], st[7]));
  if constexpr (FENCE) ptx::fence_proxy_async_smem();
}

// Oᵀ += Vᵀ·Pᵀ (V: the block's tiles 0-7 read transposed, Pᵀ stored by every warp), waited for.
template <typename T, bool ADD = (MLA_DESC_ADD != 0)>
__device__ __forceinline__ void h16_pv_mma(float (&ot)[8][8], uint32_t k_base, uint32_t pt_base) {
  ptx::wgmma_fence();
#pragma unroll
  for (int mb = 0; mb < 8; ++mb)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      ptx::wgmma_m64n16k16_ss<T, 1>(ot[mb], sw128_at<ADD>(k_base, mb * TILE_BYTES + kk * 2048, TILE_BYTES),
                                    sw128_at<ADD>(pt_base, kk * 32, 16), 1);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int mb = 0; mb < 8; ++mb) ptx::fence_regs(ot[mb]);
}

// Pᵀ stored, then Oᵀ += Vᵀ·Pᵀ once every warp stored its part (named barrier `bar`).
template <typename T, bool ADD = (MLA_DESC_ADD != 0)>
__device__ __forceinline__ void h16_pv(float (&ot)[8][8], const float (&st)[8], uint32_t k_base, uint32_t pt_base, int warp, int lane, uint32_t bar) {
  h16_store_pt<T>(st, pt_base, warp, lane);
  ptx::named_barrier_sync(bar, 128);
  h16_pv_mma<T, ADD>(ot, k_base, pt_base);
}

}  // namespace mla
