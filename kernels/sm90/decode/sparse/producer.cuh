// The m64 and h128x producers: two warpgroups gather the blocks' FP8 tokens with 16-byte read-only loads,
// dequantize them to bf16 and write each 64-token block into a K buffer's SW128 tiles (the format's
// QK_TILES: nine for V3.2, eight for MODEL1), one valid flag per token. An entry without a slot (-1, outside the cache, past the request's top-k length)
// reads slot 0, always inside the cache, and is written as a zero row with its flag cleared: no branch
// around the loads, and no NaN from stale bytes reaches P·V.
//
// Each warp takes 8 tokens and its lanes q = lane / 8 take 16-byte chunks q, q + 4, q + 8, ... of each, so
// one load instruction reads 64 contiguous bytes of each of 8 tokens (8-16 lines, asking L2 for 256-byte
// fetches) instead of 16 bytes of 32 places. Chunk k of a lane holds dims 64k + 16q .. +15: chunks 2q and
// 2q + 1 of SW128 tile k, so the 8 lanes of a chunk write 8 different rows (conflict-free after the
// swizzle). Every load of a block goes out before the thread waits for the buffer and converts.
//
// Without crossover, producer warpgroup pidx converts tokens 32 pidx .. + 31 of every block, all dims.
// With crossover (h_q = 128: the two 64-head CTAs of a query token in a cluster) each CTA converts its
// 32 tokens only, the two warpgroups splitting the dims (warpgroup 0 tiles 0-3, warpgroup 1 the rest,
// RoPE by the format's XO_ROPE_WG, so a thread has 6-7 loads in flight, not 11), and lane 0 of each warp copies the warp's 8
// rows of the tiles it wrote to the peer with 1 KB bulk copies (8 consecutive rows of a SW128 tile are
// 1 KB contiguous and the swizzle depends only on the row), crediting the peer's kfull as a TMA load
// would. Those rows are not rewritten before the copy has read them: this CTA's kempty needs the peer
// consumers' release, which follows their kfull wait, which the copy's complete_tx ends.
#pragma once
#include "cursor.cuh"
#include "smem.h"

namespace mla::sparse {

// A block's valid flags, one bit per token (byte j: tokens 8j .. 8j + 7), from a warp's ballot, written
// by its lane 0, which then arrives on kfull itself: racecheck orders a write before the consumers'
// reads only through the writing thread's own arrival (a __syncwarp before another lane's arrival does
// not count for it). `bits` covers `bytes` bytes from byte j.
template <int BYTES>
__device__ __forceinline__ void store_valid_bits(Smem& sm, int stage, int j, uint32_t bits, int lane) {
  static_assert(BYTES == 1 || BYTES == 4, "a warp's 8 tokens or its 32");
  if (lane != 0) return;
  if constexpr (BYTES == 1) sm.valid[stage][j] = static_cast<uint8_t>(bits);
  else *reinterpret_cast<uint32_t*>(&sm.valid[stage][j]) = bits;
}

template <class Fmt, bool XO, bool EXTRA>
__device__ __forceinline__ void producer(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx, int pidx) {
  static_assert(Fmt::ROPE_DIMS == 64 && Fmt::NOPE_TILES <= 8 && Fmt::NOPE_TILES > 4, "two 16-byte loads of RoPE per lane; 5-8 FP8 tiles");
  static_assert(!XO || PRODUCER_WARPGROUPS == 2, "with crossover the two warpgroups split the dims");
  // Tokens of a block per thread and their 64-dim FP8 tiles (GROUPS: the array's size; with crossover
  // warpgroup 1 converts NOPE_TILES - 4 of them). TOKENS is 1 with two producer warpgroups; the
  // per-token arrays and loops stay because ptxas's schedule of h128x depends on them (scalars compiled
  // to different SASS).
  constexpr int TOKENS = XO ? 1 : BLOCK_N / (32 * PRODUCER_WARPGROUPS), GROUPS = XO ? 4 : Fmt::NOPE_TILES;
  // Whether FP8 tile g0 + k of this warpgroup exists, and whether it copies the RoPE dims.
  auto has_group = [&](int k) { return !XO || (pidx == 0 ? k < 4 : 4 + k < Fmt::NOPE_TILES); };
  const bool copies_rope = !XO || pidx == Fmt::XO_ROPE_WG;
  const int t = threadIdx.x - CONSUMER_THREADS - 128 * pidx, warp = t / 32, lane = t % 32, q = lane / 8;
  const uint32_t rank = XO ? ptx::cluster_ctarank() : 0u, peer = rank ^ 1u;
  auto token_of = [&](int r) { return (XO ? 32 * static_cast<int>(rank) : 32 * (PRODUCER_WARPGROUPS * r + pidx)) + 8 * warp + lane % 8; };
  const int n_blocks = walk_blocks<EXTRA>(p, meta);
  Cursor cur = cursor_begin<EXTRA>(p, meta), ahead = cur;  // cur: the block being filled (its valid flags, with crossover)
  int slot[TOKENS], slot1[TOKENS];  // the slots of blocks it and it + 1
#pragma unroll
  for (int r = 0; r < TOKENS; ++r) slot[r] = cursor_slot<EXTRA>(p, meta, ahead, s_idx, token_of(r));
  cursor_next<EXTRA>(p, meta, ahead);
#pragma unroll
  for (int r = 0; r < TOKENS; ++r) slot1[r] = cursor_slot<EXTRA>(p, meta, ahead, s_idx, token_of(r));
  cursor_next<EXTRA>(p, meta, ahead);
#pragma unroll
  for (int r = 0; r < TOKENS; ++r) prefetch_token_lines<Fmt, EXTRA>(p, slot[r], q), prefetch_token_lines<Fmt, EXTRA>(p, slot1[r], q);
  uint4 raw[TOKENS][GROUPS], rope[TOKENS][2];  // raw[r][k]: chunk q of tile g0 + k
  typename Fmt::Scales sc[TOKENS];
  auto issue = [&](int r, int s) {  // token r's loads from slot s (none: slot 0, converted to zeros)
    const typename Fmt::Token tok = Fmt::locate(token_place<EXTRA>(p, s >= 0 ? s : 0));
    const int g0 = XO ? 4 * pidx : 0;
#pragma unroll
    for (int k = 0; k < GROUPS; ++k)
      if (has_group(k)) raw[r][k] = ptx::ld_nc_v4_l2_256(tok.data + 64 * (g0 + k) + 16 * q);
    sc[r] = Fmt::load_scales(tok);
    if (copies_rope) {
#pragma unroll
      for (int k = 0; k < 2; ++k) rope[r][k] = ptx::ld_nc_v4(Fmt::rope(tok) + 64 * k + 16 * q);
    }
  };
  for (int it = 0; it < n_blocks; ++it) {
    const int stage = it % K_STAGES;
    uint8_t* kb = sm.k[stage];
    const uint32_t remote_kb = XO ? ptx::mapa_shared(ptx::smem_addr(kb), peer) : 0u;
    const uint32_t remote_bar = XO ? ptx::mapa_shared(ptx::smem_addr(&sm.kfull[stage]), peer) : 0u;
    auto put = [&](int offset, uint4 v) { *reinterpret_cast<uint4*>(kb + offset) = v; };
    // Every load of the block goes out before the buffer wait and the conversions.
    PendingSlot pending2[TOKENS];
#pragma unroll
    for (int r = 0; r < TOKENS; ++r) issue(r, slot[r]);
#pragma unroll
    for (int r = 0; r < TOKENS; ++r) pending2[r] = cursor_index<EXTRA>(p, meta, ahead, s_idx, token_of(r));
    // With crossover both CTAs read the same index row, so each sets all 64 valid flags itself: these
    // index loads go out with the gathers (read at the block's end they stalled the producer).
    PendingSlot flag_entry{-1, false};
    if constexpr (XO) {
      if (pidx == 0) flag_entry = cursor_index<EXTRA>(p, meta, cur, s_idx, t < 64 ? t : 0);
    }
    // The buffer is free once the consumers (of both CTAs, with crossover) released it. The peer's
    // consumers arrive here (relaxed) after their reads completed; this wait only has to order this
    // thread's later writes after that, which a CTA-scope wait does without invalidating L1.
    ptx::mbarrier_wait(&sm.kempty[stage], ((it / K_STAGES) & 1) ^ 1);
#pragma unroll
    for (int r = 0; r < TOKENS; ++r) {
      const int token = token_of(r);
      const bool valid = slot[r] >= 0;
      const int g0 = XO ? 4 * pidx : 0;
#pragma unroll
      for (int k = 0; k < GROUPS; ++k) {
        if (!has_group(k)) continue;
        uint4 a, b;
        dequant16(raw[r][k], Fmt::scale_bf16(!XO || pidx == 0 ? Fmt::scale_word(sc[r], k) : Fmt::scale_word(sc[r], 4 + k)), a, b);
        if (!valid) a = b = make_uint4(0, 0, 0, 0);
        put((g0 + k) * TILE_BYTES + sw128(token, 2 * q), a);
        put((g0 + k) * TILE_BYTES + sw128(token, 2 * q + 1), b);
      }
      if (copies_rope) {  // RoPE stays bf16
#pragma unroll
        for (int k = 0; k < 2; ++k) put(Fmt::ROPE_TILE * TILE_BYTES + sw128(token, q + 4 * k), valid ? rope[r][k] : make_uint4(0, 0, 0, 0));
      }
      if constexpr (!XO) {  // lanes 0-7 hold the warp's tokens 32·pidx + 8·warp + 0..7
        store_valid_bits<1>(sm, stage, 4 * pidx + warp, __ballot_sync(0xFFFFFFFFu, valid) & 0xFFu, lane);
      }
    }
    if constexpr (XO) {  // warps 0-1 of producer 0 hold tokens 32·warp + lane (flag_entry)
      if (pidx == 0 && warp < 2) store_valid_bits<4>(sm, stage, 4 * warp, __ballot_sync(0xFFFFFFFFu, slot_of<EXTRA>(p, flag_entry) >= 0), lane);
    }
    ptx::fence_proxy_async_smem();  // the consumers' wgmma (and, with crossover, the bulk copy) read these generic writes
    if constexpr (XO) {
      __syncwarp();  // every lane's rows and fence before lane 0's copy
      if (lane == 0) {
        const uint32_t rows = ptx::smem_addr(kb) + (32 * rank + 8 * warp) * 128;
#pragma unroll
        for (int tile = 0; tile < Fmt::QK_TILES; ++tile)
          if (tile == Fmt::ROPE_TILE ? pidx == Fmt::XO_ROPE_WG : tile / 4 == pidx)  // the tiles this warpgroup wrote
            ptx::bulk_copy_smem_to_cluster(remote_kb + (rows - ptx::smem_addr(kb)) + tile * TILE_BYTES, rows + tile * TILE_BYTES, 8 * 128, remote_bar);
      }
    }
    if (XO && t == 0 && pidx == 0) ptx::mbarrier_arrive_expect_tx(&sm.kfull[stage], 32 * Fmt::D_QK * 2);  // + the peer's half
    else ptx::mbarrier_arrive(&sm.kfull[stage]);
    int slot2[TOKENS];
#pragma unroll
    for (int r = 0; r < TOKENS; ++r) {
      slot2[r] = slot_of<EXTRA>(p, pending2[r]);
      if (!XO || pidx == 0) prefetch_token_lines<Fmt, EXTRA>(p, slot2[r], q);  // with crossover both warpgroups hold the same tokens
    }
#pragma unroll
    for (int r = 0; r < TOKENS; ++r) slot[r] = slot1[r], slot1[r] = slot2[r];
    cursor_next<EXTRA>(p, meta, cur);
    cursor_next<EXTRA>(p, meta, ahead);
  }
}

}  // namespace mla::sparse
