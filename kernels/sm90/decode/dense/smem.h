// The dense seesaw kernel's shared memory: Q and the pair's two K blocks as nine SW128 tiles each, the
// softmax state the two warpgroups exchange, and the mbarriers.
#pragma once
#include "config.h"

namespace mla::dense {

struct __align__(1024) Smem {
  uint8_t q[QK_BYTES];
  // K0 (even block of the pair), K1 (odd block). Tile 8 (RoPE dims) is not part of V, so once Q·Kᵀ of a
  // block is done its space holds that block's P tile (sP0 in K0, sP1 in K1) for the other warpgroup. At
  // d_qk 512 no K tile lands there: it only ever holds P.
  uint8_t k[2][QK_BYTES];
  float m[64];               // running max per row (log2 domain)
  float scale0[64];
  float scale1[64];
  float l[2][64];            // final row sums of each warpgroup
  uint64_t kfull[2][NUM_TILES];
  // The once-per-request exchange of sm.l: all 256 threads arrive and wait. An mbarrier, not a named
  // barrier: racecheck follows mbarriers (it reported the exchange under bar.sync), at the same speed.
  uint64_t l_ready;
  // The per-pair hand-over of the running max and scale (sm.m, sm.scale0: W0 -> W1; sm.m, sm.scale1:
  // W1 -> W0): every thread of the publishing warpgroup arrives (128) after its writes, and its reads of
  // the other side's values, and the other warpgroup waits. One side only arrives, which a named
  // barrier would also order (bar.arrive releases), but racecheck does not model bar.arrive and reported
  // these exchanges; through mbarriers it follows them, and dense-compute-mtp measured no slower.
  uint64_t scale0_ready;
  uint64_t scale1_ready;
  uint64_t qk0_issued;       // one arrival per W0 warp per pair once it queued QK0_FIRST tiles of Q·K0ᵀ
  uint64_t pv0r_issued;      // pipe: one arrival per W1 warp per pair once it queued sP0·V0R
  uint64_t q_full;           // the request's nine Q boxes landed (TMA: one arrival with their bytes)
  // fast: thread 0's note to itself, from the prologue to the consumer's start, of whether block 1 of the
  // first pair waits, and its physical block (held in registers across the barrier they spilled 16
  // bytes; read again from global memory they would wait behind the first blocks). 8-B aligned: one
  // 64-bit store.
  int first_stagger, first_phys1;
  int pair_done;             // merge_pairs: thread 0's reading of a pair's merge flag, for the other threads
};
constexpr int SMEM_BYTES = sizeof(Smem) + 1024;  // + the alignment of the dynamic shared memory to 1024 B
static_assert(SMEM_BYTES <= 232448, "fits the opt-in shared memory of an H100/H200 SM");
static_assert(offsetof(Smem, k) % 1024 == 0 && QK_BYTES % 1024 == 0, "SW128 tiles start on 1024-B boundaries");

// The P tile of block `stage` lives in that block's RoPE tile (see Smem).
__device__ __forceinline__ uint8_t* p_tile(Smem& sm, int stage) { return sm.k[stage] + (NUM_TILES - 1) * TILE_BYTES; }
// pipe's sP1 lives in Q's tile 8 instead, which pipe holds in registers, so K1's tile 8 is refilled with
// K1's tiles 4-7 by W1 (refill), whose next Q·K1ᵀ then reads only tiles it refilled itself.
__device__ __forceinline__ uint8_t* pipe_p1_tile(Smem& sm) { return sm.q + (NUM_TILES - 1) * TILE_BYTES; }

}  // namespace mla::dense
