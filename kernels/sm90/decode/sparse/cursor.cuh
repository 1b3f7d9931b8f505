// The walk over a CTA's work: the 64-index blocks of its scheduler part, across requests, in the order
// the consumers take them; each entry's cache slot (checked, never dereferenced when invalid); the L2
// prefetch of the tokens ahead.
//
// A request's walk is its top-k list's blocks, then (DeepSeek-V4) its extra list's blocks over the
// second cache: ceil(len / 64) + ceil(extra_len / 64) blocks, one softmax over both. The scheduler
// counts the same blocks (sched_meta.cu, walk_length below), so the split merge and the combine do not
// know there are two lists. EXTRA is a kernel's compile-time choice: a call with one cache runs the
// kernels without the second list's bookkeeping, which cost V3.2's kernels 1-4 % on the H200 (ptxas
// schedules the producers differently around it).
#pragma once
#include "../common/tiles.cuh"
#include "format.cuh"

namespace mla::sparse {

// A request's two list lengths as stored. The consumers load them a request ahead and clamp them where
// they use them (a load checked beside its issue is waited for right there).
struct RawLengths {
  int len, extra_len;
};
template <bool EXTRA>
__device__ __forceinline__ RawLengths load_lengths(const SparseParams& p, int req) {
  return {p.lengths[req], EXTRA && p.extra_topk > 0 && p.extra_lengths != nullptr ? p.extra_lengths[req] : p.extra_topk};
}
// A request's valid entries of each list: its lengths, clamped to [0, topk] and [0, extra_topk].
__device__ __forceinline__ int main_length(const SparseParams& p, const RawLengths& r) { return max(0, min(r.len, p.topk)); }
template <bool EXTRA>
__device__ __forceinline__ int extra_length(const SparseParams& p, const RawLengths& r) {
  return !EXTRA || p.extra_topk == 0 ? 0 : max(0, min(r.extra_len, p.extra_topk));
}
__device__ __forceinline__ int main_blocks(int len) { return len / BLOCK_N + (len % BLOCK_N != 0); }

// The walk's length in entries as the scheduler counts it (with a second list, the main list padded to
// whole blocks).
template <bool EXTRA>
__device__ __forceinline__ int walk_length(int len, int extra_len) { return EXTRA ? BLOCK_N * main_blocks(len) + extra_len : len; }
template <bool EXTRA>
__device__ __forceinline__ int walk_length(const SparseParams& p, const RawLengths& r) { return walk_length<EXTRA>(main_length(p, r), extra_length<EXTRA>(p, r)); }
template <bool EXTRA>
__device__ __forceinline__ int walk_length(const SparseParams& p, int req) { return walk_length<EXTRA>(p, load_lengths<EXTRA>(p, req)); }

// Position in the walk. The producers keep cursors two blocks ahead of the one they fill, to prefetch.
struct Cursor {
  int req, blk, end_blk, len, extra_len;
};

__device__ __forceinline__ bool cursor_valid(const SchedMeta& meta, const Cursor& c) { return c.req <= meta.end_req_idx; }

// Moves to the next request with a non-empty block range when the current one is used up.
template <bool EXTRA>
__device__ __forceinline__ void cursor_settle(const SparseParams& p, const SchedMeta& meta, Cursor& c) {
  while (c.blk >= c.end_blk && ++c.req <= meta.end_req_idx) {
    const RawLengths r = load_lengths<EXTRA>(p, c.req);
    c.len = main_length(p, r);
    c.extra_len = extra_length<EXTRA>(p, r);
    c.blk = 0;
    c.end_blk = piece_end_block(meta, c.req, walk_length<EXTRA>(c.len, c.extra_len));
  }
}

template <bool EXTRA>
__device__ __forceinline__ Cursor cursor_begin(const SparseParams& p, const SchedMeta& meta) {
  Cursor c;
  c.req = meta.begin_req_idx;
  const RawLengths r = load_lengths<EXTRA>(p, c.req);
  c.len = main_length(p, r);
  c.extra_len = extra_length<EXTRA>(p, r);
  c.blk = meta.begin_block_idx;
  c.end_blk = piece_end_block(meta, c.req, walk_length<EXTRA>(c.len, c.extra_len));
  cursor_settle<EXTRA>(p, meta, c);
  return c;
}

template <bool EXTRA>
__device__ __forceinline__ void cursor_next(const SparseParams& p, const SchedMeta& meta, Cursor& c) {
  ++c.blk;
  cursor_settle<EXTRA>(p, meta, c);
}

// Blocks in this CTA's walk (the m64 producers loop over a count and keep only look-ahead cursors).
template <bool EXTRA>
__device__ __forceinline__ int walk_blocks(const SparseParams& p, const SchedMeta& meta) {
  int n = 0;
  for (Cursor c = cursor_begin<EXTRA>(p, meta); cursor_valid(meta, c); cursor_next<EXTRA>(p, meta, c)) ++n;
  return n;
}

// The slot of entry `token` of the cursor's block, in two steps so the index load is issued early and
// waited for only where the slot is used: cursor_index always loads, branch-free (entry 0 of the part's
// last request's row of the same list, always inside it, stands in where there is nothing to read),
// and slot_of applies the checks later. With the checks beside the load, ptxas waited for it right
// there (12 % of the producers' warp samples in ncu were that one compare).
struct PendingSlot {
  int id;
  bool in;     // the entry exists: inside the walk and its list's valid length
  bool extra;  // it indexes the extra cache
};

template <bool EXTRA>
__device__ __forceinline__ PendingSlot cursor_index(const SparseParams& p, const SchedMeta& meta, const Cursor& c, int s_idx, int token) {
  const int nmain = main_blocks(c.len);
  // An empty request's one block reads the main list (there may be no extra list).
  const bool extra = EXTRA && p.extra_topk > 0 && c.blk >= nmain;
  const int pos = (extra ? c.blk - nmain : c.blk) * BLOCK_N + token;
  const bool in = cursor_valid(meta, c) && pos < (extra ? c.extra_len : c.len);
  const int* list = extra ? p.extra_indices : p.indices;
  const long long batch_stride = extra ? p.extra_indices_batch_stride : p.indices_batch_stride;
  const long long token_stride = extra ? p.extra_indices_token_stride : p.indices_token_stride;
  const long long at = static_cast<long long>(in ? c.req : meta.end_req_idx) * batch_stride + s_idx * token_stride + (in ? pos : 0);
  return {__ldg(list + at), in, extra};
}

// The walk slot (extra-cache ids after the main cache's: format.cuh), or -1 where there is none to read
// (past the walk, past the list's valid length, -1, or outside its cache).
template <bool EXTRA>
__device__ __forceinline__ int slot_of(const SparseParams& p, PendingSlot e) {
  if (!EXTRA) return e.in && e.id >= 0 && e.id < p.num_slots ? e.id : -1;
  const int limit = e.extra ? p.extra_num_slots : p.num_slots;
  return e.in && e.id >= 0 && e.id < limit ? e.id + (e.extra ? p.num_slots : 0) : -1;
}

template <bool EXTRA>
__device__ __forceinline__ int cursor_slot(const SparseParams& p, const SchedMeta& meta, const Cursor& c, int s_idx, int token) {
  return slot_of<EXTRA>(p, cursor_index<EXTRA>(p, meta, c, s_idx, token));
}

// The gathers are latency-bound (random tokens spread over gigabytes), so the m64 producers warm L2 and
// the address translation two blocks ahead, per-thread addresses (the format's prefetch): the bulk
// prefetch takes uniform operands and ran as an eight-trip loop per warp (sparse-v32 540.5 against
// 488.8 µs on the H200).
template <class Fmt, bool EXTRA>
__device__ __forceinline__ void prefetch_token_lines(const SparseParams& p, int slot, int q) {
  if (slot >= 0) Fmt::prefetch(token_place<EXTRA>(p, slot), q);
}

}  // namespace mla::sparse
