// The seesaw steps, each a piece of one warpgroup's part of a pair (the table in kernel.cuh): S = Q·Kᵀ,
// the masked online softmax with its max and scales exchanged through shared memory, the rescales, and
// O += P·V with P in registers (RS) or handed over in shared memory (SS). Accumulator layout: thread
// element i of S is row 16·warp + lane/4 + 8·((i >> 1) & 1), column 8·(i >> 2) + 2·(lane % 4) + (i & 1).
#pragma once
#include "../common/qk.cuh"
#include "../common/softmax.cuh"
#include "smem.h"

namespace mla::dense {

// ---- step 1: S = Q·Kᵀ -------------------------------------------------------------------------------

// S = Q·Kᵀ for one 64-token block over its KT tiles, waiting on each tile's barrier just before its four
// k-steps. With `arrive_before` < KT (W0, QK0_FIRST), each warp's lane 0 arrives on qk0_issued once the
// tiles before that one are queued.
template <typename T, int KT>
__device__ __forceinline__ void compute_s(float (&s)[32], Smem& sm, int stage, uint32_t phase, int lane = 0, int arrive_before = KT) {
  qk_block<T, KT>(s, ptx::smem_addr(sm.q), ptx::smem_addr(sm.k[stage]), [&](int t) {
    if (t == arrive_before && lane == 0) ptx::mbarrier_arrive(&sm.qk0_issued);
    ptx::mbarrier_wait(&sm.kfull[stage][t], phase);
  });
}

// pipe: this thread's A fragments of Q's tile 8 (k-step kk, register x: row 16·warp + lane/4 + 8·(x & 1),
// dims 16·kk + 8·(x >> 1) + 2·(lane % 4) + {0, 1}), read from its SW128 copy. Q·Kᵀ with both operands in
// shared memory asks for all of its bandwidth, so every TMA write landing during it slows it; the RS
// tile asks for half (dense-compute 505.1 vs 518.5 µs).
__device__ __forceinline__ void load_qrope(uint32_t (&qrope)[4][4], const Smem& sm, int warp_in_wg, int lane) {
  const uint8_t* tile = sm.q + (NUM_TILES - 1) * TILE_BYTES;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int r = 16 * warp_in_wg + lane / 4 + 8 * (x & 1);
      qrope[kk][x] = *reinterpret_cast<const uint32_t*>(tile + sw128(r, 2 * kk + (x >> 1)) + 4 * (lane % 4));
    }
}

// pipe: queues S (+)= Q·Kᵀ over `count` tiles of block `stage` from tile `first` on, wrapping from the
// last of its KT tiles to tile 0, each once its TMA load (parity `phase`) has landed, as one commit group
// that is not waited for here. `starts`: the first of them overwrites S. The RoPE tile 8 (d_qk 576) is an
// RS wgmma from qrope.
template <typename T, int KT>
__device__ __forceinline__ void qk_issue(float (&s)[32], Smem& sm, int stage, uint32_t phase, int first, int count, bool starts, const uint32_t (&qrope)[4][4]) {
  const uint32_t q = ptx::smem_addr(sm.q), k = ptx::smem_addr(sm.k[stage]);
  ptx::wgmma_fence();
#pragma unroll
  for (int i = 0; i < count; ++i) {
    const int t = (first + i) % KT;
    ptx::mbarrier_wait(&sm.kfull[stage][t], phase);
    if (KT > V_TILES && t == KT - 1) {
      // Never the first tile of a block's sum (W0 reads it last, W1 fifth), so it accumulates.
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) ptx::wgmma_m64n64k16_rs<T>(s, qrope[kk], sw128_at(k, t * TILE_BYTES + kk * 32, 16));
    } else {
      qk_tile<T>(s, q, k, t, starts && i == 0);
    }
  }
  ptx::wgmma_commit();
}

// ---- step 2: masking and the online softmax -----------------------------------------------------------

// Keys visible to flattened row `flat` (row = s * heads_per_kv + head): FlashMLA's causal rule lets query
// token s of s_q see keys [0, seqlen - (s_q - 1 - s)).
__device__ __forceinline__ int dense_row_limit(const DenseParams& p, int flat, int seqlen) {
  if (!p.causal || flat >= p.rows_per_kv) return seqlen;
  return seqlen - (p.s_q - 1 - flat / p.heads_per_kv);
}

// Scales scores to the log2 domain (SCALE; pipe scales inside its exponent instead) and masks tokens at
// or past each row's limit (-inf). When no row of the warp ends inside this block (the common case), the
// per-element compare is skipped.
template <bool SCALE = true>
__device__ __forceinline__ void mask_scale(float (&s)[32], const DenseParams& p, int blk, int lane, const int (&limit)[2]) {
  const int tok0 = blk * BLOCK_N + 2 * (lane % 4);
  if (__all_sync(0xFFFFFFFFu, min(limit[0], limit[1]) >= (blk + 1) * BLOCK_N)) {
    if constexpr (SCALE) {
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] *= p.scale_log2;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int tok = tok0 + 8 * (i >> 2) + (i & 1);
    s[i] = tok < limit[(i >> 1) & 1] ? (SCALE ? s[i] * p.scale_log2 : s[i]) : MASKED;
  }
}

// fast, W0: the running max m with S0's row maxima, s0 = 2^(m_old - m0), P0 = 2^(S0 - m0) in s; m0 and
// s0 published for W1.
__device__ __forceinline__ void softmax_w0(float (&s)[32], float (&m)[2], float (&l)[2], float (&scale0)[2], Smem& sm, int warp_in_wg, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
    const float m_old = m[half];  // == sm.m[r], written by W1 last iteration
    const float mx = row_max<true>(s, half);
    const float m_new = mx > m_old + LAZY_MAX ? mx : m_old;
    scale0[half] = ptx::exp2_approx(m_old - m_new);
    l[half] = l[half] * scale0[half] + exponentiate(s, half, m_new);
    m[half] = m_new;
    if (lane % 4 == 0) sm.m[r] = m_new, sm.scale0[r] = scale0[half];
  }
}

// fast, W1 (after W0 published m0, s0): m1 = max(m0, rowmax S1), s1 = 2^(m0 - m1), P1 = 2^(S1 - m1) in
// s; scale01 = s0·s1 for O_R; m1 and s1 published for W0.
__device__ __forceinline__ void softmax_w1(float (&s)[32], float (&m)[2], float (&l)[2], float (&scale01)[2], Smem& sm, int warp_in_wg, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
    const float m0 = sm.m[r], s0 = sm.scale0[r];
    const float mx = row_max<true>(s, half);
    const float m_new = mx > m0 + LAZY_MAX ? mx : m0;
    const float s1 = ptx::exp2_approx(m0 - m_new);
    scale01[half] = s0 * s1;
    l[half] = l[half] * scale01[half] + exponentiate(s, half, m_new);
    m[half] = m_new;
    __syncwarp();  // the warp's four readers of sm.m[r] (above) read before lane 0 overwrites it
    if (lane % 4 == 0) sm.m[r] = m_new, sm.scale1[r] = s1;
  }
}

// W0, step 4 (after W1 published s1): its sum and max follow W1's.
__device__ __forceinline__ void take_scale1(float (&m)[2], float (&l)[2], float (&scale1)[2], const Smem& sm, int warp_in_wg, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
    scale1[half] = sm.scale1[r];
    m[half] = sm.m[r];
    l[half] *= scale1[half];
  }
}

// pipe's softmax step in two halves, so a warpgroup publishes its new max and scale before its
// exponentials: new_max takes S unscaled (masked entries -inf), the row maxima times `sc` = scale_log2
// with the running max m_old, and the factor 2^(m_old - m_new) for what was summed against m_old;
// exp_sum then makes P = 2^(S·sc - m) in place (one fma per element instead of fast's multiply and
// subtract) and l = l·scale + rowsum(P).
__device__ __forceinline__ void new_max(const float (&s)[32], const float (&m_old)[2], float (&m_new)[2], float (&scale)[2], float sc) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float mx = row_max<true>(s, half) * sc;
    m_new[half] = mx > m_old[half] + LAZY_MAX ? mx : m_old[half];
    scale[half] = ptx::exp2_approx(m_old[half] - m_new[half]);
  }
}
__device__ __forceinline__ void exp_sum(float (&s)[32], float (&l)[2], const float (&m)[2], const float (&scale)[2], float sc) {
#pragma unroll
  for (int half = 0; half < 2; ++half) l[half] = l[half] * scale[half] + exponentiate_scaled(s, half, m[half], sc);
}

// ---- steps 3-5: rescales and O += P·V ------------------------------------------------------------------

// O_half *= f per row, skipped when every factor of the warp is exactly 1 (the running max did not move,
// which is most blocks after the first), so the multiply by 1 is not on the critical path.
__device__ __forceinline__ void rescale_o(float (&o)[128], const float (&f)[2]) {
  if (__all_sync(0xFFFFFFFFu, f[0] == 1.0f && f[1] == 1.0f)) return;
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] *= f[(i >> 1) & 1];
}

// Multiplies packed 16-bit P fragments by a per-row factor (rows alternate with x & 1), skipped for a
// warp whose factors are all 1.
template <typename T>
__device__ __forceinline__ void scale_p(uint32_t (&a)[4][4], const float (&f)[2]) {
  if (__all_sync(0xFFFFFFFFu, f[0] == 1.0f && f[1] == 1.0f)) return;
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      float lo, hi;
      if constexpr (T::is_fp16) {
        const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&a[j][x]));
        lo = v.x, hi = v.y;
      } else {
        const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a[j][x]));
        lo = v.x, hi = v.y;
      }
      a[j][x] = ptx::pack2<T>(lo * f[x & 1], hi * f[x & 1]);
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

// O_half += A·V where A is P in registers (RS) and V = 4 tiles of this block starting at first_tile.
template <typename T>
__device__ __forceinline__ void pv_rs(float (&o)[128], const uint32_t (&a)[4][4], const uint8_t* kblock, int first_tile) {
  const uint32_t base = ptx::smem_addr(kblock) + first_tile * TILE_BYTES;
  ptx::wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; ++j) ptx::wgmma_m64n256k16_rs_transb<T>(o, a[j], sw128_at(base, j * 2048, TILE_BYTES));
  ptx::wgmma_commit();
}

// O_half += sP·V with P from shared memory (SS).
template <typename T>
__device__ __forceinline__ void pv_ss(float (&o)[128], const uint8_t* ptile, const uint8_t* kblock, int first_tile) {
  const uint32_t pa = ptx::smem_addr(ptile), base = ptx::smem_addr(kblock) + first_tile * TILE_BYTES;
  ptx::wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; ++j)
    ptx::wgmma_m64n256k16_ss_transb<T>(o, sw128_at(pa, j * 32, 16), sw128_at(base, j * 2048, TILE_BYTES));
  ptx::wgmma_commit();
}

}  // namespace mla::dense
