// Dense split-KV MLA decode for Hopper (sm_90a) with the "seesaw" schedule (FLASHMLA.md §5.1, the seed's
// part 1), our own implementation.
//
// One CTA = 64 query rows x the KV blocks its SM part was given, two blocks per iteration:
// warpgroup 0 (W0) owns O_L = O[:, 0:256] and computes S0 = Q·K0ᵀ; warpgroup 1 (W1) owns O_R = O[:, 256:512]
// and computes S1 = Q·K1ᵀ. No QKᵀ is computed twice. The running max m is shared through smem and the
// two warpgroups take turns on the CUDA cores while the other keeps the tensor cores busy:
//
//   step | W0 (O_L)                                      | W1 (O_R)
//   -----+-----------------------------------------------+-----------------------------------------------
//    1   | S0 = Q·K0ᵀ                                    | S1 = Q·K1ᵀ
//    2   | m0 = max(m, rowmax S0), s0 = 2^(m-m0),        | (waits for s0)
//        | P0 = 2^(S0-m0); publish m0, s0  ──────────────┼─> m1 = max(m0, rowmax S1), s1 = 2^(m0-m1),
//    3   | O_L = O_L·s0 + P0·V0L   (tensor)              |     P1 = 2^(S1-m1); O_R *= s0·s1; sP1 <- P1;
//        |                                               |     publish m1, s1  (CUDA cores)
//    4   | (waits for s1) P0 *= s1; sP0 <- P0; O_L *= s1 | O_R += P1·V1R       (tensor)
//    5   | O_L += sP1·V1L           (tensor)             | O_R += sP0·V0R      (tensor)
//
// Mathematically this is FlashAttention's online softmax; each O half receives both blocks, at different
// times. There is no producer warpgroup (so each consumer thread may use all 255 registers): K arrives by
// TMA as nine 64x64 SW128 tiles per block, each on its own mbarrier so QKᵀ starts on the first tile, and
// each warpgroup refills the tiles it was the last to read as soon as it is done with them: W0 tiles
// 0-3 (V's left half) of both blocks and K1's tile 8, W1 the other tiles 4-8. P tiles travel between the
// warpgroups in the blocks' RoPE tiles, which V does not use.
#include <cuda/std/type_traits>

#include "decode_common.cuh"
#include "split_merge.cuh"

MLA_EXPORT_LAYOUT(dense_seesaw_params_layout, mla::DenseParams, MLA_OFFSETS_DENSE)

namespace {

using namespace mla;

constexpr int CONSUMER_THREADS = 256;
constexpr int THREADS = CONSUMER_THREADS;

// Named barriers (id 0 is __syncthreads). Each is used once per iteration: one warpgroup arrives, the
// other waits, so 256 threads complete it.
enum : uint32_t { BAR_CONSUMERS = 1, BAR_SCALE0_READY = 2, BAR_SCALE1_READY = 3, BAR_P0_READY = 4, BAR_WG0 = 6, BAR_WG1 = 7 };

// MLA_DENSE_WG_MBARRIERS (a racecheck build option; dense suite 11/11 on it): no 128-thread named barriers. A
//   warpgroup releases a refill group by one mbarrier arrival per warp (warp 0 waits for the four, then
//   refills), and orders its tail zeroing before its own wgmma with an mbarrier all 128 threads arrive
//   on and wait for. racecheck follows mbarriers (the producer -> consumer exchanges are never flagged)
//   and its last dense report (sm.l, ordered by full barriers) went away in the sparse kernel when its
//   128-thread barrier did (docs/reliability.md §3).
#ifndef MLA_DENSE_WG_MBARRIERS
#define MLA_DENSE_WG_MBARRIERS 0
#endif

// W1 queues its Q·K1ᵀ only once W0 has queued the first MLA_DENSE_QK0_FIRST tiles of Q·K0ᵀ (mbarrier
// qk0_issued: one arrival per W0 warp before it waits for that tile; 0 = no such order). Issued together,
// the two Q·Kᵀ interleave on the tensor pipe and finish together, so W0's softmax ran with the pipe idle;
// with W0's first tiles ahead, W0's Q·K0ᵀ ends earlier and its softmax overlaps the tail of W1's. K0's
// tiles 0-3 were refilled mid-iteration, so with N <= 4 W1 does not wait on memory through W0 (what sank
// the first attempt at this order, docs/dense-decode.md §3). H200, one call, with a named barrier for
// the order: N = 4 dense-compute 529.0 vs 535.1 µs, dense-compute-mtp 1003.5 vs 1027.5, the
// memory-bound and latency cases unchanged (N = 1: 530.7 / 1014.2; N = 6, 8 no better). An mbarrier
// because racecheck, which does not model bar.arrive, reported the SCALE1 exchange (16 hazards) once a
// fourth arrive-ordered named barrier was in the loop.
#ifndef MLA_DENSE_QK0_FIRST
#define MLA_DENSE_QK0_FIRST 4
#endif
static_assert(MLA_DENSE_QK0_FIRST >= 0 && MLA_DENSE_QK0_FIRST < NUM_TILES, "W0 arrives before waiting for tile N: N in [0, 8]");

// MLA_PAIR_PREFETCH (default 1; 0 for A/B): the piece of a two-piece request that ends its CTA's part
//   (split 0, usually the second to finish) asks L2 for the other piece's partial (cp.async.bulk.prefetch)
//   before its last pair of blocks, so the merge's loads after it find it there, and reads the pair's
//   flag then (its acquire load's latency under that pair, not on the epilogue's path).
#ifndef MLA_PAIR_PREFETCH
#define MLA_PAIR_PREFETCH 1
#endif

// MLA_DENSE_V1R_EARLY (a timing experiment): W1 refills K1's tiles 4-7 as soon as its P1·V1R is done
// (wgmma_wait<1> behind sP0·V0R), not at the end of the iteration with K0's tiles 4-8; W1's next Q·K1ᵀ
// reads those tiles in the usual order. (W1_V1R_FIRST, measured in the fifth session, also changed that
// order, and lost 2 %.)
#ifndef MLA_DENSE_V1R_EARLY
#define MLA_DENSE_V1R_EARLY 0
#endif

// MLA_PIPE_QROPE_REGS (on by default; 0 builds seesaw_pipe's previous form): seesaw_pipe holds Q's RoPE
//   tile (tile 8) in registers, 16 per thread (251 in all, no spill), and issues that tile of Q·Kᵀ as an
//   RS wgmma (FlashMLA's form). Q·Kᵀ with both operands in shared memory at n = 64 asks for the whole
//   128 B/clock of shared-memory bandwidth (2 KB of Q + 2 KB of K per 32-cycle k-step), so every TMA
//   write landing during it slows it; the RS tile asks for half. sP1 then lives in Q's tile 8 (its shared
//   memory is free), so W1 refills K1's tile 8 with tiles 4-7 right after P1·V1R (refill's QR spans), and
//   its next Q·K1ᵀ (tiles 4-8 first) reads only tiles it refilled itself. H200, one call (ac846a5, records
//   `…-exp8a-*`): dense-compute 505.1 vs 518.5 µs, -mtp 927.9 vs 941.5, no-loads builds 450.6 vs 464.7;
//   the memory-bound and latency cases within 0.7 µs; seesawPipe.test 3/3 (dense grid 224/224).
#ifndef MLA_PIPE_QROPE_REGS
#define MLA_PIPE_QROPE_REGS 1
#endif

// MLA_PIPE_LAZY_MAX (τ in log2 units, default 8; 0 = the exact running max): seesaw_pipe moves a row's
//   running max only when a block's row max exceeds it by more than τ (FlashAttention-4's conditional
//   rescale), so after the first block the factors are exactly 1 and the warp-vote fast paths skip the O
//   and P rescales (with the exact max, a new, slightly larger maximum turns up in ~1/k of the k-th
//   block's rows, so ~40 % of a warp's blocks still rescaled). Exact: P = 2^(S·c - m) is then at most 2^τ,
//   which bf16/fp16 P holds with the same relative precision, and l, O and the LSE use the same m.
//   H200, one call (8abdd11, records `…-exp8b-*`): dense-compute 496.5 vs 508.8 µs, -mtp 899.0 vs
//   928.7, dense-b1 41.2 vs 42.3, the memory-bound cases within 1 µs; seesawPipe.test 3/3 (grid 224/224).
#ifndef MLA_PIPE_LAZY_MAX
#define MLA_PIPE_LAZY_MAX 8
#endif

// MLA_PIPE_EXP_ISSUE (a timing experiment): W0 exponentiates, packs and queues P0·V0L one k-step (16 of
//   the block's 64 columns) at a time (exp_pack_issue), so the tensor pipe starts P0·V0L after a quarter
//   of the exponentials instead of after all of them, the pack and the issue. The trace (MLA_TRACE) put
//   W0's path from S0 ready to P0·V0L queued at ~1,000 cycles a pair (~300 max and publish, ~350
//   exponentials, ~300 pack and issue) with the pipe idle through most of it. 2: W1 as well (P1·V1R,
//   sP1 stored after it is queued). Measured, not kept (H200, one call at 103202e, records `…-exp8f-*`):
//   dense-compute 490.9 (1) and 489.8 (2) vs 494.8 µs, -mtp 895.0 and 906.8 vs 898.6; the trace of 2
//   had the same pair period (5,836 vs 5,851 cycles): P0·V0L was queued 55 cycles earlier and no pair
//   got shorter, so the bubble at the top of the pair is not W0's exponentials. seesawPipe.test 4/4 on 2.
#ifndef MLA_PIPE_EXP_ISSUE
#define MLA_PIPE_EXP_ISSUE 0
#endif
// Also measured and not kept (H200, docs/dense-decode.md §23, records `…-exp21-{b,e,f}-*`): a share of
// the exponentials as a polynomial on the FMA pipe (8, 12, 16 of 32: dense-compute +2.4, +4.3, +6.3 %,
// every added instruction at the top of the pair costs its issue cycle), and P made against the running
// max held before the block beside the max's reduction (both warpgroups: +1.1 %, W1's chain got longer;
// W0 only: +0.6 %, ptxas did not interleave the chains, and that form spilled 8 bytes); W1's row maxima
// of S1 taken before it waits for W0's scale (§25, same bits; three rounds in the second of two calls:
// dense-compute 450.0-450.6 vs 450.2-450.8 µs, -mtp 844.1-848.1 vs 842.3-845.4; the first call's 0.2 %
// within the spread; seesaw_fast's W1 likewise, the memory-bound and latency cases within theirs).

// MLA_FAST_LAZY_MAX (τ, default 8; 0 = the exact running max): seesaw_fast and seesaw (the memory-bound
//   and latency shapes' kernels) with seesaw_pipe's lazy running max, so their warp-vote fast paths skip
//   the rescales after the first block. H200, one call (records `…-s9a-*`): seesaw_fast dense-compute
//   509.0 vs 531.2 µs, dense-b1 41.3 vs 42.2, dense-mem-h16 and -short-h16 within 0.3 µs.
#ifndef MLA_FAST_LAZY_MAX
#define MLA_FAST_LAZY_MAX 8
#endif

// MLA_DENSE_Q_TMA (default 1; 0 = every request's Q by ld.global, the tenth session's form): where the host
//   encoded p.tmap_q (p.q_tma), Q comes by TMA as nine SW128 boxes on sm.q_full, and the first request's
//   Q is issued before the first K blocks. The eleventh session's trace (`…-trace-11-16a74c0.txt`) had
//   CTA 0's first Q load (synchronous ld.global, issued just after 147 KB of K TMA per SM) take 10.2 k
//   cycles at dense-short-h16 (5.7 µs of a 42 µs kernel), 10.1 k at -mem-h16, 8.4 k at -b1, 15.2 k and
//   8.5 k per request at dense-compute: Q waited behind every SM's first K blocks.
//   H200, one call (records `…-exp11b-*`), against ld.global: dense-short-h16 47.2 vs 50.5 µs, -mem-h16
//   296.9 vs 299.6, -mem-h64 303.9 vs 308.8, -b1 34.1 vs 38.6, -uneven 36.5 vs 41.8, -compute 484.4 vs
//   491.1, -mtp 877.7 vs 888.6. Measured and not kept: issuing a later request's Q at the end of the
//   previous request's last pair (under its epilogue) instead of at its top: -compute 491.6, -mtp 887.3.
#ifndef MLA_DENSE_Q_TMA
#define MLA_DENSE_Q_TMA 1
#endif

// MLA_FIRST_STAGGER (default 1; 0 = both blocks of the first pair issued at once): at its start every
//   CTA asked for both blocks of its first pair at once, ~19 MB over the GPU at dense-short-h16 (~4.4 µs
//   of HBM), so a CTA's block 0 landed among every CTA's block 1: the twenty-first session's trace had
//   CTA 0's first S0 ready ~8.4 k cycles after the consumers began. Now thread 0 issues block 1 once
//   block 0's first tile has landed (block 0's other tiles are then ahead of it in the memory's queues;
//   W0 waits for block 0 anyway), where the CTA's first piece has at least MLA_FIRST_STAGGER_MIN blocks;
//   the prologue leaves it the decision and block 1's id in sm.first_stagger / first_phys1. seesaw_fast
//   and seesaw only (seesaw_pipe spilled 8 bytes with it, and its compute-bound calls have little start to
//   gain). H200 (docs/dense-decode.md §24, four calls): dense-short-h16 0.9-1.6 µs faster (45.2-46.2 µs),
//   -mem-h64 0.5-2 µs; dense-b1 0.6-0.9 µs slower with every form, also where none of its CTAs staggers
//   (its pieces have 8 blocks): the build's schedule, not traced. Measured, not kept: block 1 after block
//   0's last tile (dense-short-h16 45.7-46.5, -b1 34.3-34.6); the consumers' first loads (num_splits,
//   cache_seqlens) pulled into L1 by warp 1 before the first blocks (prefetch.global.L1): 46.7-46.8 vs
//   46.5-46.8 µs; thread 0 issuing it after the first request's Q wait instead, so the top's loads go
//   out first (§25, one call, three rounds): dense-short-h16 44.9-45.2 vs 44.8-45.1, -b1 33.1-33.5 vs
//   33.3-33.5, the same.
#ifndef MLA_FIRST_STAGGER
#define MLA_FIRST_STAGGER 1
#endif
#ifndef MLA_FIRST_STAGGER_MIN
#define MLA_FIRST_STAGGER_MIN 12
#endif

// MLA_DENSE_STORE16 (an experiment; dense suite 15/15 on it, H200): the epilogue writes O with 16-byte
//   stores. Measured mixed, not kept (one call, three builds, docs/dense-decode.md §15): dense-b1 33.0 vs
//   34.3 / 34.5 µs, -uneven 36.1 vs 36.5 / 36.6, -short-h16 47.6 vs 46.3 / 46.1, -mem-h64 294.2 vs
//   295.3 / 295.1, -compute 485.1 vs 484.1 / 484.1, -mtp 877.2 vs 877.9 / 877.2. A quad holds 8 consecutive columns of its row per
//   accumulator group; a 4 x 4 transpose inside the quad (two rounds of xor-shuffles) gives each lane 8
//   consecutive bf16 (one st.global.v4 instead of four 32-bit stores), and for fp32 partials a swap with
//   the neighbour lane gives 4 consecutive floats (one v4 instead of two v2). The trace had the l exchange
//   + store at 9.8 k cycles of dense-b1's 42 k (fp32 partials) and 9-11 k a request at dense-compute.
#ifndef MLA_DENSE_STORE16
#define MLA_DENSE_STORE16 0
#endif

// MLA_PIPE_S0_FIRST (a timing experiment): W1 queues each Q·K1ᵀ only once W0 has queued all of its
//   Q·K0ᵀ (mbarrier qk0_issued, one arrival per W0 warp), so S0 completes a whole Q·Kᵀ ahead of S1 and
//   W0's softmax runs while the tensor pipe computes S1. The trace (MLA_TRACE, eighth session) showed the
//   two Q·Kᵀ interleaved and finishing together, then the pipe idle through W0's max, exponentials and
//   pack (~700 cycles a pair without loads). Measured, not kept (H200, one call at a63ea42, docs/dense-
//   decode.md §11): dense-compute 514.2 vs 490.1 µs, -mtp 951.2 vs 884.8, no loads 460.4 vs 452.1: W1
//   then reaches its pair ~1,600 cycles late, its Q·K1ᵀ queued behind W0's, which waits on its own
//   loads (as in the seventh session's first form of seesaw_pipe, below).
#ifndef MLA_PIPE_S0_FIRST
#define MLA_PIPE_S0_FIRST 0
#endif
static_assert(!(MLA_PIPE_EXP_ISSUE && MLA_PIPE_S0_FIRST), "one seesaw_pipe order experiment at a time");

// seesaw_pipe, measured and not kept (H200, one call each against the kept form, docs/dense-decode.md
// §10): W1 queuing its next Q·K1ᵀ only after all of W0's (dense-compute 545.5 vs 537.9 µs, mtp 1006.5
// vs 974.4); without the sP0·V0R-first order (538.7, 974.5: no gain, and the early SCALE1 needs it).

// Measured and not kept (H200, one call each, docs/dense-decode.md §8): the next pair's 18 tiles
// prefetched into L2 (cp.async.bulk.prefetch.tensor) after W0's Q·K0ᵀ or at the top of the iteration,
// and the K tiles loaded with L2::evict_normal: all slower, the memory-bound cases by 14-24 %; W1 taking
// its row maxima before it waits for W0's scales: no faster (546.2 vs 545.7 µs).

// MLA_TRACE=N (a diagnostic build, not a shipped option): seesaw_pipe records clock64 at its schedule's
// events, from lane 0 of each warpgroup's first warp, for the first N pairs of CTA (0, 0, 0) in every
// launch (the last launch's stay), into mla_trace[warpgroup][pair][event]; scripts/device/traceDense.mjs
// runs a case and prints the timeline. The events are listed there (EVENTS, by TRACE index).
// MLA_TRACE_PART=z traces CTA (0, 0, z) instead: part 1 begins with split 1 of a two-piece request at
// dense-compute-mtp (dense-compute has no split request since the dense scheduler costs a piece 8
// blocks, docs/dense-decode.md §21), whose count (store, barrier, atomic) CTA 0 never shows.
#ifdef MLA_TRACE
#ifndef MLA_TRACE_PART
#define MLA_TRACE_PART 0
#endif
// MLA_TRACE_MB=x traces m-block x (seesaw_mc: rank 1 of the cluster with x = 1).
#ifndef MLA_TRACE_MB
#define MLA_TRACE_MB 0
#endif
constexpr int TRACE_EVENTS = 16, TRACE_REQS = 8;
extern "C" {
__device__ long long mla_trace[2][MLA_TRACE][TRACE_EVENTS];
// Per request of CTA 0 (first TRACE_REQS), warpgroup 0: clock64 at the request's top, Q loaded, its
// pairs done, output stored, then within the epilogue: the l exchange passed, the stores (or the merge)
// issued, and (seesaw, seesaw_fast: recording it per pair spilled seesaw_pipe's trace builds) the
// request's first S0 ready, its first K tiles landed and multiplied; and per warpgroup {clock64,
// globaltimer} at the consumer's start and end.
__device__ long long mla_trace_req[TRACE_REQS][7];
__device__ long long mla_trace_span[2][4];
// Per CTA (linear index, first 1024): %globaltimer when it starts and when its consumer is done, and
// the SM it ran on (%smid).
__device__ long long mla_trace_cta[1024][3];
// seesaw_mc's rank 1 (MLA_TRACE_MB=1), per traced pair and refill group: clock64 before and after its wait
// for rank 0's release.
__device__ long long mla_trace_mc[MLA_TRACE][5][2];
}
#define TRACE(ev)                                                                               \
  do {                                                                                          \
    if (trace_pair < MLA_TRACE && lane == 0 && warp_u == 0) mla_trace[wg][trace_pair][ev] = clock64(); \
  } while (0)
#else
#define TRACE(ev) \
  do {            \
  } while (0)
#endif

struct __align__(1024) Smem {
  uint8_t q[QK_BYTES];
  // K0 (even block of the pair), K1 (odd block). Tile 8 (RoPE dims) is not part of V, so once Q·Kᵀ of a
  // block is done its space holds that block's P tile (sP0 in K0, sP1 in K1) for the other warpgroup.
  uint8_t k[2][QK_BYTES];
  float m[64];               // running max per row (log2 domain)
  float scale0[64];
  float scale1[64];
  float l[2][64];            // final row sums of each warpgroup
  uint64_t kfull[2][NUM_TILES];
  // Unused since seesaw_mc's first handover (rank 0 waiting for both releases) was replaced; kept, and
  // still initialised, so the other kernels' shared-memory layout and SASS stay the measured ones.
  uint64_t kempty[3];
  // MLA_DENSE_WG_MBARRIERS only (unused, and not initialised, otherwise):
  uint64_t wg_free[5];  // per refill group: one arrival per warp of the warpgroup that read it last
  uint64_t wg_sync[2];  // per warpgroup: all 128 threads
  // The once-per-request exchange of sm.l: all 256 consumer threads arrive and wait. An mbarrier, not
  // a 256-thread named barrier: racecheck reported that exchange under bar.sync (it does not model the
  // bar.arrive of the seesaw's other barriers) and is silent with this one, at the same speed (H200:
  // dense-compute 535.2 vs 532.9 µs, dense-mem-h16 300.9 vs 301.9; docs/reliability.md §3).
  uint64_t l_ready;
  uint64_t qk0_issued;  // one arrival per W0 warp per pair (MLA_DENSE_QK0_FIRST)
  uint64_t pv0r_issued;  // seesaw_pipe: one arrival per W1 warp per pair once it queued sP0·V0R
  uint64_t q_full;       // q_by_tma: the request's nine Q boxes landed (one arrival with their bytes)
  int pair_done;         // merge_pairs: thread 0's reading of a pair's merge flag, for the other consumers
  // seesaw_mc: per refill group, rank 1's barrier that rank 0's release arrives on.
  uint64_t mc_free[5];
  // MLA_FIRST_STAGGER: thread 0's note to itself, from the prologue to the consumer's start, of whether
  // block 1 of the first pair waits, and its physical block (held in registers across the barrier they
  // spilled 16 bytes; read again from global memory they would wait behind the first blocks).
  int first_stagger, first_phys1;
};
constexpr int SMEM_BYTES = sizeof(Smem) + 1024;
static_assert(SMEM_BYTES <= 232448, "fits the opt-in shared memory of an H100/H200 SM");

// The P tile of block `stage` lives in that block's RoPE tile (see Smem).
__device__ __forceinline__ uint8_t* p_tile(Smem& sm, int stage) { return sm.k[stage] + (NUM_TILES - 1) * TILE_BYTES; }
// seesaw_pipe's sP1: in Q's tile 8 when that tile is held in registers (QR), else in K1's.
template <bool QR>
__device__ __forceinline__ uint8_t* p1_tile(Smem& sm) { return QR ? sm.q + (NUM_TILES - 1) * TILE_BYTES : p_tile(sm, 1); }

// S = Q·Kᵀ for one 64-token block, waiting on each tile's barrier just before its four k-steps. With
// `arrive_before` < NUM_TILES (W0, MLA_DENSE_QK0_FIRST), each warp's lane 0 arrives on qk0_issued once
// the tiles before that one are queued.
template <typename T>
__device__ __forceinline__ void compute_s(float (&s)[32], Smem& sm, int stage, uint32_t phase, int lane = 0, int arrive_before = NUM_TILES) {
  qk_block<T>(s, ptx::smem_addr(sm.q), ptx::smem_addr(sm.k[stage]), [&](int t) {
    if (t == arrive_before && lane == 0) ptx::mbarrier_arrive(&sm.qk0_issued);
    ptx::mbarrier_wait(&sm.kfull[stage][t], phase);
  });
}

// Step 2 for W0: the running max m with S0's row maxima, s0 = 2^(m_old - m0), P0 = 2^(S0 - m0) in s; m0
// and s0 published for W1.
template <bool FAST>
__device__ __forceinline__ void softmax_w0(float (&s)[32], float (&m)[2], float (&l)[2], float (&scale0)[2], Smem& sm, int warp_in_wg, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
#ifdef MLA_ABLATE_SOFTMAX  // timing experiment only: P = S, no max, no exponentials (wrong outputs)
    scale0[half] = 1.0f;
    if (lane % 4 == 0) sm.m[r] = m[half], sm.scale0[r] = 1.0f;
    continue;
#endif
    const float m_old = m[half];  // == sm.m[r], written by W1 last iteration
    const float mx = row_max<FAST>(s, half);
    const float m_new = MLA_FAST_LAZY_MAX > 0 ? (mx > m_old + float(MLA_FAST_LAZY_MAX) ? mx : m_old) : fmaxf(m_old, mx);
    scale0[half] = ptx::exp2_approx(m_old - m_new);
    l[half] = l[half] * scale0[half] + exponentiate(s, half, m_new);
    m[half] = m_new;
    if (lane % 4 == 0) sm.m[r] = m_new, sm.scale0[r] = scale0[half];
  }
}

// Step 2 for W1 (after W0 published m0, s0): m1 = max(m0, rowmax S1), s1 = 2^(m0 - m1), P1 = 2^(S1 - m1)
// in s; scale01 = s0·s1 for O_R; m1 and s1 published for W0.
template <bool FAST>
__device__ __forceinline__ void softmax_w1(float (&s)[32], float (&m)[2], float (&l)[2], float (&scale01)[2], Smem& sm, int warp_in_wg, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
#ifdef MLA_ABLATE_SOFTMAX
    scale01[half] = 1.0f;
    __syncwarp();
    if (lane % 4 == 0) sm.scale1[r] = 1.0f;
    continue;
#endif
    const float m0 = sm.m[r], s0 = sm.scale0[r];
    const float mx = row_max<FAST>(s, half);
    const float m_new = MLA_FAST_LAZY_MAX > 0 ? (mx > m0 + float(MLA_FAST_LAZY_MAX) ? mx : m0) : fmaxf(m0, mx);
    const float s1 = ptx::exp2_approx(m0 - m_new);
    scale01[half] = s0 * s1;
    l[half] = l[half] * scale01[half] + exponentiate(s, half, m_new);
    m[half] = m_new;
    __syncwarp();  // the warp's four readers of sm.m[r] (above) read before lane 0 overwrites it
    if (lane % 4 == 0) sm.m[r] = m_new, sm.scale1[r] = s1;
  }
}

// Step 4 for W0 (after W1 published s1): its sum and max follow W1's.
__device__ __forceinline__ void take_scale1(float (&m)[2], float (&l)[2], float (&scale1)[2], const Smem& sm, int warp_in_wg, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
    scale1[half] = sm.scale1[r];
    m[half] = sm.m[r];
    l[half] *= scale1[half];
  }
}

// seesaw_pipe: queues S (+)= Q·Kᵀ over `count` tiles of block `stage` from tile `first` on, wrapping
// from tile 8 to tile 0, each once its TMA load (parity `phase`) has landed, as one commit group that
// is not waited for here. `starts`: the first of them overwrites S.
template <typename T>
__device__ __forceinline__ void qk_issue(float (&s)[32], Smem& sm, int stage, uint32_t phase, int first, int count, bool starts, const uint32_t (&qrope)[4][4]) {
  const uint32_t q = ptx::smem_addr(sm.q), k = ptx::smem_addr(sm.k[stage]);
  ptx::wgmma_fence();
#pragma unroll
  for (int i = 0; i < count; ++i) {
    const int t = (first + i) % NUM_TILES;
    ptx::mbarrier_wait(&sm.kfull[stage][t], phase);
    if (MLA_PIPE_QROPE_REGS && t == NUM_TILES - 1) {
      // Never the first tile of a block's sum (W0 reads it last, W1 fifth), so it accumulates.
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) ptx::wgmma_m64n64k16_rs<T>(s, qrope[kk], sw128_at(k, t * TILE_BYTES + kk * 32, 16));
    } else {
      qk_tile<T>(s, q, k, t, starts && i == 0);
    }
  }
  ptx::wgmma_commit();
}

// MLA_PIPE_QROPE_REGS: this thread's A fragments of Q's tile 8 (k-step kk, register x: row
// 16·warp + lane/4 + 8·(x & 1), dims 16·kk + 8·(x >> 1) + 2·(lane % 4) + {0, 1}), read from its SW128 copy.
__device__ __forceinline__ void load_qrope(uint32_t (&qrope)[4][4], const Smem& sm, int warp_in_wg, int lane) {
  const uint8_t* tile = sm.q + (NUM_TILES - 1) * TILE_BYTES;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int r = 16 * warp_in_wg + lane / 4 + 8 * (x & 1);
      qrope[kk][x] = *reinterpret_cast<const uint32_t*>(tile + sw128(r, 2 * kk + (x >> 1)) + 4 * (lane % 4));
    }
}

// seesaw_pipe's softmax step in two halves, so a warpgroup publishes its new max and scale before its
// exponentials: new_max takes S unscaled (masked entries -inf), the row maxima times `sc` = scale_log2
// with the running max m_old, and the factor 2^(m_old - m_new) for what was summed against m_old;
// exp_sum then makes P = 2^(S·sc - m) in place (one fma per element instead of seesaw_fast's multiply
// and subtract) and l = l·scale + rowsum(P).
template <bool FAST>
__device__ __forceinline__ void new_max(const float (&s)[32], const float (&m_old)[2], float (&m_new)[2], float (&scale)[2], float sc) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float mx = row_max<FAST>(s, half) * sc;
    if constexpr (MLA_PIPE_LAZY_MAX > 0) m_new[half] = mx > m_old[half] + float(MLA_PIPE_LAZY_MAX) ? mx : m_old[half];
    else m_new[half] = fmaxf(m_old[half], mx);
    scale[half] = ptx::exp2_approx(m_old[half] - m_new[half]);
  }
}
__device__ __forceinline__ void exp_sum(float (&s)[32], float (&l)[2], const float (&m)[2], const float (&scale)[2], float sc) {
#pragma unroll
  for (int half = 0; half < 2; ++half) l[half] = l[half] * scale[half] + exponentiate_scaled(s, half, m[half], sc);
}

// MLA_PIPE_EXP_ISSUE: exp_sum, pack_p and pv_rs over V's left half of `kblock` in one pass, a k-step
// (columns 16j..16j+15: elements 8j..8j+7) at a time, each queued on the tensor pipe once packed. The
// sums run in exp_sum's order, so l and P are the same bits; `a` keeps P for the hand-over.
template <typename T>
__device__ __forceinline__ void exp_pack_issue(float (&o)[128], uint32_t (&a)[4][4], float (&s)[32], float (&l)[2], const float (&m)[2],
                                               const float (&scale)[2], float sc, const uint8_t* kblock) {
  const uint32_t base = ptx::smem_addr(kblock);
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int i = 8 * j + 2 * x, h = x & 1;
      s[i] = ptx::exp2_approx(fmaf(s[i], sc, -m[h]));
      s[i + 1] = ptx::exp2_approx(fmaf(s[i + 1], sc, -m[h]));
      sum[h] += s[i] + s[i + 1];
      a[j][x] = ptx::pack2<T>(s[i], s[i + 1]);
    }
    ptx::wgmma_fence();
    ptx::wgmma_m64n256k16_rs_transb<T>(o, a[j], sw128_at(base, j * 2048, TILE_BYTES));
  }
  ptx::wgmma_commit();
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = l[h] * scale[h] + sum[h];
}

// Scales scores to the log2 domain (SCALE; seesaw_pipe scales inside its exponent instead) and masks
// tokens at or past each row's limit (-inf). FAST: when no row of the warp ends inside this block (the
// common case), the per-element compare is skipped.
template <bool FAST, bool SCALE = true>
__device__ __forceinline__ void mask_scale(float (&s)[32], const DenseParams& p, int blk, int lane, const int (&limit)[2]) {
#ifdef MLA_ABLATE_SOFTMAX
  return;
#endif
  const int tok0 = blk * BLOCK_N + 2 * (lane % 4);
  if constexpr (FAST) {
    if (__all_sync(0xFFFFFFFFu, min(limit[0], limit[1]) >= (blk + 1) * BLOCK_N)) {
      if constexpr (SCALE) {
#pragma unroll
        for (int i = 0; i < 32; ++i) s[i] *= p.scale_log2;
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int tok = tok0 + 8 * (i >> 2) + (i & 1);
    s[i] = tok < limit[(i >> 1) & 1] ? (SCALE ? s[i] * p.scale_log2 : s[i]) : MASKED;
  }
}

// O_half *= f per row. FAST: skipped when every factor of the warp is exactly 1 (the running max did not
// move, which is most blocks after the first few), so the multiply by 1 is not on the critical path.
template <bool FAST>
__device__ __forceinline__ void rescale_o(float (&o)[128], const float (&f)[2]) {
  if constexpr (FAST) {
    if (__all_sync(0xFFFFFFFFu, f[0] == 1.0f && f[1] == 1.0f)) return;
  }
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] *= f[(i >> 1) & 1];
}

// Multiplies packed 16-bit P fragments by a per-row factor (rows alternate with x & 1); FAST skips a
// warp whose factors are all 1.
template <typename T, bool FAST>
__device__ __forceinline__ void scale_p(uint32_t (&a)[4][4], const float (&f)[2]) {
  if constexpr (FAST) {
    if (__all_sync(0xFFFFFFFFu, f[0] == 1.0f && f[1] == 1.0f)) return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      float lo, hi;
      if constexpr (T::is_fp16) {
        const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&a[j][x]));
        lo = v.x, hi = v.y;
      } else {
        const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a[j][x]));
        lo = v.x, hi = v.y;
      }
      a[j][x] = ptx::pack2<T>(lo * f[x & 1], hi * f[x & 1]);
    }
}

// O_half += A·V where A is P in registers (RS) and V = 4 tiles of this block starting at first_tile.
template <typename T>
__device__ __forceinline__ void pv_rs(float (&o)[128], const uint32_t (&a)[4][4], const uint8_t* kblock, int first_tile) {
  const uint32_t base = ptx::smem_addr(kblock) + first_tile * TILE_BYTES;
  ptx::wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; ++j) ptx::wgmma_m64n256k16_rs_transb<T>(o, a[j], sw128_at(base, j * 2048, TILE_BYTES));
  ptx::wgmma_commit();
}

// O_half += sP·V with P from shared memory (SS).
template <typename T>
__device__ __forceinline__ void pv_ss(float (&o)[128], const uint8_t* ptile, const uint8_t* kblock, int first_tile) {
  const uint32_t pa = ptx::smem_addr(ptile), base = ptx::smem_addr(kblock) + first_tile * TILE_BYTES;
  ptx::wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; ++j)
    ptx::wgmma_m64n256k16_ss_transb<T>(o, sw128_at(pa, j * 32, 16), sw128_at(base, j * 2048, TILE_BYTES));
  ptx::wgmma_commit();
}

template <typename T>
__device__ __forceinline__ void store_out(const DenseParams& p, float (&o)[128], int req, int m_block, int hk, int wg, int warp_in_wg,
                                          int lane, bool is_split, int slot, const float (&L)[2], const float (&m)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int flat = m_block * BLOCK_M + 16 * warp_in_wg + lane / 4 + 8 * half;
    // MLA_DENSE_STORE16 shuffles across the warp: every lane runs it, rows past the end only do not store.
    const bool row_ok = flat < p.rows_per_kv;
    if (!MLA_DENSE_STORE16 && !row_ok) continue;
    const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
    const bool empty = L[half] == 0.0f;  // a NaN L propagates (see dense_decode_sm90.cu)
    const float inv = empty ? 0.0f : 1.0f / L[half];
    if (!is_split) {
      uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * D_V;
      if constexpr (MLA_DENSE_STORE16) {
        // Group g: accumulator column groups c = 4g .. 4g + 3 (columns 8c + 2·(lane % 4) + {0, 1}); after
        // the transpose lane t holds the four words of column group 4g + t.
        const bool t0 = lane & 1, t1 = lane & 2;
#pragma unroll
        for (int g = 0; g < 8; ++g) {
          uint32_t w[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int i = 16 * g + 4 * j + 2 * half;
            w[j] = ptx::pack2<T>(o[i] * inv, o[i + 1] * inv);
          }
          // Round 1 swaps index bit 0 with lane bit 0, round 2 index bit 1 with lane bit 1.
#pragma unroll
          for (int j1 = 0; j1 < 2; ++j1) {
            const uint32_t got = __shfl_xor_sync(0xFFFFFFFFu, t0 ? w[2 * j1] : w[2 * j1 + 1], 1);
            if (t0) w[2 * j1] = got;
            else w[2 * j1 + 1] = got;
          }
#pragma unroll
          for (int j0 = 0; j0 < 2; ++j0) {
            const uint32_t got = __shfl_xor_sync(0xFFFFFFFFu, t1 ? w[j0] : w[2 + j0], 2);
            if (t1) w[j0] = got;
            else w[2 + j0] = got;
          }
          if (row_ok) *reinterpret_cast<uint4*>(out + wg * 256 + 8 * (4 * g + lane % 4)) = make_uint4(w[0], w[1], w[2], w[3]);
        }
      } else {
#pragma unroll
        for (int i = 2 * half; i < 128; i += 4)
          *reinterpret_cast<uint32_t*>(out + wg * 256 + 8 * (i >> 2) + 2 * (lane % 4)) = ptx::pack2<T>(o[i] * inv, o[i + 1] * inv);
      }
      if (wg == 0 && lane % 4 == 0 && row_ok)
        p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = empty ? INFINITY : (__log2f(L[half]) + m[half]) * LN2;
    } else {
      const long long row = (static_cast<long long>(slot) * p.h_kv + hk) * p.rows_per_kv + flat;
      float* oa = p.o_accum + row * D_V;
      if constexpr (MLA_DENSE_STORE16) {
        // Column groups c = 2u, 2u + 1: lane t keeps group 2u + t0's pair and takes its neighbour's, the
        // four floats 8c + 4·t1 .. + 3.
        const bool t0 = lane & 1;
#pragma unroll
        for (int u = 0; u < 16; ++u) {
          const int ia = 8 * u + 2 * half, ib = ia + 4;  // o indices of groups 2u and 2u + 1
          const float a0 = o[ia] * inv, a1 = o[ia + 1] * inv, b0 = o[ib] * inv, b1 = o[ib + 1] * inv;
          const float g0 = __shfl_xor_sync(0xFFFFFFFFu, t0 ? a0 : b0, 1), g1 = __shfl_xor_sync(0xFFFFFFFFu, t0 ? a1 : b1, 1);
          const float4 v = t0 ? make_float4(g0, g1, b0, b1) : make_float4(a0, a1, g0, g1);
          if (row_ok) *reinterpret_cast<float4*>(oa + wg * 256 + 8 * (2 * u + (lane & 1)) + 4 * ((lane >> 1) & 1)) = v;
        }
      } else {
#pragma unroll
        for (int i = 2 * half; i < 128; i += 4)
          *reinterpret_cast<float2*>(oa + wg * 256 + 8 * (i >> 2) + 2 * (lane % 4)) = make_float2(o[i] * inv, o[i + 1] * inv);
      }
      if (wg == 0 && lane % 4 == 0 && row_ok) p.lse_accum[row] = empty ? -INFINITY : __log2f(L[half]) + m[half];
    }
  }
}

// DenseParams::merge_pairs: the piece of a two-piece request that finishes second writes out and lse
// itself, from the other piece's partial (o_accum / lse_accum rows of `other_slot`, released by that CTA
// through merge_flags) and its own O, L and m in registers, with the combine's formula in split order
// (split_merge.cuh), so the bits are those the combine would write. The partial is read with
// ld.global.cg (another SM wrote it during this kernel) in batches of 8 column pairs, two in flight
// (two of 16 made seesaw_fast spill, and seesaw_pipe, which did not, 0.8 % slower at dense-compute):
// its first form (the lse, then each batch, waited for one after the other) took ~20 k cycles at
// dense-compute against ~9 k for the plain store (the trace, docs/dense-decode.md §20).
template <typename T, int LOADS = 8>
__device__ __forceinline__ void merge_pair_out(const DenseParams& p, const float (&o)[128], int req, int m_block, int hk, int wg, int warp_in_wg,
                                               int lane, int own_slot, int other_slot, const float (&L)[2], const float (&m)[2]) {
  const bool own_first = own_slot < other_slot;
  const int col = wg * 256 + 2 * (lane % 4);  // + 8k: the accumulator's column pairs (store_out)
  bool ok[2];
  const float* po[2];
  float other[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int flat = m_block * BLOCK_M + 16 * warp_in_wg + lane / 4 + 8 * half;
    ok[half] = flat < p.rows_per_kv;
    const long long row = (static_cast<long long>(other_slot) * p.h_kv + hk) * p.rows_per_kv + (ok[half] ? flat : 0);
    po[half] = p.o_accum + row * D_V + col;
    other[half] = ok[half] ? ptx::ld_cg_f32(p.lse_accum + row) : 0.0f;
  }
  // Batch j: half j / PER_HALF, column pairs LOADS · (j % PER_HALF) onwards.
  constexpr int PER_HALF = 32 / LOADS, BATCHES = 2 * PER_HALF;
  auto load = [&](float2 (&v)[LOADS], int j) {
    const int half = j / PER_HALF;
#pragma unroll
    for (int k = 0; k < LOADS; ++k) v[k] = ok[half] ? ptx::ld_cg_f32x2(po[half] + 8 * (LOADS * (j % PER_HALF) + k)) : make_float2(0.0f, 0.0f);
  };
  float2 v[2][LOADS];
  load(v[0], 0);
  load(v[1], 1);
  float inv[2], sum[2], w[2][FEW_SPLITS];
  uint16_t* out[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int flat = m_block * BLOCK_M + 16 * warp_in_wg + lane / 4 + 8 * half;
    const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
    const bool empty = L[half] == 0.0f;
    inv[half] = empty ? 0.0f : 1.0f / L[half];
    const float own = empty ? -INFINITY : __log2f(L[half]) + m[half];  // this piece's lse2, as store_out writes it
    const float lse2[FEW_SPLITS] = {own_first ? own : other[half], own_first ? other[half] : own, -INFINITY};
    const float G = merged_lse2(lse2, sum[half]);
#pragma unroll
    for (int i = 0; i < FEW_SPLITS; ++i) w[half][i] = exp2f(lse2[i] - G);
    out[half] = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * D_V + col;
    if (ok[half] && wg == 0 && lane % 4 == 0) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = G * LN2;
  }
  auto merge = [&](const float2 (&y)[LOADS], int j) {
    const int half = j / PER_HALF;
    if (!ok[half]) return;
#pragma unroll
    for (int k = 0; k < LOADS; ++k) {
      const int c = LOADS * (j % PER_HALF) + k, i = 2 * half + 4 * c;
      const float2 x = make_float2(o[i] * inv[half], o[i + 1] * inv[half]);
      const float2 a = own_first ? x : y[k], b = own_first ? y[k] : x;
      float2 acc = make_float2(0.0f, 0.0f);
      if (sum[half] != 0.0f) {  // no key in either piece: 0 (the combine's rule)
        acc.x += w[half][0] * a.x, acc.y += w[half][0] * a.y;
        acc.x += w[half][1] * b.x, acc.y += w[half][1] * b.y;
        acc.x += w[half][2] * 0.0f, acc.y += w[half][2] * 0.0f;  // the combine's empty third slot
      }
      *reinterpret_cast<uint32_t*>(out[half] + 8 * c) = ptx::pack2<T>(acc.x, acc.y);
    }
  };
#pragma unroll
  for (int j = 0; j < BATCHES; ++j) {
    merge(v[j % 2], j);
    if (j + 2 < BATCHES) load(v[j % 2], j + 2);
  }
}

// Whether the combine has work from this piece: split, and not a pair this kernel merges (merge_pairs).
__device__ __forceinline__ bool piece_needs_combine(const DenseParams& p, const SchedMeta& meta, int req) {
  return piece_is_split(meta, req) && !(p.merge_pairs != 0 && p.num_splits[req + 1] - p.num_splits[req] == 2);
}

// The next pair's two block-table lookups are issued at the top of the iteration, with the pair, not by
// lane 0 right before each refill's TMA (dependent loads of cache_seqlens and block_table after a
// barrier, five per pair, on the path from a tile being freed to its refill landing). H200, one call:
// dense-compute 538.1 vs 550.9 µs, dense-compute-mtp 1032.8 vs 1054.2, dense-mem-h16 300.6 vs 305.0.

// The pair of blocks after (req, blk0) in this CTA's pieces, or req > end_req_idx when there is none.
// phys: the blocks' physical ids (with_phys).
struct Pair {
  int req, blk0, end_blk;
  int phys[2];
};

__device__ __forceinline__ int piece_end(const DenseParams& p, const SchedMeta& meta, int req) {
  return piece_end_block(meta, req, p.cache_seqlens[req]);
}

// Physical block of `blk`; -1 past the piece (odd count), the table or the length: TMA then fetches
// zeros (out-of-bounds fill), and those rows are masked.
__device__ __forceinline__ int phys_block(const DenseParams& p, int req, int blk, int end_blk) {
  return blk < end_blk ? table_block(p, req, blk, p.cache_seqlens[req]) : -1;
}

__device__ __forceinline__ Pair with_phys(const DenseParams& p, Pair pr) {
#pragma unroll
  for (int st = 0; st < 2; ++st) pr.phys[st] = pr.end_blk == 0 ? -1 : phys_block(p, pr.req, pr.blk0 + st, pr.end_blk);
  return pr;
}

__device__ __forceinline__ Pair next_pair(const DenseParams& p, const SchedMeta& meta, Pair cur) {
  if (cur.blk0 + 2 < cur.end_blk) return with_phys(p, {cur.req, cur.blk0 + 2, cur.end_blk, {}});
  const int req = cur.req + 1;
  if (req > meta.end_req_idx) return {req, 0, 0, {-1, -1}};
  return with_phys(p, {req, 0, piece_end(p, meta, req), {}});
}

// Issues the TMA of request req's m-block of Q (64 flattened rows of KV head hk) into sQ: nine SW128 boxes
// of 64 rows x 64 dims, the layout load_q_dense writes. A box spans one token's heads (heads_per_kv a
// multiple of 64) or 64 / heads_per_kv tokens; rows past s_q are out of the tensor, so zero.
__device__ __forceinline__ void load_q_tma(const DenseParams& p, Smem& sm, int req, int m_block, int hk) {
  const int flat = m_block * BLOCK_M;
  ptx::mbarrier_arrive_expect_tx(&sm.q_full, NUM_TILES * TILE_BYTES);
  for (int t = 0; t < NUM_TILES; ++t)
    ptx::tma_load_5d(sm.q + t * TILE_BYTES, &p.tmap_q, &sm.q_full, t * 64, flat % p.heads_per_kv, hk, flat / p.heads_per_kv, req);
}

// Issues TMA loads of tiles [t_begin, t_end) of the pair's block `stage` into K buffer `stage`.
__device__ __forceinline__ void load_tiles(const DenseParams& p, Smem& sm, const Pair& pr, int stage, int t_begin, int t_end, int hk, uint64_t policy, bool first = false) {
  if (pr.end_blk == 0) return;  // no next pair
  const int phys = pr.phys[stage];
#ifdef MLA_ABLATE_LOADS  // timing experiment: compute on the first pair's data, never wait for memory
  if (!first) {
    for (int t = t_begin; t < t_end; ++t) ptx::mbarrier_arrive(&sm.kfull[stage][t]);
    return;
  }
#endif
  for (int t = t_begin; t < t_end; ++t) {
    ptx::mbarrier_arrive_expect_tx(&sm.kfull[stage][t], TILE_BYTES);
    ptx::tma_load_4d(sm.k[stage] + t * TILE_BYTES, &p.tmap_kv, &sm.kfull[stage][t], t * 64, hk, 0, phys, policy);
  }
}

// The three refill groups: tiles that become free together, released by the warpgroup that read them last.
enum : int { REFILL_K0_LEFT = 0, REFILL_K1_LEFT_P = 1, REFILL_RIGHT = 2 };
// MLA_DENSE_V1R_EARLY only (not with multicast): REFILL_RIGHT in two parts, K1's tiles 4-7 (V1R) and
// K0's tiles 4-8 (V0R, sP0).
enum : int { REFILL_K1_RIGHT = 3, REFILL_K0_RIGHT_P = 4 };

// Issues (or, with multicast, releases) refill group g for the pair `next`, called by one whole warp of
// the releasing warpgroup (warp-uniform, after the warpgroup's named barrier). Without multicast lane 0
// issues the CTA's own TMA. With multicast (MC: a cluster of the two m-block CTAs of one KV head, which
// walk the same blocks) lane 0 expects the tiles on its CTA's own barriers; rank 0 then arrives on rank
// 1's mc_free barrier of the group (one-way: nothing comes back, so rank 0 never waits), and rank 1's
// warp waits on that barrier, locally, and multicasts each tile once for both (each K line read once
// from L2: in scripts/device/l2-probe.cu the pair of CTAs received 6.2 TB/s, multicast 7.9;
// docs/dense-decode.md §21). Rank 1 has more to do, so it tends to release second and its wait is
// short (~80 cycles in the trace). A copy landing before rank 0's expect_tx leaves the barrier's
// tx-count negative with its arrival pending, so the phase cannot complete early.
// MLA_MC_PREFETCH (seesaw_mc; default 1): rank 0, which releases each group before rank 1 multicasts
// it, asks L2 for the group's tiles as it releases them (H200: dense-compute 483.8 against 494.6 µs).
#ifndef MLA_MC_PREFETCH
#define MLA_MC_PREFETCH 1
#endif
template <bool MC, bool QR = false>
__device__ __forceinline__ void refill(const DenseParams& p, Smem& sm, const Pair& next, int g, int hk, uint64_t policy, int lane, uint32_t& mc_phase
#ifdef MLA_TRACE
                                       , long long* tr
#endif
) {
  struct Span { int stage, t0, t1; };
  // Rows 3-4 (REFILL_RIGHT in two parts) are used by MLA_DENSE_V1R_EARLY and seesaw_pipe. QR (seesaw_pipe
  // with MLA_PIPE_QROPE_REGS): sP1 lives in Q's tile 8, so K1's tile 8 goes with tiles 4-7 (row 3, W1's,
  // after P1·V1R) instead of with 0-3 (row 1, W0's). Keep five rows:
  // with three, nvcc orders registers differently in the PTX and ptxas allocates every kernel here
  // differently from the builds that were measured.
  const Span spans[5][2] = {{{0, 0, 4}, {0, 0, 0}}, {{1, 0, 4}, {1, QR ? 0 : NUM_TILES - 1, QR ? 0 : NUM_TILES}}, {{0, 4, NUM_TILES}, {1, 4, NUM_TILES - 1}},
                            {{1, 4, QR ? NUM_TILES : NUM_TILES - 1}, {1, 0, 0}}, {{0, 4, NUM_TILES}, {0, 0, 0}}};
  if constexpr (!MC) {
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < 2; ++i) load_tiles(p, sm, next, spans[g][i].stage, spans[g][i].t0, spans[g][i].t1, hk, policy);
    }
  } else {
    // Both conditions are uniform; the shuffles let ptxas see it (a branch on the rank made ptxas
    // serialize the wgmmas).
    if (__shfl_sync(0xFFFFFFFFu, next.end_blk, 0) == 0) return;  // no next pair: the two CTAs walk alike
    const bool issuer = __shfl_sync(0xFFFFFFFFu, ptx::cluster_ctarank(), 0) == 1;
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
        for (int t = spans[g][i].t0; t < spans[g][i].t1; ++t) ptx::mbarrier_arrive_expect_tx(&sm.kfull[spans[g][i].stage][t], TILE_BYTES);
    }
    if (!issuer) {
      if (lane == 0) {
        ptx::mbarrier_arrive_remote_relaxed(ptx::mapa_shared(ptx::smem_addr(&sm.mc_free[g]), 1));
        if constexpr (MLA_MC_PREFETCH) {
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int stage = spans[g][i].stage, phys = next.phys[stage];
            for (int t = spans[g][i].t0; t < spans[g][i].t1; ++t) ptx::tma_prefetch_4d(&p.tmap_kv, t * 64, hk, 0, phys, policy);
          }
        }
      }
      return;
    }
#ifdef MLA_TRACE
    if (lane == 0 && tr != nullptr) tr[0] = clock64();
#endif
    ptx::mbarrier_wait_cluster(&sm.mc_free[g], (mc_phase >> g) & 1u);  // rank 0 is done reading too
    mc_phase ^= 1u << g;
#ifdef MLA_TRACE
    if (lane == 0 && tr != nullptr) tr[1] = clock64();
#endif
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int stage = spans[g][i].stage, phys = next.phys[stage];
        for (int t = spans[g][i].t0; t < spans[g][i].t1; ++t)
          ptx::tma_load_4d_multicast(sm.k[stage] + t * TILE_BYTES, &p.tmap_kv, &sm.kfull[stage][t], t * 64, hk, 0, phys, 0x3, policy);
      }
    }
  }
}

template <typename T, bool FAST, bool MC, bool PIPE>
__device__ __forceinline__ void consumer(const DenseParams& p, Smem& sm, const SchedMeta& meta, int m_block, int hk) {
  // wg comes from a shuffle so ptxas can see it is warp-uniform: with a plain threadIdx.x / 128 it treats
  // the W0/W1 branches as divergent, injects warpgroup.arrive there and serializes every wgmma (C7520),
  // which halves the tensor-core rate.
  const int tid = threadIdx.x, wg = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 128), 0);
  const int t128 = tid % 128, warp_in_wg = t128 / 32, lane = tid % 32;
  const int warp_u = __shfl_sync(0xFFFFFFFFu, warp_in_wg, 0);  // warp-uniform for ptxas (see wg)
  const uint64_t policy = ptx::policy_evict_first();
  uint32_t phase = 0;  // flips once per iteration (pair of blocks) for every barrier
  uint32_t mc_phase = 0;  // seesaw_mc, rank 1's releasing warps: parity of each refill group's mc_free
  // A warpgroup's own barrier (`bar`: BAR_WG0 or BAR_WG1, the same warpgroup as `wg`), and its release of
  // refill group g after which warp 0 refills it for `next`: named barriers, or (MLA_DENSE_WG_MBARRIERS)
  // mbarriers, each completed once per iteration (group) or per use (sync).
  uint32_t wg_sync_phase = 0;
  uint32_t l_phase = 0;  // parity of sm.l_ready, flips once per request
  uint32_t q_phase = 0;  // parity of sm.q_full, flips once per request (q_by_tma)
  const bool q_by_tma = MLA_DENSE_Q_TMA && p.q_tma;
#ifdef MLA_TRACE
  const bool trace_cta = blockIdx.x == MLA_TRACE_MB && blockIdx.y == 0 && blockIdx.z == MLA_TRACE_PART;
  int trace_pair = trace_cta ? 0 : MLA_TRACE, trace_req = 0;
  auto trace_req_event = [&](int ev) {
    if (trace_cta && trace_req < TRACE_REQS && wg == 0 && lane == 0 && warp_u == 0) mla_trace_req[trace_req][ev] = clock64();
  };
  if (trace_cta && lane == 0 && warp_u == 0) mla_trace_span[wg][0] = clock64(), mla_trace_span[wg][1] = ptx::globaltimer();
#define TRACE_REQ(ev) trace_req_event(ev)
#else
#define TRACE_REQ(ev) \
  do {                \
  } while (0)
#endif
  auto wg_sync = [&](uint32_t bar) {
    if constexpr (MLA_DENSE_WG_MBARRIERS) {
      ptx::mbarrier_arrive(&sm.wg_sync[bar - BAR_WG0]);
      ptx::mbarrier_wait(&sm.wg_sync[bar - BAR_WG0], wg_sync_phase);
      wg_sync_phase ^= 1;
    } else {
      ptx::named_barrier_sync(bar, 128);
    }
  };
#ifdef MLA_TRACE
#define REFILL_TRACE , (MC && trace_pair < MLA_TRACE ? mla_trace_mc[trace_pair][g] : nullptr)
#else
#define REFILL_TRACE
#endif
  auto release_and_refill = [&](uint32_t bar, int g, const Pair& next) {
    if constexpr (MLA_DENSE_WG_MBARRIERS) {
      __syncwarp();
      if (lane == 0) ptx::mbarrier_arrive(&sm.wg_free[g]);
      if (warp_u == 0) {
        ptx::mbarrier_wait(&sm.wg_free[g], phase);
        refill<MC, PIPE && MLA_PIPE_QROPE_REGS>(p, sm, next, g, hk, policy, lane, mc_phase REFILL_TRACE);
      }
    } else {
      ptx::named_barrier_sync(bar, 128);
      if (warp_u == 0) refill<MC, PIPE && MLA_PIPE_QROPE_REGS>(p, sm, next, g, hk, policy, lane, mc_phase REFILL_TRACE);
    }
  };
  // All 256 consumers meet (sm.l_ready, the once-per-request exchange's barrier below, used again by the
  // pair merge's count; the exchange keeps its own three lines: written through this helper, and with the
  // pair condition as one helper shared with piece_needs_combine, every seesaw kernel's SASS changed).
  auto consumers_sync = [&]() {
    ptx::mbarrier_arrive(&sm.l_ready);
    ptx::mbarrier_wait(&sm.l_ready, l_phase);
    l_phase ^= 1;
  };
#if MLA_FIRST_STAGGER
  // Thread 0 issues the first pair's block 1 where the prologue left it to.
  if constexpr (!MC && !PIPE) {
    if (wg == 0 && warp_u == 0) {  // thread 0's warp, whose warpgroup waits for block 0 anyway
      if (lane == 0 && sm.first_stagger) {
        ptx::mbarrier_wait(&sm.kfull[0][0], 0);
        load_tiles(p, sm, Pair{meta.begin_req_idx, meta.begin_block_idx, 1, {-1, sm.first_phys1}}, 1, 0, NUM_TILES, hk, policy, true);
      }
      __syncwarp();
    }
  }
#endif
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int seqlen = p.cache_seqlens[req];
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, seqlen);
    const bool is_split = piece_is_split(meta, req);
    // merge_pairs: a request in exactly two pieces is merged by the piece that finishes second (usually
    // split 0, which ends its part; split 1 began the next part). Its flag counts the pieces that stored
    // their partial.
    const int first_slot = p.num_splits[req];
    const int slot = first_slot + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);
    const int other_slot = slot == first_slot ? first_slot + 1 : first_slot;
    const bool pair = is_split && p.merge_pairs != 0 && p.num_splits[req + 1] - first_slot == 2;
    int* const pair_flag = p.merge_flags + (static_cast<long long>(req) * p.h_kv + hk) * p.num_m_blocks + m_block;
    // Split 0's merge reads split 1's partial: this m-block's rows of it, contiguous, into L2 first.
    int pair_seen = 0;  // thread 0: the flag as read then (used in the epilogue)
    auto prefetch_other = [&]() {
      if (MLA_PAIR_PREFETCH && pair && slot == first_slot && tid == 0) {
        const int rows = min(BLOCK_M, p.rows_per_kv - m_block * BLOCK_M);
        const long long row0 = (static_cast<long long>(other_slot) * p.h_kv + hk) * p.rows_per_kv + m_block * BLOCK_M;
        ptx::prefetch_l2_bulk(p.o_accum + row0 * D_V, rows * D_V * 4);
        pair_seen = ptx::ld_acquire_gpu(pair_flag);
      }
    };

    TRACE_REQ(0);
    if (q_by_tma) {
      // The first request's Q was issued with the first K blocks (dense_seesaw); a later one once the
      // previous request is done with sQ and sm.l.
      if (req != meta.begin_req_idx) {
        ptx::named_barrier_sync(BAR_CONSUMERS, CONSUMER_THREADS);
        if (tid == 0) load_q_tma(p, sm, req, m_block, hk);
      }
      ptx::mbarrier_wait(&sm.q_full, q_phase);
      q_phase ^= 1;
    } else {
      ptx::named_barrier_sync(BAR_CONSUMERS, CONSUMER_THREADS);  // the previous request is done with sQ and sm.l
      load_q_dense(p, sm.q, req, m_block, hk, tid, CONSUMER_THREADS);
      ptx::fence_proxy_async_smem();
      ptx::named_barrier_sync(BAR_CONSUMERS, CONSUMER_THREADS);
    }
    TRACE_REQ(1);

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

    // Measured on the H200 and not kept (docs/dense-decode.md §6; bench/results/2026-11-30-h200-exp5-
    // e{2,3,4,5}-dense_seesaw_fast.json), dense-compute vs 550.9 µs: W1 arriving SCALE1 before storing
    // sP1 (550.7), W0 refilling K0 tiles 0-3 after SCALE1 (547.4, but dense-mem-h64 325.3 vs 322.0), W1
    // refilling V1R first and reading K1's tiles 4-7 first (560.8), W0 queuing the next pair's Q·K0ᵀ
    // behind P1·V1L (556.0; dense-compute-mtp 1046.9 vs 1054.2).
    // The seesaw steps seesaw_fast and seesaw_pipe share (the table at the top), inlined.
    // W0, steps 3-4: O_L = O_L·s0 + P0·V0L (V0's rows past the end zeroed first), K0's tiles 0-3 then
    // free; once W1 published s1, P0·s1 handed over as sP0 and O_L rescaled (V1's tail rows zeroed:
    // W1's Q·K1ᵀ is done, it published s1 after it). Leaves sP1·V1L to the caller.
    auto w0_step_3_pre = [&](const float (&scale0)[2], int blk0) {
      rescale_o<FAST>(o, scale0);
      if (seqlen - blk0 * BLOCK_N < BLOCK_N) {
        zero_tail_rows(sm.k[0], 0, max(seqlen - blk0 * BLOCK_N, 0), t128);
        ptx::fence_proxy_async_smem();
        wg_sync(BAR_WG0);
      }
    };
    // From P0·V0L queued on (MLA_PIPE_EXP_ISSUE enters here with it queued by exp_pack_issue): P0·s1
    // stored as sP0 once W1 published s1.
    auto w0_steps_3_4_post = [&](uint32_t (&p0)[4][4], int blk1, const Pair& next) {
      ptx::wgmma_wait<0>();
      ptx::fence_regs(o);
      if constexpr (PIPE) TRACE(5);
      release_and_refill(BAR_WG0, REFILL_K0_LEFT, next);
      ptx::named_barrier_sync(BAR_SCALE1_READY, CONSUMER_THREADS);
      if constexpr (PIPE) TRACE(6);
      float scale1[2];
      take_scale1(m, l, scale1, sm, warp_in_wg, lane);
      scale_p<T, FAST>(p0, scale1);
      store_p(p_tile(sm, 0), p0, warp_in_wg, lane);
      ptx::fence_proxy_async_smem();
      ptx::named_barrier_arrive(BAR_P0_READY, CONSUMER_THREADS);
      rescale_o<FAST>(o, scale1);
      if (seqlen - blk1 * BLOCK_N < BLOCK_N) {
        zero_tail_rows(sm.k[1], 0, max(seqlen - blk1 * BLOCK_N, 0), t128);
        ptx::fence_proxy_async_smem();
        wg_sync(BAR_WG0);
      }
    };
    auto w0_steps_3_4 = [&](const float (&scale0)[2], int blk0, int blk1, const Pair& next) {
      w0_step_3_pre(scale0, blk0);
      uint32_t p0[4][4];
      pack_p<T>(p0, s);
      pv_rs<T>(o, p0, sm.k[0], 0);  // O_L += P0·V0L
      if constexpr (PIPE) TRACE(4);
      w0_steps_3_4_post(p0, blk1, next);
    };
    // W1, steps 4-5 after it published s1 and sP1: O_R = O_R·s0·s1 + P1·V1R + sP0·V0R (the V rows past
    // the end zeroed first), queued, not waited for.
    auto w1_step_4_pre = [&](const float (&scale01)[2], int blk0, int blk1) {
      rescale_o<FAST>(o, scale01);
      if (seqlen - blk1 * BLOCK_N < BLOCK_N) {
        zero_tail_rows(sm.k[1], 4, max(seqlen - blk1 * BLOCK_N, 0), t128);
        zero_tail_rows(sm.k[0], 4, max(seqlen - blk0 * BLOCK_N, 0), t128);
        ptx::fence_proxy_async_smem();
        wg_sync(BAR_WG1);
      }
    };
    // From P1·V1R queued on: sP0·V0R once W0 handed sP0 over.
    auto w1_step_5 = [&]() {
      if constexpr (PIPE) TRACE(5);
      ptx::named_barrier_sync(BAR_P0_READY, CONSUMER_THREADS);
      if constexpr (PIPE) TRACE(6);
      pv_ss<T>(o, p_tile(sm, 0), sm.k[0], 4);  // O_R += sP0·V0R
    };
    auto w1_steps_4_5 = [&](const float (&scale01)[2], const uint32_t (&p1)[4][4], int blk0, int blk1) {
      w1_step_4_pre(scale01, blk0, blk1);
      pv_rs<T>(o, p1, sm.k[1], 4);  // O_R += P1·V1R
      w1_step_5();
    };

    if constexpr (PIPE) {
      uint32_t qrope[4][4];
      if constexpr (MLA_PIPE_QROPE_REGS) load_qrope(qrope, sm, warp_in_wg, lane);
      // One pair; LAST: the request's last, after which nothing is queued (the next request needs its own
      // Q first). The last pair is its own copy of the body, not a branch: with the next Q·Kᵀ queued
      // under a runtime condition, ptxas could not tell whether S was in flight where the paths meet
      // and serialized every wgmma (C7515).
      auto pipe_pair = [&](int blk0, auto last) {
        constexpr bool LAST = decltype(last)::value;
        const int blk1 = blk0 + 1;
        const Pair next = next_pair(p, meta, {req, blk0, end_blk, {}});
        // seesaw_pipe (docs/dense-decode.md §9): the seesaw steps of seesaw_fast, with the loop rotated so
        // the tensor pipe does not drain between a warpgroup's last P·V and its next Q·Kᵀ:
        //  - S of this pair was queued at the end of the previous iteration (or above); wait for it here;
        //  - W1 queues sP0·V0R, then says so (pv0r_issued): W0 queues sP1·V1L behind it, so W1's P·V
        //    finish first and W1 refills K1's tiles 4-7 (after P1·V1R) and K0's 4-8 (after sP0·V0R) early;
        //  - W0 queues the next pair's Q·K0ᵀ tiles 0-3 (refilled mid-iteration) right behind sP1·V1L,
        //    retires only sP1·V1L, refills K1's tiles 0-3 and 8, then queues tiles 4-8;
        //  - W1 queues the next Q·K1ᵀ starting with the tiles it refilled itself: 4-8, then 0-3;
        //  - each warpgroup publishes its new max and scale before its exponentials (new_max, exp_sum),
        //    and S stays unscaled: the exponent is one fma.
        // H200, one call (docs/dense-decode.md §10): dense-compute 522.2 vs seesaw_fast 531.7 µs, -mtp
        // 939.3 vs 1002.0; the memory-bound and latency cases 0-2 µs slower.
        TRACE(0);
        ptx::wgmma_wait<0>();
        ptx::fence_regs(s);
        TRACE(1);
        if (wg == 0) {
          mask_scale<FAST, false>(s, p, blk0, lane, limit);
          float scale0[2], m_new[2];
          new_max<FAST>(s, m, m_new, scale0, p.scale_log2);
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
            if (lane % 4 == 0) sm.m[r] = m_new[half], sm.scale0[r] = scale0[half];
            m[half] = m_new[half];
          }
          ptx::named_barrier_arrive(BAR_SCALE0_READY, CONSUMER_THREADS);
          TRACE(2);
          if constexpr (MLA_PIPE_EXP_ISSUE) {
            w0_step_3_pre(scale0, blk0);
            TRACE(3);
            uint32_t p0[4][4];
            exp_pack_issue<T>(o, p0, s, l, m, scale0, p.scale_log2, sm.k[0]);  // O_L += P0·V0L
            TRACE(4);
            w0_steps_3_4_post(p0, blk1, next);
          } else {
            exp_sum(s, l, m, scale0, p.scale_log2);
            TRACE(3);
            w0_steps_3_4(scale0, blk0, blk1, next);
          }
          TRACE(7);
          ptx::mbarrier_wait(&sm.pv0r_issued, phase);  // W1 queued sP0·V0R (and stored sP1)
          TRACE(8);
          pv_ss<T>(o, p1_tile<PIPE && MLA_PIPE_QROPE_REGS>(sm), sm.k[1], 0);  // O_L += sP1·V1L
          if constexpr (!LAST) {
            qk_issue<T>(s, sm, 0, phase ^ 1, 0, 4, true, qrope);
            TRACE(9);
            ptx::wgmma_wait<1>();  // sP1·V1L only
            ptx::fence_regs(o);
            TRACE(10);
            release_and_refill(BAR_WG0, REFILL_K1_LEFT_P, next);
            TRACE(11);
            qk_issue<T>(s, sm, 0, phase ^ 1, 4, NUM_TILES - 4, false, qrope);
            if (MLA_PIPE_S0_FIRST && lane == 0) ptx::mbarrier_arrive(&sm.qk0_issued);
            TRACE(12);
          } else {
            ptx::wgmma_wait<0>();
            ptx::fence_regs(o);
            release_and_refill(BAR_WG0, REFILL_K1_LEFT_P, next);
          }
        } else {
          mask_scale<FAST, false>(s, p, blk1, lane, limit);
          ptx::named_barrier_sync(BAR_SCALE0_READY, CONSUMER_THREADS);
          TRACE(2);
          float m0[2], s0[2], m_new[2], s1[2], scale01[2];
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
            m0[half] = sm.m[r], s0[half] = sm.scale0[r];
          }
          new_max<FAST>(s, m0, m_new, s1, p.scale_log2);
          __syncwarp();  // the warp's readers of sm.m[r] (above) read before lane 0 overwrites it
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
            if (lane % 4 == 0) sm.m[r] = m_new[half], sm.scale1[r] = s1[half];
            scale01[half] = s0[half] * s1[half];
            m[half] = m_new[half];
          }
          // W0 reads sP1 only after pv0r_issued, which each W1 warp arrives on after storing it, so
          // SCALE1 carries only the max and scale and goes out before the exponentials.
          ptx::named_barrier_arrive(BAR_SCALE1_READY, CONSUMER_THREADS);
          TRACE(3);
          if constexpr (MLA_PIPE_EXP_ISSUE >= 2) {
            w1_step_4_pre(scale01, blk0, blk1);
            uint32_t p1[4][4];
            exp_pack_issue<T>(o, p1, s, l, m, scale01, p.scale_log2, sm.k[1] + 4 * TILE_BYTES);  // O_R += P1·V1R
            store_p(p1_tile<PIPE && MLA_PIPE_QROPE_REGS>(sm), p1, warp_in_wg, lane);
            ptx::fence_proxy_async_smem();
            TRACE(4);
            w1_step_5();
          } else {
            exp_sum(s, l, m, scale01, p.scale_log2);
            uint32_t p1[4][4];
            pack_p<T>(p1, s);
            store_p(p1_tile<PIPE && MLA_PIPE_QROPE_REGS>(sm), p1, warp_in_wg, lane);
            ptx::fence_proxy_async_smem();
            TRACE(4);
            w1_steps_4_5(scale01, p1, blk0, blk1);
          }
          {
            TRACE(7);
            __syncwarp();
            if (lane == 0) ptx::mbarrier_arrive(&sm.pv0r_issued);
            ptx::wgmma_wait<1>();  // P1·V1R is done: K1's tiles 4-7 are free
            TRACE(8);
            release_and_refill(BAR_WG1, REFILL_K1_RIGHT, next);
            ptx::wgmma_wait<0>();
            ptx::fence_regs(o);
            TRACE(9);
            release_and_refill(BAR_WG1, REFILL_K0_RIGHT_P, next);
            TRACE(10);
          }
          if constexpr (!LAST) {
            if constexpr (MLA_PIPE_S0_FIRST) ptx::mbarrier_wait(&sm.qk0_issued, phase ^ 1);
            qk_issue<T>(s, sm, 1, phase ^ 1, 4, NUM_TILES, true, qrope);
          }
          TRACE(11);
        }
      };
      if (start_blk < end_blk) {
        // The first pair's S is queued here; every pair then queues the next one's behind its last P·V.
        if (wg == 0) {
          qk_issue<T>(s, sm, 0, phase, 0, NUM_TILES, true, qrope);
          if (MLA_PIPE_S0_FIRST && lane == 0) ptx::mbarrier_arrive(&sm.qk0_issued);
        } else {
          if constexpr (MLA_PIPE_S0_FIRST) ptx::mbarrier_wait(&sm.qk0_issued, phase);
          qk_issue<T>(s, sm, 1, phase, 4, NUM_TILES, true, qrope);
        }
        int blk0 = start_blk;
        for (; blk0 + 2 < end_blk; blk0 += 2, phase ^= 1) {
          pipe_pair(blk0, cuda::std::false_type{});
#ifdef MLA_TRACE
          ++trace_pair;
#endif
        }
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
          compute_s<T>(s, sm, 0, phase, lane, MLA_DENSE_QK0_FIRST > 0 ? MLA_DENSE_QK0_FIRST : NUM_TILES);
          if (blk0 == start_blk) TRACE_REQ(6);
          mask_scale<FAST>(s, p, blk0, lane, limit);
          float scale0[2];
          softmax_w0<FAST>(s, m, l, scale0, sm, warp_in_wg, lane);
          ptx::named_barrier_arrive(BAR_SCALE0_READY, CONSUMER_THREADS);
          w0_steps_3_4(scale0, blk0, blk1, next);
          pv_ss<T>(o, p_tile(sm, 1), sm.k[1], 0);  // O_L += sP1·V1L
          ptx::wgmma_wait<0>();
          ptx::fence_regs(o);
          // W0 was the last to read K1 tiles 0-3 (V1L) and tile 8 (sP1).
          release_and_refill(BAR_WG0, REFILL_K1_LEFT_P, next);
        } else {
          if constexpr (MLA_DENSE_QK0_FIRST > 0) ptx::mbarrier_wait(&sm.qk0_issued, phase);
          compute_s<T>(s, sm, 1, phase);
          mask_scale<FAST>(s, p, blk1, lane, limit);
          ptx::named_barrier_sync(BAR_SCALE0_READY, CONSUMER_THREADS);
          float scale01[2];
          softmax_w1<FAST>(s, m, l, scale01, sm, warp_in_wg, lane);
          uint32_t p1[4][4];
          pack_p<T>(p1, s);
          store_p(p_tile(sm, 1), p1, warp_in_wg, lane);
          ptx::fence_proxy_async_smem();
          ptx::named_barrier_arrive(BAR_SCALE1_READY, CONSUMER_THREADS);
          w1_steps_4_5(scale01, p1, blk0, blk1);
          if constexpr (MLA_DENSE_V1R_EARLY && !MC) {
            ptx::wgmma_wait<1>();  // P1·V1R is done (sP0·V0R may still run): refill V1R now
            release_and_refill(BAR_WG1, REFILL_K1_RIGHT, next);
            ptx::wgmma_wait<0>();
            ptx::fence_regs(o);
            release_and_refill(BAR_WG1, REFILL_K0_RIGHT_P, next);
          } else {
            ptx::wgmma_wait<0>();
            ptx::fence_regs(o);
            // K0 tiles 4-8 (V0R, sP0) and K1 tiles 4-7 (V1R) are done; W0's Q·K0ᵀ finished before it
            // published sP0, and W0 refills K1's tile 8 (sP1) once it has read it.
            release_and_refill(BAR_WG1, REFILL_RIGHT, next);
          }
        }
      }

    }

    TRACE_REQ(2);
    // A piece that finds the other's count in the flag merges at once, from its registers; the reading
    // is published to the other consumers by the l exchange's barrier below.
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
    TRACE_REQ(4);
    float L[2], M[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = 16 * warp_in_wg + lane / 4 + 8 * half;
      L[half] = sm.l[0][r] + sm.l[1][r];
      M[half] = sm.m[r];
    }
    if (pair && sm.pair_done != 0) {
      merge_pair_out<T>(p, o, req, m_block, hk, wg, warp_in_wg, lane, slot, other_slot, L, M);
      TRACE_REQ(5);
      if (tid == 0) *pair_flag = 0;  // for the next call: both pieces have counted
    } else {
      store_out<T>(p, o, req, m_block, hk, wg, warp_in_wg, lane, is_split, slot, L, M);
      TRACE_REQ(5);
      if (pair) {  // count now, and merge if the other piece counted first
        consumers_sync();  // every consumer's partial stored before thread 0's release
        if (tid == 0) sm.pair_done = ptx::atom_add_acq_rel_gpu(pair_flag, 1);
        consumers_sync();
        if (sm.pair_done != 0) {
          merge_pair_out<T>(p, o, req, m_block, hk, wg, warp_in_wg, lane, slot, other_slot, L, M);
          if (tid == 0) *pair_flag = 0;
        }
      }
    }
    TRACE_REQ(3);
#ifdef MLA_TRACE
    ++trace_req;
#endif
  }
#ifdef MLA_TRACE
  if (trace_cta && lane == 0 && warp_u == 0) mla_trace_span[wg][2] = clock64(), mla_trace_span[wg][3] = ptx::globaltimer();
#endif
}

template <typename T, bool FAST, bool MC, bool PIPE = false>
__device__ __forceinline__ void dense_seesaw(const DenseParams& p) {
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = smem_struct_1024<Smem>(smem_raw);
#ifdef MLA_TRACE
  const int trace_cta_id = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (threadIdx.x == 0 && trace_cta_id < 1024) mla_trace_cta[trace_cta_id][0] = ptx::globaltimer(), mla_trace_cta[trace_cta_id][2] = ptx::smid();
#endif
  const SchedMeta meta = reinterpret_cast<const SchedMeta*>(p.sched_meta)[blockIdx.z];
  if (meta.begin_req_idx >= p.b) {
    ptx::pdl_launch_dependents();
    return;
  }
  // A CTA none of whose pieces leaves work for the combine lets it launch now (pdl_launch_if_unsplit,
  // with merge_pairs' pairs counted as unsplit: the combine's CTAs return at once for them).
  if (MLA_PDL_EARLY_UNSPLIT && !piece_needs_combine(p, meta, meta.begin_req_idx) && !piece_needs_combine(p, meta, meta.end_req_idx))
    ptx::pdl_launch_dependents();
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < NUM_TILES; ++t) ptx::mbarrier_init(&sm.kfull[s][t], 1);
    for (int g = 0; g < 3; ++g) ptx::mbarrier_init(&sm.kempty[g], 2);
    if constexpr (MC)
      for (int g = 0; g < 5; ++g) ptx::mbarrier_init(&sm.mc_free[g], 1);
#if MLA_DENSE_WG_MBARRIERS
    for (int g = 0; g < 5; ++g) ptx::mbarrier_init(&sm.wg_free[g], 4);
    for (int w = 0; w < 2; ++w) ptx::mbarrier_init(&sm.wg_sync[w], 128);
#endif
    ptx::mbarrier_init(&sm.l_ready, CONSUMER_THREADS);
    ptx::mbarrier_init(&sm.qk0_issued, 4);
    if constexpr (PIPE) ptx::mbarrier_init(&sm.pv0r_issued, 4);
    ptx::mbarrier_init(&sm.q_full, 1);
    ptx::fence_mbarrier_init();
    // Q first: issued behind every SM's first K blocks it waited for them (MLA_DENSE_Q_TMA).
    if (MLA_DENSE_Q_TMA && p.q_tma) load_q_tma(p, sm, meta.begin_req_idx, blockIdx.x, blockIdx.y);
    ptx::prefetch_tensormap(&p.tmap_kv);
    // The first pair of blocks; afterwards each warpgroup refills what it frees.
    const Pair first = with_phys(p, {meta.begin_req_idx, meta.begin_block_idx, piece_end(p, meta, meta.begin_req_idx), {}});
    const uint64_t policy = ptx::policy_evict_first();
    load_tiles(p, sm, first, 0, 0, NUM_TILES, blockIdx.y, policy, true);
#if MLA_FIRST_STAGGER
    bool stagger = false;
    if constexpr (!MC && !PIPE) {
      stagger = first.end_blk - first.blk0 >= MLA_FIRST_STAGGER_MIN;
      sm.first_stagger = stagger;
      sm.first_phys1 = first.phys[1];
    }
    if (!stagger)
#endif
      load_tiles(p, sm, first, 1, 0, NUM_TILES, blockIdx.y, policy, true);
  }
  // With multicast the peer arrives on kempty and writes into this CTA only once its barriers exist,
  // and neither CTA leaves while the other may still do so.
  if constexpr (MC) ptx::cluster_sync();
  else __syncthreads();
  consumer<T, FAST, MC, PIPE>(p, sm, meta, blockIdx.x, blockIdx.y);
#ifdef MLA_TRACE
  if (threadIdx.x == 0 && trace_cta_id < 1024) mla_trace_cta[trace_cta_id][1] = ptx::globaltimer();
#endif
  // A CTA with split pieces triggers here, not after its setup: with the combine's CTAs launched early
  // (parked in griddepcontrol.wait on the SMs the main grid left free) every latency case was slower on
  // the H200 (`…-exp11c-*`, -b1 36.4 vs 34.0 µs, -uneven 40.9 vs 36.5, -short-h16 49.3 vs 47.4). Unsplit
  // CTAs triggered at the top (pdl_launch_if_unsplit), where the combine's CTAs have nothing to wait for.
  ptx::pdl_launch_dependents();
  if constexpr (MC) ptx::cluster_sync();
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_seesaw_bf16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_seesaw<ptx::bf16_t, false, false>(p);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_seesaw_fp16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_seesaw<ptx::fp16_t, false, false>(p);
}
// "seesaw_fast" (the default): the same schedule with warp-uniform fast paths (no masking in full blocks,
// no rescale by exactly 1); bit-identical outputs, 6 % faster at dense-compute on the H200.
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_seesaw_fast_bf16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_seesaw<ptx::bf16_t, true, false>(p);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_seesaw_fast_fp16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_seesaw<ptx::fp16_t, true, false>(p);
}
// "seesaw_mc": seesaw_pipe with the K tiles of each pair multicast by TMA to the two m-block CTAs of a
// (2, 1, 1) cluster (grid x = m-blocks, even), each refill issued by rank 1 once rank 0 has released it
// too (refill). Experimental: the same outputs as seesaw_pipe, bit for bit, 2.9 % slower at dense-compute
// on the H200 (474.8 against 461.3 µs; docs/dense-decode.md §21).
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_seesaw_mc_bf16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_seesaw<ptx::bf16_t, true, true, true>(p);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_seesaw_mc_fp16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_seesaw<ptx::fp16_t, true, true, true>(p);
}
// "seesaw_pipe": seesaw_fast with FlashMLA's rotated loop (see consumer, PIPE; docs/dense-decode.md §9-10),
// the API's choice for compute-bound shapes. W1 sums its Q·K1ᵀ tiles in another order and the exponent is
// one fma, so outputs may differ from seesaw_fast's in the last bits.
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_seesaw_pipe_bf16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_seesaw<ptx::bf16_t, true, false, true>(p);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_dense_seesaw_pipe_fp16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_seesaw<ptx::fp16_t, true, false, true>(p);
}
extern "C" __device__ const int mla_dense_seesaw_smem_bytes = SMEM_BYTES;

// ---- "h16": the transposed kernel for at most 16 rows per KV head (docs/dense-decode.md §12) --------
// MLA_H16_Q_FIRST (default 1; 0 = the first request's Q by load_q_h16 at its top): the h16 kernel loads
//   its first request's Q (16 rows, nine 16-byte chunks a thread) into registers before thread 0 issues
//   the first K blocks and stores it into sQ at the request's top; otherwise its ld.global waits behind
//   every CTA's first two blocks (~19 MB at dense-short-h16), as the seesaw kernels' Q did before
//   MLA_DENSE_Q_TMA. H200 (`--kernel dense_h16`, two calls): dense-short-h16 44.9-45.9 vs 46.6-47.9 µs,
//   dense-mem-h16 278.6 / 288.5 vs 291.8 / 292.0. Measured, not kept: block 1 issued once block 0 had
//   landed as well (MLA_FIRST_STAGGER's idea), 45.7 / 45.7 µs at dense-short-h16.
#ifndef MLA_H16_Q_FIRST
#define MLA_H16_Q_FIRST 1
#endif

// Experimental (EXPERIMENTAL_DENSE_KERNELS; correct on the H200, test/gpu/variants/h16.test.ts; slower than
// seesaw_fast at dense-mem-h16, about even at dense-short-h16, docs/dense-decode.md §13). At 16 rows the seesaw's 64-row wgmma
// tiles are three quarters padding; here the block's 64 tokens are wgmma's M and the 16 rows its N:
// Sᵀ = K·Qᵀ (m64n16k16, A = the K tiles as loaded), the online softmax down Sᵀ's columns (one per query
// row, spread over the four warps), Pᵀ into shared memory with stmatrix .trans, and Oᵀ += Vᵀ·Pᵀ
// (m64n16k16 reading the K tiles transposed as A, one 64-dim tile per M block; 64 accumulator registers).
// One warpgroup, two K stages; each block's stage is refilled with the block two ahead as soon as its
// P·V retires. The primitives are checked by test/gpu/mla/wgmmaProbe.test.ts.
namespace {
using namespace mla;

constexpr int H16_THREADS = 128;

struct __align__(1024) SmemH16 {
  uint8_t k[2][QK_BYTES];
  uint8_t q[NUM_TILES * H16_TILE];
  uint8_t pt[H16_TILE];  // Pᵀ: 16 rows x 64 tokens
  float red[4][H16_ROWS];  // per warp, per column: partial maxima, then partial sums
  uint64_t kfull[2];
};
constexpr int H16_SMEM_BYTES = sizeof(SmemH16) + 1024;
static_assert(H16_SMEM_BYTES <= 232448, "fits the opt-in shared memory of an H100/H200 SM");

// Q's (at most) 16 rows of KV head hk, 72 16-byte chunks a row, into SW128 tiles of 16 rows; rows past
// rows_per_kv are zero. Chunk c is row c / 72's chunk c % 72.
constexpr int H16_Q_CHUNKS = H16_ROWS * 72;
static_assert(H16_Q_CHUNKS % H16_THREADS == 0, "every thread holds the same number of Q chunks");
__device__ __forceinline__ uint4 q_chunk_h16(const DenseParams& p, int req, int hk, int r, int chunk) {
  return r < p.rows_per_kv ? load_q_chunk(p, req, hk, r, chunk) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ void store_q_chunk_h16(uint8_t* q_smem, int r, int chunk, uint4 v) {
  *reinterpret_cast<uint4*>(q_smem + (chunk / 8) * H16_TILE + sw128(r, chunk % 8)) = v;
}
__device__ __forceinline__ void load_q_h16(const DenseParams& p, uint8_t* q_smem, int req, int hk, int tid) {
  for (int c = tid; c < H16_Q_CHUNKS; c += H16_THREADS) {
    const int r = c / 72, chunk = c % 72;
    store_q_chunk_h16(q_smem, r, chunk, q_chunk_h16(p, req, hk, r, chunk));
  }
}

template <typename T>
__device__ __forceinline__ void dense_h16(const DenseParams& p) {
  extern __shared__ uint8_t smem_raw[];
  SmemH16& sm = smem_struct_1024<SmemH16>(smem_raw);
  const SchedMeta meta = reinterpret_cast<const SchedMeta*>(p.sched_meta)[blockIdx.z];
  if (meta.begin_req_idx >= p.b) {
    ptx::pdl_launch_dependents();
    return;
  }
  pdl_launch_if_unsplit(meta);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, hk = blockIdx.y;
  const uint64_t policy = ptx::policy_evict_first();
  // The CTA's blocks in order, across its requests; req > end_req_idx past the last.
  struct Cursor { int req, blk, end_blk; };
  auto advance = [&](Cursor c) -> Cursor {
    if (c.blk + 1 < c.end_blk) return {c.req, c.blk + 1, c.end_blk};
    const int req = c.req + 1;
    return req > meta.end_req_idx ? Cursor{req, 0, 0} : Cursor{req, 0, piece_end(p, meta, req)};
  };
  auto load = [&](const Cursor& c, int stage) {  // one thread; a block past the table or length reads zeros
    if (c.req > meta.end_req_idx) return;
    const int phys = table_block(p, c.req, c.blk, p.cache_seqlens[c.req]);
    ptx::mbarrier_arrive_expect_tx(&sm.kfull[stage], QK_BYTES);
    for (int t = 0; t < NUM_TILES; ++t) ptx::tma_load_4d(sm.k[stage] + t * TILE_BYTES, &p.tmap_kv, &sm.kfull[stage], t * 64, hk, 0, phys, policy);
  };
  Cursor ahead{meta.begin_req_idx, meta.begin_block_idx, piece_end(p, meta, meta.begin_req_idx)};
  constexpr int Q_PER_THREAD = H16_Q_CHUNKS / H16_THREADS;
  uint4 q_first[MLA_H16_Q_FIRST ? Q_PER_THREAD : 1];
  if constexpr (MLA_H16_Q_FIRST) {
#pragma unroll
    for (int i = 0; i < Q_PER_THREAD; ++i) {
      const int c = tid + i * H16_THREADS;
      q_first[i] = q_chunk_h16(p, meta.begin_req_idx, hk, c / 72, c % 72);
    }
  }
  if (tid == 0) {
    ptx::mbarrier_init(&sm.kfull[0], 1);
    ptx::mbarrier_init(&sm.kfull[1], 1);
    ptx::fence_mbarrier_init();
    ptx::prefetch_tensormap(&p.tmap_kv);
    load(ahead, 0);
    load(advance(ahead), 1);
  }
  ahead = advance(advance(ahead));
  __syncthreads();

  const uint32_t q_base = ptx::smem_addr(sm.q), pt_base = ptx::smem_addr(sm.pt);
  const float sc = p.scale_log2;
  int it = 0;
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int seqlen = p.cache_seqlens[req];
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end(p, meta, req);
    const bool is_split = piece_is_split(meta, req);
    ptx::named_barrier_sync(1, H16_THREADS);  // the previous request is done with sm.q and sm.red
    if (MLA_H16_Q_FIRST && req == meta.begin_req_idx) {
#pragma unroll
      for (int i = 0; i < Q_PER_THREAD; ++i) {
        const int c = tid + i * H16_THREADS;
        store_q_chunk_h16(sm.q, c / 72, c % 72, q_first[i]);
      }
    } else {
      load_q_h16(p, sm.q, req, hk, tid);
    }
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(1, H16_THREADS);
    int limit[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) limit[j] = min(dense_row_limit(p, h16_col(lane, j), seqlen), end_blk * BLOCK_N);
    float ot[8][8], m[4], l[4];
    h16_init(ot, m, l);

    for (int blk = start_blk; blk < end_blk; ++blk, ++it) {
      const int stage = it & 1;
      ptx::mbarrier_wait(&sm.kfull[stage], (it >> 1) & 1);
      if (seqlen - blk * BLOCK_N < BLOCK_N) {  // V rows past the request: NaN poison times P = 0 is NaN in the MMA
        zero_tail_rows(sm.k[stage], 0, max(seqlen - blk * BLOCK_N, 0), tid);
        zero_tail_rows(sm.k[stage], 4, max(seqlen - blk * BLOCK_N, 0), tid);
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(1, H16_THREADS);
      }
      const uint32_t k_base = ptx::smem_addr(sm.k[stage]);
      float st[8];
      h16_qk<T>(st, k_base, q_base);
      // Mask and scale to the log2 domain, with each column's max over the thread's rows.
      float mx[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) mx[j] = MASKED;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int j = h16_j(e);
        st[e] = blk * BLOCK_N + h16_row(warp, lane, e) < limit[j] ? st[e] * sc : MASKED;
        mx[j] = fmaxf(mx[j], st[e]);
      }
      h16_softmax<MLA_FAST_LAZY_MAX>(st, mx, m, l, ot, sm.red, warp, lane, 1);
      h16_pv<T>(ot, st, k_base, pt_base, warp, lane, 1);
      // Every warp's P·V has retired: the stage takes the block two ahead (and sm.pt, sm.red are free).
      ptx::named_barrier_sync(1, H16_THREADS);
      if (tid == 0) load(ahead, stage);
      ahead = advance(ahead);
    }

    // L per column: the thread's rows, the warp's, then the 4 warps'.
    float L[4] = {l[0], l[1], l[2], l[3]};
    h16_col_reduce(L, sm.red, warp, lane, 1, [](float a, float b) { return a + b; });
    const int slot = p.num_splits[req] + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int flat = h16_col(lane, j);
      if (flat >= p.rows_per_kv) continue;
      const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
      const bool empty = L[j] == 0.0f;  // a NaN L propagates (see dense_decode_sm90.cu)
      const float inv = empty ? 0.0f : 1.0f / L[j];
      if (!is_split) {
        uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s) * p.h_q + head) * D_V;
        h16_store_col<T>(out, ot, j, inv, warp, lane);
        if (warp == 0 && lane < 4) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s] = empty ? INFINITY : (__log2f(L[j]) + m[j]) * LN2;
      } else {
        const long long row = (static_cast<long long>(slot) * p.h_kv + hk) * p.rows_per_kv + flat;
        float* oa = p.o_accum + row * D_V;
        h16_store_col<T>(oa, ot, j, inv, warp, lane);
        if (warp == 0 && lane < 4) p.lse_accum[row] = empty ? -INFINITY : __log2f(L[j]) + m[j];
      }
    }
  }
  ptx::pdl_launch_dependents();
}
}  // namespace

extern "C" __global__ void __launch_bounds__(H16_THREADS, 1) mla_dense_h16_bf16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_h16<ptx::bf16_t>(p);
}
extern "C" __global__ void __launch_bounds__(H16_THREADS, 1) mla_dense_h16_fp16_sm90(const __grid_constant__ mla::DenseParams p) {
  dense_h16<ptx::fp16_t>(p);
}
extern "C" __device__ const int mla_dense_h16_smem_bytes = H16_SMEM_BYTES;

