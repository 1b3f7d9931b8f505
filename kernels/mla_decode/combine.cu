// Log-sum-exp merge of split-KV partials (FLASHMLA.md §2.3). Each split s of a row left o_s (already
// divided by its own L_s) and lse2_s = log2 L_s + M_s (base 2; -inf when the split saw no key). Then
//   G = log2 Σ_s 2^(lse2_s - m) + m,  out = Σ_s 2^(lse2_s - G) · o_s,  lse = G · ln 2,
// and with an attention sink (sparse decode) out is further scaled by 1 / (1 + e^(sink - lse)).
// Launched with programmatic dependent launch right after the main kernel: griddepcontrol.wait first.
#include "../common/ptx.cuh"
#include "params.h"

MLA_EXPORT_LAYOUT(combine_params_layout, mla::CombineParams, MLA_OFFSETS_COMBINE)

namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.69314718055994530942f;

// Grid (ceil(rows_per_kv / 8), h_kv, b), 256 threads: one warp per flattened row of one KV head.
template <typename T>
__device__ __forceinline__ void combine(const mla::CombineParams& p) {
  ptx::pdl_wait();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int flat = blockIdx.x * 8 + warp, hk = blockIdx.y, req = blockIdx.z;
  if (flat >= p.rows_per_kv) return;
  const int first = p.num_splits[req], n = p.num_splits[req + 1] - first;
  if (n <= 1) return;  // not split: the main kernel wrote out and lse itself

  auto row_of = [&](int split) { return (static_cast<long long>(first + split) * p.h_kv + hk) * p.rows_per_kv + flat; };
  float m = -INFINITY;
  for (int i = lane; i < n; i += 32) m = fmaxf(m, p.lse_accum[row_of(i)]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
  if (m == -INFINITY) m = 0.0f;  // every split empty: the sum below is 0 and G = +inf
  float sum = 0.0f;
  for (int i = lane; i < n; i += 32) sum += exp2f(p.lse_accum[row_of(i)] - m);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off);
  float G = sum > 0.0f ? __log2f(sum) + m : INFINITY;

  const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
  if (lane == 0) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = G * LN2;
  if (p.attn_sink != nullptr) {
    const float sink2 = p.attn_sink[head] * LOG2E;
    if (G != INFINITY) G += log2f(1.0f + exp2f(sink2 - G));
    else G = sink2;  // no key: out stays 0 (o_s are 0) whatever the sink
  }

  float acc[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) acc[j] = 0.0f;
  for (int i = 0; i < n; ++i) {
    const long long row = row_of(i);
    const float w = exp2f(p.lse_accum[row] - G);  // 0 for empty splits (-inf) and for G = +inf
    const float4* o = reinterpret_cast<const float4*>(p.o_accum + row * mla::D_V);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float4 v = o[lane + 32 * j];
      acc[4 * j + 0] += w * v.x;
      acc[4 * j + 1] += w * v.y;
      acc[4 * j + 2] += w * v.z;
      acc[4 * j + 3] += w * v.w;
    }
  }
  uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * mla::D_V;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int col = 4 * (lane + 32 * j);
    const uint2 v = make_uint2(ptx::pack2<T>(acc[4 * j], acc[4 * j + 1]), ptx::pack2<T>(acc[4 * j + 2], acc[4 * j + 3]));
    *reinterpret_cast<uint2*>(out + col) = v;
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256) mla_combine_bf16(const __grid_constant__ mla::CombineParams p) {
  combine<ptx::bf16_t>(p);
}
extern "C" __global__ void __launch_bounds__(256) mla_combine_fp16(const __grid_constant__ mla::CombineParams p) {
  combine<ptx::fp16_t>(p);
}
