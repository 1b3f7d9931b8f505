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

// WG0's copy of the 64 heads [h0, h0 + 64) of query token s_idx of request req into sQ's SW128 tiles (zero
// past h_q), by cp.async: nothing held in registers and nothing waited for, so the next request's Q is
// issued when this request's blocks are done and lands under its epilogue (request_start waits for it).
// Loaded at the request's start by both warpgroups, it held every request switch for several round
// trips (v4-cfg2 215.5 against 205.1 µs on the H200; issued in the last block, under its P·V, 210.8).
template <class Fmt>
__device__ __forceinline__ void issue_q(const SparseParams& p, uint32_t q_base, int req, int h0, int s_idx, int tid) {
  constexpr int PER_HEAD = Fmt::D_QK / 8, CHUNKS = 64 * PER_HEAD;
  static_assert(CHUNKS % 128 == 0, "each WG0 thread copies the same number of chunks");
  const uint16_t* q = static_cast<const uint16_t*>(p.q) + req * p.q_batch_stride + s_idx * p.q_token_stride;
#pragma unroll 4
  for (int c = tid; c < CHUNKS; c += 128) {
    const int row = c / PER_HEAD, chunk = c % PER_HEAD;
    const bool in = h0 + row < p.h_q;
    ptx::cp_async_16(q_base + (chunk / 8) * TILE_BYTES + sw128(row, chunk % 8), q + (in ? h0 + row : h0) * p.q_head_stride + chunk * 8, in ? 16u : 0u);
  }
}

// A request's start, for both warpgroups: WG0's copies of its Q landed (each thread's, published to
// wgmma, the async proxy, then all of them: wgmma reads the tiles the whole warpgroup wrote), and WG1 is
// past the previous request's reads of sm.l, sm.m and sm.scale, which WG0 writes again. (Those are
// ordered without it too, through the last P_FREE and L_READY, but racecheck does not follow that
// chain; the meeting costs nothing: WG0's first P_READY of the request would wait for WG1 anyway.)
template <int WG>
__device__ __forceinline__ void request_start() {
  if constexpr (WG == 0) {
    ptx::cp_async_wait_all();
    ptx::fence_proxy_async_smem();
  }
  ptx::named_barrier_sync_unaligned(BAR_START, CONSUMER_THREADS);
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
  // What a request switch reads is read ahead: the part's record and the rows' sinks (sm.sink) once, the
  // next request's lengths and split slot before this one's epilogue (the epilogue's stores may alias
  // them, so read after it they were read again at every switch, a round trip each).
  const SchedMeta part = meta;
  if (WG == 0 && tid < 64) sm.sink[tid] = h0 + tid < p.h_q ? sink_log2(p, h0 + tid) : -INFINITY;  // read after L_READY
  if constexpr (WG == 0) issue_q<Fmt>(p, q_base, part.begin_req_idx, h0, s_idx, tid);
  int it = 0;
  RawLengths next_lengths = load_lengths<EXTRA>(p, part.begin_req_idx);
  int next_splits = p.num_splits[part.begin_req_idx];
  for (int req = part.begin_req_idx; req <= part.end_req_idx; ++req) {
    const RawLengths lengths = next_lengths;
    const int splits = next_splits;
    const int start_blk = piece_first_block(part, req);
    const int end_blk = piece_end_block(part, req, walk_length<EXTRA>(p, lengths));
    const bool is_split = piece_is_split(part, req);
    const bool has_next = req < part.end_req_idx;
    request_start<WG>();

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
    const int slot = splits + (req == part.begin_req_idx ? part.begin_split_idx : 0);  // the piece's split slot
    // The row and Q addresses computed here, not before the block loop: ptxas hoisted them out of it and
    // spilled 8-16 bytes across the loop to make room.
    int s_late = s_idx, h_late = h0, lane_late = lane, warp_late = warp_in_wg, tid_late = tid;
    asm volatile("" : "+r"(s_late), "+r"(h_late), "+r"(lane_late), "+r"(warp_late), "+r"(tid_late));
    if constexpr (WG == 0) {  // sQ is free: this request's last Q·Kᵀ retired before the L_READY sync
      if (has_next) issue_q<Fmt>(p, q_base, req + 1, h_late, s_late, tid_late);
    }
    if (has_next) next_lengths = load_lengths<EXTRA>(p, req + 1), next_splits = p.num_splits[req + 1];
    store_rows<T>(p, sm, o, req, h_late, s_late, WG, warp_late, lane_late, is_split, slot, L, M);
  }
}

}  // namespace mla::sparse
