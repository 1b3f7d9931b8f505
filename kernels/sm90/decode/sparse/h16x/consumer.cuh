// h16x's consumers (h_q <= 16): tokens as wgmma's M and the heads as N (heads_as_n.cuh), so a block's
// tensor work is a quarter of the 64-row consumers' (48 of whose rows would be zeros at 16 heads). The
// two warpgroups take the walk's blocks in turn, each keeping its own Oᵀ, m and l for a request; at the
// request's end WG1's state is merged into WG0's (the split-KV merge, in place), which stores the rows.
#pragma once
#include "../cursor.cuh"
#include "../epilogue.cuh"
#include "mma.cuh"
#include "model1.cuh"

namespace mla::sparse::h16x {

// A block's Sᵀ masked (log2 units applied; a token without a slot gets MASKED), and the thread's own
// column maxima of it.
__device__ __forceinline__ void mask(float (&st)[8], float (&mx)[4], const uint8_t* valid, float scale_log2, int warp, int lane) {
#pragma unroll
  for (int j = 0; j < 4; ++j) mx[j] = MASKED;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int j = h16_j(e);
    st[e] = valid[h16_row(warp, lane, e)] ? st[e] * scale_log2 : MASKED;
    mx[j] = fmaxf(mx[j], st[e]);
  }
}

// The online-softmax step, with the lazy max's decision taken by a vote instead of exchanging column
// maxima every block: a thread whose scores stay within m + LAZY_MAX (m is the same in every thread of a
// column) computes Pᵀ with the m it has and stores it, and the barrier that publishes Pᵀ also ORs every
// thread's "rose". Only then (a request's first block, a jump) the full step (h16_softmax) runs again
// from the kept scores and stores Pᵀ again: the same bits either way (the same m, P and order of l's sums).
template <typename StorePt>
__device__ __forceinline__ void vote_softmax(float (&st)[8], float (&mx)[4], float (&m)[4], float (&l)[4], float (&ot)[8][8], float (&red)[4][H16_ROWS],
                                             int warp, int lane, uint32_t bar, StorePt&& store_pt) {
  bool rose = false;
#pragma unroll
  for (int j = 0; j < 4; ++j) rose |= mx[j] > m[j] + float(LAZY_MAX);
  float kept[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) kept[e] = st[e], st[e] = ptx::exp2_approx(st[e] - m[h16_j(e)]);
  store_pt(st);
  if (ptx::named_barrier_sync_or(bar, 128, rose)) {
#pragma unroll
    for (int e = 0; e < 8; ++e) st[e] = kept[e];
    h16_softmax<LAZY_MAX>(st, mx, m, l, ot, red, warp, lane, bar);
    store_pt(st);
    ptx::named_barrier_sync(bar, 128);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) l[h16_j(e)] += st[e];
  }
}

// The other warpgroup's state of the request merged into this one's: its column maxima m1 and sums l1 (by
// column), its Oᵀ tiles 0-3 at ot_lo and 4-7 at ot_hi (element e of tile mb at (8 (mb % 4) + e) · 128 + tid,
// as the other thread tid stored it).
__device__ __forceinline__ void merge_take(float (&m)[4], float (&L)[4], float (&ot)[8][8], const float* m1s, const float* l1s, const float* ot_lo,
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

// WG0's rows of a finished request: thread (warp, lane) holds, of its 4 columns (heads), dims dim_off ..
// + 3 of each 128-dim group (V32) or dim_off, + 1 of each 64-dim m-tile (MODEL1); out and lse, or the
// split partials (epilogue.cuh).
template <class Fmt>
__device__ __forceinline__ void store_heads(const SparseParams& p, const float (&ot)[8][8], const float (&m)[4], const float (&L)[4], int req, int s_idx,
                                            bool is_split, int slot, int warp, int lane, int dim_off) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int head = h16_col(lane, j);
    if (head >= p.h_q) continue;
    const bool empty = L[j] == 0.0f;  // a NaN L propagates
    const int e0 = 4 * (j >> 1) + (j & 1), e1 = e0 + 2;  // rows r and r + 8 of column j
    if (!is_split) {
      const float inv = unsplit_inv(p, head, L[j], m[j]) * OT_UNDO;
      uint16_t* out = static_cast<uint16_t*>(p.out) + ((static_cast<long long>(req) * p.s_q + s_idx) * p.h_q + head) * D_V;
      if constexpr (cuda::std::is_same_v<Fmt, Model1>) {
        store_dims_m1(ot, e0, inv, out, nullptr, dim_off);
      } else {
#pragma unroll
        for (int g = 0; g < 4; ++g)
          *reinterpret_cast<uint2*>(out + 128 * g + dim_off) =
              make_uint2(ptx::pack2<ptx::bf16_t>(ot[2 * g][e0] * inv, ot[2 * g][e1] * inv), ptx::pack2<ptx::bf16_t>(ot[2 * g + 1][e0] * inv, ot[2 * g + 1][e1] * inv));
      }
      if (warp == 0 && lane < 4) p.lse[(static_cast<long long>(req) * p.h_q + head) * p.s_q + s_idx] = empty ? INFINITY : (__log2f(L[j]) + m[j]) * LN2;
    } else {
      const float inv = empty ? 0.0f : OT_UNDO / L[j];
      const long long row = static_cast<long long>(slot) * p.s_q * p.h_q + s_idx * p.h_q + head;
      float* oa = p.o_accum + row * D_V;
      if constexpr (cuda::std::is_same_v<Fmt, Model1>) {
        store_dims_m1(ot, e0, inv, nullptr, oa, dim_off);
      } else {
#pragma unroll
        for (int g = 0; g < 4; ++g)
          *reinterpret_cast<float4*>(oa + 128 * g + dim_off) = make_float4(ot[2 * g][e0] * inv, ot[2 * g][e1] * inv, ot[2 * g + 1][e0] * inv, ot[2 * g + 1][e1] * inv);
      }
      if (warp == 0 && lane < 4) p.lse_accum[row] = empty ? -INFINITY : __log2f(L[j]) + m[j];
    }
  }
}

// Consumer warpgroup wg (0 or 1): the walk's blocks of its parity; per request Q (both warpgroups), the
// blocks, then WG1's m, L and Oᵀ merged into WG0's, which stores the rows.
template <class Fmt, bool EXTRA>
__device__ __forceinline__ void consumer(const SparseParams& p, Smem<Fmt>& sm, const SchedMeta& meta, int s_idx, int wg) {
  constexpr bool M1_TOKENS = cuda::std::is_same_v<Fmt, Model1>;  // model1.cuh's operands, else V3.2's
  const int tid = threadIdx.x - 128 * wg, warp = tid / 32, lane = tid % 32;
  const uint32_t bar = BAR_WG0 + wg;
  float (&red)[4][H16_ROWS] = sm.red[wg];
  const uint32_t q_base = ptx::smem_addr(sm.q), pt_base = ptx::smem_addr(sm.pt[wg]);
  const int dim_off = M1_TOKENS ? dim_off_m1(warp, lane) : 4 * (8 * warp + lane / 4);  // Oᵀ's rows are permuted: pv's layout
  float* const merge_hi = reinterpret_cast<float*>(sm.pt);  // Oᵀ tiles 4-7
  int it = 0;
  for (int req = meta.begin_req_idx; req <= meta.end_req_idx; ++req) {
    const int start_blk = piece_first_block(meta, req);
    const int end_blk = piece_end_block(meta, req, walk_length<EXTRA>(p, req));
    const bool is_split = piece_is_split(meta, req);
    ptx::named_barrier_sync(BAR_ALL, CONSUMER_THREADS);  // the previous request is done with sQ and the merge space
    if constexpr (M1_TOKENS) load_q_m1(p, sm, req, s_idx, threadIdx.x);
    else load_q(p, sm, req, s_idx, threadIdx.x);
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(BAR_ALL, CONSUMER_THREADS);
    float qx[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) qx[j] = sm.qexp[h16_col(lane, j)];
    float ot[8][8], m[4], l[4];
    h16_init(ot, m, l);
    for (int blk = start_blk; blk < end_blk; ++blk, ++it) {
      if ((it & 1) != wg) continue;
      const int stage = it % STAGES;
      ptx::mbarrier_wait(&sm.full[stage], (it / STAGES) & 1);
      const uint8_t* sb = sm.raw[stage];
      float st[8], mx[4];
      if constexpr (M1_TOKENS) {
        uint2 rec[2];
        qk_m1(st, rec, sb, q_base, warp, lane, qx);
        mask(st, mx, sm.valid[stage], p.scale_log2, warp, lane);
        vote_softmax(st, mx, m, l, ot, red, warp, lane, bar, [&](const float (&v)[8]) { store_pt_m1(v, rec, pt_base, warp, lane); });
        pv_m1(ot, sb, pt_base, warp, lane);
      } else {
        float4 sc[2];
        qk<Fmt>(st, sc, sb, q_base, warp, lane, qx);
        mask(st, mx, sm.valid[stage], p.scale_log2, warp, lane);
        vote_softmax(st, mx, m, l, ot, red, warp, lane, bar, [&](const float (&v)[8]) { store_pt_scaled(v, sc, pt_base, warp, lane); });
        pv<Fmt>(ot, sb, pt_base, warp, lane);
      }
      // Every warp's reads of Pᵀ are done before any rewrites it; every thread releases the stage itself
      // (racecheck orders a thread's reads before the producers' next copy only through its own arrival).
      ptx::named_barrier_sync(bar, 128);
      ptx::mbarrier_arrive(&sm.empty[stage]);
    }
    float L[4] = {l[0], l[1], l[2], l[3]};
    h16_col_reduce(L, red, warp, lane, bar, [](float a, float b) { return a + b; });
    if (wg == 1) {
      if (warp == 0 && lane < 4) {
#pragma unroll
        for (int j = 0; j < 4; ++j) sm.merge_ml[0][h16_col(lane, j)] = m[j], sm.merge_ml[1][h16_col(lane, j)] = L[j];
      }
#pragma unroll
      for (int mb = 0; mb < 4; ++mb)
#pragma unroll
        for (int e = 0; e < 8; ++e) sm.merge_ot[(8 * mb + e) * 128 + tid] = ot[mb][e];
    }
    ptx::named_barrier_sync(BAR_ALL, CONSUMER_THREADS);
    // Oᵀ tiles 4-7 into the Pᵀ tiles, free now that both warpgroups are past P·V; one barrier instruction
    // for both warpgroups (synccheck took WG1 at a barrier of its own, with the same id and count as WG0's,
    // for divergent threads; WG0 merging the low half meanwhile spilled 36 bytes).
    if (wg == 1) {
#pragma unroll
      for (int mb = 4; mb < 8; ++mb)
#pragma unroll
        for (int e = 0; e < 8; ++e) merge_hi[(8 * (mb - 4) + e) * 128 + tid] = ot[mb][e];
    }
    ptx::named_barrier_sync(BAR_ALL, CONSUMER_THREADS);
    if (wg == 1) continue;
    merge_take(m, L, ot, sm.merge_ml[0], sm.merge_ml[1], sm.merge_ot, merge_hi, tid, lane);
    const int slot = p.num_splits[req] + (req == meta.begin_req_idx ? meta.begin_split_idx : 0);  // the piece's split slot
    store_heads<Fmt>(p, ot, m, L, req, s_idx, is_split, slot, warp, lane, dim_off);
  }
}

}  // namespace mla::sparse::h16x
