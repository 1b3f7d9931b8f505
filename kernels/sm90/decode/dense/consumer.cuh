// The two warpgroups' loop over a CTA's pieces: per request its Q, the pairs of blocks in the seesaw
// schedule (fast: one pair at a time; pipe: the loop rotated so the next pair's Q·Kᵀ is queued behind
// this pair's last P·V), then the epilogue. The schedule is the table in kernel.cuh.
#pragma once
#include "epilogue.cuh"
#include "pairs.cuh"
#include "softmax.cuh"

namespace mla::dense {

template <typename T, bool PIPE, int KT>
__device__ __forceinline__ void consumer(const DenseParams& p, Smem& sm, const SchedMeta& meta, int m_block, int hk) {
  // wg comes from a shuffle so ptxas can see it is warp-uniform: with a plain threadIdx.x / 128 it treats
  // the W0/W1 branches as divergent, injects warpgroup.arrive there and serializes every wgmma (C7520),
  // which halves the tensor-core rate.
  const int tid = threadIdx.x, wg = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 128), 0);
  const int t128 = tid % 128, warp_in_wg = t128 / 32, lane = tid % 32;
  const int warp_u = __shfl_sync(0xFFFFFFFFu, warp_in_wg, 0);  // warp-uniform for ptxas (see wg)
  const uint64_t policy = ptx::policy_evict_first();
  uint32_t phase = 0;    // flips once per iteration (pair of blocks) for every K barrier
  uint32_t l_phase = 0;  // parity of sm.l_ready, flips once per request
  uint32_t q_phase = 0;  // parity of sm.q_full, flips once per request (q_by_tma)
  const bool q_by_tma = p.q_tma;
  // A warpgroup releases refill group g (its named barrier `bar`: every warp is done reading the tiles),
  // then its warp 0 refills it for `next`.
  auto release_and_refill = [&](uint32_t bar, int g, const Pair& next) {
    ptx::named_barrier_sync(bar, 128);
    if (warp_u == 0) refill<PIPE, KT>(p, sm, next, g, hk, policy, lane);
  };
  // All 256 threads meet on sm.l_ready, for the pair merge's count (the l exchange below keeps its own
  // three lines: through this helper its SASS changed).
  auto consumers_sync = [&]() {
    ptx::mbarrier_arrive(&sm.l_ready);
    ptx::mbarrier_wait(&sm.l_ready, l_phase);
    l_phase ^= 1;
  };
  if constexpr (!PIPE) {
    // Thread 0 issues the first pair's block 1 where the prologue left it to (FIRST_STAGGER_MIN).
    if (wg == 0 && warp_u == 0) {  // thread 0's warp, whose warpgroup waits for block 0 anyway
      if (lane == 0 && sm.first_stagger) {
        ptx::mbarrier_wait(&sm.kfull[0][0], 0);
        load_tiles(p, sm, Pair{meta.begin_req_idx, meta.begin_block_idx, 1, {-1, sm.first_phys1}}, 1, 0, KT, hk, policy);
      }
      __syncwarp();
    }
  }
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int seqlen = p.cache_seqlens[req];
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, seqlen);
    const bool is_split = piece_is_split(meta, req);
    int ahead[2];  // pipe: the ids of the pair after the next one (load_ids), issued before Q's wait
    if constexpr (PIPE) load_ids(p, req, start_blk + 2, end_blk, ahead);
    // merge_pairs: a request in exactly two pieces is merged by the piece that finishes second (usually
    // split 0, which ends its part; split 1 began the next part). Its flag counts the pieces that stored
    // their partial.
    const int first_slot = p.num_splits[req];
    const int slot = first_slot + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);
    const int other_slot = slot == first_slot ? first_slot + 1 : first_slot;
    const bool pair = is_split && p.merge_pairs != 0 && p.num_splits[req + 1] - first_slot == 2;
    int* const pair_flag = p.merge_flags + (static_cast<long long>(req) * p.h_kv + hk) * p.num_m_blocks + m_block;
    // Split 0's merge reads split 1's partial: before its last pair, this m-block's rows of it,
    // contiguous, into L2, and the pair's flag read then (its acquire load's latency under that pair,
    // not on the epilogue's path).
    int pair_seen = 0;  // thread 0: the flag as read then (used in the epilogue)
    auto prefetch_other = [&]() {
      if (pair && slot == first_slot && tid == 0) {
        const int rows = min(BLOCK_M, p.rows_per_kv - m_block * BLOCK_M);
        const long long row0 = (static_cast<long long>(other_slot) * p.h_kv + hk) * p.rows_per_kv + m_block * BLOCK_M;
        ptx::prefetch_l2_bulk(p.o_accum + row0 * D_V, rows * D_V * 4);
        pair_seen = ptx::ld_acquire_gpu(pair_flag);
      }
    };

    if (q_by_tma) {
      // The first request's Q was issued with the first K blocks (dense_seesaw); a later one once the
      // previous request is done with sQ and sm.l.
      if (req != meta.begin_req_idx) {
        ptx::named_barrier_sync(BAR_CONSUMERS, THREADS);
        if (tid == 0) load_q_tma<KT>(p, sm, req, m_block, hk);
      }
      ptx::mbarrier_wait(&sm.q_full, q_phase);
      q_phase ^= 1;
    } else {
      ptx::named_barrier_sync(BAR_CONSUMERS, THREADS);  // the previous request is done with sQ and sm.l
      load_q_dense<KT>(p, sm.q, req, m_block, hk, tid, THREADS);
      ptx::fence_proxy_async_smem();
      ptx::named_barrier_sync(BAR_CONSUMERS, THREADS);
    }

    // Keys a row may see in this piece: its causal/length limit, and never past the piece's last block
    // (the odd block of the last pair may belong to another part, or not exist).
    int limit[2];
#pragma unroll
    for (int half = 0; half < 2; ++half)
      limit[half] = min(dense_row_limit(p, m_block * BLOCK_M + 16 * warp_in_wg + lane / 4 + 8 * half, seqlen), end_blk * BLOCK_N);
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float l[2] = {0.0f, 0.0f}, m[2] = {M_INIT, M_INIT};
    float s[32];

    // Steps 3-5 as fast and pipe share them, as lambdas over the request's state (O, l, m, S).
    // W0, steps 3-4: O_L = O_L·s0 + P0·V0L (V0's rows past the end zeroed first), K0's tiles 0-3 then
    // free; once W1 published s1, P0·s1 handed over as sP0 and O_L rescaled (V1's tail rows zeroed:
    // W1's Q·K1ᵀ is done, it published s1 after it). Leaves sP1·V1L to the caller.
    auto w0_steps_3_4 = [&](const float (&scale0)[2], int blk0, int blk1, const Pair& next) {
      rescale_o(o, scale0);
      if (seqlen - blk0 * BLOCK_N < BLOCK_N) {
        zero_tail_rows(sm.k[0], 0, max(seqlen - blk0 * BLOCK_N, 0), t128);
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(BAR_WG0, 128);
      }
      uint32_t p0[4][4];
      pack_p<T>(p0, s);
      pv_rs<T>(o, p0, sm.k[0], 0);  // O_L += P0·V0L
      ptx::wgmma_wait<0>();
      ptx::fence_regs(o);
      release_and_refill(BAR_WG0, REFILL_K0_LEFT, next);
      ptx::mbarrier_wait(&sm.scale1_ready, phase);
      float scale1[2];
      take_scale1(m, l, scale1, sm, warp_in_wg, lane);
      scale_p<T>(p0, scale1);
      store_p(p_tile(sm, 0), p0, warp_in_wg, lane);
      ptx::fence_proxy_async_smem();
      ptx::named_barrier_arrive(BAR_P0_READY, THREADS);
      rescale_o(o, scale1);
      if (seqlen - blk1 * BLOCK_N < BLOCK_N) {
        zero_tail_rows(sm.k[1], 0, max(seqlen - blk1 * BLOCK_N, 0), t128);
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(BAR_WG0, 128);
      }
    };
    // W1, steps 4-5 after it published s1 and sP1: O_R = O_R·s0·s1 + P1·V1R + sP0·V0R (the V rows past
    // the end zeroed first), queued, not waited for.
    auto w1_steps_4_5 = [&](const float (&scale01)[2], const uint32_t (&p1)[4][4], int blk0, int blk1) {
      rescale_o(o, scale01);
      if (seqlen - blk1 * BLOCK_N < BLOCK_N) {
        zero_tail_rows(sm.k[1], 4, max(seqlen - blk1 * BLOCK_N, 0), t128);
        zero_tail_rows(sm.k[0], 4, max(seqlen - blk0 * BLOCK_N, 0), t128);
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(BAR_WG1, 128);
      }
      pv_rs<T>(o, p1, sm.k[1], 4);  // O_R += P1·V1R
      ptx::named_barrier_sync(BAR_P0_READY, THREADS);
      pv_ss<T>(o, p_tile(sm, 0), sm.k[0], 4);  // O_R += sP0·V0R
    };

    if constexpr (PIPE) {
      uint32_t qrope[4][4];  // Q's RoPE tile (d_qk 576 only)
      if constexpr (KT > V_TILES) load_qrope(qrope, sm, warp_in_wg, lane);
      // One pair; LAST: the request's last, after which nothing is queued (the next request needs its own
      // Q first). The last pair is its own copy of the body, not a branch: with the next Q·Kᵀ queued
      // under a runtime condition, ptxas could not tell whether S was in flight where the paths meet
      // and serialized every wgmma (C7515).
      auto pipe_pair = [&](int blk0, auto last) {
        constexpr bool LAST = decltype(last)::value;
        const int blk1 = blk0 + 1;
        Pair next;
        if constexpr (LAST) {
          next = next_pair(p, meta, {req, blk0, end_blk, {}});
        } else {
          next = pair_of_ids(p, req, blk0 + 2, end_blk, ahead);
          load_ids(p, req, blk0 + 4, end_blk, ahead);
        }
        ptx::wgmma_wait<0>();  // this pair's S, queued by the previous pair (or before the first)
        ptx::fence_regs(s);
        if (wg == 0) {
          mask_scale<false>(s, p, blk0, lane, limit);
          float scale0[2], m_new[2];
          new_max(s, m, m_new, scale0, p.scale_log2);
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
            if (lane % 4 == 0) sm.m[r] = m_new[half], sm.scale0[r] = scale0[half];
            m[half] = m_new[half];
          }
          ptx::mbarrier_arrive(&sm.scale0_ready);
          exp_sum(s, l, m, scale0, p.scale_log2);
          w0_steps_3_4(scale0, blk0, blk1, next);
          ptx::mbarrier_wait(&sm.pv0r_issued, phase);  // W1 queued sP0·V0R (and stored sP1)
          pv_ss<T>(o, pipe_p1_tile(sm), sm.k[1], 0);  // O_L += sP1·V1L
          if constexpr (!LAST) {
            qk_issue<T, KT>(s, sm, 0, phase ^ 1, 0, 4, true, qrope);
            ptx::wgmma_wait<1>();  // sP1·V1L only
            ptx::fence_regs(o);
            release_and_refill(BAR_WG0, REFILL_K1_LEFT_P, next);
            qk_issue<T, KT>(s, sm, 0, phase ^ 1, 4, KT - 4, false, qrope);
          } else {
            ptx::wgmma_wait<0>();
            ptx::fence_regs(o);
            release_and_refill(BAR_WG0, REFILL_K1_LEFT_P, next);
          }
        } else {
          mask_scale<false>(s, p, blk1, lane, limit);
          ptx::mbarrier_wait(&sm.scale0_ready, phase);
          float m0[2], s0[2], m_new[2], s1[2], scale01[2];
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
            m0[half] = sm.m[r], s0[half] = sm.scale0[r];
          }
          new_max(s, m0, m_new, s1, p.scale_log2);
          __syncwarp();  // the warp's readers of sm.m[r] (above) read before lane 0 overwrites it
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
            if (lane % 4 == 0) sm.m[r] = m_new[half], sm.scale1[r] = s1[half];
            scale01[half] = s0[half] * s1[half];
            m[half] = m_new[half];
          }
          // W0 reads sP1 only after pv0r_issued, which each W1 warp arrives on after storing it, so
          // scale1_ready carries only the max and scale and goes out before the exponentials.
          ptx::mbarrier_arrive(&sm.scale1_ready);
          exp_sum(s, l, m, scale01, p.scale_log2);
          uint32_t p1[4][4];
          pack_p<T>(p1, s);
          store_p(pipe_p1_tile(sm), p1, warp_in_wg, lane);
          ptx::fence_proxy_async_smem();
          w1_steps_4_5(scale01, p1, blk0, blk1);
          __syncwarp();
          if (lane == 0) ptx::mbarrier_arrive(&sm.pv0r_issued);
          ptx::wgmma_wait<1>();  // P1·V1R is done: K1's tiles 4-8 are free
          release_and_refill(BAR_WG1, REFILL_K1_RIGHT, next);
          ptx::wgmma_wait<0>();
          ptx::fence_regs(o);
          release_and_refill(BAR_WG1, REFILL_K0_RIGHT_P, next);
          if constexpr (!LAST) qk_issue<T, KT>(s, sm, 1, phase ^ 1, 4, KT, true, qrope);
        }
      };
      if (start_blk < end_blk) {
        // The first pair's S is queued here; every pair then queues the next one's behind its last P·V.
        if (wg == 0) qk_issue<T, KT>(s, sm, 0, phase, 0, KT, true, qrope);
        else qk_issue<T, KT>(s, sm, 1, phase, 4, KT, true, qrope);
        int blk0 = start_blk;
        for (; blk0 + 2 < end_blk; blk0 += 2, phase ^= 1) pipe_pair(blk0, cuda::std::false_type{});
        prefetch_other();
        pipe_pair(blk0, cuda::std::true_type{});
        phase ^= 1;
      }
    } else {
      for (int blk0 = start_blk; blk0 < end_blk; blk0 += 2, phase ^= 1) {
        const int blk1 = blk0 + 1;
        const Pair next = next_pair(p, meta, {req, blk0, end_blk, {}});
        if (blk0 + 2 >= end_blk) prefetch_other();
        if (wg == 0) {
          compute_s<T, KT>(s, sm, 0, phase, lane, QK0_FIRST);
          mask_scale(s, p, blk0, lane, limit);
          float scale0[2];
          softmax_w0(s, m, l, scale0, sm, warp_in_wg, lane);
          ptx::mbarrier_arrive(&sm.scale0_ready);
          w0_steps_3_4(scale0, blk0, blk1, next);
          pv_ss<T>(o, p_tile(sm, 1), sm.k[1], 0);  // O_L += sP1·V1L
          ptx::wgmma_wait<0>();
          ptx::fence_regs(o);
          // W0 was the last to read K1 tiles 0-3 (V1L) and tile 8 (sP1).
          release_and_refill(BAR_WG0, REFILL_K1_LEFT_P, next);
        } else {
          ptx::mbarrier_wait(&sm.qk0_issued, phase);
          compute_s<T, KT>(s, sm, 1, phase);
          mask_scale(s, p, blk1, lane, limit);
          ptx::mbarrier_wait(&sm.scale0_ready, phase);
          float scale01[2];
          softmax_w1(s, m, l, scale01, sm, warp_in_wg, lane);
          uint32_t p1[4][4];
          pack_p<T>(p1, s);
          store_p(p_tile(sm, 1), p1, warp_in_wg, lane);
          ptx::fence_proxy_async_smem();
          ptx::mbarrier_arrive(&sm.scale1_ready);
          w1_steps_4_5(scale01, p1, blk0, blk1);
          ptx::wgmma_wait<0>();
          ptx::fence_regs(o);
          // K0 tiles 4-8 (V0R, sP0) and K1 tiles 4-7 (V1R) are done; W0's Q·K0ᵀ finished before it
          // published sP0, and W0 refills K1's tile 8 (sP1) once it has read it.
          release_and_refill(BAR_WG1, REFILL_RIGHT, next);
        }
      }
    }

    // A piece that finds the other's count in the flag merges at once, from its registers; the reading
    // is published to the other threads by the l exchange's barrier below.
    if (pair && tid == 0) sm.pair_done = pair_seen != 0 ? pair_seen : ptx::ld_acquire_gpu(pair_flag);
    // L = W0's sum + W1's sum (both relative to the final max, which W1 computed last).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      l[half] += __shfl_xor_sync(0xFFFFFFFFu, l[half], 1);
      l[half] += __shfl_xor_sync(0xFFFFFFFFu, l[half], 2);
      if (lane % 4 == 0) sm.l[wg][16 * warp_in_wg + lane / 4 + 8 * half] = l[half];
    }
    ptx::mbarrier_arrive(&sm.l_ready);
    ptx::mbarrier_wait(&sm.l_ready, l_phase);
    l_phase ^= 1;
    float L[2], M[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
      L[half] = sm.l[0][r] + sm.l[1][r];
      M[half] = sm.m[r];
    }
    if (pair && sm.pair_done != 0) {
      merge_pair_out<T>(p, o, req, m_block, hk, wg, warp_in_wg, lane, slot, other_slot, L, M);
      if (tid == 0) *pair_flag = 0;  // for the next call: both pieces have counted
    } else {
      store_out<T>(p, o, req, m_block, hk, wg, warp_in_wg, lane, is_split, slot, L, M);
      if (pair) {  // count now, and merge if the other piece counted first
        consumers_sync();  // every thread's partial stored before thread 0's release
        if (tid == 0) sm.pair_done = ptx::atom_add_acq_rel_gpu(pair_flag, 1);
        consumers_sync();
        if (sm.pair_done != 0) {
          merge_pair_out<T>(p, o, req, m_block, hk, wg, warp_in_wg, lane, slot, other_slot, L, M);
          if (tid == 0) *pair_flag = 0;
        }
      }
    }
  }
}

}  // namespace mla::dense
