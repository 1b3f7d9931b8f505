// Decode context parallelism: the merge of the ranks' partial outputs by their log-sum-exp (params.h,
// DcpMergeParams). One kernel for the three communication forms: with every rank's o in memory (after an
// all-gather, or N virtual shards on one GPU) it writes the merged output; with only its own o it writes
// this rank's weighted term in the layout the following reduce-scatter or all-reduce sums.
// The weights are taken in base 2 from the natural-log lse the decode kernels return, the same formula
// as the split-KV combine (split_merge.cuh), and the attention sink is applied here, once, after the
// merge: a sink applied per shard would count 1 + e^sink once per rank.
#include "../common/ptx.cuh"
#include "../mla/params.h"

MLA_EXPORT_LAYOUT(dcp_merge_params_layout, mla::DcpMergeParams, MLA_OFFSETS_DCP_MERGE)

namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.69314718055994530942f;
constexpr int THREADS = 256;
constexpr int ROW_THREADS = mla::D_V / 8;  // eight 16-bit columns (16 bytes) per thread
constexpr int ROWS_PER_CTA = THREADS / ROW_THREADS;

// Rank r's lse of row (i, s, h) in base 2; -inf for a shard that saw no key (the decode kernels return
// +inf there, FlashMLA's convention for an empty row).
__device__ __forceinline__ float lse2_of(const mla::DcpMergeParams& p, int r, int i, int s, int h) {
  const float l = p.lse_parts[r * p.lse_part_stride + i * p.lse_stride_b + h * p.lse_stride_h + s * p.lse_stride_s];
  return isinf(l) ? -INFINITY : l * LOG2E;
}

template <typename T>
__device__ __forceinline__ void merge_row(const mla::DcpMergeParams& p, int row, int col) {
  const int h = row % p.h_q, token = row / p.h_q, s = token % p.s_q, i = token / p.s_q;
  // G = log2 Σ_r 2^(lse2_r): the maximum first, so no term overflows. fmaxf skips a NaN lse, which
  // then makes the sum, G, lse and out NaN.
  float m = -INFINITY;
  for (int r = 0; r < p.ranks; ++r) m = fmaxf(m, lse2_of(p, r, i, s, h));
  if (m == -INFINITY) m = 0.0f;  // no rank saw a key: the sum is 0
  float sum = 0.0f;
  for (int r = 0; r < p.ranks; ++r) sum += exp2f(lse2_of(p, r, i, s, h) - m);
  const float G = sum == 0.0f ? INFINITY : __log2f(sum) + m;
  if (col == 0 && p.lse != nullptr) p.lse[(static_cast<long long>(i) * p.h_q + h) * p.s_q + s] = G * LN2;

  float acc[8] = {};
  // No key anywhere: out is 0 whatever the sink or the (poisoned) parts hold.
  if (sum != 0.0f) {
    float Gs = G;  // G with the sink's share: out = Σ 2^(lse2_r - Gs) · o_r
    if (p.attn_sink != nullptr) Gs += log2f(1.0f + exp2f(p.attn_sink[h] * LOG2E - G));
    const long long offset = static_cast<long long>(row) * mla::D_V + 8 * col;
    for (int k = 0; k < p.o_count; ++k) {
      const float w = exp2f(lse2_of(p, p.o_first + k, i, s, h) - Gs);  // 0 for an empty shard and a +inf sink
      if (w == 0.0f) continue;  // an empty shard's o is not read: 0 · NaN would poison the row
      const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.o_parts) + k * p.o_part_stride + offset);
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = ptx::unpack2<T>(words[j]);
        acc[2 * j] += w * f.x, acc[2 * j + 1] += w * f.y;
      }
    }
  }
  const int chunk = h / p.heads_per_chunk, hh = h % p.heads_per_chunk;
  uint16_t* out = static_cast<uint16_t*>(p.out) + chunk * p.chunk_stride +
                  (static_cast<long long>(token) * p.heads_per_chunk + hh) * mla::D_V + 8 * col;
  *reinterpret_cast<uint4*>(out) = make_uint4(ptx::pack2<T>(acc[0], acc[1]), ptx::pack2<T>(acc[2], acc[3]),
                                              ptx::pack2<T>(acc[4], acc[5]), ptx::pack2<T>(acc[6], acc[7]));
}

template <typename T>
__device__ __forceinline__ void dcp_merge(const mla::DcpMergeParams& p) {
  const int row = blockIdx.x * ROWS_PER_CTA + threadIdx.x / ROW_THREADS;
  if (row < p.b * p.s_q * p.h_q) merge_row<T>(p, row, threadIdx.x % ROW_THREADS);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS) mla_dcp_merge_bf16(const __grid_constant__ mla::DcpMergeParams p) {
  dcp_merge<ptx::bf16_t>(p);
}
extern "C" __global__ void __launch_bounds__(THREADS) mla_dcp_merge_fp16(const __grid_constant__ mla::DcpMergeParams p) {
  dcp_merge<ptx::fp16_t>(p);
}
