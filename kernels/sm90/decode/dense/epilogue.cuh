// The end of a request's piece: O / L and the lse written out (or, for a split piece, the fp32 partial
// for the combine), and the in-kernel merge of a request in exactly two pieces (merge_pairs).
#pragma once
#include "../../../decode/split_merge.cuh"
#include "smem.h"

namespace mla::dense {

// W0 and W1 each write their half of O (columns wg·256 ..); W0's quad leaders write the lse.
template <typename T>
__device__ __forceinline__ void store_out(const DenseParams& p, float (&o)[128], int req, int m_block, int hk, int wg, int warp_in_wg,
                                          int lane, bool is_split, int slot, const float (&L)[2], const float (&m)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int flat = m_block * BLOCK_M + 16 * warp_in_wg + lane / 4 + 8 * half;
    if (flat >= p.rows_per_kv) continue;
    const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
    // Only L == 0 means "no visible key"; a NaN L (NaN in q or in a visible token) stays NaN in out and
    // lse, as in the CPU reference, instead of passing for an empty row.
    const bool empty = L[half] == 0.0f;
    const float inv = empty ? 0.0f : 1.0f / L[half];
    if (!is_split) {
      uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * D_V;
#pragma unroll
      for (int i = 2 * half; i < 128; i += 4)
        *reinterpret_cast<uint32_t*>(out + wg * 256 + 8 * (i >> 2) + 2 * (lane % 4)) = ptx::pack2<T>(o[i] * inv, o[i + 1] * inv);
      if (wg == 0 && lane % 4 == 0)
        p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = empty ? INFINITY : (__log2f(L[half]) + m[half]) * LN2;
    } else {
      const long long row = (static_cast<long long>(slot) * p.h_kv + hk) * p.rows_per_kv + flat;
      float* oa = p.o_accum + row * D_V;
#pragma unroll
      for (int i = 2 * half; i < 128; i += 4)
        *reinterpret_cast<float2*>(oa + wg * 256 + 8 * (i >> 2) + 2 * (lane % 4)) = make_float2(o[i] * inv, o[i + 1] * inv);
      if (wg == 0 && lane % 4 == 0) p.lse_accum[row] = empty ? -INFINITY : __log2f(L[half]) + m[half];
    }
  }
}

// DenseParams::merge_pairs: the piece of a two-piece request that finishes second writes out and lse
// itself, from the other piece's partial (o_accum / lse_accum rows of `other_slot`, released by that CTA
// through merge_flags) and its own O, L and m in registers, with the combine's formula in split order
// (split_merge.cuh), so the bits are those the combine would write. The partial is read with
// ld.global.cg (another SM wrote it during this kernel) in batches of LOADS column pairs, two in flight:
// loading the lse, then each batch, one after the other took twice the plain store's time.
template <typename T, int LOADS = MERGE_LOADS>
__device__ __forceinline__ void merge_pair_out(const DenseParams& p, const float (&o)[128], int req, int m_block, int hk, int wg, int warp_in_wg,
                                               int lane, int own_slot, int other_slot, const float (&L)[2], const float (&m)[2]) {
  const bool own_first = own_slot < other_slot;
  const int col = wg * 256 + 2 * (lane % 4);  // + 8k: the accumulator's column pairs (store_out)
  bool ok[2];
  const float* po[2];
  float other[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int flat = m_block * BLOCK_M + 16 * warp_in_wg + lane / 4 + 8 * half;
    ok[half] = flat < p.rows_per_kv;
    const long long row = (static_cast<long long>(other_slot) * p.h_kv + hk) * p.rows_per_kv + (ok[half] ? flat : 0);
    po[half] = p.o_accum + row * D_V + col;
    other[half] = ok[half] ? ptx::ld_cg_f32(p.lse_accum + row) : 0.0f;
  }
  // Batch j: half j / PER_HALF, column pairs LOADS · (j % PER_HALF) onwards.
  constexpr int PER_HALF = 32 / LOADS, BATCHES = 2 * PER_HALF;
  auto load = [&](float2 (&v)[LOADS], int j) {
    const int half = j / PER_HALF;
#pragma unroll
    for (int k = 0; k < LOADS; ++k) v[k] = ok[half] ? ptx::ld_cg_f32x2(po[half] + 8 * (LOADS * (j % PER_HALF) + k)) : make_float2(0.0f, 0.0f);
  };
  float2 v[2][LOADS];
  load(v[0], 0);
  load(v[1], 1);
  float inv[2], sum[2], w[2][FEW_SPLITS];
  uint16_t* out[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int flat = m_block * BLOCK_M + 16 * warp_in_wg + lane / 4 + 8 * half;
    const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
    const bool empty = L[half] == 0.0f;
    inv[half] = empty ? 0.0f : 1.0f / L[half];
    const float own = empty ? -INFINITY : __log2f(L[half]) + m[half];  // this piece's lse2, as store_out writes it
    const float lse2[FEW_SPLITS] = {own_first ? own : other[half], own_first ? other[half] : own, -INFINITY};
    const float G = merged_lse2(lse2, sum[half]);
#pragma unroll
    for (int i = 0; i < FEW_SPLITS; ++i) w[half][i] = exp2f(lse2[i] - G);
    out[half] = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * D_V + col;
    if (ok[half] && wg == 0 && lane % 4 == 0) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = G * LN2;
  }
  auto merge = [&](const float2 (&y)[LOADS], int j) {
    const int half = j / PER_HALF;
    if (!ok[half]) return;
#pragma unroll
    for (int k = 0; k < LOADS; ++k) {
      const int c = LOADS * (j % PER_HALF) + k, i = 2 * half + 4 * c;
      const float2 x = make_float2(o[i] * inv[half], o[i + 1] * inv[half]);
      const float2 a = own_first ? x : y[k], b = own_first ? y[k] : x;
      float2 acc = make_float2(0.0f, 0.0f);
      if (sum[half] != 0.0f) {  // no key in either piece: 0 (the combine's rule)
        acc.x += w[half][0] * a.x, acc.y += w[half][0] * a.y;
        acc.x += w[half][1] * b.x, acc.y += w[half][1] * b.y;
        acc.x += w[half][2] * 0.0f, acc.y += w[half][2] * 0.0f;  // the combine's empty third slot
      }
      *reinterpret_cast<uint32_t*>(out[half] + 8 * c) = ptx::pack2<T>(acc.x, acc.y);
    }
  };
#pragma unroll
  for (int j = 0; j < BATCHES; ++j) {
    merge(v[j % 2], j);
    if (j + 2 < BATCHES) load(v[j % 2], j + 2);
  }
}

// Whether the combine has work from this piece: split, and not a pair this kernel merges (merge_pairs).
__device__ __forceinline__ bool piece_needs_combine(const DenseParams& p, const SchedMeta& meta, int req) {
  return piece_is_split(meta, req) && !(p.merge_pairs != 0 && p.num_splits[req + 1] - p.num_splits[req] == 2);
}

}  // namespace mla::dense
