// h16x over DeepSeek-V4's MODEL1 tokens (h_q <= 16). The plan is V3.2's (operands.cuh, mma.cuh); what
// the format changes:
// - seven e8m0 scales, one per 64-dim tile, where V3.2 has four fp32 ones per 128 dims. Q·Kᵀ keeps one
//   f16 group accumulator in flight per tile and folds each into an fp32 sum as soon as its commit group
//   retires (seven live accumulators would not fit beside Oᵀ); Pᵀ gets one scaled tile per scale tile;
// - V is the whole row, so P·V has an eighth m-tile, RoPE's bf16 values, against an unscaled Pᵀ tile;
// - a 64-dim scale tile is one m-tile of Oᵀ, so a thread's two rows of it are two adjacent dims: P·V
//   reads two codes of a token (V3.2 four, two m-tiles' worth, from one 128-dim group).
// The staged token (smem.h Geometry<Model1>): 576 data bytes, then the 8-byte scale record.
#pragma once
#include "mma.cuh"

namespace mla::sparse::h16x {

using M1 = Geometry<Model1>;

// Logical column (wgmma's k order) of NoPE dim d: inside each 64-dim tile, thread q of k-step s holds
// dims 16q + 4s + j (j = 0..3; one 16-byte load covers the tile's four k-steps) as columns 2q + j
// (j < 2) and 8 + 2q + j - 2.
__device__ __forceinline__ int nope_col_m1(int d) {
  const int g = d >> 6, q = (d >> 4) & 3, s = (d >> 2) & 3, j = d & 3;
  return 16 * (4 * g + s) + (j < 2 ? 2 * q + j : 8 + 2 * q + j - 2);
}

// The e8m0 byte of scale tile g in a token's record.
__device__ __forceinline__ uint32_t record_byte(const uint2& r, int g) { return ((g < 4 ? r.x : r.y) >> (8 * (g & 3))) & 0xFFu; }
// 2^(byte − 127) as fp32: byte 0 is 2^-127 (an fp32 subnormal), 0xFF NaN.
__device__ __forceinline__ float e8m0_f32(uint32_t byte) {
  return __uint_as_float(byte == 0xFFu ? 0x7FC00000u : byte == 0u ? 0x00400000u : byte << 23);
}
// 2^(byte − 127) · PT_SCALE (2^64), 0xFF NaN; a byte of 191 or more (a scale past 2^63) gives inf, as
// Pᵀ's bf16 would overflow there anyway (mma.cuh: every scale up to 2^56 stays finite).
__device__ __forceinline__ float e8m0_pt(uint32_t byte) {
  static_assert(PT_SCALE == 18446744073709551616.0f, "64 added to the exponent");
  return __uint_as_float(byte == 0xFFu ? 0x7FC00000u : min(byte + 64u, 255u) << 23);
}

// Q of (req, s_idx) into sm.q by the 256 consumer threads: thread t takes head t / 16, NoPE dims
// 28 (t % 16) .. + 27 (f16, times 2^-k, permuted) and RoPE dims 4 (t % 16) .. + 3 (bf16, tile 7).
__device__ __forceinline__ void load_q_m1(const SparseParams& p, Smem<Model1>& sm, int req, int s_idx, int t) {
  const int head = t / 16, part = t % 16;
  const bool in = head < p.h_q;
  const uint16_t* src = static_cast<const uint16_t*>(p.q) + (in ? req * p.q_batch_stride + s_idx * p.q_token_stride + head * p.q_head_stride : 0);
  constexpr int PER = Model1::NOPE_DIMS / 16;  // 28 dims: seven 8-byte loads
  uint2 v[PER / 4];
#pragma unroll
  for (int i = 0; i < PER / 4; ++i) v[i] = in ? *reinterpret_cast<const uint2*>(src + PER * part + 4 * i) : make_uint2(0, 0);
  const uint2 r = in ? *reinterpret_cast<const uint2*>(src + Model1::ROPE_OFFSET + 4 * part) : make_uint2(0, 0);
  auto value = [&](int i) {  // NoPE dim PER · part + i
    const uint32_t w = (i & 2) ? v[i / 4].y : v[i / 4].x;
    return __uint_as_float((i & 1) ? (w & 0xFFFF0000u) : (w << 16));
  };
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < PER; ++i) amax = fmaxf(amax, fabsf(value(i)));
  const float down = q_down_scale(amax, &sm.qexp[head], part);
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = nope_col_m1(PER * part + i);
    *reinterpret_cast<__half*>(sm.q + (c / 64) * H16_TILE + sw128(head, (c % 64) / 8) + 2 * (c % 8)) = __float2half_rn(value(i) * down);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w = i < 2 ? r.x : r.y;
    const int c = rope_col(4 * part + i);
    *reinterpret_cast<uint16_t*>(sm.q + Model1::ROPE_TILE * H16_TILE + sw128(head, c / 8) + 2 * (c % 8)) = static_cast<uint16_t>((i & 1) ? w >> 16 : w);
  }
}

// Sᵀ (log2 units not yet applied) of the block in `stage`: per 64-dim scale tile an f16 accumulator over
// its four k-steps, one commit group, folded into the fp32 sum times each token's scale once retired
// (QK_DEPTH groups in flight, their accumulators reused in turn), and the bf16 RoPE accumulator:
// qx · Σ_g acc_g · scale_g + rope. rec returns the thread's two tokens' scale records.
__device__ __forceinline__ void qk_m1(float (&st)[8], uint2 (&rec)[2], const uint8_t* stage, uint32_t q_base, int warp, int lane, const float (&qx)[4]) {
  constexpr int D = QK_DEPTH, G = Model1::NOPE_TILES;
  static_assert(G >= D + 1, "the RoPE fragments reuse a retired set");
  const int q4 = lane % 4;
  const uint8_t* t0 = stage + (16 * warp + lane / 4) * M1::TOKEN_STRIDE;
  const uint8_t* t1 = t0 + 8 * M1::TOKEN_STRIDE;
  rec[0] = *reinterpret_cast<const uint2*>(t0 + M1::RECORD_AT), rec[1] = *reinterpret_cast<const uint2*>(t1 + M1::RECORD_AT);
  float acc[D][8], accr[8], sum[8];
  uint32_t a[D][4][4];
  auto q_desc = [&](uint32_t off) { return sw128_at(q_base, off, 16); };
  // Group g's accumulator into the sum, times its tokens' scales (rows r and r + 8: tokens t0 and t1).
  auto fold = [&](int g) {
    const float s0 = e8m0_f32(record_byte(rec[0], g)), s1 = e8m0_f32(record_byte(rec[1], g));
    ptx::fence_regs(acc[g % D]);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float v = acc[g % D][e] * (((e >> 1) & 1) ? s1 : s0);
      sum[e] = g == 0 ? v : sum[e] + v;
    }
  };
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const uint4 k0 = *reinterpret_cast<const uint4*>(t0 + 64 * g + 16 * q4), k1 = *reinterpret_cast<const uint4*>(t1 + 64 * g + 16 * q4);
    if (g >= D) {
      ptx::wgmma_wait<D - 1>();  // group g - D retired: its fragments and accumulator are free
      fold(g - D);
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint32_t w0 = word(k0, s), w1 = word(k1, s);
      a[g % D][s][0] = lo_f16x2(w0), a[g % D][s][1] = lo_f16x2(w1), a[g % D][s][2] = hi_f16x2(w0), a[g % D][s][3] = hi_f16x2(w1);
    }
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) ptx::wgmma_m64n16k16_rs<ptx::fp16_t>(acc[g % D], a[g % D][s], q_desc(g * H16_TILE + s * 32), s != 0);
    ptx::wgmma_commit();
  }
  const RopeRows rope = load_rope(t0, t1, Model1::ROPE_OFFSET, q4);
  ptx::wgmma_wait<D - 1>();  // every group but the last retired
#pragma unroll
  for (int g = G - D; g < G - 1; ++g) fold(g);
  qk_rope(accr, a[G % D], rope, q_base, Model1::ROPE_TILE * H16_TILE);  // the retired set after the last group's
  ptx::wgmma_wait<0>();
  fold(G - 1);
  ptx::fence_regs(accr);
#pragma unroll
  for (int e = 0; e < 8; ++e) st[e] = qx[h16_j(e)] * sum[e] + accr[e];
}

// Pᵀ's tiles: tile g < 7 holds Pᵀ times each token's tile-g scale times PT_SCALE, tile 7 (RoPE, whose V
// is bf16 as stored) Pᵀ / OT_UNDO, so every tile's product with its V carries O · 2^-56; stored as
// h16_store_pt does, fenced once for the wgmma that reads them.
__device__ __forceinline__ void store_pt_m1(const float (&st)[8], const uint2 (&rec)[2], uint32_t pt_base, int warp, int lane) {
#pragma unroll
  for (int g = 0; g < Model1::NOPE_TILES; ++g) {
    const float s0 = e8m0_pt(record_byte(rec[0], g)), s1 = e8m0_pt(record_byte(rec[1], g));
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = st[e] * (((e >> 1) & 1) ? s1 : s0);
    h16_store_pt<ptx::bf16_t>(v, pt_base + g * H16_TILE, warp, lane);
  }
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = st[e] * (1.0f / OT_UNDO);
  h16_store_pt<ptx::bf16_t>(v, pt_base + Model1::ROPE_TILE * H16_TILE, warp, lane);
  ptx::fence_proxy_async_smem();
}

// The thread's first Oᵀ dim of each 64-dim m-tile: rows r = 16w + l/4 and r + 8 are dims
// 64g + dim_off_m1 and + 1 (two adjacent codes of a token, one 16-bit load).
__device__ __forceinline__ int dim_off_m1(int warp, int lane) { return 2 * (8 * warp + lane / 4); }

// Oᵀ += Vᵀ·Pᵀ from the raw bytes in `stage`: m-tiles 0-6 from the e4m3 codes (two per token, paired by
// prmt and taken as bf16 by moving bits, as in V3.2's pv), m-tile 7 from RoPE's bf16 (one 32-bit word a
// token, halves paired by prmt). Per k-step of 16 tokens a thread holds tokens 2q, 2q + 1, 2q + 8, 2q + 9
// (q = l % 4), as wgmma's A fragment. Issued in halves of a k-step (four m-tiles), PV_DEPTH in flight.
__device__ __forceinline__ void pv_m1(float (&ot)[8][8], const uint8_t* stage, uint32_t pt_base, int warp, int lane) {
  const int q4 = lane % 4, dim_off = dim_off_m1(warp, lane);
  constexpr int D = PV_DEPTH, MT = 2;  // commit groups of MT m-tiles of one k-step (4 spilled 16 bytes)
  constexpr uint32_t LO16 = 0x5410u, HI16 = 0x7632u;  // prmt: the low (high) halves of (a, b)
  uint32_t a[D][MT][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint8_t* t[4];
    t[0] = stage + (16 * kk + 2 * q4) * M1::TOKEN_STRIDE, t[1] = t[0] + M1::TOKEN_STRIDE, t[2] = t[0] + 8 * M1::TOKEN_STRIDE, t[3] = t[2] + M1::TOKEN_STRIDE;
#pragma unroll
    for (int part = 0; part < 8 / MT; ++part) {
      const int h = (8 / MT) * kk + part;
      uint32_t w[MT][4];  // [m-tile of the part][token]
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        const int g = MT * part + mi;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[mi][i] = g < Model1::NOPE_TILES ? *reinterpret_cast<const uint16_t*>(t[i] + 64 * g + dim_off)
                                            : *reinterpret_cast<const uint32_t*>(t[i] + Model1::ROPE_OFFSET + 2 * dim_off);
      }
      if (h >= D) ptx::wgmma_wait<D - 1>();  // group h - D retired
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        const int g = MT * part + mi;
        uint32_t (&f)[4] = a[h % D][mi];
#pragma unroll
        for (int x = 0; x < 2; ++x) {  // tokens 2q, 2q + 1 (x = 0) and 2q + 8, 2q + 9
          const uint32_t u = w[mi][2 * x], v = w[mi][2 * x + 1];
          if (g < Model1::NOPE_TILES) {
            f[2 * x] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(0))), f[2 * x + 1] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(1)));
          } else {
            f[2 * x] = ptx::prmt(u, v, LO16), f[2 * x + 1] = ptx::prmt(u, v, HI16);
          }
        }
      }
      ptx::wgmma_fence();
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        const int g = MT * part + mi;
        ptx::wgmma_m64n16k16_rs<ptx::bf16_t>(ot[g], a[h % D][mi], sw128_at(pt_base, g * H16_TILE + kk * 32, 16), 1);
      }
      ptx::wgmma_commit();
    }
  }
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int mb = 0; mb < 8; ++mb) ptx::fence_regs(ot[mb]);
}

// The thread's dims of one head's row of WG0's final Oᵀ: column j's rows r and r + 8 (elements e0, e0 + 2)
// of every m-tile g, times `inv`, as bf16 pairs into out (or fp32 pairs into the partial row oa).
__device__ __forceinline__ void store_dims_m1(const float (&ot)[8][8], int e0, float inv, uint16_t* out, float* oa, int dim_off) {
#pragma unroll
  for (int g = 0; g < 8; ++g) {
    const float x = ot[g][e0] * inv, y = ot[g][e0 + 2] * inv;
    if (out != nullptr) *reinterpret_cast<uint32_t*>(out + 64 * g + dim_off) = ptx::pack2<ptx::bf16_t>(x, y);
    else *reinterpret_cast<float2*>(oa + 64 * g + dim_off) = make_float2(x, y);
  }
}

}  // namespace mla::sparse::h16x
