// h16x's two products on a stage of raw tokens, A from registers (operands.cuh), B from shared memory.
#pragma once
#include "operands.cuh"

namespace mla::sparse::h16x {

// Pᵀ's tiles hold p · scale · 2^64 (bf16 keeps every scale up to 2^56 finite at p <= 2^LAZY_MAX) and V's
// bf16 are the codes' values · 2^-120, so Oᵀ accumulates O · 2^-56: OT_UNDO is multiplied back at the end.
constexpr float PT_SCALE = 18446744073709551616.0f, OT_UNDO = 72057594037927936.0f;
static_assert(LAZY_MAX <= 8, "p · 2^56 · 2^64 stays below bf16's largest finite value");

// Sᵀ (log2 units not yet applied) of the block in `stage`: four f16 group accumulators and the bf16 RoPE
// one, combined as qx · Σ_g acc_g · scale_g + rope; sc returns the thread's two tokens' scales. Issued in
// half groups (4 k-steps, 16 registers of A fragments), QK_DEPTH in flight.
template <class Fmt>
__device__ __forceinline__ void qk(float (&st)[8], float4 (&sc)[2], const uint8_t* stage, uint32_t q_base, int warp, int lane, const float (&qx)[4]) {
  static_assert(Fmt::NUM_SCALES == 4 && Fmt::SCALE_GROUP == 128, "one f16 accumulator per 128-dim scale group");
  const int q4 = lane % 4;
  const uint8_t* t0 = stage + (16 * warp + lane / 4) * Fmt::TOKEN_BYTES;
  const uint8_t* t1 = t0 + 8 * Fmt::TOKEN_BYTES;
  float acc[4][8], accr[8];
  auto q_desc = [&](uint32_t off) { return sw128_at(q_base, off, 16); };
  constexpr int D = QK_DEPTH, KS = 4;  // commit groups of KS k-steps, D of them in flight
  uint32_t a[D][KS][4];
  uint4 k0, k1;
#pragma unroll
  for (int h = 0; h < 32 / KS; ++h) {
    const int g = (h * KS) / 8, s0 = (h * KS) % 8;  // the group and its first k-step
    const int off = 128 * g + 32 * q4 + 4 * s0;
    k0 = *reinterpret_cast<const uint4*>(t0 + off), k1 = *reinterpret_cast<const uint4*>(t1 + off);
    if (h >= D) ptx::wgmma_wait<D - 1>();  // group h - D retired: its fragments' registers are free
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const uint32_t w0 = word(k0, (s0 + s) % 4), w1 = word(k1, (s0 + s) % 4);
      a[h % D][s][0] = lo_f16x2(w0), a[h % D][s][1] = lo_f16x2(w1), a[h % D][s][2] = hi_f16x2(w0), a[h % D][s][3] = hi_f16x2(w1);
    }
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const int ks = 8 * g + s0 + s;
      ptx::wgmma_m64n16k16_rs<ptx::fp16_t>(acc[g], a[h % D][s], q_desc((ks / 4) * H16_TILE + (ks % 4) * 32), s0 + s != 0);
    }
    ptx::wgmma_commit();
  }
  const RopeRows rope = load_rope(t0, t1, Fmt::ROPE_OFFSET, q4);
  // RoPE's four k-steps, in a retired set of A fragments (a separate array spilled at 224 registers).
  ptx::wgmma_wait<D - 1>();
  qk_rope(accr, a[(32 / KS) % D], rope, q_base, Fmt::ROPE_TILE * H16_TILE);
  const float4 s0 = *reinterpret_cast<const float4*>(t0 + Fmt::SCALE_OFFSET), s1 = *reinterpret_cast<const float4*>(t1 + Fmt::SCALE_OFFSET);
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int g = 0; g < 4; ++g) ptx::fence_regs(acc[g]);
  ptx::fence_regs(accr);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float4& s = ((e >> 1) & 1) ? s1 : s0;
    st[e] = qx[h16_j(e)] * (acc[0][e] * s.x + acc[1][e] * s.y + acc[2][e] * s.z + acc[3][e] * s.w) + accr[e];
  }
  sc[0] = s0, sc[1] = s1;
}

// Pᵀ's tiles: tile g holds Pᵀ times each token's group-g scale (sc: the thread's two tokens', as qk
// returns them) times PT_SCALE, stored as h16_store_pt does, fenced once for the wgmma that reads them.
__device__ __forceinline__ void store_pt_scaled(const float (&st)[8], const float4 (&sc)[2], uint32_t pt_base, int warp, int lane) {
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float4& s = sc[(e >> 1) & 1];
      v[e] = st[e] * ((g == 0 ? s.x : g == 1 ? s.y : g == 2 ? s.z : s.w) * PT_SCALE);
    }
    h16_store_pt<ptx::bf16_t>(v, pt_base + g * H16_TILE, warp, lane);
  }
  ptx::fence_proxy_async_smem();
}

// Oᵀ += Vᵀ·Pᵀ from the raw bytes in `stage`. Thread (warp w, lane l) owns dims 128g + 4(8w + l/4) + i of
// each group g: tile 2g's rows r, r + 8 are i = 0, 1 and tile 2g + 1's are i = 2, 3 (r = 16w + l/4); per
// k-step of 16 tokens it holds tokens 2q, 2q + 1, 2q + 8, 2q + 9 (q = l % 4), as wgmma's A fragment.
// Issued in halves of a k-step (two groups, four m-tiles), PV_DEPTH in flight.
template <class Fmt>
__device__ __forceinline__ void pv(float (&ot)[8][8], const uint8_t* stage, uint32_t pt_base, int warp, int lane) {
  const int q4 = lane % 4, dim_off = 4 * (8 * warp + lane / 4);
  constexpr int D = PV_DEPTH, KG = 2;  // commit groups of KG scale groups (2 m-tiles each) of one k-step
  uint32_t a[D][2 * KG][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint8_t* t[4];
    t[0] = stage + (16 * kk + 2 * q4) * Fmt::TOKEN_BYTES, t[1] = t[0] + Fmt::TOKEN_BYTES, t[2] = t[0] + 8 * Fmt::TOKEN_BYTES, t[3] = t[2] + Fmt::TOKEN_BYTES;
#pragma unroll
    for (int part = 0; part < 4 / KG; ++part) {
      const int h = (4 / KG) * kk + part;
      uint32_t w[KG][4];  // [group of the part][token]
#pragma unroll
      for (int gg = 0; gg < KG; ++gg)
#pragma unroll
        for (int i = 0; i < 4; ++i) w[gg][i] = *reinterpret_cast<const uint32_t*>(t[i] + 128 * (KG * part + gg) + dim_off);
      if (h >= D) ptx::wgmma_wait<D - 1>();  // group h - D retired
#pragma unroll
      for (int gg = 0; gg < KG; ++gg) {
        uint32_t (&f0)[4] = a[h % D][2 * gg];
        uint32_t (&f1)[4] = a[h % D][2 * gg + 1];
#pragma unroll
        for (int x = 0; x < 2; ++x) {  // tokens 2q, 2q + 1 (x = 0) and 2q + 8, 2q + 9
          const uint32_t u = w[gg][2 * x], v = w[gg][2 * x + 1];
          f0[x * 2] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(0))), f0[x * 2 + 1] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(1)));
          f1[x * 2] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(2))), f1[x * 2 + 1] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(3)));
        }
      }
      ptx::wgmma_fence();
#pragma unroll
      for (int i = 0; i < 2 * KG; ++i) {
        const uint32_t off = (KG * part + i / 2) * H16_TILE + kk * 32;
        ptx::wgmma_m64n16k16_rs<ptx::bf16_t>(ot[2 * KG * part + i], a[h % D][i], sw128_at(pt_base, off, 16), 1);
      }
      ptx::wgmma_commit();
    }
  }
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int mb = 0; mb < 8; ++mb) ptx::fence_regs(ot[mb]);
}

}  // namespace mla::sparse::h16x
