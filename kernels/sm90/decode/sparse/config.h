// The sparse kernels' fixed numbers: warpgroup roles, setmaxnreg budgets, named-barrier ids and the
// tuning constants that stay. The alternatives tried and dropped are in docs/experiments.md.
#pragma once
#include <cstdint>

namespace mla::sparse {

// Every sparse kernel: four warpgroups, one CTA per SM.
constexpr int THREADS = 512;
// What each thread starts with (65,536 / 512, a multiple of 8). The setmaxnreg budgets of a CTA's
// warpgroups must add up to at most four times this: setmaxnreg.inc waits for ever for registers the
// CTA was never given.
constexpr int LAUNCH_REGS = (65536 / THREADS) / 8 * 8;
static_assert(LAUNCH_REGS == 128, "the budgets below are sized for 128 registers at launch");
constexpr int CONSUMER_THREADS = 256;  // WG0 and WG1 consume, WG2 and WG3 produce

// ---- m64 and h128x: WG0 and WG1 consume 64 query rows, WG2 and WG3 dequantize -----------------------
constexpr int PRODUCER_WARPGROUPS = 2;  // two producer warps per SM sub-partition to interleave their conversions
constexpr int K_STAGES = 2;             // K buffers: the producers fill one block while the consumers read the other
// WG0 holds O_L, S and P; WG1 holds O_R; a producer thread its ~11 gathers in flight (64 spilled 40 B).
constexpr int WG0_REGS = 208, WG1_REGS = 160, PRODUCER_REGS = 72;
static_assert(WG0_REGS + WG1_REGS + PRODUCER_WARPGROUPS * PRODUCER_REGS <= 4 * LAUNCH_REGS, "setmaxnreg within the CTA's registers");
static_assert(WG0_REGS % 8 == 0 && WG1_REGS % 8 == 0 && PRODUCER_REGS % 8 == 0, "setmaxnreg takes multiples of 8");

// Named barriers of the two consumer warpgroups (256 threads each time; 0 is __syncthreads'):
//   START      a request's start, once WG0's copies of its Q landed;
//   P_READY    WG0 arrives once P and the row factors are in shared memory, WG1 waits;
//   P_FREE     WG1 is done with P (a sync on both sides), WG0 may overwrite it;
//   L_READY    WG0's final row sums and maxima are in sm.l / sm.m for WG1's epilogue.
enum : uint32_t { BAR_START = 1, BAR_P_READY = 2, BAR_P_FREE = 3, BAR_L_READY = 4 };

// The lazy running max (τ, log2 units): a row's max moves only when a block's max exceeds it by more
// than τ, so after the first block the rescale factors are exactly 1 and the O rescale is skipped by a
// warp vote; P is then at most 2^τ. sparse-v32 on the H200: 369.8 against 379.1 µs with the exact max.
constexpr int LAZY_MAX = 8;
static_assert(LAZY_MAX > 0, "the consumers skip the rescale by a vote on factors of exactly 1");

// ---- h16x (h_q <= 16): WG0 and WG1 consume alternate blocks, WG2 and WG3 bulk-copy raw tokens -----
namespace h16x {
constexpr int STAGES = 4;      // raw-token ring: bulk copies need no registers, so depth costs only smem
// Commit groups of A fragments in flight: in Q·Kᵀ half a scale group each (three in flight spilled; whole
// groups made ptxas serialize the wgmmas, C7512), in P·V two scale groups of one k-step.
constexpr int QK_DEPTH = 2, PV_DEPTH = 2;
constexpr int CONSUMER_REGS = 224;
constexpr int PRODUCER_REGS = (4 * LAUNCH_REGS - 2 * CONSUMER_REGS) / 2;  // the producers hold no data
static_assert(2 * CONSUMER_REGS + 2 * PRODUCER_REGS <= 4 * LAUNCH_REGS, "setmaxnreg within the CTA's registers");
static_assert(QK_DEPTH >= 1 && QK_DEPTH <= 4 && PV_DEPTH >= 1 && PV_DEPTH <= 4, "1 to 4 sets in flight");
// A stage is full after lanes 0-7 of each of the 8 producer warps arrived (lane 0 with its bytes).
constexpr int FULL_ARRIVALS = 64;
enum : uint32_t { BAR_ALL = 1, BAR_WG0 = 2 };  // BAR_ALL: both consumer warpgroups; BAR_WG0 + wg: one of them
}  // namespace h16x

}  // namespace mla::sparse
