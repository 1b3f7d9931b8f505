// Where a finished request's rows go: out and lse for a piece that holds the whole request (the attention
// sink applied here), or o_accum and lse_accum at the piece's split slot for the combine, in the dense
// layout with h_kv = 1 (row = s * h_q + head), so the dense combine merges them and applies the sink.
#pragma once
#include "../common/rows.cuh"
#include "smem.h"

namespace mla::sparse {

// A head's attention sink in the log2 domain; -inf without one, whose 2^(-inf - M) adds nothing below.
__device__ __forceinline__ float sink_log2(const SparseParams& p, int head) { return p.attn_sink != nullptr ? p.attn_sink[head] * LOG2E : -INFINITY; }

// 1 / the divisor of an unsplit row: out = o / (L + 2^(sink_log2 - M)); 0 for an empty row, and a +inf
// sink gives 0.
__device__ __forceinline__ float unsplit_inv(float sink, float L, float M) { return L == 0.0f ? 0.0f : 1.0f / (L + exp2f(sink - M)); }
__device__ __forceinline__ float unsplit_inv(const SparseParams& p, int head, float L, float M) { return unsplit_inv(sink_log2(p, head), L, M); }

// A 64-row consumer warpgroup's O columns [256 wg, +256) of heads h0 + 16 warp + lane / 4 (+ 8): o in
// wgmma's accumulator layout, L and M the two rows' final sum and max (log2 domain). The rows' sinks
// come from sm.sink, written once per CTA (a load here was a round trip on every request switch).
// 16-byte stores (rows.cuh): the 4- and 8-byte ones queued behind the producers' gathers in the
// load/store unit. Every lane runs the exchanges; only rows below h_q are stored.
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
      store_row_16bit<T>(out, o, half, inv, lane, stored);
      if (stored && wg == 0 && c == 0)
        p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s_idx] = empty ? INFINITY : (__log2f(L[half]) + M[half]) * LN2;
    } else {
      const float inv = empty ? 0.0f : 1.0f / L[half];
      const long long at = static_cast<long long>(slot) * p.s_q * p.h_q + s_idx * p.h_q + head;
      store_row_f32(p.o_accum + at * D_V + wg * 256, o, half, inv, lane, stored);
      if (stored && wg == 0 && c == 0) p.lse_accum[at] = empty ? -INFINITY : __log2f(L[half]) + M[half];
    }
  }
}

}  // namespace mla::sparse
