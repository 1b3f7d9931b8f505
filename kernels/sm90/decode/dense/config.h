// Dense seesaw decode (sm_90a): threads, named barriers and the tuned constants, each chosen by timing
// on the H200 against its alternatives (docs/experiments.md lists the forms that were dropped).
#pragma once
#include "../common/tiles.cuh"

namespace mla::dense {

// Two consumer warpgroups and no producer: K arrives by TMA issued by the consumers themselves, so each
// thread may hold 255 registers (__launch_bounds__(256, 1)).
constexpr int THREADS = 256;
static_assert(THREADS * 255 <= 65536, "255 registers a thread fit one SM's register file");

// Named barriers (id 0 is __syncthreads). P0_READY is used once per pair: W0 arrives, W1 waits (256
// threads; what it orders, sP0, W1 reads only through wgmma); BAR_WG0/1 are a warpgroup's own (128
// threads). The scale hand-overs go through mbarriers (smem.h).
enum : uint32_t { BAR_CONSUMERS = 1, BAR_P0_READY = 4, BAR_WG0 = 6, BAR_WG1 = 7 };

// W1 queues Q·K1ᵀ once W0 queued the first 4 tiles of Q·K0ᵀ, so S0 is ready first and W0's softmax
// overlaps the tail of W1's Q·Kᵀ (dense-compute 529.0 vs 535.1 µs; 1, 6 and 8 no better).
constexpr int QK0_FIRST = 4;
static_assert(QK0_FIRST >= 1 && QK0_FIRST < NUM_TILES, "W0 arrives before waiting for tile QK0_FIRST");

// τ of the lazy running max (log2 units): a row's max moves only when a block's max exceeds it by more
// than τ, so after the first block the factors are exactly 1 and the warp-vote fast paths skip the
// rescales. Exact: P <= 2^τ, which 16-bit P holds at the same relative precision, and l, O and the lse
// use the same m (dense-compute: pipe 496.5 vs 508.8 µs, fast 509.0 vs 531.2).
constexpr float LAZY_MAX = 8.0f;

// fast only: thread 0 issues the first pair's block 1 once block 0's first tile has landed, where the
// CTA's first piece has at least this many blocks (dense-short-h16 0.9-1.6 µs faster).
constexpr int FIRST_STAGGER_MIN = 12;

// merge_pair_out reads the other piece's partial in batches of this many column pairs, two in flight
// (16 made fast spill).
constexpr int MERGE_LOADS = 8;

}  // namespace mla::dense
