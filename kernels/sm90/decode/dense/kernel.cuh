// Dense split-KV MLA decode for Hopper (sm_90a), the "seesaw" schedule (docs/dense-decode.md §4).
//
// One CTA = 64 query rows x the KV blocks its SM part was given, two blocks (a pair) per iteration:
// warpgroup 0 (W0) owns O_L = O[:, 0:256] and computes S0 = Q·K0ᵀ; warpgroup 1 (W1) owns O_R = O[:, 256:512]
// and computes S1 = Q·K1ᵀ. No Q·Kᵀ is computed twice. The running max m is shared through smem and the
// two warpgroups take turns on the CUDA cores while the other keeps the tensor cores busy:
//
//   step | W0 (O_L)                                      | W1 (O_R)
//   -----+-----------------------------------------------+-----------------------------------------------
//    1   | S0 = Q·K0ᵀ                                    | S1 = Q·K1ᵀ (once W0 queued 4 tiles of its own)
//    2   | m0 = max(m, rowmax S0), s0 = 2^(m-m0),        | (waits for s0)
//        | P0 = 2^(S0-m0); publish m0, s0  ──────────────┼─> m1 = max(m0, rowmax S1), s1 = 2^(m0-m1),
//    3   | O_L = O_L·s0 + P0·V0L   (tensor)              |     P1 = 2^(S1-m1); O_R *= s0·s1; sP1 <- P1;
//        |                                               |     publish m1, s1  (CUDA cores)
//    4   | (waits for s1) P0 *= s1; sP0 <- P0; O_L *= s1 | O_R += P1·V1R       (tensor)
//    5   | O_L += sP1·V1L           (tensor)             | O_R += sP0·V0R      (tensor)
//
// This is FlashAttention's online softmax; each O half receives both blocks, at different times. The
// running max is lazy (config.h LAZY_MAX), so after the first blocks the rescales are skipped by a warp
// vote. There is no producer warpgroup: K arrives by TMA as KT 64x64 SW128 tiles per block, each on its
// own mbarrier so Q·Kᵀ starts on the first tile, and each warpgroup refills the tiles it was the last to
// read as soon as it is done with them (pairs.cuh, refill). P tiles travel between the warpgroups in the
// blocks' ninth tile: at d_qk 576 (KT 9) the RoPE tile, which V does not use; at d_qk 512 (KT 8,
// DeepSeek-V4's head, where V is the whole row) a slot no K tile fills. Shared memory is the same for both.
//
// Two schedules, chosen by the host by shape:
//  - fast: the table as it stands, one pair per iteration (memory-bound and latency shapes).
//  - pipe: the loop rotated so the tensor pipe does not drain between a warpgroup's last P·V and its next
//    Q·Kᵀ (FlashMLA's form, for compute-bound shapes):
//      * S of this pair was queued at the end of the previous iteration; the pair starts by waiting for it;
//      * each warpgroup publishes its new max and scale before its exponentials, and S stays unscaled
//        (the exponent is one fma);
//      * W1 queues sP0·V0R, then says so (pv0r_issued): W0 queues sP1·V1L behind it, so W1's P·V finish
//        first and W1 refills K1's tiles 4-8 (after P1·V1R) and K0's 4-8 (after sP0·V0R) early;
//      * W0 queues the next pair's Q·K0ᵀ tiles 0-3 (refilled mid-iteration) right behind sP1·V1L,
//        retires only sP1·V1L, refills K1's tiles 0-3, then queues tiles 4-8;
//      * W1 queues the next Q·K1ᵀ starting with the tiles it refilled itself: 4-8, then 0-3;
//      * Q's RoPE tile is held in registers (an RS wgmma), and sP1 lives in its shared-memory copy.
//    W1 sums its Q·K1ᵀ tiles in another order and the exponent is one fma, so outputs may differ from
//    fast's in the last bits.
#pragma once
#include "consumer.cuh"

namespace mla::dense {

template <typename T, bool PIPE, int KT = NUM_TILES>
__device__ __forceinline__ void dense_seesaw(const DenseParams& p) {
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = smem_struct_1024<Smem>(smem_raw);
  const SchedMeta meta = reinterpret_cast<const SchedMeta*>(p.sched_meta)[blockIdx.z];
  if (meta.begin_req_idx >= p.b) {
    ptx::pdl_launch_dependents();
    return;
  }
  // A CTA none of whose pieces leaves work for the combine lets it launch now (merge_pairs' pairs count
  // as unsplit: the combine's CTAs return at once for them).
  if (!piece_needs_combine(p, meta, meta.begin_req_idx) && !piece_needs_combine(p, meta, meta.end_req_idx)) ptx::pdl_launch_dependents();
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < NUM_TILES; ++t) ptx::mbarrier_init(&sm.kfull[s][t], 1);
    ptx::mbarrier_init(&sm.l_ready, THREADS);
    ptx::mbarrier_init(&sm.scale0_ready, 128);
    ptx::mbarrier_init(&sm.scale1_ready, 128);
    ptx::mbarrier_init(&sm.qk0_issued, 4);
    if constexpr (PIPE) ptx::mbarrier_init(&sm.pv0r_issued, 4);
    ptx::mbarrier_init(&sm.q_full, 1);
    ptx::fence_mbarrier_init();
    // Q before the first K blocks: issued after them, it waited behind every SM's (~10 k cycles).
    if (p.q_tma) load_q_tma<KT>(p, sm, meta.begin_req_idx, blockIdx.x, blockIdx.y);
    ptx::prefetch_tensormap(&p.tmap_kv);
    // The first pair of blocks; afterwards each warpgroup refills what it frees.
    const Pair first = with_phys(p, {meta.begin_req_idx, meta.begin_block_idx, piece_end(p, meta, meta.begin_req_idx), {}});
    const uint64_t policy = ptx::policy_evict_first();
    load_tiles(p, sm, first, 0, 0, KT, blockIdx.y, policy);
    // fast: where the first piece is long, block 1 waits until block 0's first tile has landed (the
    // consumer issues it), so block 0 does not land among every CTA's block 1 at the start of a call.
    // Not pipe: it spilled there, and its compute-bound calls have little start to gain.
    bool stagger = false;
    if constexpr (!PIPE) {
      stagger = first.end_blk - first.blk0 >= FIRST_STAGGER_MIN;
      sm.first_stagger = stagger;
      sm.first_phys1 = first.phys[1];
    }
    if (!stagger) load_tiles(p, sm, first, 1, 0, KT, blockIdx.y, policy);
  }
  __syncthreads();
  consumer<T, PIPE, KT>(p, sm, meta, blockIdx.x, blockIdx.y);
  // A CTA with split pieces triggers here, not at its start: with the combine's CTAs launched early
  // (parked in griddepcontrol.wait on the SMs the main grid left free) every latency case was slower.
  ptx::pdl_launch_dependents();
}

}  // namespace mla::dense
