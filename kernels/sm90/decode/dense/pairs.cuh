// The walk over a CTA's blocks two at a time (a pair: K0 the even block, K1 the odd one), and the loads:
// Q by TMA (or ld.global where the host could not encode its tensor map), K tiles by TMA, each on its own
// mbarrier, and the refills of the tiles a warpgroup has finished reading.
#pragma once
#include "smem.h"

namespace mla::dense {

// The physical id of block `blk` of request `req`, read from the table only where the block holds a
// visible token (blk · 64 < seqlen; an empty request's row, or a column past its blocks, may hold
// anything), else -1. An id outside [0, num_blocks) is recorded in p.errors (the first one since the
// host last cleared it: MlaSchedMeta.checkErrors) and, like -1, reads as zeros by TMA's out-of-bounds fill.
__device__ __forceinline__ void check_block_id(const DenseParams& p, int req, int blk, int id) {
  if ((id < 0 || id >= p.num_blocks) && p.errors != nullptr && atomicCAS(&p.errors[0], ERR_NONE, ERR_BLOCK_ID) == ERR_NONE) {
    p.errors[1] = req, p.errors[2] = blk, p.errors[3] = id, p.errors[4] = p.num_blocks;
  }
}
__device__ __forceinline__ int table_block(const DenseParams& p, int req, int blk, int seqlen) {
  if (blk >= p.max_blocks_per_seq || blk * BLOCK_N >= seqlen) return -1;
  const int id = p.block_table[req * p.block_table_stride + blk];
  check_block_id(p, req, blk, id);
  return id;
}

// The pair of blocks after (req, blk0) in this CTA's pieces, or req > end_req_idx when there is none.
// phys: the blocks' physical ids (with_phys). The next pair's two table lookups are issued at the top of
// the iteration (pipe: a pair earlier within a request, load_ids), not right before each refill's TMA,
// where their dependent loads were on the path from a tile being freed to its refill landing
// (dense-compute 538.1 vs 550.9 µs).
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

// pipe, within a request: the ids of the pair after next are loaded at the top of a pair (load_ids) and
// checked at the top of the next one (pair_of_ids), so their loads land under a whole pair instead of
// being waited for before the softmax. A block before the piece's end holds visible tokens (the
// scheduler stored lengths that fit the table), so the length is not read again.
__device__ __forceinline__ void load_ids(const DenseParams& p, int req, int blk0, int end_blk, int (&ids)[2]) {
  const int end = min(end_blk, p.max_blocks_per_seq);
#pragma unroll
  for (int st = 0; st < 2; ++st) ids[st] = blk0 + st < end ? p.block_table[req * p.block_table_stride + blk0 + st] : -1;
}
__device__ __forceinline__ Pair pair_of_ids(const DenseParams& p, int req, int blk0, int end_blk, const int (&ids)[2]) {
  const int end = min(end_blk, p.max_blocks_per_seq);
#pragma unroll
  for (int st = 0; st < 2; ++st)
    if (blk0 + st < end) check_block_id(p, req, blk0 + st, ids[st]);
  return {req, blk0, end_blk, {ids[0], ids[1]}};
}

__device__ __forceinline__ Pair next_pair(const DenseParams& p, const SchedMeta& meta, Pair cur) {
  if (cur.blk0 + 2 < cur.end_blk) return with_phys(p, {cur.req, cur.blk0 + 2, cur.end_blk, {}});
  const int req = cur.req + 1;
  if (req > meta.end_req_idx) return {req, 0, 0, {-1, -1}};
  return with_phys(p, {req, 0, piece_end(p, meta, req), {}});
}

// 16-byte chunk `chunk` (dims 8·chunk .. +7) of row `flat` of KV head hk's query rows (row = s_q index
// · heads_per_kv + head within the head group). The caller keeps flat < rows_per_kv.
__device__ __forceinline__ uint4 load_q_chunk(const DenseParams& p, int req, int hk, int flat, int chunk) {
  const uint16_t* q = static_cast<const uint16_t*>(p.q);
  const int s = flat / p.heads_per_kv, head = hk * p.heads_per_kv + flat % p.heads_per_kv;
  return __ldg(reinterpret_cast<const uint4*>(q + req * p.q_batch_stride + s * p.q_token_stride + head * p.q_head_stride + chunk * 8));
}

// Q without TMA (p.q_tma == 0): `threads` threads copy a request's 64 Q rows of KT tiles into SW128 tiles
// at `q_smem` (the layout TMA would produce); rows past rows_per_kv are zero. Six 16-byte loads per thread
// are in flight at a time (Q is 72 KB: one at a time cost a memory round trip per 4 KB).
template <int KT>
__device__ __forceinline__ void load_q_dense(const DenseParams& p, uint8_t* q_smem, int req, int m_block, int hk, int tid, int threads) {
  constexpr int BATCH = 6, ROW_CHUNKS = 8 * KT, Q_CHUNKS = 64 * ROW_CHUNKS;
  for (int base = tid; base < Q_CHUNKS; base += BATCH * threads) {
    uint4 v[BATCH];
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int c = base + j * threads, r = c / ROW_CHUNKS, chunk = c % ROW_CHUNKS;
      const int flat = m_block * BLOCK_M + r;
      v[j] = make_uint4(0, 0, 0, 0);
      if (c < Q_CHUNKS && flat < p.rows_per_kv) v[j] = load_q_chunk(p, req, hk, flat, chunk);
    }
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int c = base + j * threads, r = c / ROW_CHUNKS, chunk = c % ROW_CHUNKS;
      if (c < Q_CHUNKS) *reinterpret_cast<uint4*>(q_smem + (chunk / 8) * TILE_BYTES + sw128(r, chunk % 8)) = v[j];
    }
  }
}

// Issues the TMA of request req's m-block of Q (64 flattened rows of KV head hk) into sQ: KT SW128 boxes
// of 64 rows x 64 dims, the layout load_q_dense writes. A box spans one token's heads (heads_per_kv a
// multiple of 64) or 64 / heads_per_kv tokens; rows past s_q are out of the tensor, so zero.
template <int KT>
__device__ __forceinline__ void load_q_tma(const DenseParams& p, Smem& sm, int req, int m_block, int hk) {
  const int flat = m_block * BLOCK_M;
  ptx::mbarrier_arrive_expect_tx(&sm.q_full, KT * TILE_BYTES);
  for (int t = 0; t < KT; ++t)
    ptx::tma_load_5d(sm.q + t * TILE_BYTES, &p.tmap_q, &sm.q_full, t * 64, flat % p.heads_per_kv, hk, flat / p.heads_per_kv, req);
}

// Issues TMA loads of tiles [t_begin, t_end) of the pair's block `stage` into K buffer `stage`.
__device__ __forceinline__ void load_tiles(const DenseParams& p, Smem& sm, const Pair& pr, int stage, int t_begin, int t_end, int hk, uint64_t policy) {
  if (pr.end_blk == 0) return;  // no next pair
  const int phys = pr.phys[stage];
  for (int t = t_begin; t < t_end; ++t) {
    ptx::mbarrier_arrive_expect_tx(&sm.kfull[stage][t], TILE_BYTES);
    ptx::tma_load_4d(sm.k[stage] + t * TILE_BYTES, &p.tmap_kv, &sm.kfull[stage][t], t * 64, hk, 0, phys, policy);
  }
}

// The refill groups: tiles that become free together, refilled by the warpgroup that read them last.
// fast: K0's V-left (W0), K1's V-left and sP1 (W0), the right halves and sP0 (W1). pipe splits the last
// in two, K1's V-right (W1, after P1·V1R) and K0's V-right and sP0 (W1, after sP0·V0R).
enum : int { REFILL_K0_LEFT = 0, REFILL_K1_LEFT_P = 1, REFILL_RIGHT = 2, REFILL_K1_RIGHT = 3, REFILL_K0_RIGHT_P = 4 };

// Issues refill group g for the pair `next`, called by one whole warp of the releasing warpgroup after
// its named barrier; lane 0 issues the TMA. QR (pipe): sP1 lives in Q's tile 8, so K1's tile 8 goes with
// tiles 4-7 (row 3, W1's) instead of with 0-3 (row 1, W0's). KT: the tiles a block loads, V's 8 and, at
// d_qk 576, the RoPE tile 8 (at 512 tile 8's space only carries P, and no group refills it).
template <bool QR, int KT>
__device__ __forceinline__ void refill(const DenseParams& p, Smem& sm, const Pair& next, int g, int hk, uint64_t policy, int lane) {
  struct Span { int stage, t0, t1; };
  // Five rows, also for fast, which uses three: with three, nvcc orders registers differently in the PTX
  // and ptxas allocates both kernels differently from the builds that were measured.
  const Span spans[5][2] = {{{0, 0, 4}, {0, 0, 0}}, {{1, 0, 4}, {1, QR ? 0 : V_TILES, QR ? 0 : KT}}, {{0, 4, KT}, {1, 4, V_TILES}},
                            {{1, 4, QR ? KT : V_TILES}, {1, 0, 0}}, {{0, 4, KT}, {0, 0, 0}}};
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) load_tiles(p, sm, next, spans[g][i].stage, spans[g][i].t0, spans[g][i].t1, hk, policy);
  }
}

}  // namespace mla::dense
