// The walk over a CTA's work: the 64-index blocks of its scheduler part, across requests, in the order
// the consumers take them; each entry's cache slot (checked, never dereferenced when invalid); the L2
// prefetch of the tokens ahead.
#pragma once
#include "../common/tiles.cuh"

namespace mla::sparse {

// A request's valid top-k entries: its length, clamped to [0, topk].
__device__ __forceinline__ int request_length(const SparseParams& p, int req) { return max(0, min(p.lengths[req], p.topk)); }

// Position in the walk. The producers keep cursors two blocks ahead of the one they fill, to prefetch.
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

// Blocks in this CTA's walk (the m64 producers loop over a count and keep only look-ahead cursors).
__device__ __forceinline__ int walk_blocks(const SparseParams& p, const SchedMeta& meta) {
  int n = 0;
  for (Cursor c = cursor_begin(p, meta); cursor_valid(meta, c); cursor_next(p, meta, c)) ++n;
  return n;
}

// The slot of entry `token` of the cursor's block, in two steps so the index load is issued early and
// waited for only where the slot is used: cursor_index always loads, branch-free (entry 0 of the part's
// last request, always inside the indices, stands in where there is nothing to read), and slot_of
// applies the checks later. With the checks beside the load, ptxas waited for it right there (12 % of
// the producers' warp samples in ncu were that one compare).
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

// The cache slot, or -1 where there is none to read (past the walk, past the request's top-k length,
// -1, or outside the cache).
__device__ __forceinline__ int slot_of(const SparseParams& p, PendingSlot e) { return e.in && e.id >= 0 && e.id < p.num_slots ? e.id : -1; }

__device__ __forceinline__ int cursor_slot(const SparseParams& p, const SchedMeta& meta, const Cursor& c, int s_idx, int token) {
  return slot_of(p, cursor_index(p, meta, c, s_idx, token));
}

// The gathers are latency-bound (random tokens spread over gigabytes), so the m64 producers warm L2 and
// the address translation two blocks ahead. A thread takes lines q and q + 4 of its token (the last
// offset clamped onto the token's last byte), per-thread addresses: the bulk prefetch takes uniform
// operands and ran as an eight-trip loop per warp (sparse-v32 540.5 against 488.8 µs on the H200).
template <class Fmt>
__device__ __forceinline__ void prefetch_token_lines(const SparseParams& p, int slot, int q) {
  static_assert(Fmt::TOKEN_BYTES <= 5 * 128 + 129, "offsets 0, 128, ..., 640 and the last byte touch every line of a token");
  if (slot < 0) return;
  const uint8_t* tok = Fmt::token(p, slot);
  ptx::prefetch_l2(tok + 128 * q);
  if (q < 3) ptx::prefetch_l2(tok + min(128 * (q + 4), Fmt::TOKEN_BYTES - 1));
}

}  // namespace mla::sparse
