// Log-sum-exp merge of split-KV partials (FLASHMLA.md §2.3). Each split s of a row left o_s (already
// divided by its own L_s) and lse2_s = log2 L_s + M_s (base 2; -inf when the split saw no key). Then
//   G = log2 Σ_s 2^(lse2_s - m) + m,  out = Σ_s 2^(lse2_s - G) · o_s,  lse = G · ln 2,
// and with an attention sink (sparse decode) out is further scaled by 1 / (1 + e^(sink - lse)).
// Launched with programmatic dependent launch right after the main kernel: griddepcontrol.wait first.
#include "../common/ptx.cuh"
#include "../mla/params.h"
#include "split_merge.cuh"

MLA_EXPORT_LAYOUT(combine_params_layout, mla::CombineParams, MLA_OFFSETS_COMBINE)

namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.69314718055994530942f;

// 512 threads in four groups of 128; thread `col` of a group owns columns [4·col, 4·col + 4) of a row.
// The ncu times of the first combine (one 128-thread CTA per row, four loads in flight per thread) were
// what the latency cases lost: 17 µs at dense-b1 (64 splits a row), 25.5 µs at dense-uneven (~100), and
// 22 µs at sparse-v32, where 32,768 CTAs mostly found their request unsplit and returned. Now a CTA takes
// rows_per_cta rows of one request (the host sizes it so the grid still covers the SMs twice over), a
// row with many splits is shared by the four groups, eight loads in flight per thread, and a row with
// few has all its loads issued at once (merge_rows). H200, ncu: dense-b1 9.0-9.8 µs, dense-uneven
// 10.8-11.8, sparse-v32 5.2-5.6 (before merge_rows).
constexpr int THREADS = 512;
constexpr int GROUPS = THREADS / 128;
constexpr int UNROLL = 8;
// Below MANY_SPLITS each group merges rows of its own with every load of a row in one batch (merge_rows);
// up to MID_SPLITS each group still owns its rows, in two batches (merge_row_mid), where a CTA has
// several rows; beyond, the groups share each row.
constexpr int MANY_SPLITS = 2 * GROUPS;
constexpr int MID_SPLITS = 2 * UNROLL;
// Splits of such a row whose o loads go out with its lse loads (8 spilled at 64 registers).
constexpr int MID_EARLY = 6;
// Splits of a shared row whose o loads are issued before its maxima are known (4 spilled at 64 registers).
constexpr int EARLY = 2;

// One row of the workspace: the split s partial of this row is lse2[s · stride], o[s · o_stride].
struct SplitRow {
  const float* lse2;
  const float4* o;  // this thread's four columns
  long long stride, o_stride;
};

__device__ __forceinline__ SplitRow split_row(const mla::CombineParams& p, int first, int hk, int flat, int col) {
  const long long stride = static_cast<long long>(p.h_kv) * p.rows_per_kv;  // between splits, in rows
  const long long row0 = (static_cast<long long>(first) * p.h_kv + hk) * p.rows_per_kv + flat;
  return {p.lse_accum + row0, reinterpret_cast<const float4*>(p.o_accum + row0 * mla::D_V) + col, stride, stride * (mla::D_V / 4)};
}

// Σ 2^(lse2_s - G) · o_s over splits s = i0, i0 + step, ... < n, UNROLL loads in flight.
__device__ __forceinline__ float4 accumulate(const SplitRow& r, int i0, int step, int n, float G) {
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int i = i0; i < n; i += UNROLL * step) {
    float4 v[UNROLL];
    float w[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const int s = i + k * step;
      v[k] = s < n ? r.o[s * r.o_stride] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      w[k] = s < n ? exp2f(r.lse2[s * r.stride] - G) : 0.0f;  // 0 for empty splits (-inf) and for G = +inf (a +inf sink)
    }
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) acc.x += w[k] * v[k].x, acc.y += w[k] * v[k].y, acc.z += w[k] * v[k].z, acc.w += w[k] * v[k].w;
  }
  return acc;
}

// Writes the row's lse (G in base 2, before the sink) and returns G with the sink's share added.
__device__ __forceinline__ float write_lse(const mla::CombineParams& p, int req, int hk, int flat, float G, bool writer) {
  const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
  if (writer) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = G * LN2;
  if (p.attn_sink != nullptr && G != INFINITY) G += log2f(1.0f + exp2f(p.attn_sink[head] * LOG2E - G));
  return G;
}

template <typename T>
__device__ __forceinline__ void write_out(const mla::CombineParams& p, int req, int hk, int flat, int col, float4 acc) {
  const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
  uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * mla::D_V;
  *reinterpret_cast<uint2*>(out + 4 * col) = make_uint2(ptx::pack2<T>(acc.x, acc.y), ptx::pack2<T>(acc.z, acc.w));
}

// Max or sum over the CTA; every thread gets the same value (each folds the warps' values in one order).
template <bool MAX>
__device__ __forceinline__ float cta_reduce(float v, float (&scratch)[THREADS / 32]) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, u) : v + u;
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < THREADS / 32; ++w) v = MAX ? fmaxf(v, scratch[w]) : v + scratch[w];
  return v;
}

// Rows flat0, flat0 + GROUPS, ... < row_end of a request with n <= SLOTS splits, ROWS of them at a time,
// every load of those rows in one batch: one trip to memory per ROWS rows (loading o only once the
// maxima were in, and one row at a time, the combine took 30 µs at dense-compute, two splits a row).
template <typename T, int ROWS, int SLOTS>
__device__ __forceinline__ void merge_rows(const mla::CombineParams& p, int req, int hk, int first, int n, int flat0, int row_end, int col) {
  for (int base = flat0; base < row_end; base += GROUPS * ROWS) {
    float l[ROWS][SLOTS];
    float4 v[ROWS][SLOTS];
#pragma unroll
    for (int j = 0; j < ROWS; ++j) {
      const int flat = base + GROUPS * j;
      const SplitRow r = split_row(p, first, hk, flat < row_end ? flat : base, col);
#pragma unroll
      for (int i = 0; i < SLOTS; ++i) {
        const bool on = i < n && flat < row_end;
        l[j][i] = on ? r.lse2[i * r.stride] : -INFINITY;  // padding: weight 2^-inf = 0
        v[j][i] = on ? r.o[i * r.o_stride] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
#pragma unroll
    for (int j = 0; j < ROWS; ++j) {
      const int flat = base + GROUPS * j;
      if (flat >= row_end) break;
      float sum;
      // A NaN split (NaN data) makes the sum NaN and so G, lse and out.
      const float G = write_lse(p, req, hk, flat, mla::merged_lse2(l[j], sum), col == 0);
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      // No key in any split: out is 0 whatever the sink (a -inf sink made 2^(-inf - -inf) NaN here).
      if (sum != 0.0f) {
#pragma unroll
        for (int i = 0; i < SLOTS; ++i) {
          const float w = exp2f(l[j][i] - G);  // 0 for empty splits (-inf) and for G = +inf (a +inf sink)
          acc.x += w * v[j][i].x, acc.y += w * v[j][i].y, acc.z += w * v[j][i].z, acc.w += w * v[j][i].w;
        }
      }
      write_out<T>(p, req, hk, flat, col, acc);
    }
  }
}

// Rows flat0, flat0 + GROUPS, ... < row_end of a request with MANY_SPLITS <= n <= MID_SPLITS splits, one
// row per group at a time: every lse and the first MID_EARLY splits' o in one batch, the rest of o (up
// to UNROLL loads in flight) after it. Shared among the four groups, such a row took three CTA-wide
// barriers with a dependent load between them, one row per CTA at a time: 15.6 µs at long-b4-128k-mtp
// (9 splits a row, 3 rows a CTA) under ncu, where FlashMLA's combine took 5.8; this way 7.7.
template <typename T>
__device__ __forceinline__ void merge_row_mid(const mla::CombineParams& p, int req, int hk, int first, int n, int flat0, int row_end, int col) {
  for (int flat = flat0; flat < row_end; flat += GROUPS) {
    const SplitRow r = split_row(p, first, hk, flat, col);
    float l[MID_SPLITS];
    float4 v[MID_EARLY];
#pragma unroll
    for (int i = 0; i < MID_SPLITS; ++i) l[i] = i < n ? r.lse2[i * r.stride] : -INFINITY;  // padding: weight 0
#pragma unroll
    for (int i = 0; i < MID_EARLY; ++i) v[i] = r.o[i * r.o_stride];  // n >= MANY_SPLITS > MID_EARLY
    float sum;
    const float G = write_lse(p, req, hk, flat, mla::merged_lse2(l, sum), col == 0);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (sum != 0.0f) {  // no key in any split: out is 0 whatever the sink
#pragma unroll
      for (int i = 0; i < MID_EARLY; ++i) {
        const float w = exp2f(l[i] - G);  // 0 for empty splits (-inf) and for G = +inf (a +inf sink)
        acc.x += w * v[i].x, acc.y += w * v[i].y, acc.z += w * v[i].z, acc.w += w * v[i].w;
      }
      const float4 rest = accumulate(r, MID_EARLY, 1, n, G);  // its lse loads hit L1
      acc.x += rest.x, acc.y += rest.y, acc.z += rest.z, acc.w += rest.w;
    }
    write_out<T>(p, req, hk, flat, col, acc);
  }
}

// Grid (ceil(rows_per_kv / rows_per_cta), h_kv, b): rows [rows_per_cta · x, +rows_per_cta) of request z.
template <typename T>
__device__ __forceinline__ void combine(const mla::CombineParams& p) {
  // num_splits is the scheduler kernel's, complete before the main kernel began (launched without PDL),
  // so it may be read before the wait; an unsplit request's CTAs then leave without waiting for the
  // main kernel.
  const int hk = blockIdx.y, req = blockIdx.z, tid = threadIdx.x, group = tid / 128, col = tid % 128;
  const int first = p.num_splits[req], n = p.num_splits[req + 1] - first;
  // Not split, or a pair the main kernel merged (skip_pairs): out and lse are written already.
  if (n <= 1 || (p.skip_pairs && n == 2)) return;
  ptx::pdl_wait();
  const int row_begin = blockIdx.x * p.rows_per_cta, row_end = min(row_begin + p.rows_per_cta, p.rows_per_kv);

  if (n < MANY_SPLITS) {  // each group its own rows, each thread every split of its columns
    if (n <= mla::FEW_SPLITS) merge_rows<T, 2, mla::FEW_SPLITS>(p, req, hk, first, n, row_begin + group, row_end, col);
    else merge_rows<T, 1, MANY_SPLITS - 1>(p, req, hk, first, n, row_begin + group, row_end, col);
    return;
  }
  // With one row a CTA the groups have nothing to take but a share of that row.
  if (n <= MID_SPLITS && p.rows_per_cta > 1) {
    merge_row_mid<T>(p, req, hk, first, n, row_begin + group, row_end, col);
    return;
  }

  // Many splits (a long request spread over many SMs): the four groups take every fourth split of a row.
  __shared__ float red_max[THREADS / 32], red_sum[THREADS / 32];
  __shared__ float4 partial[GROUPS - 1][128];
  for (int flat = row_begin; flat < row_end; ++flat) {
    const SplitRow r = split_row(p, first, hk, flat, col);
    // This group's first EARLY splits of o go out with the lse loads (they do not depend on G).
    float4 v0[EARLY];
#pragma unroll
    for (int k = 0; k < EARLY; ++k) {
      const int s = group + k * GROUPS;
      v0[k] = s < n ? r.o[s * r.o_stride] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float m = -INFINITY;
    for (int i = tid; i < n; i += THREADS) m = fmaxf(m, r.lse2[i * r.stride]);
    m = cta_reduce<true>(m, red_max);
    if (m == -INFINITY) m = 0.0f;
    float sum = 0.0f;
    for (int i = tid; i < n; i += THREADS) sum += exp2f(r.lse2[i * r.stride] - m);
    sum = cta_reduce<false>(sum, red_sum);
    const float G = write_lse(p, req, hk, flat, mla::lse2_of_sum(m, sum), tid == 0);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (sum != 0.0f) {
#pragma unroll
      for (int k = 0; k < EARLY; ++k) {
        const int s = group + k * GROUPS;
        const float w = s < n ? exp2f(r.lse2[s * r.stride] - G) : 0.0f;
        acc.x += w * v0[k].x, acc.y += w * v0[k].y, acc.z += w * v0[k].z, acc.w += w * v0[k].w;
      }
      const float4 rest = accumulate(r, group + EARLY * GROUPS, GROUPS, n, G);
      acc.x += rest.x, acc.y += rest.y, acc.z += rest.z, acc.w += rest.w;
    }
    if (group > 0) partial[group - 1][col] = acc;
    __syncthreads();
    if (group == 0) {
#pragma unroll
      for (int g = 0; g < GROUPS - 1; ++g) {
        const float4 u = partial[g][col];
        acc.x += u.x, acc.y += u.y, acc.z += u.z, acc.w += u.w;
      }
      write_out<T>(p, req, hk, flat, col, acc);
    }
    __syncthreads();  // the next row rewrites partial and the reduction scratch
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 2) mla_combine_bf16(const __grid_constant__ mla::CombineParams p) {
  combine<ptx::bf16_t>(p);
}
extern "C" __global__ void __launch_bounds__(THREADS, 2) mla_combine_fp16(const __grid_constant__ mla::CombineParams p) {
  combine<ptx::fp16_t>(p);
}
