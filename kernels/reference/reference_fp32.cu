// A deliberately simple fp32 GPU reference for dense and sparse MLA decode: one CTA per output row
// (request, query token, head), plain loops, no tensor cores, natural-log softmax with a running max. The
// tests check it against the float64 CPU reference on small shapes and then use it to check every element
// of the large shapes, where the CPU reference can only afford a sample of rows.
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

// Grid (h_q, s_q, b), 256 threads. Either head: d_qk 576 (V the first 512 dims of a row) or 512 (V the
// whole row); the score runs over d_qk dims, the output over dims 0..511 of the same row.
extern "C" __global__ void __launch_bounds__(THREADS) mla_dense_reference_fp32(const __grid_constant__ mla::RefParams p) {
  __shared__ float q[mla::D_QK];
  __shared__ float score[THREADS];
  __shared__ float red[THREADS / 32];
  const int head = blockIdx.x, s = blockIdx.y, req = blockIdx.z, tid = threadIdx.x;
  const int hk = head / (p.h_q / p.h_kv);
  const bool f16 = p.is_fp16 != 0;
  const int d_qk = p.d_qk;  // <= D_QK (q's shared row) and >= D_V (the output dims); the host checks 576 or 512
  for (int d = tid; d < d_qk; d += THREADS)
    q[d] = load_elem(p.q, ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * d_qk + d, f16);
  const int seqlen = p.cache_seqlens[req];
  const int limit = p.causal ? seqlen - (p.s_q - 1 - s) : seqlen;
  float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  __syncthreads();
  auto token_base = [&](int t) {
    const long long blk = p.block_table[static_cast<long long>(req) * p.max_blocks_per_seq + t / mla::PAGE_BLOCK_SIZE];
    return ((blk * mla::PAGE_BLOCK_SIZE + t % mla::PAGE_BLOCK_SIZE) * p.h_kv + hk) * d_qk;
  };
  for (int t0 = 0; t0 < limit; t0 += THREADS) {
    const int t = t0 + tid;
    float sc = -INFINITY;
    if (t < limit) {
      const long long base = token_base(t);
      float dot = 0.0f;
      for (int d = 0; d < d_qk; ++d) dot += q[d] * load_elem(p.kv, base + d, f16);
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
// The two sparse cache formats, byte for byte as src/numeric/kvCacheFp8.ts (V32) and
// src/numeric/kvCacheModel1.ts (MODEL1) write them.
constexpr int V32_TOKEN_BYTES = 656;   // 512 e4m3 codes, 4 f32 scales, 64 bf16 RoPE values
constexpr int V32_D_NOPE = 512;
constexpr int V32_TILE = 128;
constexpr int V32_ROPE_AT = 528;      // after the codes and the scales
constexpr int MODEL1_D_QK = 512;
constexpr int MODEL1_D_NOPE = 448;
constexpr int MODEL1_TILE = 64;
constexpr int MODEL1_DATA_BYTES = 576;   // a token's 448 e4m3 codes and 64 bf16 RoPE values, at row * 576
constexpr int MODEL1_RECORD_BYTES = 8;   // its 7 e8m0 scales and a pad byte, in the page's footer
static_assert(mla::D_QK >= MODEL1_D_QK, "q's shared row holds either head");
static_assert(mla::D_V == 2 * THREADS, "each thread owns two output dims");

// Multi-byte fields are assembled from bytes: the reference then places no alignment demand on a cache's
// base or block stride, and reads them independently of the kernels' vector loads.
__device__ __forceinline__ float bf16_at(const uint8_t* p) {
  return __uint_as_float((static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8) << 16);
}

__device__ __forceinline__ float f32_at(const uint8_t* p) {
  return __uint_as_float(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
                         static_cast<uint32_t>(p[3]) << 24);
}

// e4m3fn, decoded by arithmetic rather than cvt so the reference shares no conversion path with the
// kernels it checks: 0x7F/0xFF are NaN (there is no infinity), exponent 0 is subnormal (m * 2^-9).
__device__ __forceinline__ float e4m3_value(uint32_t c) {
  const uint32_t sign = (c & 0x80u) << 24, e = (c >> 3) & 0xFu, m = c & 7u;
  if ((c & 0x7Fu) == 0x7Fu) return __int_as_float(0x7FC00000);
  if (e == 0) return __uint_as_float(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 0.001953125f;
  return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
}

// 2^(byte - 127), exactly; 0xFF is NaN (e8m0 has no infinity), and byte 0 is the one subnormal, 2^-127.
__device__ __forceinline__ float e8m0_value(uint32_t byte) {
  if (byte == 0xFFu) return __int_as_float(0x7FC00000);
  return byte == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(byte << 23);
}

// A key located once and read dim by dim: V32 keeps a token's scales inside its 656 bytes, MODEL1 in
// its page's footer, so each format gets two pointers. data == nullptr marks a skipped index entry.
struct Key {
  const uint8_t* data;
  const uint8_t* scales;
};

__device__ __forceinline__ Key locate_key(const uint8_t* kv, long long block_stride, int page_block_size, int id, bool model1) {
  const uint8_t* page = kv + static_cast<long long>(id / page_block_size) * block_stride;
  const int row = id % page_block_size;
  if (model1) {
    return {page + static_cast<long long>(row) * MODEL1_DATA_BYTES,
            page + static_cast<long long>(page_block_size) * MODEL1_DATA_BYTES + static_cast<long long>(row) * MODEL1_RECORD_BYTES};
  }
  const uint8_t* token = page + static_cast<long long>(row) * V32_TOKEN_BYTES;
  return {token, token + V32_D_NOPE};
}

// Dim d of a key: an e4m3 code times its tile's scale, or a RoPE dim's bf16 value. Exact in f32 for
// the power-of-two scales both writers produce, so no rounding to bf16 here: the kernels' bf16
// dequantization (and the CPU reference's) gives the same values.
__device__ __forceinline__ float key_value(Key k, int d, bool model1) {
  if (model1) {
    if (d >= MODEL1_D_NOPE) return bf16_at(k.data + MODEL1_D_NOPE + 2 * (d - MODEL1_D_NOPE));
    return e4m3_value(k.data[d]) * e8m0_value(k.scales[d / MODEL1_TILE]);
  }
  if (d >= V32_D_NOPE) return bf16_at(k.data + V32_ROPE_AT + 2 * (d - V32_D_NOPE));
  return e4m3_value(k.data[d]) * f32_at(k.scales + 4 * (d / V32_TILE));
}

// Valid prefix of a request's index row: topk_length clamped to [0, topk], or all of it.
__device__ __forceinline__ int valid_length(const int* topk_length, int req, int topk) {
  return topk_length ? max(0, min(topk_length[req], topk)) : topk;
}
}  // namespace

// Grid (h_q, s_q, b), 256 threads: one CTA per output row of sparse decode, plain loops in fp32. The keys
// are the row's valid entries of indices, then (extra_topk > 0) those of extra_indices into the second
// cache, all in one softmax; an id outside [0, num_slots) of its cache is skipped, a repeated id counts
// each time it appears. V is a key's first 512 dims: V32's NoPE part, MODEL1's whole row.
extern "C" __global__ void __launch_bounds__(THREADS) mla_sparse_reference_fp32(const __grid_constant__ mla::SparseRefParams p) {
  __shared__ float q[mla::D_QK];
  __shared__ float score[THREADS];
  __shared__ Key key_of[THREADS];
  __shared__ float red[THREADS / 32];
  const int head = blockIdx.x, s = blockIdx.y, req = blockIdx.z, tid = threadIdx.x;
  const bool model1 = p.model1 != 0;
  const int d_qk = model1 ? MODEL1_D_QK : mla::D_QK;
  const long long row = (static_cast<long long>(req) * p.s_q + s) * p.h_q + head;
  for (int d = tid; d < d_qk; d += THREADS) q[d] = __uint_as_float(static_cast<uint32_t>(p.q[row * d_qk + d]) << 16);
  const int len_main = valid_length(p.topk_length, req, p.topk);
  const int len_extra = p.extra_topk > 0 ? valid_length(p.extra_topk_length, req, p.extra_topk) : 0;
  const int len = len_main + len_extra;
  const int* idx = p.indices + (static_cast<long long>(req) * p.s_q + s) * p.topk;
  const int* extra_idx = p.extra_topk > 0 ? p.extra_indices + (static_cast<long long>(req) * p.s_q + s) * p.extra_topk : nullptr;
  float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  bool any = false;
  __syncthreads();
  for (int t0 = 0; t0 < len; t0 += THREADS) {
    const int t = t0 + tid;
    float sc = -INFINITY;
    Key key{nullptr, nullptr};
    if (t < len) {
      const bool extra = t >= len_main;
      const int id = extra ? extra_idx[t - len_main] : idx[t];
      if (id >= 0 && id < (extra ? p.extra_num_slots : p.num_slots)) {
        key = extra ? locate_key(p.extra_kv, p.extra_kv_block_stride, p.extra_page_block_size, id, model1)
                    : locate_key(p.kv, p.kv_block_stride, p.page_block_size, id, model1);
        float dot = 0.0f;
        for (int d = 0; d < d_qk; ++d) dot += q[d] * key_value(key, d, model1);
        sc = dot * p.softmax_scale;
      }
    }
    score[tid] = sc;
    key_of[tid] = key;
    const float mx = block_max(sc, red, tid);
    if (mx != -INFINITY) {
      const float m_new = fmaxf(m, mx);
      const float corr = any ? expf(m - m_new) : 0.0f;
      acc0 *= corr, acc1 *= corr, l *= corr;
      const int n = min(THREADS, len - t0);
      for (int j = 0; j < n; ++j) {
        const Key kj = key_of[j];
        if (kj.data == nullptr) continue;
        const float pj = expf(score[j] - m_new);
        l += pj;
        acc0 += pj * key_value(kj, 2 * tid, model1);
        acc1 += pj * key_value(kj, 2 * tid + 1, model1);
      }
      m = m_new;
      any = true;
    }
    __syncthreads();
  }
  const long long orow = row * mla::D_V;
  const bool empty = l == 0.0f;
  const float row_lse = empty ? INFINITY : m + logf(l);
  // Sink: out *= 1 / (1 + e^(sink - lse)); lse itself is unchanged.
  const float sink_scale = p.attn_sink && !empty ? 1.0f / (1.0f + expf(p.attn_sink[head] - row_lse)) : 1.0f;
  p.out[orow + 2 * tid] = empty ? 0.0f : acc0 / l * sink_scale;
  p.out[orow + 2 * tid + 1] = empty ? 0.0f : acc1 / l * sink_scale;
  if (tid == 0) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = row_lse;
}
