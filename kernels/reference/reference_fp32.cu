// A deliberately simple fp32 GPU reference for dense MLA decode: one CTA per output row (request, query
// token, head), plain loops, no tensor cores, natural-log softmax with a running max. The tests check it
// against the float64 CPU reference on small shapes and then use it to check every element of the
// large shapes, where the CPU reference can only afford a sample of rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "../mla/params.h"

MLA_EXPORT_LAYOUT(ref_params_layout, mla::RefParams, MLA_OFFSETS_REF)
MLA_EXPORT_LAYOUT(sparse_ref_params_layout, mla::SparseRefParams, MLA_OFFSETS_SPARSE_REF)

namespace {
constexpr int THREADS = 256;

// The maximum of `v` over the block's THREADS threads (red: THREADS / 32 floats of shared memory; the
// caller syncs before red is written again).
__device__ __forceinline__ float block_max(float v, float* red, int tid) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
  if (tid % 32 == 0) red[tid / 32] = v;
  __syncthreads();
  float mx = red[0];
  for (int w = 1; w < THREADS / 32; ++w) mx = fmaxf(mx, red[w]);
  return mx;
}

__device__ __forceinline__ float load_elem(const void* base, long long i, bool is_fp16) {
  const uint16_t bits = static_cast<const uint16_t*>(base)[i];
  return is_fp16 ? __half2float(__ushort_as_half(bits)) : __uint_as_float(static_cast<uint32_t>(bits) << 16);
}
}  // namespace

// Grid (h_q, s_q, b), 256 threads.
extern "C" __global__ void __launch_bounds__(THREADS) mla_dense_reference_fp32(const __grid_constant__ mla::RefParams p) {
  __shared__ float q[mla::D_QK];
  __shared__ float score[THREADS];
  __shared__ float red[THREADS / 32];
  const int head = blockIdx.x, s = blockIdx.y, req = blockIdx.z, tid = threadIdx.x;
  const int hk = head / (p.h_q / p.h_kv);
  const bool f16 = p.is_fp16 != 0;
  for (int d = tid; d < mla::D_QK; d += THREADS)
    q[d] = load_elem(p.q, ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * mla::D_QK + d, f16);
  const int seqlen = p.cache_seqlens[req];
  const int limit = p.causal ? seqlen - (p.s_q - 1 - s) : seqlen;
  float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  __syncthreads();
  auto token_base = [&](int t) {
    const long long blk = p.block_table[static_cast<long long>(req) * p.max_blocks_per_seq + t / mla::PAGE_BLOCK_SIZE];
    return ((blk * mla::PAGE_BLOCK_SIZE + t % mla::PAGE_BLOCK_SIZE) * p.h_kv + hk) * mla::D_QK;
  };
  for (int t0 = 0; t0 < limit; t0 += THREADS) {
    const int t = t0 + tid;
    float sc = -INFINITY;
    if (t < limit) {
      const long long base = token_base(t);
      float dot = 0.0f;
      for (int d = 0; d < mla::D_QK; ++d) dot += q[d] * load_elem(p.kv, base + d, f16);
      sc = dot * p.softmax_scale;
    }
    score[tid] = sc;
    const float mx = block_max(sc, red, tid);
    const float m_new = fmaxf(m, mx);
    const float corr = m == -INFINITY ? 0.0f : expf(m - m_new);
    acc0 *= corr, acc1 *= corr, l *= corr;
    const int n = min(THREADS, limit - t0);
    for (int j = 0; j < n; ++j) {
      const float pj = expf(score[j] - m_new);
      const long long base = token_base(t0 + j);
      l += pj;
      acc0 += pj * load_elem(p.kv, base + 2 * tid, f16);
      acc1 += pj * load_elem(p.kv, base + 2 * tid + 1, f16);
    }
    m = m_new;
    __syncthreads();
  }
  const long long orow = ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * mla::D_V;
  const bool empty = !(l > 0.0f);
  p.out[orow + 2 * tid] = empty ? 0.0f : acc0 / l;
  p.out[orow + 2 * tid + 1] = empty ? 0.0f : acc1 / l;
  if (tid == 0) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = empty ? INFINITY : m + logf(l);
}

namespace {
// One dequantized value of a V32 token: e4m3 byte times its tile's f32 scale (dims < 512), or the bf16
// RoPE value (dims 512..575). Exact in f32 for power-of-two scales; no rounding to bf16 here, which the
// kernel's bf16 dequantization reproduces exactly for the scales the writer produces.
__device__ __forceinline__ float v32_value(const uint8_t* token, int d) {
  if (d >= 512) return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(token + 528)[d - 512]) << 16);
  const uint32_t c = token[d];
  const uint32_t sign = (c & 0x80u) << 24, e = (c >> 3) & 0xFu, m = c & 7u;
  float v;
  if ((c & 0x7Fu) == 0x7Fu) v = __int_as_float(0x7FC00000);
  else if (e == 0) v = __uint_as_float(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 0.001953125f;  // m * 2^-9
  else v = __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
  return v * reinterpret_cast<const float*>(token + 512)[d / 128];
}
}  // namespace

// Grid (h_q, s_q, b), 256 threads: one CTA per output row of sparse decode, plain loops in fp32.
extern "C" __global__ void __launch_bounds__(THREADS) mla_sparse_reference_fp32(const __grid_constant__ mla::SparseRefParams p) {
  __shared__ float q[mla::D_QK];
  __shared__ float score[THREADS];
  __shared__ int slot_of[THREADS];
  __shared__ float red[THREADS / 32];
  const int head = blockIdx.x, s = blockIdx.y, req = blockIdx.z, tid = threadIdx.x;
  for (int d = tid; d < mla::D_QK; d += THREADS)
    q[d] = __uint_as_float(static_cast<uint32_t>(p.q[((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * mla::D_QK + d]) << 16);
  const int len = p.topk_length ? max(0, min(p.topk_length[req], p.topk)) : p.topk;
  const int* idx = p.indices + (static_cast<long long>(req) * p.s_q + s) * p.topk;
  float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  bool any = false;
  __syncthreads();
  auto token_ptr = [&](int id) {
    return p.kv + static_cast<long long>(id / p.page_block_size) * p.kv_block_stride + static_cast<long long>(id % p.page_block_size) * 656;
  };
  for (int t0 = 0; t0 < len; t0 += THREADS) {
    const int t = t0 + tid;
    float sc = -INFINITY;
    int id = -1;
    if (t < len) {
      id = idx[t];
      if (id >= 0 && id < p.num_slots) {
        const uint8_t* tok = token_ptr(id);
        float dot = 0.0f;
        for (int d = 0; d < mla::D_QK; ++d) dot += q[d] * v32_value(tok, d);
        sc = dot * p.softmax_scale;
      } else {
        id = -1;
      }
    }
    score[tid] = sc;
    slot_of[tid] = id;
    const float mx = block_max(sc, red, tid);
    if (mx != -INFINITY) {
      const float m_new = fmaxf(m, mx);
      const float corr = any ? expf(m - m_new) : 0.0f;
      acc0 *= corr, acc1 *= corr, l *= corr;
      const int n = min(THREADS, len - t0);
      for (int j = 0; j < n; ++j) {
        if (slot_of[j] < 0) continue;
        const float pj = expf(score[j] - m_new);
        const uint8_t* tok = token_ptr(slot_of[j]);
        l += pj;
        acc0 += pj * v32_value(tok, 2 * tid);
        acc1 += pj * v32_value(tok, 2 * tid + 1);
      }
      m = m_new;
      any = true;
    }
    __syncthreads();
  }
  const long long orow = ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * mla::D_V;
  const bool empty = l == 0.0f;
  const float row_lse = empty ? INFINITY : m + logf(l);
  // Sink: out *= 1 / (1 + e^(sink - lse)); lse itself is unchanged.
  const float sink_scale = p.attn_sink && !empty ? 1.0f / (1.0f + expf(p.attn_sink[head] - row_lse)) : 1.0f;
  p.out[orow + 2 * tid] = empty ? 0.0f : acc0 / l * sink_scale;
  p.out[orow + 2 * tid + 1] = empty ? 0.0f : acc1 / l * sink_scale;
  if (tid == 0) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = row_lse;
}
