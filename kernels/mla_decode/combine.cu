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

// Grid (rows_per_kv, h_kv, b), 128 threads: one CTA per flattened row of one KV head (a long request
// split over every SM has ~130 splits per row: spread the rows over many SMs). Each thread owns 4 of
// the 512 columns; every thread reduces the (few hundred bytes of) split lse values itself.
template <typename T>
__device__ __forceinline__ void combine(const mla::CombineParams& p) {
  ptx::pdl_wait();
  const int flat = blockIdx.x, hk = blockIdx.y, req = blockIdx.z, tid = threadIdx.x;
  const int first = p.num_splits[req], n = p.num_splits[req + 1] - first;
  if (n <= 1) return;  // not split: the main kernel wrote out and lse itself

  const long long stride = static_cast<long long>(p.h_kv) * p.rows_per_kv;  // between splits, in rows
  const long long row0 = (static_cast<long long>(first) * p.h_kv + hk) * p.rows_per_kv + flat;
  const float* lse2 = p.lse_accum + row0;
  float m = -INFINITY;
  for (int i = 0; i < n; ++i) m = fmaxf(m, lse2[i * stride]);
  if (m == -INFINITY) m = 0.0f;  // every split empty: the sum below is 0 and G = +inf
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += exp2f(lse2[i * stride] - m);
  // sum == 0: every split empty, G = +inf. A NaN split (NaN data) makes the sum NaN and so G, lse and out.
  float G = sum == 0.0f ? INFINITY : __log2f(sum) + m;

  const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
  if (tid == 0) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = G * LN2;
  uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * mla::D_V;
  if (sum == 0.0f) {  // no key in any split: out is 0 whatever the sink (a -inf sink made 2^(-inf - -inf) NaN here)
    *reinterpret_cast<uint2*>(out + 4 * tid) = make_uint2(0u, 0u);
    return;
  }
  if (p.attn_sink != nullptr) G += log2f(1.0f + exp2f(p.attn_sink[head] * LOG2E - G));

  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float4* o = reinterpret_cast<const float4*>(p.o_accum + row0 * mla::D_V) + tid;
  const long long o_stride = stride * (mla::D_V / 4);
  int i = 0;
  // Four splits per step keep four 16-B loads in flight per thread.
  for (; i + 4 <= n; i += 4) {
    float4 v[4];
    float w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = o[(i + k) * o_stride], w[k] = exp2f(lse2[(i + k) * stride] - G);
#pragma unroll
    for (int k = 0; k < 4; ++k) acc.x += w[k] * v[k].x, acc.y += w[k] * v[k].y, acc.z += w[k] * v[k].z, acc.w += w[k] * v[k].w;
  }
  for (; i < n; ++i) {
    const float4 v = o[i * o_stride];
    const float w = exp2f(lse2[i * stride] - G);  // 0 for empty splits (-inf) and for G = +inf (a +inf sink)
    acc.x += w * v.x, acc.y += w * v.y, acc.z += w * v.z, acc.w += w * v.w;
  }
  *reinterpret_cast<uint2*>(out + 4 * tid) = make_uint2(ptx::pack2<T>(acc.x, acc.y), ptx::pack2<T>(acc.z, acc.w));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128) mla_combine_bf16(const __grid_constant__ mla::CombineParams p) {
  combine<ptx::bf16_t>(p);
}
extern "C" __global__ void __launch_bounds__(128) mla_combine_fp16(const __grid_constant__ mla::CombineParams p) {
  combine<ptx::fp16_t>(p);
}
