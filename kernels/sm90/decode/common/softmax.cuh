// The online-softmax pieces on a 64x64 score tile in wgmma's accumulator layout, shared by the dense and
// the sparse 64-row consumers: thread element i is row 16·warp + lane/4 + 8·((i >> 1) & 1), column
// 8·(i >> 2) + 2·(lane % 4) + (i & 1); a row's 64 scores live in the 4 lanes of a quad.
#pragma once
#include "tiles.cuh"

namespace mla {

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

}  // namespace mla
