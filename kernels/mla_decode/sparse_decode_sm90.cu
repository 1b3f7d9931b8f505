// Sparse FP8 MLA decode (DeepSeek Sparse Attention) for Hopper, first version: no crossover yet.
//
// One CTA = 64 query heads of one query token against 64-index blocks of its request's top-k list.
// Warpgroup 2 (producer) gathers the 656-byte V32 tokens with 16-byte non-caching loads, two threads per
// token, dequantizes e4m3 -> bf16 with the per-128 scales (e4m3 -> f16 -> f32 -> bf16, times the bf16
// power-of-two scale: exact), and writes the 64x576 block into SW128 tiles; invalid indices (-1, outside
// the cache, or past the request's top-k length) become zero rows and a cleared valid flag, and are
// never dereferenced. Warpgroup 0 computes S = Q·Kᵀ, masks invalid tokens, runs the online softmax,
// hands P (bf16, smem) and the row rescale factor to warpgroup 1 and accumulates O_L = O[:, 0:256];
// warpgroup 1 accumulates O_R. Two K buffers (kfull / kempty mbarriers) keep the producer a block ahead.
// Split partials use the dense layout (h_kv = 1, row = s * h_q + head) and the dense combine, which also
// applies the attention sink; unsplit rows apply the sink here: out = o / (L + 2^(sink·log2e - M)).
// Written without GPU access in its first session: tests in test/gpu/mla/sparseDecode.test.ts.
#include "decode_common.cuh"

MLA_EXPORT_LAYOUT(sparse_params_layout, mla::SparseParams, MLA_OFFSETS_SPARSE)

namespace {

using namespace mla;

constexpr int CONSUMER_THREADS = 256;
constexpr int THREADS = CONSUMER_THREADS + 128;
constexpr int TOKEN_BYTES = 656;
// A CTA of 384 threads is launched with 168 registers each (65,536 / 384 rounded down to a multiple of
// 8), so the three warpgroups can share 3 x 168 = 504 per lane, not 512: setmaxnreg.inc waits for ever
// for registers the CTA was never given (the first GPU run hung here with 224 + 168 + 120). WG0 holds
// O_L, S and P; WG1 holds O_R; the producer holds its in-flight 16-byte loads.
constexpr int LAUNCH_REGS = (65536 / THREADS) / 8 * 8;
constexpr int WG0_REGS = 216, WG1_REGS = LAUNCH_REGS, PRODUCER_REGS = 120;
static_assert(WG0_REGS + WG1_REGS + PRODUCER_REGS <= 3 * LAUNCH_REGS, "setmaxnreg within the CTA's registers");
// The v3 kernel (the default): two producer warpgroups, 512 threads, 128 registers each at launch;
// each converts one 32-token round of every block, so every SM sub-partition has two producer warps to
// interleave (ncu of the one-producer kernel: the consumers waited on it, and 20 % of its samples were
// fixed-latency waits inside its own conversions). 208 + 160 + 2 x 72 = 512 of the 4 x 128 per lane.
// P·V runs as two m64n128 wgmmas (see wgmma_m64n128k16_ss_transb: ptxas refuses m64n256 at 128).
constexpr int THREADS_V3 = CONSUMER_THREADS + 2 * 128;
constexpr int LAUNCH_REGS_V3 = (65536 / THREADS_V3) / 8 * 8;
constexpr int WG0_REGS_V3 = 208, WG1_REGS_V3 = 160, PRODUCER_REGS_V3 = 72;  // 216 / 160 / 64 spilled 40 B
static_assert(WG0_REGS_V3 + WG1_REGS_V3 + 2 * PRODUCER_REGS_V3 <= 4 * LAUNCH_REGS_V3, "setmaxnreg within the CTA's registers");

enum : uint32_t { BAR_CONSUMERS = 1, BAR_P_READY = 2, BAR_P_FREE = 3, BAR_L_READY = 4 };

// Timing ablations (wrong outputs; never shipped): MLA_ABLATE_SPARSE_CONSUMERS makes the consumers
// release each block as soon as it is full (no MMA, no softmax), so the kernel runs at the producers'
// rate; MLA_ABLATE_SPARSE_PRODUCER makes the producers hand over each buffer without loading or
// converting anything (no gathers), so it runs at the consumers' rate. Together they say which side
// bounds a kernel and by how much, which a schedule change has to know first (docs/sparse-decode.md §13).
// MLA_TRACE=N (a diagnostic build, not a shipped option): clock64 at the events of CTA (0, 0, 0)'s first
// N blocks, per block one row of mla_sparse_trace: WG0 (lane 0 of its first warp) 0 top, 1 K full, 2 S
// ready, 3 P packed, 4 P_FREE passed, 5 P_READY arrived, 6 P·V_L queued, 7 P·V_L retired; WG1 8 top,
// 9 P_READY passed, 10 P·V_R queued, 11 P·V_R retired, 12 P_FREE passed; the first producer warpgroup
// (producer_v2) 13 top, 14 buffer free, 15 K full arrived, 16 its first 16 values converted and stored
// (its loads have landed), 17 every value converted and stored, 18 the proxy fence done (then the bulk
// copies and the arrival, 15). The h16 consumer records 0 top, 1 K full, 2 Q·Kᵀ retired, 3 softmax done,
// 7 P·V retired, 12 the block's closing barrier passed. scripts/device/traceSparse.mjs prints it.
#ifdef MLA_TRACE
extern "C" {
__device__ long long mla_sparse_trace[MLA_TRACE][20];
}
#define STRACE(it, ev)                                                                                                   \
  do {                                                                                                                   \
    if ((it) < MLA_TRACE && (threadIdx.x & 127) == 0 && (blockIdx.x | blockIdx.y | blockIdx.z) == 0) {                    \
      mla_sparse_trace[it][ev] = clock64();                                                                               \
      if ((ev) == 0) mla_sparse_trace[it][19] = static_cast<long long>(ptx::globaltimer());                             \
    }                                                                                                                    \
  } while (0)
#else
#define STRACE(it, ev) \
  do {                 \
  } while (0)
#endif

// MLA_SPARSE_LAZY_MAX (τ in log2 units, default 8; 0 = the exact running max): seesaw_pipe's conditional
// rescale (dense_seesaw_sm90.cu, MLA_PIPE_LAZY_MAX) in the sparse consumers: a row's max moves only when
// a block's row max exceeds it by more than τ, so the factors are exactly 1 after the first block and
// both warpgroups skip their O rescale (128 multiplies per thread and block, between the softmax and
// each P·V) by a warp vote. P is then at most 2^τ (same relative precision in bf16). With the exact max
// the skip was measured no faster (448.2 vs 448.6 µs at sparse-v32): most blocks' factors were not 1.
// H200, one call (e87700b with the flag, records `…-exp8e-*`): sparse-v32 369.8 vs 379.1 µs, -h64 207.1
// vs 210.3, long-topk 5138.0 vs 5313.0, h16 188.3 vs 191.7; the sparse suite 8/8 on it.
#ifndef MLA_SPARSE_LAZY_MAX
#define MLA_SPARSE_LAZY_MAX 8
#endif

#ifdef MLA_ABLATE_SPARSE_CONSUMERS
constexpr bool ABLATE_CONSUMERS = true;
#else
constexpr bool ABLATE_CONSUMERS = false;
#endif
#ifdef MLA_ABLATE_SPARSE_PRODUCER
constexpr bool ABLATE_PRODUCER = true;
#else
constexpr bool ABLATE_PRODUCER = false;
#endif

struct __align__(1024) Smem {
  uint8_t q[QK_BYTES];
  uint8_t k[2][QK_BYTES];
  uint8_t p[TILE_BYTES];  // P of the current block, 64 rows x 64 tokens SW128 (WG0 -> WG1)
  float scale[64];        // row rescale factor of the current block (WG0 -> WG1)
  float l[64];            // final row sums (WG0 -> WG1)
  float m[64];            // final row maxima, log2 domain
  uint8_t valid[2][64];   // per K buffer: token holds a valid index
  uint64_t kfull[2];      // the producer's 128 threads arrive once the block is written
  uint64_t kempty[2];     // the consumers' 8 warps arrive once they no longer read the block
};
constexpr int SMEM_BYTES = sizeof(Smem) + 1024;
static_assert(SMEM_BYTES <= 232448, "fits the opt-in shared memory of an H100/H200 SM");


__device__ __forceinline__ int request_length(const SparseParams& p, int req) {
  return max(0, min(p.lengths[req], p.topk));
}

// Four e4m3 bytes -> two bf16x2 words, times the tile's bf16 scale, through the conversion units
// (e4m3x2 -> f16x2 -> f32 -> bf16x2). An exact integer path (bytes moved into bf16 bit positions, then
// x 2^120 x scale) measured slower on the H200 (1041 vs 803 µs at sparse-v32): the conversions are not
// the bottleneck (docs/sparse-decode.md §11).
__device__ __forceinline__ void dequant4(uint32_t w, __nv_bfloat162 scale, uint32_t& lo, uint32_t& hi) {
  const uint32_t h01 = ptx::cvt_f16x2_e4m3x2(static_cast<uint16_t>(w & 0xFFFFu));
  const uint32_t h23 = ptx::cvt_f16x2_e4m3x2(static_cast<uint16_t>(w >> 16));
  const float2 f01 = __half22float2(*reinterpret_cast<const __half2*>(&h01));
  const float2 f23 = __half22float2(*reinterpret_cast<const __half2*>(&h23));
  __nv_bfloat162 b01 = __hmul2(__floats2bfloat162_rn(f01.x, f01.y), scale);
  __nv_bfloat162 b23 = __hmul2(__floats2bfloat162_rn(f23.x, f23.y), scale);
  lo = *reinterpret_cast<uint32_t*>(&b01);
  hi = *reinterpret_cast<uint32_t*>(&b23);
}

// Sixteen e4m3 values (one 16-byte load) -> two 16-byte chunks of bf16.
__device__ __forceinline__ void dequant16(uint4 raw, __nv_bfloat162 scale, uint4& a, uint4& b) {
  dequant4(raw.x, scale, a.x, a.y);
  dequant4(raw.y, scale, a.z, a.w);
  dequant4(raw.z, scale, b.x, b.y);
  dequant4(raw.w, scale, b.z, b.w);
}

// Position in this CTA's walk over the 64-index blocks of its part, in the order the consumers take them
// (across requests). The producers keep cursors two blocks ahead of the one they fill, to prefetch.
struct Cursor {
  int req, blk, end_blk, len;
};

__device__ __forceinline__ bool cursor_valid(const SchedMeta& meta, const Cursor& c) { return c.req <= meta.end_req_idx; }

// Moves to the next request with a non-empty block range when the current one is used up.
__device__ __forceinline__ void cursor_settle(const SparseParams& p, const SchedMeta& meta, Cursor& c) {
  while (c.blk >= c.end_blk && ++c.req <= meta.end_req_idx) {
    c.len = request_length(p, c.req);
    c.blk = 0;
    c.end_blk = piece_end_block(meta, c.req, c.len);
  }
}

__device__ __forceinline__ Cursor cursor_begin(const SparseParams& p, const SchedMeta& meta) {
  Cursor c;
  c.req = meta.begin_req_idx;
  c.len = request_length(p, c.req);
  c.blk = meta.begin_block_idx;
  c.end_blk = piece_end_block(meta, c.req, c.len);
  cursor_settle(p, meta, c);
  return c;
}

__device__ __forceinline__ void cursor_next(const SparseParams& p, const SchedMeta& meta, Cursor& c) {
  ++c.blk;
  cursor_settle(p, meta, c);
}

// Blocks in this CTA's walk (the producers loop over a count and keep only a look-ahead cursor).
__device__ __forceinline__ int walk_blocks(const SparseParams& p, const SchedMeta& meta) {
  int n = 0;
  for (Cursor c = cursor_begin(p, meta); cursor_valid(meta, c); cursor_next(p, meta, c)) ++n;
  return n;
}

// The cache slot of entry `token` of the cursor's block, or -1 where there is none to read (past the
// walk, past the request's top-k length, -1, or outside the cache: never dereferenced).
// Split in two so the index load is issued early and waited for only where the slot is used: the load
// always goes out, branch-free (entry 0 of the part's last request, always inside the indices, stands in
// where there is nothing to read), and `slot_of` applies the checks later. With the checks next to the
// load (a branch around it) ptxas waited for the load right there: 12 % of the v3 kernel's warp samples
// in ncu on the H200 were that one compare.
struct PendingSlot {
  int id;
  bool in;  // the entry exists: inside the walk and the request's top-k length
};

__device__ __forceinline__ PendingSlot cursor_index(const SparseParams& p, const SchedMeta& meta, const Cursor& c, int s_idx, int token) {
  const int pos = c.blk * BLOCK_N + token;
  const bool in = cursor_valid(meta, c) && pos < c.len;
  const long long at = static_cast<long long>(in ? c.req : meta.end_req_idx) * p.indices_batch_stride + s_idx * p.indices_token_stride + (in ? pos : 0);
  return {__ldg(p.indices + at), in};
}

__device__ __forceinline__ int slot_of(const SparseParams& p, PendingSlot e) { return e.in && e.id >= 0 && e.id < p.num_slots ? e.id : -1; }

__device__ __forceinline__ int cursor_slot(const SparseParams& p, const SchedMeta& meta, const Cursor& c, int s_idx, int token) {
  return slot_of(p, cursor_index(p, meta, c, s_idx, token));
}

__device__ __forceinline__ const uint8_t* token_ptr(const SparseParams& p, int slot) {
  return p.kv + static_cast<long long>(slot / p.page_block_size) * p.kv_block_stride + static_cast<long long>(slot % p.page_block_size) * TOKEN_BYTES;
}

// The gathers are latency-bound (random 656-byte tokens spread over gigabytes): the producer warms L2
// (and the address translation) two blocks ahead, so each block's loads find their lines in L2.
__device__ __forceinline__ void prefetch_token(const SparseParams& p, int slot) {
  if (slot >= 0) ptx::prefetch_l2_bulk(token_ptr(p, slot), TOKEN_BYTES);
}

// Four 16-byte loads (64 e4m3 values) from `src`.
__device__ __forceinline__ void load4(uint4 (&r)[4], const uint8_t* src) {
#pragma unroll
  for (int k = 0; k < 4; ++k) r[k] = ptx::ld_nc_v4(src + 16 * k);
}

// Dequantizes 64 e4m3 values (dims d0 .. d0 + 63 of `token`) into the block's SW128 tiles; zeros for a
// token without a slot. Each 16 values give two 16-byte chunks; `put(offset, chunk)` writes one.
template <typename Put>
__device__ __forceinline__ void convert64(const uint4 (&r)[4], float scale, bool valid, int token, int d0, Put&& put) {
  const __nv_bfloat162 sc = __float2bfloat162_rn(scale);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    uint4 a, b;
    dequant16(r[k], sc, a, b);
    if (!valid) a = b = make_uint4(0, 0, 0, 0);
    const int d = d0 + 16 * k;  // first dim of these 16 values
    put((d / 64) * TILE_BYTES + sw128(token, (d % 64) / 8), a);
    put((d / 64) * TILE_BYTES + sw128(token, (d % 64) / 8 + 1), b);
  }
}

// The producers stream their loads one batch (four 16-byte loads) ahead of the conversion, across block
// boundaries too: the next block's first batch is in flight while the current block's last batch is
// converted and while the producer waits for a free buffer. Each thread is otherwise latency-bound (one
// warp per scheduler, random 656-byte tokens), the first GPU runs measured ~200-250 cycles per token.
// An entry without a slot reads slot 0 (always inside the cache) and writes zeros: no branches around
// the loads.
//
// The producer: thread t handles token t/2 of each block, dims [256·(t%2), +256) (four batches, scale
// tiles 2·half and 2·half + 1) and RoPE dims [512 + 32·(t%2), +32).
__device__ __forceinline__ void producer(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx) {
  const int t = threadIdx.x - CONSUMER_THREADS, token = t / 2, half = t % 2;
  const int n_blocks = walk_blocks(p, meta);
  Cursor ahead = cursor_begin(p, meta);
  int slot = cursor_slot(p, meta, ahead, s_idx, token);
  cursor_next(p, meta, ahead);
  int slot1 = cursor_slot(p, meta, ahead, s_idx, token);
  cursor_next(p, meta, ahead);
  if (half == 0) prefetch_token(p, slot), prefetch_token(p, slot1);
  uint4 ra[4], rb[4], rope[4];
  const uint8_t* tok = token_ptr(p, max(slot, 0));
  load4(ra, tok + half * 256);
  float2 scales = *reinterpret_cast<const float2*>(tok + 512 + 8 * half);
  for (int it = 0; it < n_blocks; ++it) {
    const int stage = it % 2;
    const bool valid = slot >= 0;
    const uint8_t* src = tok + half * 256;
    const int slot2 = cursor_slot(p, meta, ahead, s_idx, token);
    ptx::mbarrier_wait(&sm.kempty[stage], ((it / 2) & 1) ^ 1);  // both consumers are done with this buffer
    uint8_t* kb = sm.k[stage];
    auto put = [&](int offset, uint4 v) { *reinterpret_cast<uint4*>(kb + offset) = v; };
    load4(rb, src + 64);
    convert64(ra, scales.x, valid, token, half * 256, put);
    load4(ra, src + 128);
    convert64(rb, scales.x, valid, token, half * 256 + 64, put);
    load4(rb, src + 192);
    load4(rope, tok + 528 + half * 64);
    convert64(ra, scales.y, valid, token, half * 256 + 128, put);
    // The next block's first batch and scales, while this block's last batch is converted.
    const uint8_t* next = token_ptr(p, max(slot1, 0));
    load4(ra, next + half * 256);
    const float2 next_scales = *reinterpret_cast<const float2*>(next + 512 + 8 * half);
    convert64(rb, scales.y, valid, token, half * 256 + 192, put);
#pragma unroll
    for (int k = 0; k < 4; ++k)  // RoPE dims 512 + 32·half .. +32 stay bf16
      put(8 * TILE_BYTES + sw128(token, 4 * half + k), valid ? rope[k] : make_uint4(0, 0, 0, 0));
    if (half == 0) sm.valid[stage][token] = valid ? 1 : 0;
    ptx::fence_proxy_async_smem();  // the consumers' wgmma reads these generic writes
    ptx::mbarrier_arrive(&sm.kfull[stage]);
    if (half == 0) prefetch_token(p, slot2);
    slot = slot1, slot1 = slot2, tok = next, scales = next_scales;
    cursor_next(p, meta, ahead);
  }
}

// The crossover producer (h_q = 128: a cluster of the two 64-head CTAs of one query token). CTA `rank`
// dequantizes tokens [32·rank, 32·rank + 32) of each block, four threads per token (one 128-value scale
// tile, two batches, and 16 RoPE dims each), and writes every 16 bytes both into its own buffer and, with
// st.async, into the peer's, crediting the peer's kfull barrier: each CTA dequantizes half the tokens
// (the seed's crossover). A buffer is refilled only when the consumers of both CTAs have released it
// (kempty counts 16 warps: 8 local, 8 remote).
__device__ __forceinline__ void producer_crossover(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx) {
  const int t = threadIdx.x - CONSUMER_THREADS, q4 = t % 4;
  const uint32_t rank = ptx::cluster_ctarank(), peer = rank ^ 1u;
  const int token = 32 * static_cast<int>(rank) + t / 4;
  const int n_blocks = walk_blocks(p, meta);
  Cursor cur = cursor_begin(p, meta), ahead = cur;  // cur: the 64 valid flags of the block being filled
  int slot = cursor_slot(p, meta, ahead, s_idx, token);
  cursor_next(p, meta, ahead);
  int slot1 = cursor_slot(p, meta, ahead, s_idx, token);
  cursor_next(p, meta, ahead);
  if (q4 == 0) prefetch_token(p, slot), prefetch_token(p, slot1);
  uint4 ra[4], rb[4], rope[2];
  const uint8_t* tok = token_ptr(p, max(slot, 0));
  load4(ra, tok + 128 * q4);
  float scale = reinterpret_cast<const float*>(tok + 512)[q4];
  for (int it = 0; it < n_blocks; ++it) {
    const int stage = it % 2;
    const bool valid = slot >= 0;
    // Both CTAs read the same index row, so each sets all 64 valid flags itself.
    const int flag_slot = t < 64 ? cursor_slot(p, meta, cur, s_idx, t) : -1;
    const int slot2 = cursor_slot(p, meta, ahead, s_idx, token);
    ptx::mbarrier_wait(&sm.kempty[stage], ((it / 2) & 1) ^ 1);  // CTA scope: see producer_v2
    uint8_t* kb = sm.k[stage];
    const uint32_t remote_kb = ptx::mapa_shared(ptx::smem_addr(kb), peer);
    const uint32_t remote_bar = ptx::mapa_shared(ptx::smem_addr(&sm.kfull[stage]), peer);
    auto put = [&](int offset, uint4 v) {
      *reinterpret_cast<uint4*>(kb + offset) = v;
      ptx::st_async_v4(remote_kb + offset, v, remote_bar);
    };
    load4(rb, tok + 128 * q4 + 64);
#pragma unroll
    for (int k = 0; k < 2; ++k) rope[k] = ptx::ld_nc_v4(tok + 528 + 32 * q4 + 16 * k);
    convert64(ra, scale, valid, token, 128 * q4, put);
    const uint8_t* next = token_ptr(p, max(slot1, 0));
    load4(ra, next + 128 * q4);
    const float next_scale = reinterpret_cast<const float*>(next + 512)[q4];
    convert64(rb, scale, valid, token, 128 * q4 + 64, put);
#pragma unroll
    for (int k = 0; k < 2; ++k) put(8 * TILE_BYTES + sw128(token, 2 * q4 + k), valid ? rope[k] : make_uint4(0, 0, 0, 0));
    if (t < 64) sm.valid[stage][t] = flag_slot >= 0 ? 1 : 0;
    ptx::fence_proxy_async_smem();
    // One arrival per local thread; thread 0's also expects the 32 tokens x 1152 B the peer sends.
    if (t == 0) ptx::mbarrier_arrive_expect_tx(&sm.kfull[stage], 32 * D_QK * 2);
    else ptx::mbarrier_arrive(&sm.kfull[stage]);
    if (q4 == 0) prefetch_token(p, slot2);
    slot = slot1, slot1 = slot2, tok = next, scale = next_scale;
    cursor_next(p, meta, cur);
    cursor_next(p, meta, ahead);
  }
}

// The second producer (`v2` kernels, selectable while it is measured against the first): each warp
// takes 8 tokens and its lanes q = lane / 8 take 16-byte chunks q, q + 4, q + 8, ... of each token, so
// one load instruction reads 64 contiguous bytes of each of 8 tokens (8-16 lines) instead of 16 bytes of
// each of 32 places (32 lines), and asks L2 for 256-byte fetches. A round is 32 tokens (4 warps x 8):
// two rounds per block for the plain kernel, one (this CTA's half) with crossover. All eleven loads of a
// round (eight FP8 chunks, the four scales, two RoPE chunks), of both rounds, are in flight before the
// thread waits for the buffer and converts. (Issuing the next block's loads as soon as each piece was
// converted, to keep them in flight longer, measured slower on the H200: 617 vs 489 µs at sparse-v32.)
// The 16 values of chunk c of 64-dim group k are dims 64k + 16q .. +15: chunks 2q and 2q + 1 of SW128
// tile k, so the 8 lanes of a chunk write 8 different rows (conflict-free after the swizzle).
// NPROD = 2 (the v3 kernel, no crossover): producer warpgroup `pidx` takes round pidx of every block.
// Crossover: each warp writes its 8 token rows only into its own buffer, then one lane copies them to the
// peer with nine 1 KB bulk copies (rows 8w .. 8w + 7 of this CTA's half are 1 KB contiguous in each SW128
// tile, and the swizzle depends only on the row, so a byte copy keeps it), crediting the peer's kfull as
// a TMA load would: 36 bulk operations per CTA and block instead of 2,304 scattered 16-byte st.async.
// H200, sparse-v32: crossover_v2 543.9 -> 444.9 µs, crossover_v3 463.5 -> 383.7 µs (plain v3 403.7):
// the remote stores, not the cluster, were why crossover lost (0.82x before, 1.05x now). The source rows
// are not rewritten before the copy has read them: this CTA's kempty needs the peer consumers' release,
// which follows their kfull wait, which the copy's complete_tx ends.

// One token's quarter q of a v2/v3 producer thread (chunk q of every 64-dim group, the scales, RoPE chunks
// q and q + 4), its lines' L2 prefetch, and its conversion into a K buffer's SW128 tiles (zeros for a
// token without a slot): shared by producer_v2's plain rounds and the h16 experiments.
struct TokenQuarter {
  uint4 raw[8], rope[2], sc4;
};
__device__ __forceinline__ void load_quarter(TokenQuarter& x, const uint8_t* tok, int q) {
#pragma unroll
  for (int k = 0; k < 8; ++k) x.raw[k] = ptx::ld_nc_v4_l2_256(tok + 64 * k + 16 * q);
  x.sc4 = ptx::ld_nc_v4(tok + 512);
#pragma unroll
  for (int k = 0; k < 2; ++k) x.rope[k] = ptx::ld_nc_v4(tok + 528 + 64 * k + 16 * q);
}
// Lines q and q + 4 of the token in `slot` (its 656 bytes span at most 7 lines; the last offset is
// clamped onto its last byte), per-thread addresses. The bulk prefetch (prefetch_token) takes uniform
// operands, so for eight tokens per warp it ran as an eight-trip loop: 13 % of the producer's samples in
// ncu; this form took sparse-v32 from 540.5 to 488.8 µs on the H200.
__device__ __forceinline__ void prefetch_quarter_lines(const SparseParams& p, int slot, int q) {
  if (slot < 0) return;
  const uint8_t* tok = token_ptr(p, slot);
  ptx::prefetch_l2(tok + 128 * q);
  if (q < 3) ptx::prefetch_l2(tok + min(128 * (q + 4), TOKEN_BYTES - 1));
}
__device__ __forceinline__ void store_quarter(uint8_t* kb, const TokenQuarter& x, bool valid, int token, int q) {
  const float scales[4] = {__uint_as_float(x.sc4.x), __uint_as_float(x.sc4.y), __uint_as_float(x.sc4.z), __uint_as_float(x.sc4.w)};
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    uint4 a, b;
    dequant16(x.raw[k], __float2bfloat162_rn(scales[k / 2]), a, b);
    if (!valid) a = b = make_uint4(0, 0, 0, 0);
    *reinterpret_cast<uint4*>(kb + k * TILE_BYTES + sw128(token, 2 * q)) = a;
    *reinterpret_cast<uint4*>(kb + k * TILE_BYTES + sw128(token, 2 * q + 1)) = b;
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) *reinterpret_cast<uint4*>(kb + 8 * TILE_BYTES + sw128(token, q + 4 * k)) = valid ? x.rope[k] : make_uint4(0, 0, 0, 0);
}

// PIPE (the h16 kernel's MLA_SPARSE_H16_PIPE, an experiment): two register sets, so block n+1's loads fly
// while block n waits for its buffer and is converted, and the L2 prefetch runs three blocks ahead
// instead of two. Correct on the H200 and slower (sparse-h16 176.9 vs 171.7 µs; the producers alone
// 134.9 vs 132.1): the gathers were not waiting on their own latency (docs/sparse-decode.md §21).
template <bool XO, int NPROD = 1, bool PIPE = false>
__device__ __forceinline__ void producer_v2(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx, int pidx = 0) {
  static_assert(NPROD == 1 || NPROD == 2, "one or two producer warpgroups");
  static_assert(!PIPE || (!XO && NPROD == 2), "the pipelined form is written for two producer warpgroups without crossover");
  constexpr int ROUNDS = XO || NPROD == 2 ? 1 : 2;
  // Two producer warpgroups with crossover (experimental): both take this CTA's 32 tokens, and split
  // their dims: warpgroup 0 the 64-dim groups 0-3 and the RoPE dims, warpgroup 1 the groups 4-7, so each
  // thread has 6-7 loads in flight instead of 11 (72 registers).
  constexpr bool SPLIT = XO && NPROD == 2;
  const int t = threadIdx.x - CONSUMER_THREADS - 128 * pidx, warp = t / 32, lane = t % 32, q = lane / 8;
  const uint32_t rank = XO ? ptx::cluster_ctarank() : 0u, peer = rank ^ 1u;
  auto token_of = [&](int r) { return (XO ? 32 * static_cast<int>(rank) : NPROD == 2 ? 32 * pidx : 32 * r) + 8 * warp + lane % 8; };
  auto prefetch_lines = [&](int s) { prefetch_quarter_lines(p, s, q); };
  const int n_blocks = walk_blocks(p, meta);
  Cursor cur = cursor_begin(p, meta), ahead = cur;  // cur: the block being filled (valid flags)
  int slot[ROUNDS], slot1[ROUNDS];
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) slot[r] = cursor_slot(p, meta, ahead, s_idx, token_of(r));
  cursor_next(p, meta, ahead);
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) slot1[r] = cursor_slot(p, meta, ahead, s_idx, token_of(r));
  cursor_next(p, meta, ahead);
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) prefetch_lines(slot[r]), prefetch_lines(slot1[r]);
  // (Issuing round 0 of the next block as soon as round 0 of this one was converted, so its loads fly
  // during round 1's conversion and the buffer wait, measured slower on the H200: 492.6 vs 482.7 µs.)
  uint4 raw[ROUNDS][8], rope[ROUNDS][2], sc4[ROUNDS];
  auto issue = [&](int r, int s) {  // round r's loads of slot s (none: slot 0, converted to zeros)
    const uint8_t* tok = token_ptr(p, s >= 0 ? s : 0);
    if constexpr (SPLIT) {
#pragma unroll
      for (int k = 0; k < 4; ++k) raw[r][k] = ptx::ld_nc_v4_l2_256(tok + 64 * (4 * pidx + k) + 16 * q);
      sc4[r] = ptx::ld_nc_v4(tok + 512);
      if (pidx == 0) {
#pragma unroll
        for (int k = 0; k < 2; ++k) rope[r][k] = ptx::ld_nc_v4(tok + 528 + 64 * k + 16 * q);
      }
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) raw[r][k] = ptx::ld_nc_v4_l2_256(tok + 64 * k + 16 * q);
      sc4[r] = ptx::ld_nc_v4(tok + 512);
#pragma unroll
      for (int k = 0; k < 2; ++k) rope[r][k] = ptx::ld_nc_v4(tok + 528 + 64 * k + 16 * q);
    }
  };
  if constexpr (PIPE) {
    int slot2 = cursor_slot(p, meta, ahead, s_idx, token_of(0));
    cursor_next(p, meta, ahead);
    prefetch_lines(slot2);
    TokenQuarter xs[2];  // block it's loads in xs[it % 2]
    if constexpr (!ABLATE_PRODUCER) load_quarter(xs[0], token_ptr(p, slot[0] >= 0 ? slot[0] : 0), q);
    const int token = token_of(0);
    auto step = [&](auto set_c, int it) {  // set: it % 2, the register set and the K buffer
      constexpr int set = decltype(set_c)::value;
      if (pidx == 0) STRACE(it, 13);
      if (!ABLATE_PRODUCER && it + 1 < n_blocks) load_quarter(xs[set ^ 1], token_ptr(p, slot1[0] >= 0 ? slot1[0] : 0), q);
      const PendingSlot pending = cursor_index(p, meta, ahead, s_idx, token);  // block it + 3
      ptx::mbarrier_wait(&sm.kempty[set], ((it / 2) & 1) ^ 1);
      if (pidx == 0) STRACE(it, 14);
      uint8_t* kb = sm.k[set];
      const bool valid = slot[0] >= 0;
      if constexpr (!ABLATE_PRODUCER) {
        store_quarter(kb, xs[set], valid, token, q);
        if (q == 0) sm.valid[set][token] = valid ? 1 : 0;
      }
      if (pidx == 0) STRACE(it, 17);
      ptx::fence_proxy_async_smem();
      ptx::mbarrier_arrive(&sm.kfull[set]);
      if (pidx == 0) STRACE(it, 15);
      const int slot3 = slot_of(p, pending);
      if constexpr (!ABLATE_PRODUCER) prefetch_lines(slot3);
      slot[0] = slot1[0], slot1[0] = slot2, slot2 = slot3;
      cursor_next(p, meta, ahead);
    };
    for (int it = 0; it < n_blocks; it += 2) {
      step(cuda::std::integral_constant<int, 0>{}, it);
      if (it + 1 < n_blocks) step(cuda::std::integral_constant<int, 1>{}, it + 1);
    }
    return;
  }
  for (int it = 0; it < n_blocks; ++it) {
    if (pidx == 0) STRACE(it, 13);
    const int stage = it % 2;
    uint8_t* kb = sm.k[stage];
    const uint32_t remote_kb = XO ? ptx::mapa_shared(ptx::smem_addr(kb), peer) : 0u;
    const uint32_t remote_bar = XO ? ptx::mapa_shared(ptx::smem_addr(&sm.kfull[stage]), peer) : 0u;
    auto put = [&](int offset, uint4 v) { *reinterpret_cast<uint4*>(kb + offset) = v; };
    // Every load of the block (both rounds) is issued before the buffer wait and the conversions.
    PendingSlot pending2[ROUNDS];
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r)
      if constexpr (!ABLATE_PRODUCER) issue(r, slot[r]);
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) pending2[r] = cursor_index(p, meta, ahead, s_idx, token_of(r));
    // With crossover every CTA writes all 64 valid flags: their index loads go out with the gathers (read
    // at the end of the block they stalled the producer: 7 % of its samples in ncu).
    PendingSlot flag_entry{-1, false};
    if constexpr (XO) {
      if (!SPLIT || pidx == 0) flag_entry = cursor_index(p, meta, cur, s_idx, t < 64 ? t : 0);
    }
    // The buffer is free once the consumers (of both CTAs, with crossover) released it. The peer's
    // consumers arrive here (relaxed) after their reads completed; this wait only has to order this
    // thread's later writes after that, which a CTA-scope wait does without invalidating L1.
    ptx::mbarrier_wait(&sm.kempty[stage], ((it / 2) & 1) ^ 1);
    if (pidx == 0) STRACE(it, 14);
#pragma unroll
    for (int r = 0; r < ROUNDS && !ABLATE_PRODUCER; ++r) {
      const int token = token_of(r);
      const bool valid = slot[r] >= 0;
      const float scales[4] = {__uint_as_float(sc4[r].x), __uint_as_float(sc4[r].y), __uint_as_float(sc4[r].z), __uint_as_float(sc4[r].w)};
      if constexpr (SPLIT) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          uint4 a, b;
          dequant16(raw[r][k], __float2bfloat162_rn(pidx == 0 ? scales[k / 2] : scales[2 + k / 2]), a, b);
          if (!valid) a = b = make_uint4(0, 0, 0, 0);
          put((4 * pidx + k) * TILE_BYTES + sw128(token, 2 * q), a);
          put((4 * pidx + k) * TILE_BYTES + sw128(token, 2 * q + 1), b);
          if (r == 0 && k == 0 && pidx == 0) STRACE(it, 16);
        }
        if (pidx == 0) {
#pragma unroll
          for (int k = 0; k < 2; ++k) put(8 * TILE_BYTES + sw128(token, q + 4 * k), valid ? rope[r][k] : make_uint4(0, 0, 0, 0));
        }
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          uint4 a, b;
          dequant16(raw[r][k], __float2bfloat162_rn(scales[k / 2]), a, b);
          if (!valid) a = b = make_uint4(0, 0, 0, 0);
          put(k * TILE_BYTES + sw128(token, 2 * q), a);
          put(k * TILE_BYTES + sw128(token, 2 * q + 1), b);
        }
#pragma unroll
        for (int k = 0; k < 2; ++k) put(8 * TILE_BYTES + sw128(token, q + 4 * k), valid ? rope[r][k] : make_uint4(0, 0, 0, 0));
      }
      if constexpr (!XO) {
        if (q == 0) sm.valid[stage][token] = valid ? 1 : 0;
      }
    }
    if constexpr (XO) {  // both CTAs read the same index row: each sets all 64 flags itself
      if (t < 64 && (!SPLIT || pidx == 0)) sm.valid[stage][t] = slot_of(p, flag_entry) >= 0 ? 1 : 0;
    }
    if (pidx == 0) STRACE(it, 17);
    ptx::fence_proxy_async_smem();  // the consumers' wgmma (and, with crossover, the bulk copy) read these generic writes
    if (pidx == 0) STRACE(it, 18);
    if constexpr (XO && !ABLATE_PRODUCER) {  // (the ablation sets no expected bytes: nothing may arrive)
      __syncwarp();  // every lane's rows and fence before lane 0's copy
      if (lane == 0) {
        const uint32_t rows = ptx::smem_addr(kb) + (32 * rank + 8 * warp) * 128;
#pragma unroll
        for (int tile = 0; tile < NUM_TILES; ++tile)
          if (!SPLIT || (pidx == 0 ? tile < 4 || tile == NUM_TILES - 1 : tile >= 4 && tile < NUM_TILES - 1))  // SPLIT: the tiles this warpgroup wrote
            ptx::bulk_copy_smem_to_cluster(remote_kb + (rows - ptx::smem_addr(kb)) + tile * TILE_BYTES, rows + tile * TILE_BYTES, 8 * 128, remote_bar);
      }
    }
    if (XO && !ABLATE_PRODUCER && t == 0 && (!SPLIT || pidx == 0)) ptx::mbarrier_arrive_expect_tx(&sm.kfull[stage], 32 * D_QK * 2);  // + the peer's half
    else ptx::mbarrier_arrive(&sm.kfull[stage]);
    if (pidx == 0) STRACE(it, 15);
    int slot2[ROUNDS];
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) {
      slot2[r] = slot_of(p, pending2[r]);
      if (!ABLATE_PRODUCER && (!SPLIT || pidx == 0)) prefetch_lines(slot2[r]);
    }
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) slot[r] = slot1[r], slot1[r] = slot2[r];
    cursor_next(p, meta, cur);
    cursor_next(p, meta, ahead);
  }
}

// The 64 heads [h0, h0 + 64) of query token s_idx into SW128 tiles (zero past h_q), six 16-byte loads
// per thread in flight at a time (as load_q_dense).
template <typename T>
__device__ __forceinline__ void load_q(const SparseParams& p, Smem& sm, int req, int h0, int s_idx, int tid) {
  const uint16_t* q = static_cast<const uint16_t*>(p.q);
  constexpr int BATCH = 6, CHUNKS = 64 * 72;
  for (int base = tid; base < CHUNKS; base += BATCH * CONSUMER_THREADS) {
    uint4 v[BATCH];
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int c = base + j * CONSUMER_THREADS, head = h0 + c / 72;
      v[j] = make_uint4(0, 0, 0, 0);
      if (c < CHUNKS && head < p.h_q)
        v[j] = __ldg(reinterpret_cast<const uint4*>(q + req * p.q_batch_stride + s_idx * p.q_token_stride + head * p.q_head_stride + (c % 72) * 8));
    }
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int c = base + j * CONSUMER_THREADS;
      if (c < CHUNKS) *reinterpret_cast<uint4*>(sm.q + ((c % 72) / 8) * TILE_BYTES + sw128(c / 72, (c % 72) % 8)) = v[j];
    }
  }
}

// 1 / the divisor of an unsplit row: its sum plus the sink's term (0 for an empty row; a +inf sink gives 0).
__device__ __forceinline__ float unsplit_inv(const SparseParams& p, int head, float L, float M) {
  float denom = L;
  if (p.attn_sink != nullptr) denom += exp2f(p.attn_sink[head] * LOG2E - M);
  return L == 0.0f ? 0.0f : 1.0f / denom;
}

template <typename T>
__device__ __forceinline__ void store_rows(const SparseParams& p, float (&o)[128], int req, int h0, int s_idx, int wg, int warp_in_wg, int lane,
                                           bool is_split, int slot, const float (&L)[2], const float (&M)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int head = h0 + 16 * warp_in_wg + lane / 4 + 8 * half;
    if (head >= p.h_q) continue;
    const bool empty = L[half] == 0.0f;  // a NaN L propagates (see dense_decode_sm90.cu)
    if (!is_split) {
      const float inv = unsplit_inv(p, head, L[half], M[half]);
      uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s_idx) * p.h_q + head) * D_V;
#pragma unroll
      for (int i = 2 * half; i < 128; i += 4)
        *reinterpret_cast<uint32_t*>(out + wg * 256 + 8 * (i >> 2) + 2 * (lane % 4)) = ptx::pack2<T>(o[i] * inv, o[i + 1] * inv);
      if (wg == 0 && lane % 4 == 0)
        p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s_idx] = empty ? INFINITY : (__log2f(L[half]) + M[half]) * LN2;
    } else {
      const float inv = empty ? 0.0f : 1.0f / L[half];
      const long long row = static_cast<long long>(slot) * p.s_q * p.h_q + s_idx * p.h_q + head;
      float* oa = p.o_accum + row * D_V;
#pragma unroll
      for (int i = 2 * half; i < 128; i += 4)
        *reinterpret_cast<float2*>(oa + wg * 256 + 8 * (i >> 2) + 2 * (lane % 4)) = make_float2(o[i] * inv, o[i + 1] * inv);
      if (wg == 0 && lane % 4 == 0) p.lse_accum[row] = empty ? -INFINITY : __log2f(L[half]) + M[half];
    }
  }
}

// WG is the warpgroup (0 or 1), a template parameter so each instantiation holds only its own path and
// ptxas allocates each within its own register budget.
template <typename T, int WG, bool XO, bool SPLIT_PV = false, bool XO_BULK = false>
__device__ __forceinline__ void consumer(const SparseParams& p, Smem& sm, const SchedMeta& meta, int h0, int s_idx) {
  // O (+)= P·V over this warpgroup's 256 columns (V from `v_base`, 4 tiles), as one m64n256 wgmma per
  // 16 tokens or, for the 512-thread kernel, two m64n128 (columns 0-127, tiles 0-1; 128-255, tiles 2-3).
  // WG0 takes P from its registers (RS), as it has them: no read of sm.p and no wait for its other warps'
  // stores (a 128-thread barrier per block before).
  auto pv_regs = [](float (&o)[128], const uint32_t (&a)[4][4], uint32_t v_base) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (SPLIT_PV) {
        ptx::wgmma_m64n128k16_rs_transb<T, 0>(o, a[j], sw128_at(v_base, j * 2048, TILE_BYTES));
        ptx::wgmma_m64n128k16_rs_transb<T, 64>(o, a[j], sw128_at(v_base, 2 * TILE_BYTES + j * 2048, TILE_BYTES));
      } else {
        ptx::wgmma_m64n256k16_rs_transb<T>(o, a[j], sw128_at(v_base, j * 2048, TILE_BYTES));
      }
    }
  };
  auto pv = [](float (&o)[128], uint32_t p_base, uint32_t v_base) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t a = sw128_at(p_base, j * 32, 16);
      if constexpr (SPLIT_PV) {
        ptx::wgmma_m64n128k16_ss_transb<T, 0>(o, a, sw128_at(v_base, j * 2048, TILE_BYTES));
        ptx::wgmma_m64n128k16_ss_transb<T, 64>(o, a, sw128_at(v_base, 2 * TILE_BYTES + j * 2048, TILE_BYTES));
      } else {
        ptx::wgmma_m64n256k16_ss_transb<T>(o, a, sw128_at(v_base, j * 2048, TILE_BYTES));
      }
    }
  };
  constexpr int wg = WG;
  const int tid = threadIdx.x, warp_in_wg = (tid % 128) / 32, lane = tid % 32;
  const uint32_t q_base = ptx::smem_addr(sm.q), p_base = ptx::smem_addr(sm.p);
  int it = 0;
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int len = request_length(p, req);
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, len);
    const bool is_split = piece_is_split(meta, req);

    // WG0 and WG1 run different code (consumer<0>, consumer<1>), so their named barriers are the
    // unaligned forms (compute-sanitizer's synccheck flagged bar.sync here).
    ptx::named_barrier_sync_unaligned(BAR_CONSUMERS, CONSUMER_THREADS);  // the previous request is done with sQ, sm.l, sm.m
    load_q<T>(p, sm, req, h0, s_idx, tid);
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync_unaligned(BAR_CONSUMERS, CONSUMER_THREADS);

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float m[2] = {M_INIT, M_INIT}, l[2] = {0.0f, 0.0f};

    for (int blk = start_blk; blk < end_blk; ++blk, ++it) {
      const int stage = it % 2;
      const uint32_t k_base = ptx::smem_addr(sm.k[stage]);
      if constexpr (WG == 0) STRACE(it, 0);
      else STRACE(it, 8);
      ptx::mbarrier_wait(&sm.kfull[stage], (it / 2) & 1);
      if constexpr (WG == 0) STRACE(it, 1);
      // With crossover half the block was written by the peer (a bulk copy, or st.async for producer v1,
      // counted by complete_tx into this CTA's own shared memory, as a TMA load would be): a CTA-scope wait
      // sees it as it sees a TMA load.
      // The cluster-scope acquire used before invalidated L1 on every wait (CCTL.IVALL: 9 % of the warp
      // samples in ncu on the H200), for nothing this kernel reads through L1.
      // No proxy fence here with the bulk-copy transport (producers v2, v3): the peer's half comes through
      // the async proxy like a TMA load, and the producer threads fence the local half before they arrive
      // (H200, one call: sparse-v32 380.0 vs 381.8 µs, long-topk 5176.6 vs 5239.7 with the fence).
      // st.async (producer v1) keeps it.
      if constexpr (XO && !XO_BULK) ptx::fence_proxy_async_smem();
      if constexpr (ABLATE_CONSUMERS) {
        __syncwarp();
        if (lane == 0) {
          ptx::mbarrier_arrive(&sm.kempty[stage]);
          if constexpr (XO) ptx::mbarrier_arrive_remote_relaxed(ptx::mapa_shared(ptx::smem_addr(&sm.kempty[stage]), ptx::cluster_ctarank() ^ 1u));
        }
        continue;
      }
      if constexpr (WG == 0) {
        float s[32];
        qk_block<T>(s, q_base, k_base, [](int) {});
        STRACE(it, 2);
        // This thread's 16 token columns are 8c + 2(lane % 4) + e: gather their valid flags into bits 2c + e.
        uint32_t vbits = 0;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const uint32_t two = *reinterpret_cast<const uint16_t*>(&sm.valid[stage][8 * c + 2 * (lane % 4)]);
          vbits |= ((two & 1u) | ((two >> 7) & 2u)) << (2 * c);
        }
        // (Gathering them under Q·Kᵀ, before the last tile's k-steps, measured slower on the H200:
        // sparse-v32 375.2 vs 370.1 µs, one call.)
        // Invalid tokens are masked, the rest scaled to the log2 domain, in the same pass as the row max
        // (separate passes cost WG0 registers it does not have); then the online-softmax step. (Leaving S
        // unscaled and folding the scale into the exponent's fma, as seesaw_pipe does, measured no
        // faster here: sparse-v32 381.7 vs 383.7 µs, long-topk 5232.2 vs 5193.6, one H200 call.)
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
          const float m_new = MLA_SPARSE_LAZY_MAX > 0 ? (mq > m[half] + float(MLA_SPARSE_LAZY_MAX) ? mq : m[half]) : fmaxf(m[half], mq);
          scale[half] = ptx::exp2_approx(m[half] - m_new);
          m[half] = m_new;
          l[half] = l[half] * scale[half] + exponentiate(s, half, m_new);
        }
        uint32_t a[4][4];
        pack_p<T>(a, s);
        // WG1 must be done with the previous block's P before it is overwritten.
        STRACE(it, 3);
        if (blk != start_blk) ptx::named_barrier_sync_unaligned(BAR_P_FREE, CONSUMER_THREADS);
        STRACE(it, 4);
        // Sixteen 32-bit stores, not store_p's stmatrix: that measured 0.7 % faster here (sparse-v32 348.9
        // vs 352.7 µs, H200), but compute-sanitizer's racecheck then reported the sm.scale hand-over below
        // (WG0's writes, WG1's reads across P_READY: bar.arrive, which racecheck does not model, see
        // P_FREE) where this form's build had 0 hazards. stmatrix with P and sm.scale handed over through
        // an mbarrier instead (racecheck 0 hazards) measured no faster (sparse-v32 352.5 vs 354.4 / 352.7
        // µs, H200, docs/sparse-decode.md §19), so the hand-over stays the named barrier P_READY.
        store_p_words(sm.p, a, warp_in_wg, lane);
        if (lane % 4 == 0) {
          sm.scale[16 * warp_in_wg + lane / 4] = scale[0];
          sm.scale[16 * warp_in_wg + lane / 4 + 8] = scale[1];
        }
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_arrive_unaligned(BAR_P_READY, CONSUMER_THREADS);
        STRACE(it, 5);
        // (Skipping this where every row of the warp rescales by exactly 1, as seesaw_fast does, measured
        // no faster on the H200: 448.2 vs 448.6 µs at sparse-v32.)
        if (MLA_SPARSE_LAZY_MAX == 0 || !__all_sync(0xFFFFFFFFu, scale[0] == 1.0f && scale[1] == 1.0f)) {
#pragma unroll
          for (int i = 0; i < 128; ++i) o[i] *= scale[(i >> 1) & 1];
        }
        ptx::wgmma_fence();
        pv_regs(o, a, k_base);
        STRACE(it, 6);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_regs(o);
        STRACE(it, 7);
      } else {
        ptx::named_barrier_sync_unaligned(BAR_P_READY, CONSUMER_THREADS);
        STRACE(it, 9);
        const float f0 = sm.scale[16 * warp_in_wg + lane / 4], f1 = sm.scale[16 * warp_in_wg + lane / 4 + 8];
        if (MLA_SPARSE_LAZY_MAX == 0 || !__all_sync(0xFFFFFFFFu, f0 == 1.0f && f1 == 1.0f)) {
#pragma unroll
          for (int i = 0; i < 128; ++i) o[i] *= ((i >> 1) & 1) ? f1 : f0;
        }
        ptx::wgmma_fence();
        pv(o, p_base, k_base + 4 * TILE_BYTES);
        STRACE(it, 10);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_regs(o);
        STRACE(it, 11);
      }
      // Lane 0 arrives for its warp: the other lanes' reads of this buffer (the valid flags) must be
      // ordered before it, since an mbarrier arrive releases only the arriving thread's accesses.
      __syncwarp();
      if (lane == 0) {
        ptx::mbarrier_arrive(&sm.kempty[stage]);
        // The peer's producer also writes into this buffer: release it there too.
        // Relaxed: this warp's reads of the buffer are complete (wgmma_wait), and the release form's
        // fence (ERRBAR) held each consumer warp 8 % of its samples in ncu.
        if constexpr (XO) ptx::mbarrier_arrive_remote_relaxed(ptx::mapa_shared(ptx::smem_addr(&sm.kempty[stage]), ptx::cluster_ctarank() ^ 1u));
      }
      // WG1 releases P with a full barrier (a sync, not an arrive), after its K release: it waits for
      // WG0's next P here instead of at P_READY, so it costs nothing (H200: 402.7 vs 403.7 µs at
      // sparse-v32), and racecheck, which does not model barrier.arrive (scripts/device/racecheck-probe.cu
      // mode 4), then sees the sm.scale exchange ordered: its last sparse report.
      if constexpr (WG == 1) {
        ptx::named_barrier_sync_unaligned(BAR_P_FREE, CONSUMER_THREADS);
        STRACE(it, 12);
      }
    }

    // Final L and M: WG0 owns them; WG1's last P_FREE sync is met here.
    float L[2], M[2];
    if constexpr (WG == 0) {
      if constexpr (!ABLATE_CONSUMERS) ptx::named_barrier_sync_unaligned(BAR_P_FREE, CONSUMER_THREADS);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        l[half] += __shfl_xor_sync(0xFFFFFFFFu, l[half], 1);
        l[half] += __shfl_xor_sync(0xFFFFFFFFu, l[half], 2);
        L[half] = l[half], M[half] = m[half];
        if (lane % 4 == 0) sm.l[16 * warp_in_wg + lane / 4 + 8 * half] = l[half], sm.m[16 * warp_in_wg + lane / 4 + 8 * half] = m[half];
      }
      // A full barrier (not arrive): once per request, so free, and racecheck then sees the exchange
      // ordered (it reported WG0's sm.l / sm.m writes against WG1's reads across an arrive -> sync pair).
      ptx::named_barrier_sync_unaligned(BAR_L_READY, CONSUMER_THREADS);
    } else {
      ptx::named_barrier_sync_unaligned(BAR_L_READY, CONSUMER_THREADS);
#pragma unroll
      for (int half = 0; half < 2; ++half) L[half] = sm.l[16 * warp_in_wg + lane / 4 + 8 * half], M[half] = sm.m[16 * warp_in_wg + lane / 4 + 8 * half];
    }
    const int slot = p.num_splits[req] + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);
    store_rows<T>(p, o, req, h0, s_idx, wg, warp_in_wg, lane, is_split, slot, L, M);
  }
}

// MLA_SPARSE_H16_OPT_MAX (default 1; 0 builds the previous form for A/B timing): the h16 consumer takes
// the lazy max's decision by a vote in Pᵀ's barrier instead of exchanging column maxima every block
// (consumer_h16). H200, sparse-h16: 154.1-154.7 µs against 156.7-157.1 (five rounds over two calls).
#ifndef MLA_SPARSE_H16_OPT_MAX
#define MLA_SPARSE_H16_OPT_MAX 1
#endif
constexpr bool H16_OPT_MAX = MLA_SPARSE_H16_OPT_MAX != 0;
// The h16 consumer's wgmma descriptors built from each part's address (MLA_DESC_ADD's earlier form, here
// the default): its Q·Kᵀ and P·V were slower with base-plus-offset descriptors, unlike every other kernel's.
// H200, sparse-h16, `--kernel sparse_h16` (`…-exp17c-*`, one call, two rounds): 155.0 / 155.1 µs against
// 158.4 / 158.3 with base plus offset; a build with the address form in every kernel (-DMLA_DESC_ADD=0)
// 152.4 / 153.4 (its h16 SASS differs from this one in scheduling only: the same helpers, 128 bytes longer).
#ifndef MLA_SPARSE_H16_DESC_ADD
#define MLA_SPARSE_H16_DESC_ADD 0
#endif
constexpr bool H16_DESC_ADD = MLA_SPARSE_H16_DESC_ADD != 0;

// The h16 consumer (h_q <= 16; the API's kernel at 8 and 16 heads since the twelfth session, tested in
// test/gpu/mla/sparseH16.test.ts): one warpgroup with the tokens as wgmma's M and the heads as N (decode_common.cuh, h16_*), as
// the dense h16 kernel, so a block's tensor work is a quarter of the 64-row consumers' (48 of whose rows
// are zeros at 16 heads). The eleventh session's trace of sparse-h16 found the 64-row consumers' serial
// chain (Q·Kᵀ, softmax, P hand-over, P·V) setting the block period (docs/sparse-decode.md §20). sQ holds
// Q's 16 heads as nine 16-row tiles, sm.p holds Pᵀ and sm.scale the cross-warp reductions.
// DUAL (MLA_SPARSE_H16_DUAL, an experiment): two consumer warpgroups, wg taking the blocks of odd or even
// position in the CTA's walk, so always K buffer wg (one warpgroup's chain, Q·Kᵀ -> softmax -> P·V, is
// ~3.3 k cycles a block on the H200, most of it latency); each keeps its own Oᵀ, m and l for a request,
// and WG1 hands its part to WG0 through shared memory at the request's end (the split-KV merge, in
// place). Correct on the H200 and slower (sparse-h16 175.0 vs 171.3 µs): the producers bound the kernel,
// and WG0 then waited ~4.9 k cycles a block for K; it is for a faster producer.
// The h16 consumers' masking of a block's Sᵀ (log2 units applied; a token without a slot gets MASKED)
// and the thread's own column maxima of it.
__device__ __forceinline__ void h16_mask(float (&st)[8], float (&mx)[4], const uint8_t* valid, float scale_log2, int warp, int lane) {
#pragma unroll
  for (int j = 0; j < 4; ++j) mx[j] = MASKED;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int j = h16_j(e);
    st[e] = valid[h16_row(warp, lane, e)] ? st[e] * scale_log2 : MASKED;
    mx[j] = fmaxf(mx[j], st[e]);
  }
}

// The lazy max's decision needs no column maxima unless a score rose past it: a thread whose own scores
// stay within m + TAU (m is the same in every thread of a column) computes Pᵀ with the m it has and
// stores it (store_pt), and the barrier that publishes Pᵀ also ORs every thread's "rose". Only then (a
// request's first block, a jump) the full step runs again from the kept scores and stores Pᵀ again; the
// outputs are the same bits as h16_softmax's either way (the same m, P and order of l's sums).
template <typename StorePt>
__device__ __forceinline__ void h16_vote_softmax(float (&st)[8], float (&mx)[4], float (&m)[4], float (&l)[4], float (&ot)[8][8], float (&red)[4][H16_ROWS],
                                                 int warp, int lane, uint32_t bar, StorePt&& store_pt) {
  bool rose = false;
#pragma unroll
  for (int j = 0; j < 4; ++j) rose |= MLA_SPARSE_LAZY_MAX > 0 ? mx[j] > m[j] + float(MLA_SPARSE_LAZY_MAX) : mx[j] > m[j];
  float kept[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) kept[e] = st[e], st[e] = ptx::exp2_approx(st[e] - m[h16_j(e)]);
  store_pt(st);
  if (ptx::named_barrier_sync_or(bar, 128, rose)) {
#pragma unroll
    for (int e = 0; e < 8; ++e) st[e] = kept[e];
    h16_softmax<MLA_SPARSE_LAZY_MAX>(st, mx, m, l, ot, red, warp, lane, bar);
    store_pt(st);
    ptx::named_barrier_sync(bar, 128);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) l[h16_j(e)] += st[e];
  }
}

// Two consumer warpgroups' states of one request merged into this one's: the other's column maxima m1
// and sums l1 (by column), its Oᵀ tiles 0-3 at ot_lo and 4-7 at ot_hi (element e of tile mb at
// (8 (mb % 4) + e) · 128 + tid, as the other thread tid stored it).
__device__ __forceinline__ void h16_merge_take(float (&m)[4], float (&L)[4], float (&ot)[8][8], const float* m1s, const float* l1s, const float* ot_lo,
                                               const float* ot_hi, int tid, int lane) {
  float f0[4], f1[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int c = h16_col(lane, j);
    const float m1 = m1s[c], M = fmaxf(m[j], m1);
    f0[j] = ptx::exp2_approx(m[j] - M), f1[j] = ptx::exp2_approx(m1 - M);
    L[j] = L[j] * f0[j] + l1s[c] * f1[j];
    m[j] = M;
  }
#pragma unroll
  for (int mb = 0; mb < 8; ++mb) {
    const float* src = mb < 4 ? ot_lo + 8 * mb * 128 : ot_hi + 8 * (mb - 4) * 128;
#pragma unroll
    for (int e = 0; e < 8; ++e) ot[mb][e] = ot[mb][e] * f0[h16_j(e)] + src[e * 128 + tid] * f1[h16_j(e)];
  }
}

template <typename T, bool DUAL = false>
__device__ __forceinline__ void consumer_h16(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx, int wg = 0) {
  const int tid = threadIdx.x - 128 * wg, warp = tid / 32, lane = tid % 32;
  constexpr int ALL = DUAL ? 256 : 128;  // the consumer threads
  const uint32_t bar = wg == 0 ? BAR_CONSUMERS : BAR_P_READY, bar_all = DUAL ? BAR_P_FREE : BAR_CONSUMERS;
  float (&red)[4][H16_ROWS] = *reinterpret_cast<float (*)[4][H16_ROWS]>(wg == 0 ? sm.scale : sm.l);
  static_assert(sizeof(sm.scale) >= sizeof(float[4][H16_ROWS]) && sizeof(sm.l) >= sizeof(float[4][H16_ROWS]), "each warpgroup's reduction space");
  static_assert(sizeof(sm.p) >= 4096 + H16_TILE, "each warpgroup's Pᵀ, 1024-aligned");
  const uint32_t q_base = ptx::smem_addr(sm.q), pt_base = ptx::smem_addr(sm.p) + 4096 * wg;
  const uint16_t* q = static_cast<const uint16_t*>(p.q);
  // sQ holds two requests' Q (2 x 18 KB of the 64-row kernels' 72 KB); the next request's is copied
  // (cp.async) while this one's blocks run, so a request switch does not wait for an 18 KB load queued
  // behind the producers' gathers. H200, sparse-h16: 170.4 / 170.9 µs against 171.6 / 171.9 with a
  // synchronous load at each request's start (two rounds, one call).
  constexpr int Q_BYTES = (D_QK / 64) * H16_TILE;
  static_assert(2 * Q_BYTES <= QK_BYTES, "two h16 Q fit in sQ");
  auto q_async = [&](int req, int half) {
    for (int c = threadIdx.x; c < H16_ROWS * 72; c += ALL) {
      const int head = c / 72, chunk = c % 72;
      const bool in = head < p.h_q;
      const uint16_t* src = q + (in ? req * p.q_batch_stride + s_idx * p.q_token_stride + head * p.q_head_stride + chunk * 8 : 0);
      ptx::cp_async_16(q_base + half * Q_BYTES + (chunk / 8) * H16_TILE + sw128(head, chunk % 8), src, in ? 16u : 0u);
    }
    ptx::cp_async_commit();
  };
  q_async(meta.begin_req_idx, 0);
  int it = 0;
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int len = request_length(p, req);
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, len);
    const bool is_split = piece_is_split(meta, req);
    ptx::named_barrier_sync(bar_all, ALL);  // the previous request is done with sQ, red and the merge space
    const int half = (req - meta.begin_req_idx) & 1;
    if (req < meta.end_req_idx) {  // the other half was the previous request's
      q_async(req + 1, half ^ 1);
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(bar_all, ALL);
    const uint32_t q_req = q_base + half * Q_BYTES;

    float ot[8][8], m[4], l[4];
    h16_init(ot, m, l);

    for (int blk = start_blk; blk < end_blk; ++blk, ++it) {
      if (DUAL && (it & 1) != wg) continue;
      const int stage = it % 2;
      // The producer wrote zeros for invalid tokens, so V holds no poison; their scores are masked here.
      STRACE(it, 0);
      ptx::mbarrier_wait(&sm.kfull[stage], (it / 2) & 1);
      STRACE(it, 1);
      const uint32_t k_base = ptx::smem_addr(sm.k[stage]);
      float st[8], mx[4];
      if constexpr (ABLATE_CONSUMERS) {  // the producers' rate: release at once (wrong outputs)
        if (lane == 0) ptx::mbarrier_arrive(&sm.kempty[stage]);
        continue;
      }
      h16_qk<T, H16_DESC_ADD>(st, k_base, q_req);
      STRACE(it, 2);
      h16_mask(st, mx, sm.valid[stage], p.scale_log2, warp, lane);
      if constexpr (H16_OPT_MAX && !DUAL) {
        h16_vote_softmax(st, mx, m, l, ot, red, warp, lane, bar, [&](const float (&v)[8]) { h16_store_pt<T>(v, pt_base, warp, lane); });
        STRACE(it, 3);
        h16_pv_mma<T, H16_DESC_ADD>(ot, k_base, pt_base);
      } else {
        h16_softmax<MLA_SPARSE_LAZY_MAX>(st, mx, m, l, ot, red, warp, lane, bar);
        STRACE(it, 3);
        h16_pv<T, H16_DESC_ADD>(ot, st, k_base, pt_base, warp, lane, bar);
      }
      STRACE(it, 7);
      // sm.p and red are the next block's. Lane 0 releases the buffer after the barrier, which orders every
      // thread's reads of it (the valid flags) before: compute-sanitizer's racecheck models a barrier, not
      // a __syncwarp, ahead of another thread's mbarrier arrive (it reported that form once buffers were reused).
      ptx::named_barrier_sync(bar, 128);
      if (lane == 0) ptx::mbarrier_arrive(&sm.kempty[stage]);
      STRACE(it, 12);
    }

    float L[4] = {l[0], l[1], l[2], l[3]};
    h16_col_reduce(L, red, warp, lane, bar, [](float a, float b) { return a + b; });
    if constexpr (DUAL) {  // WG1's m, L (sm.m) and Oᵀ (fp32, past sQ's two halves) into WG0's
      float* xo = reinterpret_cast<float*>(sm.q + 2 * Q_BYTES);
      static_assert(2 * Q_BYTES + 64 * 128 * 4 <= QK_BYTES && sizeof(sm.m) >= 2 * H16_ROWS * 4, "the merge space");
      if (wg == 1) {
        if (warp == 0 && lane < 4) {
#pragma unroll
          for (int j = 0; j < 4; ++j) sm.m[h16_col(lane, j)] = m[j], sm.m[H16_ROWS + h16_col(lane, j)] = L[j];
        }
#pragma unroll
        for (int mb = 0; mb < 8; ++mb)
#pragma unroll
          for (int e = 0; e < 8; ++e) xo[(8 * mb + e) * 128 + tid] = ot[mb][e];
      }
      ptx::named_barrier_sync(bar_all, ALL);
      if (wg == 1) continue;
      h16_merge_take(m, L, ot, sm.m, sm.m + H16_ROWS, xo, xo + 32 * 128, tid, lane);
    }
    // The rows' destinations as store_rows computes them (a helper for those, shared with store_rows,
    // changed the shipped v2 and v3 kernels' SASS; left for a session that can re-time them).
    const int slot = p.num_splits[req] + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int head = h16_col(lane, j);
      if (head >= p.h_q) continue;
      const bool empty = L[j] == 0.0f;  // a NaN L propagates (see dense_decode_sm90.cu)
      if (!is_split) {
        const float inv = unsplit_inv(p, head, L[j], m[j]);
        uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s_idx) * p.h_q + head) * D_V;
        h16_store_col<T>(out, ot, j, inv, warp, lane);
        if (warp == 0 && lane < 4) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s_idx] = empty ? INFINITY : (__log2f(L[j]) + m[j]) * LN2;
      } else {
        const float inv = empty ? 0.0f : 1.0f / L[j];
        const long long row = static_cast<long long>(slot) * p.s_q * p.h_q + s_idx * p.h_q + head;
        float* oa = p.o_accum + row * D_V;
        h16_store_col<T>(oa, ot, j, inv, warp, lane);
        if (warp == 0 && lane < 4) p.lse_accum[row] = empty ? -INFINITY : __log2f(L[j]) + m[j];
      }
    }
  }
}

// MLA_SPARSE_H16_RR3 (an experiment): the h16 kernel's idle WG1 becomes a third producer. The three
// producer warpgroups take the walk's half blocks (32 tokens each) in turn, warpgroup k the half blocks
// k, k + 3, k + 6, ..., each with its own loads in flight, so ~1.5x the gathers of two warpgroups are
// outstanding per SM. A block's two halves come from two different warpgroups (kfull still counts 256
// threads); each warpgroup walks its half blocks in order, so the consumer's releases, in block order,
// keep every kempty wait within one phase of its buffer (its previous wait passed a later release).
// Correct on the H200 (the sparseH16 test 4/4) and slower: sparse-h16 177.5 / 177.6 vs 170.0 / 170.3 µs,
// the producers alone 128.9 / 129.1 vs 129.9 / 130.0 (`…-exp12g-*`): more gathers in flight did not
// raise their rate (docs/sparse-decode.md §21). (Timed before its loads and conversion became
// load_quarter / store_quarter, which left its code the same size and scheduled it differently.)
__device__ __forceinline__ void producer_rr3(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx, int pidx) {
  const int t = threadIdx.x - 128 * (pidx + 1), warp = t / 32, lane = t % 32, q = lane / 8;
  auto token_of = [&](int h) { return 32 * (h % 2) + 8 * warp + lane % 8; };
  auto prefetch_lines = [&](int slot) { prefetch_quarter_lines(p, slot, q); };
  auto seek = [&](Cursor& c, int& at, int blk) {  // forward to the walk's block blk
    for (; at < blk; ++at) cursor_next(p, meta, c);
  };
  const int n_blocks = walk_blocks(p, meta);
  Cursor c = cursor_begin(p, meta), ahead = c;
  int at = 0, at_ahead = 0;
  seek(c, at, pidx / 2);
  int slot = cursor_slot(p, meta, c, s_idx, token_of(pidx));
  seek(ahead, at_ahead, (pidx + 3) / 2);
  int slot1 = cursor_slot(p, meta, ahead, s_idx, token_of(pidx + 3));
  prefetch_lines(slot), prefetch_lines(slot1);
  for (int h = pidx; h / 2 < n_blocks; h += 3) {
    const int blk = h / 2, stage = blk % 2, token = token_of(h);
    TokenQuarter x;
    load_quarter(x, token_ptr(p, slot >= 0 ? slot : 0), q);
    seek(ahead, at_ahead, (h + 6) / 2);
    const PendingSlot pending = cursor_index(p, meta, ahead, s_idx, token_of(h + 6));
    ptx::mbarrier_wait(&sm.kempty[stage], ((blk / 2) & 1) ^ 1);
    const bool valid = slot >= 0;
    store_quarter(sm.k[stage], x, valid, token, q);
    if (q == 0) sm.valid[stage][token] = valid ? 1 : 0;
    ptx::fence_proxy_async_smem();
    ptx::mbarrier_arrive(&sm.kfull[stage]);
    slot = slot1;
    slot1 = slot_of(p, pending);
    prefetch_lines(slot1);
  }
}

// The h16 kernel's producers (MLA_SPARSE_H16_WT, default 2): a warp per token. Warp w of the eight
// producer warps takes tokens 8w .. 8w + 7 of each block; for each, all 32 lanes load the 512 e4m3
// bytes (16 each: one instruction covers the token's five lines) and each lane its scale (4 bytes: the
// eight lanes of a 128-dim group read the same word); the eight tokens' RoPE (128 bytes each) come in
// two loads of four tokens. With PREFETCH the lines of the block two ahead are prefetched into L2, as
// producer_v2 does (no registers: gathers in flight beyond the register set). Lane l converts dims
// 16l .. 16l + 15 (tile l/4, chunks 2(l%4) and + 1, scale l/8); lanes of odd tiles store their second
// chunk first, so each store instruction covers all eight 16-byte columns (no bank conflict, though all
// lanes write the same row of eight tiles).
// Why: scripts/device/gather-probe.cu read sparse-h16's 344 MB of tokens (nothing else to do) in 87-89
// µs with a warp per token and 64 warps per SM, in 96.5 µs with eight warps holding 16 tokens each, but
// in 124-128 µs with producer_v2's quarters (8 tokens an instruction, 64 bytes each) on eight warps: what
// the h16 producers alone took (125-130 µs). H200, sparse-h16, one call each (docs/sparse-decode.md §22):
// MODE 2 + PREFETCH 157.2 / 157.1 µs against 170.8 / 170.4 (producer_v2), producers alone 123.9 vs 129.5;
// without the prefetch 171.3; MODE 1 (two register sets, 152 registers, the consumer then at 184) 205.1,
// with the prefetch 190.8 (the consumer's Q·Kᵀ took 1,800 cycles a block instead of ~1,000); each register
// reloaded with the next block's piece as soon as converted 170.0; two consumer warpgroups (DUAL, 136 +
// 120 registers) 159.5, their producers too slow to feed them (WG0 waited ~4,000 cycles a block for K);
// the prefetch three blocks ahead instead of two 178.5 (producers alone 133.5 vs 124.0); the gathers
// with L1::no_allocate 158.8 (and sparse-v32 377.1 vs 355.5).
template <int MODE, bool PREFETCH>
__device__ __forceinline__ void producer_wt(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx, int pidx) {
  constexpr uint32_t FULL = 0xFFFFFFFFu;
  constexpr bool PIPE = MODE == 1;
  const int t = threadIdx.x - CONSUMER_THREADS - 128 * pidx, w = 4 * pidx + t / 32, lane = t % 32;
  const int g = lane / 4, qd = lane % 4;  // this lane's tile and chunk pair
  const int my_token = 8 * w + (lane & 7);  // the index this lane loads; token j's is lane j's
  struct Set {
    uint4 main[8], rope[2];
    float scale[8];
  };
  // Each lane turns its own token's slot into an offset once; the lanes that load a token fetch it.
  struct Offsets {
    uint32_t lo, hi;
  };
  auto offsets = [&](int slot) {
    const unsigned long long off = static_cast<unsigned long long>(token_ptr(p, max(slot, 0)) - p.kv);
    return Offsets{static_cast<uint32_t>(off), static_cast<uint32_t>(off >> 32)};
  };
  auto token_of = [&](Offsets o, int j) {
    return p.kv + static_cast<long long>((static_cast<unsigned long long>(__shfl_sync(FULL, o.hi, j)) << 32) | __shfl_sync(FULL, o.lo, j));
  };
  auto issue = [&](Set& x, int slot) {
    const Offsets o = offsets(slot);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint8_t* tok = token_of(o, j);
      x.main[j] = ptx::ld_nc_v4(tok + 16 * lane);
      x.scale[j] = ptx::ld_nc_f32(tok + 512 + 4 * (lane / 8));  // the scale of this lane's dims
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) x.rope[i] = ptx::ld_nc_v4(token_of(o, 4 * i + lane / 8) + 528 + 16 * (lane % 8));
  };
  auto convert = [&](const Set& x, int slot, int stage) {
    uint8_t* kb = sm.k[stage];
    const uint32_t valid = __ballot_sync(FULL, slot >= 0);  // bit j (j < 8): token 8w + j
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint4 a, b;
#ifdef MLA_ABLATE_SPARSE_DEQUANT  // timing ablation (wrong outputs): the bytes stored as loaded
      a = b = x.main[j];
#else
      dequant16(x.main[j], __float2bfloat162_rn(x.scale[j]), a, b);
#endif
      if (!((valid >> j) & 1u)) a = b = make_uint4(0, 0, 0, 0);
      uint8_t* tile = kb + g * TILE_BYTES;
      const int row = 8 * w + j, odd = g & 1;
      *reinterpret_cast<uint4*>(tile + sw128(row, 2 * qd + odd)) = odd ? b : a;
      *reinterpret_cast<uint4*>(tile + sw128(row, 2 * qd + (odd ^ 1))) = odd ? a : b;
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int js = 4 * i + lane / 8;
      *reinterpret_cast<uint4*>(kb + 8 * TILE_BYTES + sw128(8 * w + js, lane % 8)) = (valid >> js) & 1u ? x.rope[i] : make_uint4(0, 0, 0, 0);
    }
    if (lane < 8) sm.valid[stage][8 * w + lane] = slot >= 0 ? 1 : 0;
  };
  const int n_blocks = walk_blocks(p, meta);
  Cursor ahead = cursor_begin(p, meta);
  int slot_cur = cursor_slot(p, meta, ahead, s_idx, my_token);
  cursor_next(p, meta, ahead);
  int slot_nxt = cursor_slot(p, meta, ahead, s_idx, my_token);
  cursor_next(p, meta, ahead);
  Set xs[PIPE ? 2 : 1];
  if constexpr (PREFETCH) prefetch_quarter_lines(p, slot_cur, lane / 8), prefetch_quarter_lines(p, slot_nxt, lane / 8);
  if constexpr (PIPE) issue(xs[0], slot_cur);
  auto step = [&](auto set_c, int it) {  // set: the register set (PIPE) and the K buffer, it % 2
    constexpr int set = decltype(set_c)::value, rs = PIPE ? set : 0;
    if (pidx == 0) STRACE(it, 13);
    if constexpr (PIPE) {
      if (it + 1 < n_blocks) issue(xs[rs ^ 1], slot_nxt);
    } else {
      issue(xs[0], slot_cur);
    }
    const PendingSlot pending = cursor_index(p, meta, ahead, s_idx, my_token);  // block it + 2
    ptx::mbarrier_wait(&sm.kempty[set], ((it / 2) & 1) ^ 1);
    if (pidx == 0) STRACE(it, 14);
    if constexpr (PREFETCH) prefetch_quarter_lines(p, slot_of(p, pending), lane / 8);  // lane & 7's token, lines q, q + 4
    convert(xs[rs], slot_cur, set);
    if (pidx == 0) STRACE(it, 17);
    ptx::fence_proxy_async_smem();
    ptx::mbarrier_arrive(&sm.kfull[set]);
    if (pidx == 0) STRACE(it, 15);
    slot_cur = slot_nxt;
    slot_nxt = slot_of(p, pending);
    cursor_next(p, meta, ahead);
  };
  for (int it = 0; it < n_blocks; it += 2) {
    step(cuda::std::integral_constant<int, 0>{}, it);
    if (it + 1 < n_blocks) step(cuda::std::integral_constant<int, 1>{}, it + 1);
  }
}

// 512 threads as v3: WG0 the h16 consumer, WG1 idle (its registers go to the others), WG2-3 the
// producers: producer_wt (one register set and the L2 prefetch). MLA_SPARSE_H16_WT=0 builds producer_v2
// instead (the eleventh session's form, for A/B timing), where MLA_SPARSE_H16_PIPE=1 gives it two
// register sets and MLA_SPARSE_H16_RR3=1 makes WG1 a third producer; 1 = producer_wt with two sets.
#ifndef MLA_SPARSE_H16_DUAL
#define MLA_SPARSE_H16_DUAL 0
#endif
#ifndef MLA_SPARSE_H16_PIPE
#define MLA_SPARSE_H16_PIPE 0
#endif
#ifndef MLA_SPARSE_H16_RR3
#define MLA_SPARSE_H16_RR3 0
#endif
#ifndef MLA_SPARSE_H16_WT
#define MLA_SPARSE_H16_WT 2
#endif
constexpr int H16_WT = MLA_SPARSE_H16_WT;
static_assert(H16_WT >= 0 && H16_WT <= 2, "0 (producer_v2), 1 or 2 (producer_wt with two or one register sets)");
#ifndef MLA_SPARSE_H16_WT_PREFETCH
#define MLA_SPARSE_H16_WT_PREFETCH 1
#endif
constexpr bool H16_RR3 = MLA_SPARSE_H16_RR3 != 0;
constexpr bool H16_PIPE = MLA_SPARSE_H16_PIPE != 0;
constexpr bool H16_DUAL = MLA_SPARSE_H16_DUAL != 0;
constexpr bool H16_WIDE = H16_PIPE || H16_WT == 1;  // producers with two register sets
static_assert(!(H16_DUAL && H16_WIDE), "two consumer warpgroups leave the producers too few registers for two sets");
static_assert(!((H16_RR3 || H16_PIPE) && H16_WT), "RR3 and PIPE are producer_v2's: build them with MLA_SPARSE_H16_WT=0");
static_assert(!(H16_RR3 && (H16_DUAL || H16_WIDE)), "WG1 produces with RR3");
// producer_wt holds 8 scales beside its 10 loads a set: 152 registers with two sets, 120 with one (at 72
// it spilled); the h16 consumer fits in 136 without spilling, but at 184 it ran slower than at 224
// (PIPE: 180.3 vs 174.5 µs). The overrides are for timing.
#ifndef MLA_SPARSE_H16_CONSUMER_REGS
#define MLA_SPARSE_H16_CONSUMER_REGS (H16_DUAL ? (H16_WT ? 136 : 184) : H16_WT == 1 ? 184 : H16_PIPE ? 224 : 232)
#endif
constexpr int H16_CONSUMER_REGS = MLA_SPARSE_H16_CONSUMER_REGS, H16_IDLE_REGS = 24;
#ifndef MLA_SPARSE_H16_PRODUCER_REGS
#define MLA_SPARSE_H16_PRODUCER_REGS (H16_WT == 1 ? 152 : H16_WT == 2 ? 120 : H16_WIDE ? LAUNCH_REGS_V3 : PRODUCER_REGS_V3)
#endif
constexpr int H16_PRODUCER_REGS = MLA_SPARSE_H16_PRODUCER_REGS;
static_assert((H16_DUAL ? 2 * H16_CONSUMER_REGS : H16_CONSUMER_REGS + H16_IDLE_REGS) + 2 * H16_PRODUCER_REGS <= 4 * LAUNCH_REGS_V3, "setmaxnreg within the CTA's registers");
__device__ __forceinline__ void sparse_decode_h16(const SparseParams& p) {
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = smem_struct_1024<Smem>(smem_raw);
  const SchedMeta* meta = reinterpret_cast<const SchedMeta*>(p.sched_meta) + blockIdx.z;
  if (meta->begin_req_idx >= p.b) {
    ptx::pdl_launch_dependents();
    return;
  }
  pdl_launch_if_unsplit(*meta);
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      ptx::mbarrier_init(&sm.kfull[s], 128 * 2);
      ptx::mbarrier_init(&sm.kempty[s], 4);  // the consuming warpgroup's warps (WG0, or WG s with DUAL)
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  const int wg = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 128), 0);
  if (H16_RR3 && wg >= 1) {
    ptx::setmaxnreg_dec<PRODUCER_REGS_V3>();
    producer_rr3(p, sm, *meta, blockIdx.y, wg - 1);
  } else if (wg >= 2) {
    if constexpr (H16_PRODUCER_REGS < LAUNCH_REGS_V3) ptx::setmaxnreg_dec<H16_PRODUCER_REGS>();  // (PIPE keeps the launch's 128)
    if constexpr (H16_PRODUCER_REGS > LAUNCH_REGS_V3) ptx::setmaxnreg_inc<H16_PRODUCER_REGS>();
    if constexpr (H16_WT != 0)
      producer_wt<H16_WT, MLA_SPARSE_H16_WT_PREFETCH != 0>(p, sm, *meta, blockIdx.y, wg - 2);
    else
      producer_v2<false, 2, H16_PIPE>(p, sm, *meta, blockIdx.y, wg - 2);
  } else if (wg == 0 || H16_DUAL) {
    ptx::setmaxnreg_inc<H16_CONSUMER_REGS>();
    consumer_h16<ptx::bf16_t, H16_DUAL>(p, sm, *meta, blockIdx.y, wg);
  } else {
    ptx::setmaxnreg_dec<H16_IDLE_REGS>();
  }
  ptx::pdl_launch_dependents();
}

// ---- h16x (docs/sparse-decode.md §24; the API's kernel at 8 and 16 heads): the consumers convert FP8 ---
// The h16 kernel's consumer is its bound (consumer alone 152.9 µs = the kernel's time; producers alone
// 122.9), and its two wgmma chains draw ~107 B a clock of shared memory reading bf16 K and V (the smem
// probe). Here the producers only move bytes: 656-byte tokens land by cp.async.bulk in a four-stage ring
// (no registers, no L1 fill, no conversion), and two consumer warpgroups, taking the walk's blocks in
// turn, read the raw bytes into wgmma's register A fragments:
// - Sᵀ = K·Qᵀ: K's e4m3 codes become f16 exactly (one cvt per two) and multiply Q in f16 (each head
//   times 2^-k, its largest |q| into [2^14, 2^15): bf16 values are exact in f16 there), one accumulator
//   per 128-dim scale group, combined with the tokens' scales and 2^k; RoPE in bf16 from the raw bytes.
//   The 512 dims are permuted inside each group (Q's columns with them) so a thread's A fragments of a
//   group are 32 contiguous bytes of a token: two 16-byte loads.
// - Oᵀ += Vᵀ·Pᵀ: V's codes for four tokens of a dim are paired with prmt, converted and scaled exactly as
//   dequant16 does (the same bf16 values), one 4-byte load per token and group; Oᵀ's rows are permuted
//   so a thread's 4 dims of a group are contiguous (one 4-byte load, and 8- or 16-byte output stores).
// Shared memory per block: 42 KB of bulk fills, ~80 KB of loads, 18 + 16 KB of wgmma B reads (the h16
// kernel: ~335 KB). Written in the fifteenth session; H200, sparse-h16: 121.3-124.3 µs against 152.2-152.8
// for h16 (tests: test/gpu/mla/sparseH16x.test.ts).
namespace h16x {
#ifndef MLA_SPARSE_H16X_STAGES
#define MLA_SPARSE_H16X_STAGES 4
#endif
constexpr int STAGES = MLA_SPARSE_H16X_STAGES, STAGE_BYTES = 64 * TOKEN_BYTES, THREADS = 512;
// Sets of A fragments in flight (wgmma groups not yet retired) in Q·Kᵀ and in P·V: timing switches.
#ifndef MLA_SPARSE_H16X_QK_DEPTH
#define MLA_SPARSE_H16X_QK_DEPTH 2
#endif
#ifndef MLA_SPARSE_H16X_PV_DEPTH
#define MLA_SPARSE_H16X_PV_DEPTH 2
#endif
// MLA_SPARSE_H16X_FINE=1: commit groups half as large (2 k-steps in Q·Kᵀ, one scale group in P·V), so
// with depth 4 as many fragment registers keep twice the groups in flight.
#ifndef MLA_SPARSE_H16X_FINE
#define MLA_SPARSE_H16X_FINE 0
#endif
constexpr bool H16X_FINE = MLA_SPARSE_H16X_FINE != 0;
// NOWALK (default 1; 0 walks the count first, for A/B): H200, sparse-h16, three rounds in one call:
// 121.8 / 121.3 / 121.6 µs against 123.8 / 124.1 / 124.3 (`…-exp15i-*`).
#ifndef MLA_SPARSE_H16X_NOWALK
#define MLA_SPARSE_H16X_NOWALK 1
#endif
constexpr bool H16X_NOWALK = MLA_SPARSE_H16X_NOWALK != 0;
// The stage's full barrier: lanes 0-7 of each of the 8 bulk-copy warps. (Gathering part of the tokens
// with cp.async instead, four lanes or a whole warp a token, measured slower: docs/sparse-decode.md §26.)
constexpr int FULL_ARRIVALS = 64;
constexpr int H16X_QK_DEPTH = MLA_SPARSE_H16X_QK_DEPTH, H16X_PV_DEPTH = MLA_SPARSE_H16X_PV_DEPTH;
// MLA_SPARSE_H16X_PSCALE=1: P·V takes V's e4m3 codes as bf16 by moving bits (the value times 2^-120, no
// conversion instruction) and the scales go into Pᵀ instead, one Pᵀ tile per scale group; 0: V converted
// and scaled in registers (dq2), one Pᵀ. H200, sparse-h16, same call: 111.6 / 112.6 / 111.9 µs against
// 122.0 / 121.8 / 121.5 (`…-exp16a-*`, docs/sparse-decode.md §25).
#ifndef MLA_SPARSE_H16X_PSCALE
#define MLA_SPARSE_H16X_PSCALE 1
#endif
constexpr bool H16X_PSCALE = MLA_SPARSE_H16X_PSCALE != 0;
constexpr int PT_TILES = H16X_PSCALE ? 4 : 1;
// Pᵀ's tiles hold p · scale · 2^64 (bf16 keeps every scale up to 2^56 finite at p <= 2^8) and V's bf16 are
// the codes' values · 2^-120, so Oᵀ accumulates O · 2^-56: 2^56 is multiplied back in the epilogue.
constexpr float PT_SCALE = 18446744073709551616.0f, OT_UNDO = H16X_PSCALE ? 72057594037927936.0f : 1.0f;
static_assert(H16X_QK_DEPTH >= 1 && H16X_QK_DEPTH <= 4 && H16X_PV_DEPTH >= 1 && H16X_PV_DEPTH <= 4, "1 to 4 sets in flight");
#ifndef MLA_SPARSE_H16X_CONSUMER_REGS
#define MLA_SPARSE_H16X_CONSUMER_REGS 224
#endif
constexpr int CONSUMER_REGS = MLA_SPARSE_H16X_CONSUMER_REGS, PRODUCER_REGS = (4 * LAUNCH_REGS_V3 - 2 * CONSUMER_REGS) / 2;
static_assert(2 * CONSUMER_REGS + 2 * PRODUCER_REGS <= 4 * LAUNCH_REGS_V3, "setmaxnreg within the CTA's registers");
enum : uint32_t { BAR_ALL = 1, BAR_WG0 = 2 };  // BAR_WG0 + wg: one consumer warpgroup
constexpr int Q_TILES = D_QK / 64;             // 8 f16 tiles (NoPE, permuted) + 1 bf16 tile (RoPE, permuted)
struct __align__(1024) Smem {
  uint8_t raw[STAGES][STAGE_BYTES];  // the blocks' tokens as stored in the cache, 656 bytes each
  uint8_t q[Q_TILES * H16_TILE];     // 1024-aligned: 4 x 41,984 = 164 x 1024
  uint8_t pt[2][PT_TILES][H16_TILE];  // Pᵀ of each consumer warpgroup (PSCALE: one per scale group)
  float merge_ot[(H16X_PSCALE ? 32 : 64) * 128];  // WG1's Oᵀ at a request's end (PSCALE: half of it, the other half in pt)
  float red[2][4][H16_ROWS];
  float merge_ml[2][H16_ROWS];       // WG1's m and L
  float qexp[H16_ROWS];              // 2^k of each head
  uint8_t valid[STAGES][64];
  uint64_t full[STAGES];             // FULL_ARRIVALS: lanes 0-7 of each bulk-copy warp (lane 0 with the valid tokens' bytes)
  uint64_t empty[STAGES];            // the consuming warpgroup's 4 warps arrive
};
constexpr int SMEM_BYTES = sizeof(Smem) + 1024;
static_assert(SMEM_BYTES <= 232448, "fits the opt-in shared memory of an H100/H200 SM");

// Logical column (wgmma's k order) of NoPE dim d: inside each 128-dim group, thread q (lane % 4) of
// k-step s holds dims 32q + 4s + j (j = 0..3) as columns 2q + j (j < 2) and 8 + 2q + j - 2.
__device__ __forceinline__ int nope_col(int d) {
  const int g = d >> 7, q = (d >> 5) & 3, s = (d >> 2) & 7, j = d & 3;
  return 16 * (8 * g + s) + (j < 2 ? 2 * q + j : 8 + 2 * q + j - 2);
}
// The same for RoPE dim d (0..63): thread q of k-step ks holds dims 16q + 4ks + j.
__device__ __forceinline__ int rope_col(int d) {
  const int q = d >> 4, ks = (d >> 2) & 3, j = d & 3;
  return 16 * ks + (j < 2 ? 2 * q + j : 8 + 2 * q + j - 2);
}
__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
__device__ __forceinline__ uint32_t lo_f16x2(uint32_t w) { return ptx::cvt_f16x2_e4m3x2(static_cast<uint16_t>(w & 0xFFFFu)); }
__device__ __forceinline__ uint32_t hi_f16x2(uint32_t w) { return ptx::cvt_f16x2_e4m3x2(static_cast<uint16_t>(w >> 16)); }
// Two e4m3 codes (low byte first) times their tokens' bf16 scales: dequant4's values (f16 -> f32, whose
// upper halves are the exact bf16 of an e4m3 value, times the scale in bf16).
__device__ __forceinline__ uint32_t dq2(uint16_t two, __nv_bfloat162 scale) {
  const uint32_t h = ptx::cvt_f16x2_e4m3x2(two);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const uint32_t b = ptx::prmt(__float_as_uint(f.x), __float_as_uint(f.y), 0x7632u);
  const __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&b), scale);
  return *reinterpret_cast<const uint32_t*>(&r);
}

// Q of (req, s_idx) into sm.q by the 256 consumer threads: thread t takes head t / 16, NoPE dims
// 32 (t % 16) .. + 31 and RoPE dims 4 (t % 16) .. + 3; heads past h_q are zeros.
__device__ __forceinline__ void load_q(const SparseParams& p, Smem& sm, int req, int s_idx, int t) {
  const int head = t / 16, part = t % 16;
  const bool in = head < p.h_q;
  const uint16_t* src = static_cast<const uint16_t*>(p.q) + (in ? req * p.q_batch_stride + s_idx * p.q_token_stride + head * p.q_head_stride : 0);
  uint4 v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = in ? *reinterpret_cast<const uint4*>(src + 32 * part + 8 * i) : make_uint4(0, 0, 0, 0);
  const uint2 r = in ? *reinterpret_cast<const uint2*>(src + D_V + 4 * part) : make_uint2(0, 0);
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t w = word(v[i / 4], i % 4);
    amax = fmaxf(amax, fmaxf(fabsf(__uint_as_float(w << 16)), fabsf(__uint_as_float(w & 0xFFFF0000u))));
  }
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  // k: the head's largest |q| times 2^-k in [2^14, 2^15) (f16's top binade but one), clamped.
  const int e = amax > 0.0f ? static_cast<int>((__float_as_uint(amax) >> 23) & 0xFF) - 127 : 14;
  const int k = max(-100, min(100, e - 14));
  const float down = __uint_as_float(static_cast<uint32_t>(127 - k) << 23);
  if (part == 0) sm.qexp[head] = __uint_as_float(static_cast<uint32_t>(127 + k) << 23);
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const uint32_t w = word(v[i / 8], (i % 8) / 2);
    const float x = __uint_as_float((i & 1) ? (w & 0xFFFF0000u) : (w << 16));
    const int c = nope_col(32 * part + i);
    const __half h = __float2half_rn(x * down);
    *reinterpret_cast<__half*>(sm.q + (c / 64) * H16_TILE + sw128(head, (c % 64) / 8) + 2 * (c % 8)) = h;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w = i < 2 ? r.x : r.y;
    const int c = rope_col(4 * part + i);
    *reinterpret_cast<uint16_t*>(sm.q + 8 * H16_TILE + sw128(head, c / 8) + 2 * (c % 8)) = static_cast<uint16_t>((i & 1) ? w >> 16 : w);
  }
}

// Sᵀ (log2 units not yet applied) of the block in `stage`: four f16 group accumulators and the bf16 RoPE
// one, combined as qx · Σ_g acc_g · scale_g + rope. Issued in half groups (4 k-steps, 16 registers of A
// fragments), two in flight: with whole groups in flight ptxas serialized the wgmmas (C7512), with three
// it spilled.
template <bool FINE>
__device__ __forceinline__ void qk(float (&st)[8], float4 (&sc)[2], const uint8_t* stage, uint32_t q_base, int warp, int lane, const float (&qx)[4]) {
  const int q4 = lane % 4;
  const uint8_t* t0 = stage + (16 * warp + lane / 4) * TOKEN_BYTES;
  const uint8_t* t1 = t0 + 8 * TOKEN_BYTES;
  float acc[4][8], accr[8];
  auto q_desc = [&](uint32_t off) { return sw128_at(q_base, off, 16); };
  // Commit groups of KS k-steps (4: half a scale group; 2 with H16X_FINE), D of them in flight.
  constexpr int D = H16X_QK_DEPTH, KS = FINE ? 2 : 4;
  uint32_t a[D][KS][4];
  uint4 k0, k1;
#pragma unroll
  for (int h = 0; h < 32 / KS; ++h) {
    const int g = (h * KS) / 8, s0 = (h * KS) % 8;  // the group and its first k-step
    if (s0 % 4 == 0) {
      const int off = 128 * g + 32 * q4 + 4 * s0;
      k0 = *reinterpret_cast<const uint4*>(t0 + off), k1 = *reinterpret_cast<const uint4*>(t1 + off);
    }
    if (h >= D) ptx::wgmma_wait<D - 1>();  // group h - D retired: its fragments' registers are free
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const uint32_t w0 = word(k0, (s0 + s) % 4), w1 = word(k1, (s0 + s) % 4);
      a[h % D][s][0] = lo_f16x2(w0), a[h % D][s][1] = lo_f16x2(w1), a[h % D][s][2] = hi_f16x2(w0), a[h % D][s][3] = hi_f16x2(w1);
    }
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const int ks = 8 * g + s0 + s;
      ptx::wgmma_m64n16k16_rs<ptx::fp16_t>(acc[g], a[h % D][s], q_desc((ks / 4) * H16_TILE + (ks % 4) * 32), s0 + s != 0);
    }
    ptx::wgmma_commit();
  }
  const uint4 r00 = *reinterpret_cast<const uint4*>(t0 + 528 + 32 * q4), r01 = *reinterpret_cast<const uint4*>(t0 + 528 + 32 * q4 + 16);
  const uint4 r10 = *reinterpret_cast<const uint4*>(t1 + 528 + 32 * q4), r11 = *reinterpret_cast<const uint4*>(t1 + 528 + 32 * q4 + 16);
  // RoPE's four k-steps: bf16 as stored, thread q's dims 16q .. 16q + 15; in a retired set of A fragments
  // where a set is four k-steps (a separate array spilled at 224 registers).
  auto rope = [&](uint32_t (&ar)[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const uint4& x0 = ks < 2 ? r00 : r01;
      const uint4& x1 = ks < 2 ? r10 : r11;
      const int w = 2 * (ks % 2);
      ar[ks][0] = word(x0, w), ar[ks][1] = word(x1, w), ar[ks][2] = word(x0, w + 1), ar[ks][3] = word(x1, w + 1);
    }
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      ptx::wgmma_m64n16k16_rs<ptx::bf16_t>(accr, ar[ks], q_desc(8 * H16_TILE + ks * 32), ks != 0);
    ptx::wgmma_commit();
  };
  if constexpr (KS == 4) {
    ptx::wgmma_wait<D - 1>();
    rope(a[(32 / KS) % D]);
  } else {
    uint32_t ar[4][4];
    rope(ar);
  }
  const float4 s0 = *reinterpret_cast<const float4*>(t0 + D_V), s1 = *reinterpret_cast<const float4*>(t1 + D_V);
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int g = 0; g < 4; ++g) ptx::fence_regs(acc[g]);
  ptx::fence_regs(accr);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float4& s = ((e >> 1) & 1) ? s1 : s0;
    st[e] = qx[h16_j(e)] * (acc[0][e] * s.x + acc[1][e] * s.y + acc[2][e] * s.z + acc[3][e] * s.w) + accr[e];
  }
  sc[0] = s0, sc[1] = s1;
}

// PSCALE's Pᵀ tiles: tile g holds Pᵀ times each token's group-g scale (sc: the thread's two tokens', as qk
// returns them) times 2^64, stored as h16_store_pt does, fenced once.
__device__ __forceinline__ void store_pt_scaled(const float (&st)[8], const float4 (&sc)[2], uint32_t pt_base, int warp, int lane) {
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float4& s = sc[(e >> 1) & 1];
      v[e] = st[e] * ((g == 0 ? s.x : g == 1 ? s.y : g == 2 ? s.z : s.w) * PT_SCALE);
    }
    h16_store_pt<ptx::bf16_t, false>(v, pt_base + g * H16_TILE, warp, lane);
  }
  ptx::fence_proxy_async_smem();
}

// Two e4m3 codes as bf16x2, each value times 2^-120: sx holds code b, its sign replicated, code c, its
// sign replicated (prmt with the sign bit set in the selector), so each 16-bit half shifted left by 4 has
// b's exponent and mantissa in bf16's fields (e4m3's bias 7 read as bf16's 127: subnormals land on bf16
// subnormals, exactly) and the sign at bit 15; the mask drops the sign copies. A NaN code becomes a
// finite value: such a token's score (from the same bytes, converted with NaN kept) is NaN already.
__device__ __forceinline__ uint32_t e4m3x2_as_bf16(uint32_t sx) { return (sx << 4) & 0x87F087F0u; }
// prmt selector of byte j of (x, y): x's byte j, its sign, y's byte j, its sign.
__host__ __device__ constexpr uint32_t pair_sel(int j) { return uint32_t(j) | uint32_t(8 + j) << 4 | uint32_t(4 + j) << 8 | uint32_t(12 + j) << 12; }

// Oᵀ += Vᵀ·Pᵀ from the raw bytes in `stage`. Thread (warp w, lane l) owns dims 128g + 4(8w + l/4) + i of
// each group g: tile 2g's rows r, r + 8 are i = 0, 1 and tile 2g + 1's are i = 2, 3 (r = 16w + l/4); per
// k-step of 16 tokens it holds tokens 2q, 2q + 1, 2q + 8, 2q + 9 (q = l % 4), as wgmma's A fragment.
// Issued in halves of a k-step (two groups, four m-tiles), two in flight.
__device__ __forceinline__ void pv(float (&ot)[8][8], const uint8_t* stage, uint32_t pt_base, int warp, int lane) {
  const int q4 = lane % 4, dim_off = 4 * (8 * warp + lane / 4);
  // Commit groups of KG scale groups (2 m-tiles each) of one k-step (2; 1 with H16X_FINE), D in flight.
  constexpr int D = H16X_PV_DEPTH, KG = H16X_FINE ? 1 : 2;
  uint32_t a[D][2 * KG][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint8_t* t[4];
    t[0] = stage + (16 * kk + 2 * q4) * TOKEN_BYTES, t[1] = t[0] + TOKEN_BYTES, t[2] = t[0] + 8 * TOKEN_BYTES, t[3] = t[2] + TOKEN_BYTES;
    float4 sc[4];
    if constexpr (!H16X_PSCALE) {
#pragma unroll
      for (int i = 0; i < 4; ++i) sc[i] = *reinterpret_cast<const float4*>(t[i] + D_V);
    }
#pragma unroll
    for (int part = 0; part < 4 / KG; ++part) {
      const int h = (4 / KG) * kk + part;
      uint32_t w[KG][4];  // [group of the part][token]
#pragma unroll
      for (int gg = 0; gg < KG; ++gg)
#pragma unroll
        for (int i = 0; i < 4; ++i) w[gg][i] = *reinterpret_cast<const uint32_t*>(t[i] + 128 * (KG * part + gg) + dim_off);
      if (h >= D) ptx::wgmma_wait<D - 1>();  // group h - D retired
#pragma unroll
      for (int gg = 0; gg < KG; ++gg) {
        uint32_t (&f0)[4] = a[h % D][2 * gg];
        uint32_t (&f1)[4] = a[h % D][2 * gg + 1];
        if constexpr (H16X_PSCALE) {
#pragma unroll
          for (int x = 0; x < 2; ++x) {  // tokens 2q, 2q + 1 (x = 0) and 2q + 8, 2q + 9
            const uint32_t u = w[gg][2 * x], v = w[gg][2 * x + 1];
            f0[x * 2] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(0))), f0[x * 2 + 1] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(1)));
            f1[x * 2] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(2))), f1[x * 2 + 1] = e4m3x2_as_bf16(ptx::prmt(u, v, pair_sel(3)));
          }
          continue;
        }
        const int g = KG * part + gg;
        const float s0[4] = {sc[0].x, sc[0].y, sc[0].z, sc[0].w}, s1[4] = {sc[1].x, sc[1].y, sc[1].z, sc[1].w};
        const float s8[4] = {sc[2].x, sc[2].y, sc[2].z, sc[2].w}, s9[4] = {sc[3].x, sc[3].y, sc[3].z, sc[3].w};
        const __nv_bfloat162 c01 = __floats2bfloat162_rn(s0[g], s1[g]), c89 = __floats2bfloat162_rn(s8[g], s9[g]);
        const uint32_t x01 = ptx::prmt(w[gg][0], w[gg][1], 0x5140u), y01 = ptx::prmt(w[gg][0], w[gg][1], 0x7362u);
        const uint32_t x89 = ptx::prmt(w[gg][2], w[gg][3], 0x5140u), y89 = ptx::prmt(w[gg][2], w[gg][3], 0x7362u);
        f0[0] = dq2(static_cast<uint16_t>(x01 & 0xFFFFu), c01), f0[1] = dq2(static_cast<uint16_t>(x01 >> 16), c01);
        f0[2] = dq2(static_cast<uint16_t>(x89 & 0xFFFFu), c89), f0[3] = dq2(static_cast<uint16_t>(x89 >> 16), c89);
        f1[0] = dq2(static_cast<uint16_t>(y01 & 0xFFFFu), c01), f1[1] = dq2(static_cast<uint16_t>(y01 >> 16), c01);
        f1[2] = dq2(static_cast<uint16_t>(y89 & 0xFFFFu), c89), f1[3] = dq2(static_cast<uint16_t>(y89 >> 16), c89);
      }
      ptx::wgmma_fence();
#pragma unroll
      for (int i = 0; i < 2 * KG; ++i) {
        const uint32_t off = (H16X_PSCALE ? (KG * part + i / 2) * H16_TILE : 0) + kk * 32;
        ptx::wgmma_m64n16k16_rs<ptx::bf16_t>(ot[2 * KG * part + i], a[h % D][i], sw128_at(pt_base, off, 16), 1);
      }
      ptx::wgmma_commit();
    }
  }
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int mb = 0; mb < 8; ++mb) ptx::fence_regs(ot[mb]);
}

// The 8 producer warps: warp pw's lanes 0-7 bulk-copy tokens 8pw .. 8pw + 7 of each block (a token
// without a slot: its row zeroed, so V holds no stale NaN, and its flag cleared); each of them arrives on
// the stage's full barrier, lane 0 expecting the warp's valid tokens' bytes. Indices two blocks ahead.
__device__ __forceinline__ void producer(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx, int pidx) {
  constexpr uint32_t FULL = 0xFFFFFFFFu;
  const int t = threadIdx.x - 256 - 128 * pidx, lane = t % 32, pw = 4 * pidx + t / 32;
  const int my_token = 8 * pw + (lane & 7);
  // NOWALK: the loop runs while the cursor has a block instead of over a count walked first, whose
  // dependent loads of the requests' lengths came before the first copy.
  const int n_blocks = H16X_NOWALK ? 0 : walk_blocks(p, meta);
  Cursor ahead = cursor_begin(p, meta);
  bool has_cur = cursor_valid(meta, ahead);
  int slot_cur = cursor_slot(p, meta, ahead, s_idx, my_token);
  cursor_next(p, meta, ahead);
  bool has_nxt = cursor_valid(meta, ahead);
  int slot_nxt = cursor_slot(p, meta, ahead, s_idx, my_token);
  cursor_next(p, meta, ahead);
  for (int it = 0; H16X_NOWALK ? has_cur : it < n_blocks; ++it) {
    const bool has_ahead = cursor_valid(meta, ahead);
    const PendingSlot pending = cursor_index(p, meta, ahead, s_idx, my_token);  // block it + 2
    const int stage = it % STAGES;
    if (pidx == 0) STRACE(it, 13);
    ptx::mbarrier_wait(&sm.empty[stage], ((it / STAGES) & 1) ^ 1);
    if (pidx == 0) STRACE(it, 14);
    // The ablation (MLA_ABLATE_SPARSE_PRODUCER, wrong outputs) copies and clears nothing: the consumers' rate.
    const bool mine = lane < 8, valid = slot_cur >= 0, copy = valid && !ABLATE_PRODUCER;
    uint8_t* row = sm.raw[stage] + my_token * TOKEN_BYTES;
    if (mine && !valid && !ABLATE_PRODUCER) {
#pragma unroll 1
      for (int c = 0; c < TOKEN_BYTES / 16; ++c) reinterpret_cast<uint4*>(row)[c] = make_uint4(0, 0, 0, 0);
      ptx::fence_proxy_async_smem();  // before a later bulk copy into the same row
    }
    if (mine) sm.valid[stage][my_token] = valid ? 1 : 0;
    const uint32_t n_valid = __popc(__ballot_sync(FULL, mine && copy));
    // Each lane that wrote (zeros, its flag) arrives itself, so the release covers its own writes (racecheck
    // did not take a __syncwarp before lane 0's arrive for that); lane 0's arrival also expects the bytes.
    if (lane == 0) ptx::mbarrier_arrive_expect_tx(&sm.full[stage], n_valid * TOKEN_BYTES);
    else if (mine) ptx::mbarrier_arrive(&sm.full[stage]);
    __syncwarp();
    if (mine && copy) ptx::bulk_copy_global_to_smem(ptx::smem_addr(row), token_ptr(p, slot_cur), TOKEN_BYTES, &sm.full[stage]);
    if (pidx == 0) STRACE(it, 15);
    slot_cur = slot_nxt;
    slot_nxt = slot_of(p, pending);
    has_cur = has_nxt;
    has_nxt = has_ahead;
    cursor_next(p, meta, ahead);
  }
}

// Consumer warpgroup wg (0 or 1): the walk's blocks of its parity; per request Q (both warpgroups), the
// blocks, then WG1's m, L and Oᵀ merged into WG0's, which stores the rows (as consumer_h16).
__device__ __forceinline__ void consumer(const SparseParams& p, Smem& sm, const SchedMeta& meta, int s_idx, int wg) {
  const int tid = threadIdx.x - 128 * wg, warp = tid / 32, lane = tid % 32;
  const uint32_t bar = BAR_WG0 + wg;
  float (&red)[4][H16_ROWS] = sm.red[wg];
  const uint32_t q_base = ptx::smem_addr(sm.q), pt_base = ptx::smem_addr(sm.pt[wg]);
  const int dim_off = 4 * (8 * warp + lane / 4);
  float* const merge_hi = H16X_PSCALE ? reinterpret_cast<float*>(sm.pt) : sm.merge_ot + 32 * 128;  // Oᵀ tiles 4-7
  auto store_pt = [&](const float (&st)[8], const float4 (&sc)[2]) {
    if constexpr (H16X_PSCALE) store_pt_scaled(st, sc, pt_base, warp, lane);
    else h16_store_pt<ptx::bf16_t>(st, pt_base, warp, lane);
  };
  int it = 0;
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int len = request_length(p, req);
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, len);
    const bool is_split = piece_is_split(meta, req);
    ptx::named_barrier_sync(BAR_ALL, 256);  // the previous request is done with sQ and the merge space
    load_q(p, sm, req, s_idx, threadIdx.x);
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(BAR_ALL, 256);
    float qx[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) qx[j] = sm.qexp[h16_col(lane, j)];
    float ot[8][8], m[4], l[4];
    h16_init(ot, m, l);
    for (int blk = start_blk; blk < end_blk; ++blk, ++it) {
      if ((it & 1) != wg) continue;
      const int stage = it % STAGES;
      STRACE(it, 0);
      ptx::mbarrier_wait(&sm.full[stage], (it / STAGES) & 1);
      STRACE(it, 1);
      if constexpr (ABLATE_CONSUMERS) {  // the producers' rate: release at once (wrong outputs)
        ptx::named_barrier_sync(bar, 128);
        if (lane == 0) ptx::mbarrier_arrive(&sm.empty[stage]);
        continue;
      }
      const uint8_t* sb = sm.raw[stage];
      float st[8], mx[4];
      float4 sc[2];
      qk<H16X_FINE>(st, sc, sb, q_base, warp, lane, qx);
      STRACE(it, 2);
      h16_mask(st, mx, sm.valid[stage], p.scale_log2, warp, lane);
      h16_vote_softmax(st, mx, m, l, ot, red, warp, lane, bar, [&](const float (&v)[8]) { store_pt(v, sc); });
      STRACE(it, 3);
      pv(ot, sb, pt_base, warp, lane);
      STRACE(it, 7);
      ptx::named_barrier_sync(bar, 128);  // every warp's reads of the stage (and of sm.p) are done
      if (lane == 0) ptx::mbarrier_arrive(&sm.empty[stage]);
      STRACE(it, 12);
    }
    float L[4] = {l[0], l[1], l[2], l[3]};
    h16_col_reduce(L, red, warp, lane, bar, [](float a, float b) { return a + b; });
    if (wg == 1) {
      if (warp == 0 && lane < 4) {
#pragma unroll
        for (int j = 0; j < 4; ++j) sm.merge_ml[0][h16_col(lane, j)] = m[j], sm.merge_ml[1][h16_col(lane, j)] = L[j];
      }
#pragma unroll
      for (int mb = 0; mb < (H16X_PSCALE ? 4 : 8); ++mb)
#pragma unroll
        for (int e = 0; e < 8; ++e) sm.merge_ot[(8 * mb + e) * 128 + tid] = ot[mb][e];
    }
    ptx::named_barrier_sync(BAR_ALL, 256);
    if constexpr (H16X_PSCALE) {
      // Oᵀ tiles 4-7 into the Pᵀ tiles, free now that both warpgroups are past P·V; one barrier instruction
      // for both warpgroups (synccheck reported WG1 at a barrier of its own, with the same id and count as
      // WG0's, as divergent threads; WG0 merging the low half meanwhile spilled 36 bytes).
      if (wg == 1) {
#pragma unroll
        for (int mb = 4; mb < 8; ++mb)
#pragma unroll
          for (int e = 0; e < 8; ++e) merge_hi[(8 * (mb - 4) + e) * 128 + tid] = ot[mb][e];
      }
      ptx::named_barrier_sync(BAR_ALL, 256);
    }
    if (wg == 1) continue;
    h16_merge_take(m, L, ot, sm.merge_ml[0], sm.merge_ml[1], sm.merge_ot, merge_hi, tid, lane);
    const int slot = p.num_splits[req] + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int head = h16_col(lane, j);
      if (head >= p.h_q) continue;
      const bool empty = L[j] == 0.0f;  // a NaN L propagates (see dense_decode_sm90.cu)
      const int e0 = 4 * (j >> 1) + (j & 1), e1 = e0 + 2;  // rows r and r + 8 of column j
      if (!is_split) {
        const float inv = unsplit_inv(p, head, L[j], m[j]) * OT_UNDO;
        uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s_idx) * p.h_q + head) * D_V;
#pragma unroll
        for (int g = 0; g < 4; ++g)
          *reinterpret_cast<uint2*>(out + 128 * g + dim_off) =
              make_uint2(ptx::pack2<ptx::bf16_t>(ot[2 * g][e0] * inv, ot[2 * g][e1] * inv), ptx::pack2<ptx::bf16_t>(ot[2 * g + 1][e0] * inv, ot[2 * g + 1][e1] * inv));
        if (warp == 0 && lane < 4) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s_idx] = empty ? INFINITY : (__log2f(L[j]) + m[j]) * LN2;
      } else {
        const float inv = empty ? 0.0f : OT_UNDO / L[j];
        const long long row = static_cast<long long>(slot) * p.s_q * p.h_q + s_idx * p.h_q + head;
        float* oa = p.o_accum + row * D_V;
#pragma unroll
        for (int g = 0; g < 4; ++g)
          *reinterpret_cast<float4*>(oa + 128 * g + dim_off) = make_float4(ot[2 * g][e0] * inv, ot[2 * g][e1] * inv, ot[2 * g + 1][e0] * inv, ot[2 * g + 1][e1] * inv);
        if (warp == 0 && lane < 4) p.lse_accum[row] = empty ? -INFINITY : __log2f(L[j]) + m[j];
      }
    }
  }
}

__device__ __forceinline__ void kernel(const SparseParams& p) {
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = smem_struct_1024<Smem>(smem_raw);
  const SchedMeta* meta = reinterpret_cast<const SchedMeta*>(p.sched_meta) + blockIdx.z;
  if (meta->begin_req_idx >= p.b) {
    ptx::pdl_launch_dependents();
    return;
  }
  pdl_launch_if_unsplit(*meta);
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptx::mbarrier_init(&sm.full[s], FULL_ARRIVALS);
      ptx::mbarrier_init(&sm.empty[s], 4);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  const int wg = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg >= 2) {
    ptx::setmaxnreg_dec<PRODUCER_REGS>();
    producer(p, sm, *meta, blockIdx.y, wg - 2);
  } else {
    ptx::setmaxnreg_inc<CONSUMER_REGS>();
    consumer(p, sm, *meta, blockIdx.y, wg);
  }
  ptx::pdl_launch_dependents();
}
}  // namespace h16x

template <bool XO, bool V2, int NPROD = 1>
__device__ __forceinline__ void sparse_decode(const SparseParams& p) {
  static_assert(NPROD == 1 || V2, "v3 = the v2 producer in two warpgroups");
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = smem_struct_1024<Smem>(smem_raw);
  // Each role reads the part's record itself, so nothing but the params stays live across the role
  // branches (their registers are allocated separately after setmaxnreg).
  const SchedMeta* meta = reinterpret_cast<const SchedMeta*>(p.sched_meta) + blockIdx.z;
  if (meta->begin_req_idx >= p.b) {  // both CTAs of a cluster share the record, so both leave here
    ptx::pdl_launch_dependents();
    return;
  }
  pdl_launch_if_unsplit(*meta);
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      ptx::mbarrier_init(&sm.kfull[s], 128 * NPROD);
      ptx::mbarrier_init(&sm.kempty[s], (XO ? 2 : 1) * CONSUMER_THREADS / 32);
    }
    ptx::fence_mbarrier_init();
  }
  // The peer may arrive on these barriers and write this buffer only once they exist.
  if constexpr (XO) ptx::cluster_sync();
  else __syncthreads();
  // Warp-uniform by construction (a shuffle from lane 0), so the role branch needs no divergence tracking.
  const int wg = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg >= 2) {
    if constexpr (NPROD == 2) {
      ptx::setmaxnreg_dec<PRODUCER_REGS_V3>();
      producer_v2<XO, 2>(p, sm, *meta, blockIdx.y, wg - 2);
    } else {
      ptx::setmaxnreg_dec<PRODUCER_REGS>();
      if constexpr (V2) producer_v2<XO>(p, sm, *meta, blockIdx.y);
      else if constexpr (XO) producer_crossover(p, sm, *meta, blockIdx.y);
      else producer(p, sm, *meta, blockIdx.y);
    }
  } else if (wg == 0) {
    ptx::setmaxnreg_inc<NPROD == 2 ? WG0_REGS_V3 : WG0_REGS>();
    consumer<ptx::bf16_t, 0, XO, NPROD == 2, V2>(p, sm, *meta, blockIdx.x * 64, blockIdx.y);
  } else {
    // WG1 keeps the 168 registers a 384-thread CTA starts with; a 512-thread one starts at 128.
    if constexpr (NPROD == 2) ptx::setmaxnreg_inc<WG1_REGS_V3>();
    consumer<ptx::bf16_t, 1, XO, NPROD == 2, V2>(p, sm, *meta, blockIdx.x * 64, blockIdx.y);
  }
  ptx::pdl_launch_dependents();
  // No CTA may leave while its peer can still write its buffers or arrive on its barriers.
  if constexpr (XO) ptx::cluster_sync();
}

}  // namespace

// Grid (ceil(h_q / 64), s_q, num_sm_parts), 384 threads.
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_sparse_decode_bf16_sm90(const __grid_constant__ mla::SparseParams p) {
  sparse_decode<false, false>(p);
}
// Crossover (h_q = 128 only): launch with a (2, 1, 1) cluster over the two head tiles.
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_sparse_decode_crossover_bf16_sm90(const __grid_constant__ mla::SparseParams p) {
  sparse_decode<true, false>(p);
}
// The same with the second producer (producer_v2), for measuring it against the first.
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_sparse_decode_v2_bf16_sm90(const __grid_constant__ mla::SparseParams p) {
  sparse_decode<false, true>(p);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1) mla_sparse_decode_crossover_v2_bf16_sm90(const __grid_constant__ mla::SparseParams p) {
  sparse_decode<true, true>(p);
}
// Two producer warpgroups (producer v3, the default; first run in test/gpu/variants): 512 threads, no crossover.
extern "C" __global__ void __launch_bounds__(THREADS_V3, 1) mla_sparse_decode_v3_bf16_sm90(const __grid_constant__ mla::SparseParams p) {
  sparse_decode<false, true, 2>(p);
}
// Crossover with two producer warpgroups (experimental, written without a GPU; test/gpu/variants).
extern "C" __global__ void __launch_bounds__(THREADS_V3, 1) mla_sparse_decode_crossover_v3_bf16_sm90(const __grid_constant__ mla::SparseParams p) {
  sparse_decode<true, true, 2>(p);
}
// The h16 consumer (h_q <= 16, grid (1, s_q, num_sm_parts)), 512 threads; experimental (test/gpu/variants).
extern "C" __global__ void __launch_bounds__(THREADS_V3, 1) mla_sparse_decode_h16_bf16_sm90(const __grid_constant__ mla::SparseParams p) {
  sparse_decode_h16(p);
}
extern "C" __device__ const int mla_sparse_decode_smem_bytes = SMEM_BYTES;
// The h16x consumers (h_q <= 16, grid (1, s_q, num_sm_parts)), 512 threads: tokens by bulk copy, FP8
// converted by the consumers (h16x above); flashMlaWithKvcache's kernel at 8 and 16 heads.
extern "C" __global__ void __launch_bounds__(h16x::THREADS, 1) mla_sparse_decode_h16x_bf16_sm90(const __grid_constant__ mla::SparseParams p) {
  h16x::kernel(p);
}
extern "C" __device__ const int mla_sparse_h16x_smem_bytes = h16x::SMEM_BYTES;


// The kernels' dequantization on its own, for an exhaustive test: chunk i (16 e4m3 codes) times
// scales[i / 16] -> 16 bf16 at out[2i], out[2i + 1]. One thread per chunk.
extern "C" __global__ void mla_sparse_dequant_selftest(const uint4* raw, const float* scales, uint4* out, int chunks) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= chunks) return;
  uint4 a, b;
  dequant16(raw[i], __float2bfloat162_rn(scales[i / 16]), a, b);
  out[2 * i] = a;
  out[2 * i + 1] = b;
}
