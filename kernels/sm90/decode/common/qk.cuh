// S = Q·Kᵀ on the tensor cores for one 64-token block: Q and K as 64-dim SW128 tiles.
#pragma once
#include "tiles.cuh"

namespace mla {

// S (+)= Q·Kᵀ over 64-dim tile t: four wgmma m64n64k16 k-steps, both operands SW128 K-major in smem.
// `first`: the first tile of the block's sum, which overwrites S instead of adding to it.
template <typename T>
__device__ __forceinline__ void qk_tile(float (&s)[32], uint32_t q_base, uint32_t k_base, int t, bool first) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    ptx::wgmma_m64n64k16_ss<T>(s, sw128_at(q_base, t * TILE_BYTES + kk * 32, 16), sw128_at(k_base, t * TILE_BYTES + kk * 32, 16), !first || kk != 0);
}

// S = Q·Kᵀ for one 64-token block: TILES tiles over d_qk (9 over 576; DeepSeek-V4's 512: 8). before_tile(t)
// runs before tile t's k-steps (e.g. a wait for its TMA load).
template <typename T, int TILES = NUM_TILES, typename BeforeTile>
__device__ __forceinline__ void qk_block(float (&s)[32], uint32_t q_base, uint32_t k_base, BeforeTile&& before_tile) {
#pragma unroll
  for (int t = 0; t < TILES; ++t) {
    before_tile(t);
    if (t == 0) ptx::wgmma_fence();
    qk_tile<T>(s, q_base, k_base, t, t == 0);
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::fence_regs(s);
}

}  // namespace mla
