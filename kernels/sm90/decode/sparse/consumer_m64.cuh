// The 64-row consumers (m64, and h128x with XO): one CTA = 64 query heads of one query token; WG0 computes
// S = Q·Kᵀ, masks the invalid tokens, runs the online softmax, hands P (bf16, smem) and the rows' rescale
// factors to WG1, and accumulates O_L = O[:, 0:256] from P in its registers; WG1 accumulates O_R.
// WG is a template parameter so each warpgroup's instantiation holds only its own path and ptxas
// allocates it within its own register budget; the two run different code, so their named barriers are
// the unaligned forms (synccheck flagged bar.sync here).
#pragma once
#include "../common/qk.cuh"
#include "../common/softmax.cuh"
#include "cursor.cuh"
#include "epilogue.cuh"
#include "smem.h"

namespace mla::sparse {

// The 64 heads [h0, h0 + 64) of query token s_idx into the format's QK_TILES SW128 tiles (zero past
// h_q), by the 256 consumer threads, six 16-byte loads each in flight at a time.
template <typename T, class Fmt>
__device__ __forceinline__ void load_q(const SparseParams& p, Smem& sm, int req, int h0, int s_idx, int tid) {
  const uint16_t* q = static_cast<const uint16_t*>(p.q);
  constexpr int PER_HEAD = Fmt::D_QK / 8, BATCH = 6, CHUNKS = 64 * PER_HEAD;
  for (int base = tid; base < CHUNKS; base += BATCH * CONSUMER_THREADS) {
    uint4 v[BATCH];
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int c = base + j * CONSUMER_THREADS, head = h0 + c / PER_HEAD;
      v[j] = make_uint4(0, 0, 0, 0);
      if (c < CHUNKS && head < p.h_q)
        v[j] = __ldg(reinterpret_cast<const uint4*>(q + req * p.q_batch_stride + s_idx * p.q_token_stride + head * p.q_head_stride + (c % PER_HEAD) * 8));
    }
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int c = base + j * CONSUMER_THREADS;
      if (c < CHUNKS) *reinterpret_cast<uint4*>(sm.q + ((c % PER_HEAD) / 8) * TILE_BYTES + sw128(c / PER_HEAD, (c % PER_HEAD) % 8)) = v[j];
    }
  }
}

// The valid flags of this thread's 16 token columns, 8c + 2(lane % 4) + e, as bits 2c + e, read after the
// block's kfull wait. Lane 0 reads the block's 64 bits and shares them by shuffle: it is the lane that
// releases the buffer for its warp (kempty), and racecheck orders a read before the producer's next
// write only through the reading thread's own arrival.
__device__ __forceinline__ uint32_t load_valid_bits(const Smem& sm, int stage, int lane) {
  uint32_t lo = 0, hi = 0;
  if (lane == 0) {
    const uint2 w = *reinterpret_cast<const uint2*>(sm.valid[stage]);
    lo = w.x, hi = w.y;
  }
  lo = __shfl_sync(0xFFFFFFFFu, lo, 0);
  hi = __shfl_sync(0xFFFFFFFFu, hi, 0);
  // Byte c of a word holds tokens 8c .. 8c + 7; this lane's two of them to bits 2c, 2c + 1.
  auto gather = [&](uint32_t word) {
    const uint32_t x = (word >> (2 * (lane % 4))) & 0x03030303u;
    return (x | x >> 6 | x >> 12 | x >> 18) & 0xFFu;
  };
  return gather(lo) | gather(hi) << 8;
}

// WG0's hand-over of a block's P and its rows' rescale factors to WG1. P_READY is a full barrier on both
// sides: WG1 is already waiting there (it passed P_FREE with WG0 and then only waits for the block), so
// WG0 loses nothing by waiting too, and racecheck, which does not model bar.arrive, sees sm.scale's
// hand-over ordered. Sixteen 32-bit stores rather than stmatrix (store_p), which measured no faster here.
__device__ __forceinline__ void give_p(Smem& sm, const uint32_t (&a)[4][4], const float (&scale)[2], int warp_in_wg, int lane) {
  store_p_words(sm.p, a, warp_in_wg, lane);
  if (lane % 4 == 0) {
    sm.scale[16 * warp_in_wg + lane / 4] = scale[0];
    sm.scale[16 * warp_in_wg + lane / 4 + 8] = scale[1];
  }
  ptx::fence_proxy_async_smem();
  ptx::named_barrier_sync_unaligned(BAR_P_READY, CONSUMER_THREADS);
}

// WG1's side: waits for P and reads its rows' factors.
__device__ __forceinline__ void take_p(const Smem& sm, float& f0, float& f1, int warp_in_wg, int lane) {
  ptx::named_barrier_sync_unaligned(BAR_P_READY, CONSUMER_THREADS);
  f0 = sm.scale[16 * warp_in_wg + lane / 4], f1 = sm.scale[16 * warp_in_wg + lane / 4 + 8];
}

template <typename T, class Fmt, int WG, bool XO, bool EXTRA>
__device__ __forceinline__ void consumer(const SparseParams& p, Smem& sm, const SchedMeta& meta, int h0, int s_idx) {
  // O (+)= P·V over this warpgroup's 256 columns (V from `v_base`, 4 tiles) as two m64n128 wgmmas per 16
  // tokens (columns 0-127, tiles 0-1; 128-255, tiles 2-3): ptxas sizes a wgmma against the launch's 128
  // registers and refuses m64n256 there. WG0 takes P from its registers (RS): no read of sm.p and no
  // wait for its other warps' stores.
  auto pv_regs = [](float (&o)[128], const uint32_t (&a)[4][4], uint32_t v_base) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      ptx::wgmma_m64n128k16_rs_transb<T, 0>(o, a[j], sw128_at(v_base, j * 2048, TILE_BYTES));
      ptx::wgmma_m64n128k16_rs_transb<T, 64>(o, a[j], sw128_at(v_base, 2 * TILE_BYTES + j * 2048, TILE_BYTES));
    }
  };
  auto pv = [](float (&o)[128], uint32_t p_base, uint32_t v_base) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t a = sw128_at(p_base, j * 32, 16);
      ptx::wgmma_m64n128k16_ss_transb<T, 0>(o, a, sw128_at(v_base, j * 2048, TILE_BYTES));
      ptx::wgmma_m64n128k16_ss_transb<T, 64>(o, a, sw128_at(v_base, 2 * TILE_BYTES + j * 2048, TILE_BYTES));
    }
  };
  const int tid = threadIdx.x, warp_in_wg = (tid % 128) / 32, lane = tid % 32;
  const uint32_t q_base = ptx::smem_addr(sm.q), p_base = ptx::smem_addr(sm.p);
  int it = 0;
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, walk_length<EXTRA>(p, req));
    const bool is_split = piece_is_split(meta, req);

    ptx::named_barrier_sync_unaligned(BAR_CONSUMERS, CONSUMER_THREADS);  // the previous request is done with sQ, sm.l, sm.m
    load_q<T, Fmt>(p, sm, req, h0, s_idx, tid);
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync_unaligned(BAR_CONSUMERS, CONSUMER_THREADS);

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float m[2] = {M_INIT, M_INIT}, l[2] = {0.0f, 0.0f};

    for (int blk = start_blk; blk < end_blk; ++blk, ++it) {
      const int stage = it % K_STAGES;
      const uint32_t k_base = ptx::smem_addr(sm.k[stage]);
      // With crossover half the block comes from the peer by bulk copy, counted by complete_tx into this
      // CTA's own barrier as a TMA load would be: a CTA-scope wait sees it as it sees a TMA load, and no
      // proxy fence is needed (the producers fence their local half before they arrive). The
      // cluster-scope acquire invalidated L1 on every wait, for nothing this kernel reads through L1.
      ptx::mbarrier_wait(&sm.kfull[stage], (it / K_STAGES) & 1);
      if constexpr (WG == 0) {
        float s[32];
        qk_block<T, Fmt::QK_TILES>(s, q_base, k_base, [](int) {});
        const uint32_t vbits = load_valid_bits(sm, stage, lane);
        // Invalid tokens are masked and the rest scaled to the log2 domain in the pass that takes the
        // row max (separate passes cost registers WG0 does not have), then the online-softmax step.
        float scale[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float mx = MASKED;
#pragma unroll
          for (int i = 2 * half; i < 32; i += 4)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float v = (vbits >> (2 * (i >> 2) + e)) & 1u ? s[i + e] * p.scale_log2 : MASKED;
              s[i + e] = v;
              mx = fmaxf(mx, v);
            }
          const float mq = quad_max(mx);
          const float m_new = mq > m[half] + float(LAZY_MAX) ? mq : m[half];
          scale[half] = ptx::exp2_approx(m[half] - m_new);
          m[half] = m_new;
          l[half] = l[half] * scale[half] + exponentiate(s, half, m_new);
        }
        uint32_t a[4][4];
        pack_p<T>(a, s);
        // WG1 must be done with the previous block's P before it is overwritten.
        if (blk != start_blk) ptx::named_barrier_sync_unaligned(BAR_P_FREE, CONSUMER_THREADS);
        give_p(sm, a, scale, warp_in_wg, lane);
        if (!__all_sync(0xFFFFFFFFu, scale[0] == 1.0f && scale[1] == 1.0f)) {
#pragma unroll
          for (int i = 0; i < 128; ++i) o[i] *= scale[(i >> 1) & 1];
        }
        ptx::wgmma_fence();
        pv_regs(o, a, k_base);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_regs(o);
      } else {
        float f0, f1;
        take_p(sm, f0, f1, warp_in_wg, lane);
        if (!__all_sync(0xFFFFFFFFu, f0 == 1.0f && f1 == 1.0f)) {
#pragma unroll
          for (int i = 0; i < 128; ++i) o[i] *= ((i >> 1) & 1) ? f1 : f0;
        }
        ptx::wgmma_fence();
        pv(o, p_base, k_base + 4 * TILE_BYTES);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_regs(o);
      }
      // Lane 0 arrives for its warp: the warp read this buffer through its wgmma (retired above) and
      // lane 0's read of the valid flags.
      __syncwarp();
      if (lane == 0) {
        ptx::mbarrier_arrive(&sm.kempty[stage]);
        // The peer's producers also write this buffer: release it there too. Relaxed: this warp's reads
        // of the buffer are complete (wgmma_wait), and the release form's fence held each consumer warp
        // 8 % of its samples in ncu.
        if constexpr (XO) ptx::mbarrier_arrive_remote_relaxed(ptx::mapa_shared(ptx::smem_addr(&sm.kempty[stage]), ptx::cluster_ctarank() ^ 1u));
      }
      // WG1 releases P with a full barrier (a sync, not an arrive), after its K release: it then waits
      // for WG0's next P here instead of at P_READY, so this costs nothing, and racecheck, which does not
      // model bar.arrive, sees the sm.scale exchange ordered.
      if constexpr (WG == 1) ptx::named_barrier_sync_unaligned(BAR_P_FREE, CONSUMER_THREADS);
    }

    // Final L and M: WG0 owns them; WG1's last P_FREE sync is met here.
    float L[2], M[2];
    if constexpr (WG == 0) {
      ptx::named_barrier_sync_unaligned(BAR_P_FREE, CONSUMER_THREADS);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        l[half] += __shfl_xor_sync(0xFFFFFFFFu, l[half], 1);
        l[half] += __shfl_xor_sync(0xFFFFFFFFu, l[half], 2);
        L[half] = l[half], M[half] = m[half];
        if (lane % 4 == 0) sm.l[16 * warp_in_wg + lane / 4 + 8 * half] = l[half], sm.m[16 * warp_in_wg + lane / 4 + 8 * half] = m[half];
      }
      // A full barrier (not an arrive): once per request, so free, and racecheck sees the exchange ordered.
      ptx::named_barrier_sync_unaligned(BAR_L_READY, CONSUMER_THREADS);
    } else {
      ptx::named_barrier_sync_unaligned(BAR_L_READY, CONSUMER_THREADS);
#pragma unroll
      for (int half = 0; half < 2; ++half) L[half] = sm.l[16 * warp_in_wg + lane / 4 + 8 * half], M[half] = sm.m[16 * warp_in_wg + lane / 4 + 8 * half];
    }
    const int slot = p.num_splits[req] + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);  // the piece's split slot
    // The row addresses computed here, not before the block loop: ptxas hoisted them out of it and, in
    // h128x over MODEL1 with a second cache, spilled one (8 bytes) across the loop to make room.
    int s_late = s_idx, h_late = h0, lane_late = lane, warp_late = warp_in_wg;
    asm volatile("" : "+r"(s_late), "+r"(h_late), "+r"(lane_late), "+r"(warp_late));
    store_rows<T>(p, o, req, h_late, s_late, WG, warp_late, lane_late, is_split, slot, L, M);
  }
}

}  // namespace mla::sparse
