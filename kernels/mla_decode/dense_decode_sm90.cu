// Dense split-KV MLA decode for Hopper (sm_90a), first tensor-core version ("dense_v1").
//
// One CTA = 64 query rows (the flattened s_q x heads_per_kv rows of one request and KV head) against the
// request's KV blocks that the tile scheduler gave its SM part. Per 64-token KV block:
//   S = Q·Kᵀ (wgmma m64n64k16, both operands in SW128 smem, 9 tiles x 4 k-steps over d_qk = 576),
//   online softmax in the log2 domain, O = O·scale + P·V (wgmma m64n256k16, P from registers, V = the
//   same K tile read MN-major).
// Warp roles (288 threads): warpgroup 0 owns O[:, 0:256], warpgroup 1 owns O[:, 256:512]; both compute
// the full S redundantly (a simple v1: no cross-warpgroup exchange; costs 576/1088 extra MMA work);
// warpgroup 2 is the TMA producer (one thread issues) keeping two KV blocks in flight (kfull / kempty
// mbarriers); setmaxnreg moves its registers to the consumers, whose O half alone is 128 registers.
// The seesaw schedule (FLASHMLA.md §5.1) replaces the redundant S in the next kernel version.
#include "decode_common.cuh"

MLA_EXPORT_LAYOUT(dense_params_layout, mla::DenseParams, MLA_OFFSETS_DENSE)

namespace {

using namespace mla;

constexpr int NUM_STAGES = 2;
constexpr int CONSUMER_THREADS = 256;
constexpr int THREADS = CONSUMER_THREADS + 128;  // registers are allocated per warpgroup anyway
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;  // (2 * 232 + 40) * 128 = 64,512 <= 65,536

struct __align__(1024) Smem {
  uint8_t q[QK_BYTES];
  uint8_t k[NUM_STAGES][QK_BYTES];
  uint64_t kfull[NUM_STAGES];
  uint64_t kempty[NUM_STAGES];
};
constexpr int SMEM_BYTES = sizeof(Smem) + 1024;  // + slack to align the base to 1024 B by hand

template <typename T>
__device__ __forceinline__ void store_out(const DenseParams& p, float (&o)[128], int req, int m_block, int hk, int wg,
                                          int warp_in_wg, int lane, bool is_split, int slot, const float (&l)[2],
                                          const float (&m)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
    const int flat = m_block * BLOCK_M + r;
    if (flat >= p.rows_per_kv) continue;
    const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
    const float L = l[half];
    // Only L == 0 means "no visible key"; a NaN L (NaN in q or in a visible token) stays NaN in out and
    // lse, as in the CPU reference, instead of passing for an empty row.
    const bool empty = L == 0.0f;
    const float inv = empty ? 0.0f : 1.0f / L;
    if (!is_split) {
      uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * D_V;
#pragma unroll
      for (int i = 2 * half; i < 128; i += 4) {
        const int col = wg * 256 + 8 * (i >> 2) + 2 * (lane % 4);
        *reinterpret_cast<uint32_t*>(out + col) = ptx::pack2<T>(o[i] * inv, o[i + 1] * inv);
      }
      if (wg == 0 && lane % 4 == 0) {
        p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] =
            empty ? INFINITY : (__log2f(L) + m[half]) * LN2;
      }
    } else {
      const long long row = (static_cast<long long>(slot) * p.h_kv + hk) * p.rows_per_kv + flat;
      float* oa = p.o_accum + row * D_V;
#pragma unroll
      for (int i = 2 * half; i < 128; i += 4) {
        const int col = wg * 256 + 8 * (i >> 2) + 2 * (lane % 4);
        *reinterpret_cast<float2*>(oa + col) = make_float2(o[i] * inv, o[i + 1] * inv);
      }
      if (wg == 0 && lane % 4 == 0) p.lse_accum[row] = empty ? -INFINITY : __log2f(L) + m[half];
    }
  }
}

template <typename T>
__device__ __forceinline__ void consumer(const DenseParams& p, Smem& sm, const SchedMeta& meta, int m_block, int hk) {
  const int tid = threadIdx.x, wg = tid / 128, t128 = tid % 128, warp_in_wg = t128 / 32, lane = tid % 32;
  const uint32_t q_base = ptx::smem_addr(sm.q);
  int it = 0;
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int seqlen = p.cache_seqlens[req];
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, seqlen);
    const bool is_split = piece_is_split(meta, req);

    ptx::named_barrier_sync(1, CONSUMER_THREADS);  // every wgmma of the previous request has read sQ
    load_q_dense(p, sm.q, req, m_block, hk, tid, CONSUMER_THREADS);
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(1, CONSUMER_THREADS);

    int limit[2];
    float m[2] = {M_INIT, M_INIT}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int half = 0; half < 2; ++half)
      limit[half] = dense_row_limit(p, m_block * BLOCK_M + 16 * warp_in_wg + lane / 4 + 8 * half, seqlen);
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;

    for (int blk = start_blk; blk < end_blk; ++blk, ++it) {
      const int stage = it % NUM_STAGES;
      ptx::mbarrier_wait(&sm.kfull[stage], (it / NUM_STAGES) & 1);
      uint8_t* kblock = sm.k[stage];
      const uint32_t k_base = ptx::smem_addr(kblock);

      float s[32];
      qk_block<T>(s, q_base, k_base, [](int) {});

      // Online softmax over this block, base 2: scores are pre-multiplied by softmax_scale * log2(e).
      const int tok0 = blk * BLOCK_N + 2 * (lane % 4);
      float scale_o[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float mx = MASKED;
#pragma unroll
        for (int i = 2 * half; i < 32; i += 4) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int tok = tok0 + 8 * (i >> 2) + e;
            const float v = tok < limit[half] ? s[i + e] * p.scale_log2 : MASKED;
            s[i + e] = v;
            mx = fmaxf(mx, v);
          }
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 2));
        const float m_new = fmaxf(m[half], mx);
        scale_o[half] = ptx::exp2_approx(m[half] - m_new);
        m[half] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int i = 2 * half; i < 32; i += 4) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            s[i + e] = ptx::exp2_approx(s[i + e] - m_new);
            sum += s[i + e];
          }
        }
        l[half] = l[half] * scale_o[half] + sum;
      }
#pragma unroll
      for (int i = 0; i < 128; ++i) o[i] *= scale_o[(i >> 1) & 1];

      const int valid = seqlen - blk * BLOCK_N;
      if (valid < BLOCK_N) {
        zero_tail_rows(kblock, 4 * wg, valid < 0 ? 0 : valid, t128);
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(2 + wg, 128);
      }

      uint32_t a[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int x = 0; x < 4; ++x) a[j][x] = ptx::pack2<T>(s[8 * j + 2 * x], s[8 * j + 2 * x + 1]);
      }
      ptx::wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint64_t dv = ptx::smem_desc_sw128(k_base + 4 * wg * TILE_BYTES + j * 2048, TILE_BYTES, 1024);
        ptx::wgmma_m64n256k16_rs_transb<T>(o, a[j], dv);
      }
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_regs(o);
      if (lane == 0) ptx::mbarrier_arrive(&sm.kempty[stage]);
    }

#pragma unroll
    for (int half = 0; half < 2; ++half) {
      l[half] += __shfl_xor_sync(0xFFFFFFFFu, l[half], 1);
      l[half] += __shfl_xor_sync(0xFFFFFFFFu, l[half], 2);
    }
    const int slot = p.num_splits[req] + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);
    store_out<T>(p, o, req, m_block, hk, wg, warp_in_wg, lane, is_split, slot, l, m);
  }
}

__device__ __forceinline__ void producer(const DenseParams& p, Smem& sm, const SchedMeta& meta, int hk) {
  const uint64_t policy = ptx::policy_evict_first();
  int it = 0;
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, p.cache_seqlens[req]);
    for (int blk = start_blk; blk < end_blk; ++blk, ++it) {
      const int stage = it % NUM_STAGES;
      // A fresh barrier reports parity 1 complete, so the first NUM_STAGES waits pass at once.
      ptx::mbarrier_wait(&sm.kempty[stage], ((it / NUM_STAGES) & 1) ^ 1);
      // Block ids outside the table or the cache are fetched as zeros by TMA (out-of-bounds fill).
      const int phys = table_block(p, req, blk, p.cache_seqlens[req]);
      ptx::mbarrier_arrive_expect_tx(&sm.kfull[stage], QK_BYTES);
#pragma unroll
      for (int t = 0; t < NUM_TILES; ++t)
        ptx::tma_load_4d(sm.k[stage] + t * TILE_BYTES, &p.tmap_kv, &sm.kfull[stage], t * 64, hk, 0, phys, policy);
    }
  }
}

template <typename T>
__device__ __forceinline__ void dense_decode(const DenseParams& p) {
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = smem_struct_1024<Smem>(smem_raw);
  const SchedMeta meta = reinterpret_cast<const SchedMeta*>(p.sched_meta)[blockIdx.z];
  const int m_block = blockIdx.x, hk = blockIdx.y;
  if (meta.begin_req_idx >= p.b) {
    ptx::pdl_launch_dependents();
    return;
  }
  pdl_launch_if_unsplit(meta);
  if (threadIdx.x == 0) {
    for (int i = 0; i < NUM_STAGES; ++i) {
      ptx::mbarrier_init(&sm.kfull[i], 1);
      ptx::mbarrier_init(&sm.kempty[i], CONSUMER_THREADS / 32);
    }
    ptx::fence_mbarrier_init();
    ptx::prefetch_tensormap(&p.tmap_kv);
  }
  __syncthreads();
  if (threadIdx.x < CONSUMER_THREADS) {
    ptx::setmaxnreg_inc<CONSUMER_REGS>();
    consumer<T>(p, sm, meta, m_block, hk);
  } else {
    ptx::setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == CONSUMER_THREADS) producer(p, sm, meta, hk);
  }
  // The combine kernel (launched with PDL) waits for this whole grid before reading the partials.
  ptx::pdl_launch_dependents();
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_decode_bf16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_decode<ptx::bf16_t>(p);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_decode_fp16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_decode<ptx::fp16_t>(p);
}
// Dynamic shared memory the host must request for the kernels above.
extern "C" __device__ const int mla_dense_decode_smem_bytes = SMEM_BYTES;
