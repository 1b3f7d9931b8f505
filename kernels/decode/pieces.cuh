// How a scheduler part's record (SchedMeta) cuts the requests into pieces of 64-token blocks: shared by
// every main kernel, whatever the architecture (the scheduler itself is sched_meta.cu).
#pragma once
#include "../mla/params.h"

namespace mla {

// Blocks the scheduler gives a request: an empty request still gets one (its CTA writes out 0, lse +inf).
// No `seqlen + 63`: it overflows int for lengths near 2^31.
__device__ __forceinline__ int num_kv_blocks(int seqlen) { return seqlen <= 0 ? 1 : seqlen / BLOCK_N + (seqlen % BLOCK_N != 0); }

// A part's piece of request req (its SchedMeta): blocks [piece_first_block, piece_end_block) of a request
// of len tokens (or top-k entries), and whether another part holds the rest (the piece then writes
// partials for the combine).
__device__ __forceinline__ int piece_first_block(const SchedMeta& meta, int req) { return req == meta.begin_req_idx ? meta.begin_block_idx : 0; }
__device__ __forceinline__ int piece_end_block(const SchedMeta& meta, int req, int len) {
  return req == meta.end_req_idx ? meta.end_block_idx : num_kv_blocks(len);
}
__device__ __forceinline__ bool piece_is_split(const SchedMeta& meta, int req) {
  return (req == meta.begin_req_idx && meta.is_first_req_splitted) || (req == meta.end_req_idx && meta.is_last_req_splitted);
}

}  // namespace mla
