// h16x's producers only move bytes: each token lands by one cp.async.bulk in a STAGES-deep ring (no
// registers, no L1 fill, no conversion), so the gathers in flight are bounded by shared memory, not by
// the issuing threads. (Gathering part of the tokens with cp.async instead, four lanes or a warp a
// token, was slower.) A MODEL1 token is two pieces: its data by the bulk copy, its 8-byte scale record
// (in the page's footer; a bulk copy moves multiples of 16 bytes) loaded by the lane one block ahead
// and stored after the data's place.
#pragma once
#include "../cursor.cuh"
#include "../smem.h"

namespace mla::sparse::h16x {

// The 8 producer warps: warp pw's lanes 0-7 copy tokens 8pw .. 8pw + 7 of each block (a token without a
// slot: its row zeroed, so V holds no stale NaN, and its flag cleared); each of them arrives on the
// stage's full barrier, each expecting its own token's bytes. The producers, not the memory, were what
// the consumers waited for (ncu at v4-h16: the consumers 33 % of their samples on a stage not yet full,
// the producers 35 % on the check of the index they had loaded in the same iteration), so nothing waits
// on the copy's path: indices are loaded three blocks ahead and checked an iteration later, and a
// token's address (a division by the page size) and MODEL1 record are worked out an iteration before its
// copy. Both together: v4-h16 78.1 against 90.6 µs on the H200, sparse-h16 112.3 against 111.2; the
// indices alone moved neither by more than 1 %. The
// loop runs while the cursor has a block rather than over a count walked first, whose dependent loads
// of the requests' lengths delayed the first copy (sparse-h16 on the H200: 121.6 against 124.1 µs).
template <class Fmt, bool EXTRA>
__device__ __forceinline__ void producer(const SparseParams& p, Smem<Fmt>& sm, const SchedMeta& meta_in, int s_idx, int pidx) {
  // The part's record in registers: read through the reference, it was loaded again every iteration (the
  // copies' generic stores to shared memory might alias it) and waited for at the iteration's top.
  const SchedMeta meta = meta_in;
  const int t = threadIdx.x - CONSUMER_THREADS - 128 * pidx, lane = t % 32, pw = 4 * pidx + t / 32;
  const int my_token = 8 * pw + (lane & 7);
  Cursor ahead = cursor_begin<EXTRA>(p, meta);
  bool has_cur = cursor_valid(meta, ahead);
  int slot_cur = cursor_slot<EXTRA>(p, meta, ahead, s_idx, my_token);
  cursor_next<EXTRA>(p, meta, ahead);
  bool has_nxt = cursor_valid(meta, ahead);
  int slot_nxt = cursor_slot<EXTRA>(p, meta, ahead, s_idx, my_token);
  cursor_next<EXTRA>(p, meta, ahead);
  // Block it + 2's index, loaded an iteration before its check. Two of them alternate (the loop below
  // is unrolled by two): with one variable copied on, ptxas waited for the older load at the copy, at
  // the top of the next iteration, not where it is checked.
  bool has_pend = cursor_valid(meta, ahead);
  PendingSlot pend0 = cursor_index<EXTRA>(p, meta, ahead, s_idx, my_token), pend1;
  cursor_next<EXTRA>(p, meta, ahead);
  constexpr bool RECORDS = cuda::std::is_same_v<Fmt, Model1>;
  constexpr int STRIDE = Geometry<Fmt>::TOKEN_STRIDE;
  // The current token's address and (MODEL1) its record, from the iteration before its copy: a load
  // waited for at once would hold the lane a memory round trip per block.
  const uint8_t* src = nullptr;
  uint2 record = make_uint2(0, 0);
  auto locate_next = [&](int slot) {
    if (lane < 8 && slot >= 0) {
      const auto tok = Fmt::locate(token_place<EXTRA>(p, slot));
      src = tok.data;
      if constexpr (RECORDS) record = Fmt::load_scales(tok);
    }
  };
  locate_next(slot_cur);
  // One block: `in_flight` holds block it + 2's index load, `fresh` receives block it + 3's.
  auto block = [&](int it, const PendingSlot& in_flight, PendingSlot& fresh) {
    const bool has_ahead = cursor_valid(meta, ahead);
    fresh = cursor_index<EXTRA>(p, meta, ahead, s_idx, my_token);
    const int stage = it % STAGES;
    ptx::mbarrier_wait(&sm.empty[stage], ((it / STAGES) & 1) ^ 1);
    const bool mine = lane < 8, valid = slot_cur >= 0;
    uint8_t* row = sm.raw[stage] + my_token * STRIDE;
    if (mine && !valid) {
#pragma unroll 1
      for (int c = 0; c < STRIDE / 16; ++c) reinterpret_cast<uint4*>(row)[c] = make_uint4(0, 0, 0, 0);
      ptx::fence_proxy_async_smem();  // before a later bulk copy into the same row
    }
    if (mine) sm.valid[stage][my_token] = valid ? 1 : 0;
    // Each lane arrives itself after its writes (zeros, its flag) and its copy, expecting the copy's
    // bytes: racecheck orders a thread's writes, a bulk copy's too, before the consumers' reads only
    // through that thread's own arrival. A copy that lands before the arrival's expect_tx leaves the
    // barrier's tx-count negative with the arrival pending, so the phase cannot complete early.
    constexpr int COPY = Geometry<Fmt>::COPY_BYTES;
    if (mine && valid) {
      ptx::bulk_copy_global_to_smem(ptx::smem_addr(row), src, COPY, &sm.full[stage]);
      if constexpr (RECORDS) *reinterpret_cast<uint2*>(row + Geometry<Fmt>::RECORD_AT) = record;
      ptx::mbarrier_arrive_expect_tx(&sm.full[stage], COPY);
    } else if (mine) {
      ptx::mbarrier_arrive(&sm.full[stage]);
    }
    locate_next(slot_nxt);
    slot_cur = slot_nxt;
    slot_nxt = slot_of<EXTRA>(p, in_flight);
    has_cur = has_nxt;
    has_nxt = has_pend;
    has_pend = has_ahead;
    cursor_next<EXTRA>(p, meta, ahead);
  };
  for (int it = 0; has_cur; it += 2) {
    block(it, pend0, pend1);
    if (!has_cur) break;
    block(it + 1, pend1, pend0);
  }
}

}  // namespace mla::sparse::h16x
