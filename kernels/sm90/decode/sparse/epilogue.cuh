// Where a finished request's rows go: out and lse for a piece that holds the whole request (the attention
// sink applied here), or o_accum and lse_accum at the piece's split slot for the combine, in the dense
// layout with h_kv = 1 (row = s * h_q + head), so the dense combine merges them and applies the sink.
#pragma once
#include "../common/tiles.cuh"
#include "smem.h"

namespace mla::sparse {

// A head's attention sink in the log2 domain; -inf without one, whose 2^(-inf - M) adds nothing below.
__device__ __forceinline__ float sink_log2(const SparseParams& p, int head) { return p.attn_sink != nullptr ? p.attn_sink[head] * LOG2E : -INFINITY; }

// 1 / the divisor of an unsplit row: out = o / (L + 2^(sink_log2 - M)); 0 for an empty row, and a +inf
// sink gives 0.
__device__ __forceinline__ float unsplit_inv(float sink, float L, float M) { return L == 0.0f ? 0.0f : 1.0f / (L + exp2f(sink - M)); }
__device__ __forceinline__ float unsplit_inv(const SparseParams& p, int head, float L, float M) { return unsplit_inv(sink_log2(p, head), L, M); }

// A 4x4 matrix of 32-bit words over the four lanes of a quad (lane c holds row c in w) becomes its
// transpose (lane c then holds column c): two exchanges of two words each.
__device__ __forceinline__ void quad_transpose(uint32_t (&w)[4], int lane) {
  const bool hi = lane & 2, odd = lane & 1;
  const uint32_t a0 = __shfl_xor_sync(0xFFFFFFFFu, hi ? w[0] : w[2], 2), a1 = __shfl_xor_sync(0xFFFFFFFFu, hi ? w[1] : w[3], 2);
  if (hi) w[0] = a0, w[1] = a1;
  else w[2] = a0, w[3] = a1;
  const uint32_t b0 = __shfl_xor_sync(0xFFFFFFFFu, odd ? w[0] : w[1], 1), b1 = __shfl_xor_sync(0xFFFFFFFFu, odd ? w[2] : w[3], 1);
  if (odd) w[0] = b0, w[2] = b1;
  else w[1] = b0, w[3] = b1;
}

// A 64-row consumer warpgroup's O columns [256 wg, +256) of heads h0 + 16 warp + lane / 4 (+ 8): o in
// wgmma's accumulator layout, L and M the two rows' final sum and max (log2 domain). The rows' sinks
// come from sm.sink, written once per CTA (a load here was a round trip on every request switch).
// The four lanes of a quad hold 8 consecutive columns of a row, 2 each: exchanged first (quad_transpose
// for bf16, pairs of lanes for fp32), each lane stores 16 bytes, a quarter (bf16) or half (fp32) of the
// store instructions, which queue behind the producers' gathers in the load/store unit. Every lane
// runs the exchanges; only rows below h_q are stored.
template <typename T>
__device__ __forceinline__ void store_rows(const SparseParams& p, const Smem& sm, float (&o)[128], int req, int h0, int s_idx, int wg, int warp_in_wg,
                                           int lane, bool is_split, int slot, const float (&L)[2], const float (&M)[2]) {
  const int c = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = 16 * warp_in_wg + lane / 4 + 8 * half, head = h0 + row;
    const bool stored = head < p.h_q;
    const bool empty = L[half] == 0.0f;  // a NaN L propagates
    if (!is_split) {
      const float inv = unsplit_inv(sm.sink[row], L[half], M[half]);
      uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s_idx) * p.h_q + head) * D_V + wg * 256;
#pragma unroll
      for (int g = 0; g < 8; ++g) {  // columns 32g .. + 31: lane c stores 8 (4g + c) .. + 7
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int i = 2 * half + 4 * (4 * g + k);
          w[k] = ptx::pack2<T>(o[i] * inv, o[i + 1] * inv);
        }
        quad_transpose(w, c);
        if (stored) *reinterpret_cast<uint4*>(out + 8 * (4 * g + c)) = make_uint4(w[0], w[1], w[2], w[3]);
      }
      if (stored && wg == 0 && c == 0)
        p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s_idx] = empty ? INFINITY : (__log2f(L[half]) + M[half]) * LN2;
    } else {
      const float inv = empty ? 0.0f : 1.0f / L[half];
      const long long at = static_cast<long long>(slot) * p.s_q * p.h_q + s_idx * p.h_q + head;
      float* oa = p.o_accum + at * D_V + wg * 256;
      const bool odd = lane & 1;
#pragma unroll
      for (int t = 0; t < 16; ++t) {  // columns 16t .. + 15: lanes 2e and 2e + 1 store 8j + 4e .. + 3 of j = 2t and 2t + 1
        const int i0 = 2 * half + 8 * t, i1 = i0 + 4;
        const float x0 = __shfl_xor_sync(0xFFFFFFFFu, (odd ? o[i0] : o[i1]) * inv, 1);
        const float x1 = __shfl_xor_sync(0xFFFFFFFFu, (odd ? o[i0 + 1] : o[i1 + 1]) * inv, 1);
        const float4 v = odd ? make_float4(x0, x1, o[i1] * inv, o[i1 + 1] * inv) : make_float4(o[i0] * inv, o[i0 + 1] * inv, x0, x1);
        if (stored) *reinterpret_cast<float4*>(oa + 8 * (2 * t + odd) + 4 * (c / 2)) = v;
      }
      if (stored && wg == 0 && c == 0) p.lse_accum[at] = empty ? -INFINITY : __log2f(L[half]) + M[half];
    }
  }
}

}  // namespace mla::sparse
