// Tokens as wgmma's M and at most 16 query rows as N (the h16x sparse consumers): at 16 rows a 64-row
// tile would be three quarters padding. One warpgroup. Accumulator element e of an m64n16 tile: row
// (token) 16·warp + lane/4 + 8·((e>>1)&1), column (query row) 8·(e>>2) + 2·(lane%4) + (e&1). A thread
// holds 4 columns, j = 2·(e>>2) + (e&1), in 2 rows. Pᵀ is one SW128 tile of 16 rows x 64 tokens.
#pragma once
#include "tiles.cuh"

namespace mla {

constexpr int H16_ROWS = 16;
constexpr int H16_TILE = H16_ROWS * 128;
__device__ __forceinline__ int h16_col(int lane, int j) { return 8 * (j >> 1) + 2 * (lane % 4) + (j & 1); }
__device__ __forceinline__ int h16_j(int e) { return 2 * (e >> 2) + (e & 1); }
__device__ __forceinline__ int h16_row(int warp, int lane, int e) { return 16 * warp + lane / 4 + 8 * ((e >> 1) & 1); }

// A request's start: Oᵀ = 0, m = M_INIT, l = 0.
__device__ __forceinline__ void h16_init(float (&ot)[8][8], float (&m)[4], float (&l)[4]) {
#pragma unroll
  for (int mb = 0; mb < 8; ++mb)
#pragma unroll
    for (int e = 0; e < 8; ++e) ot[mb][e] = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) m[j] = M_INIT, l[j] = 0.0f;
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
// of query row 8·(x>>1) + i, in 16-byte chunk 2·warp + (x&1). Not fenced: the caller fences once after
// its tiles, before the wgmma that reads them.
template <typename T>
__device__ __forceinline__ void h16_store_pt(const float (&st)[8], uint32_t pt_base, int warp, int lane) {
  const int g = lane / 8, r = 8 * (g >> 1) + lane % 8, chunk = 2 * warp + (g & 1);
  ptx::stmatrix_x4_trans(pt_base + r * 128 + ((chunk ^ (r & 7)) << 4), ptx::pack2<T>(st[0], st[1]), ptx::pack2<T>(st[2], st[3]),
                         ptx::pack2<T>(st[4], st[5]), ptx::pack2<T>(st[6], st[7]));
}

}  // namespace mla
