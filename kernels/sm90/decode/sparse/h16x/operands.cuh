// h16x's operand layouts. The consumers read the tokens' raw bytes straight into wgmma's register A
// fragments, so Q's columns and Oᵀ's rows are permuted to make a thread's fragments contiguous bytes:
// - Sᵀ = K·Qᵀ: inside each 128-dim scale group, thread q (lane % 4) of k-step s holds dims 32q + 4s + j
//   (one 16-byte load covers four k-steps); K's e4m3 codes become f16 exactly (one cvt per two) and
//   multiply Q in f16, each head scaled by 2^-k so its largest |q| is in [2^14, 2^15), where bf16 values
//   are exact in f16. RoPE stays bf16, thread q holding dims 16q .. 16q + 15.
// - Oᵀ += Vᵀ·Pᵀ: V's codes of four tokens of a dim are paired by prmt and taken as bf16 by moving bits
//   (the value times 2^-120, no conversion); the group scales go into Pᵀ instead (mma.cuh).
#pragma once
#include "../../common/heads_as_n.cuh"
#include "../smem.h"

namespace mla::sparse::h16x {

// Logical column (wgmma's k order) of NoPE dim d: thread q of k-step s holds dims 32q + 4s + j (j = 0..3)
// of each 128-dim group as columns 2q + j (j < 2) and 8 + 2q + j - 2.
__device__ __forceinline__ int nope_col(int d) {
  const int g = d >> 7, q = (d >> 5) & 3, s = (d >> 2) & 7, j = d & 3;
  return 16 * (8 * g + s) + (j < 2 ? 2 * q + j : 8 + 2 * q + j - 2);
}
// The same for RoPE dim d (0..63): thread q of k-step ks holds dims 16q + 4ks + j.
__device__ __forceinline__ int rope_col(int d) {
  const int q = d >> 4, ks = (d >> 2) & 3, j = d & 3;
  return 16 * ks + (j < 2 ? 2 * q + j : 8 + 2 * q + j - 2);
}
__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
__device__ __forceinline__ uint32_t lo_f16x2(uint32_t w) { return ptx::cvt_f16x2_e4m3x2(static_cast<uint16_t>(w & 0xFFFFu)); }
__device__ __forceinline__ uint32_t hi_f16x2(uint32_t w) { return ptx::cvt_f16x2_e4m3x2(static_cast<uint16_t>(w >> 16)); }

// Two e4m3 codes as bf16x2, each value times 2^-120: sx holds code b, its sign replicated, code c, its
// sign replicated (prmt with the sign bit set in the selector), so each 16-bit half shifted left by 4 has
// b's exponent and mantissa in bf16's fields (e4m3's bias 7 read as bf16's 127: subnormals land on bf16
// subnormals, exactly) and the sign at bit 15; the mask drops the sign copies. A NaN code becomes a
// finite value: such a token's score (from the same bytes, converted with NaN kept) is NaN already.
__device__ __forceinline__ uint32_t e4m3x2_as_bf16(uint32_t sx) { return (sx << 4) & 0x87F087F0u; }
// prmt selector of byte j of (x, y): x's byte j, its sign, y's byte j, its sign.
__host__ __device__ constexpr uint32_t pair_sel(int j) { return uint32_t(j) | uint32_t(8 + j) << 4 | uint32_t(4 + j) << 8 | uint32_t(12 + j) << 12; }

// A head's Q scaling into f16's range from the largest |q| of the thread's NoPE dims (amax; the head's
// 16 threads are 16 consecutive lanes): 2^-k (down) brings the head's largest |q| into [2^14, 2^15)
// (f16's top binade but one), k clamped; 2^k is stored to sm.qexp by the head's first thread.
__device__ __forceinline__ float q_down_scale(float amax, float* qexp, int part) {
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const int e = amax > 0.0f ? static_cast<int>((__float_as_uint(amax) >> 23) & 0xFF) - 127 : 14;
  const int k = max(-100, min(100, e - 14));
  const float down = __uint_as_float(static_cast<uint32_t>(127 - k) << 23);
  if (part == 0) *qexp = __uint_as_float(static_cast<uint32_t>(127 + k) << 23);
  return down;
}

// The RoPE dims of the thread's two tokens (thread q holds dims 16q .. 16q + 15 of each, bf16 as stored
// at `rope` bytes into the token), loaded before the wait that frees the fragments they go into.
struct RopeRows {
  uint4 t0lo, t0hi, t1lo, t1hi;
};
__device__ __forceinline__ RopeRows load_rope(const uint8_t* t0, const uint8_t* t1, int rope, int q4) {
  const int at = rope + 32 * q4;
  return {*reinterpret_cast<const uint4*>(t0 + at), *reinterpret_cast<const uint4*>(t0 + at + 16), *reinterpret_cast<const uint4*>(t1 + at),
          *reinterpret_cast<const uint4*>(t1 + at + 16)};
}

// Sᵀ's RoPE part: the four k-steps of Q's RoPE tile (at q_tile, bytes from q_base) against the tokens'
// bf16 RoPE dims, in the retired fragment set `ar`, as one commit group (accr overwritten).
__device__ __forceinline__ void qk_rope(float (&accr)[8], uint32_t (&ar)[4][4], const RopeRows& r, uint32_t q_base, uint32_t q_tile) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const uint4& x0 = ks < 2 ? r.t0lo : r.t0hi;
    const uint4& x1 = ks < 2 ? r.t1lo : r.t1hi;
    const int w = 2 * (ks % 2);
    ar[ks][0] = word(x0, w), ar[ks][1] = word(x1, w), ar[ks][2] = word(x0, w + 1), ar[ks][3] = word(x1, w + 1);
  }
  ptx::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) ptx::wgmma_m64n16k16_rs<ptx::bf16_t>(accr, ar[ks], sw128_at(q_base, q_tile + ks * 32, 16), ks != 0);
  ptx::wgmma_commit();
}

// Q of (req, s_idx) into sm.q by the 256 consumer threads: thread t takes head t / 16, NoPE dims
// 32 (t % 16) .. + 31 and RoPE dims 4 (t % 16) .. + 3; heads past h_q are zeros.
template <class Fmt>
__device__ __forceinline__ void load_q(const SparseParams& p, Smem<Fmt>& sm, int req, int s_idx, int t) {
  const int head = t / 16, part = t % 16;
  const bool in = head < p.h_q;
  const uint16_t* src = static_cast<const uint16_t*>(p.q) + (in ? req * p.q_batch_stride + s_idx * p.q_token_stride + head * p.q_head_stride : 0);
  uint4 v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = in ? *reinterpret_cast<const uint4*>(src + 32 * part + 8 * i) : make_uint4(0, 0, 0, 0);
  const uint2 r = in ? *reinterpret_cast<const uint2*>(src + D_V + 4 * part) : make_uint2(0, 0);
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t w = word(v[i / 4], i % 4);
    amax = fmaxf(amax, fmaxf(fabsf(__uint_as_float(w << 16)), fabsf(__uint_as_float(w & 0xFFFF0000u))));
  }
  const float down = q_down_scale(amax, &sm.qexp[head], part);
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const uint32_t w = word(v[i / 8], (i % 8) / 2);
    const float x = __uint_as_float((i & 1) ? (w & 0xFFFF0000u) : (w << 16));
    const int c = nope_col(32 * part + i);
    const __half h = __float2half_rn(x * down);
    *reinterpret_cast<__half*>(sm.q + (c / 64) * H16_TILE + sw128(head, (c % 64) / 8) + 2 * (c % 8)) = h;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w = i < 2 ? r.x : r.y;
    const int c = rope_col(4 * part + i);
    *reinterpret_cast<uint16_t*>(sm.q + 8 * H16_TILE + sw128(head, c / 8) + 2 * (c % 8)) = static_cast<uint16_t>((i & 1) ? w >> 16 : w);
  }
}

}  // namespace mla::sparse::h16x
