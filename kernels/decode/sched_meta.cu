// Tile scheduler metadata (FLASHMLA.md §2.1-2.2), computed on the GPU from cache_seqlens so that a decode
// loop never waits for the host. src/mla/schedule.ts is the CPU twin: same algorithm, same records.
//
// The KV blocks (64 tokens) of all requests are cut into num_sm_parts contiguous pieces of roughly equal
// cost, where every piece also pays a fixed overhead of p.fixed_overhead blocks (prologue, Q load,
// epilogue, combine). An empty request still costs one block, so it gets a CTA that writes out = 0 and
// lse = +inf.
#include "../mla/params.h"

MLA_EXPORT_LAYOUT(sched_params_layout, mla::SchedParams, MLA_OFFSETS_SCHED)

namespace {
// Written without `seqlen + 63`, which overflows int for lengths near 2^31 (and then read
// cache_seqlens[-1] further on).
__device__ __forceinline__ int num_kv_blocks(int seqlen) {
  return seqlen <= 0 ? 1 : seqlen / mla::BLOCK_N + (seqlen % mla::BLOCK_N != 0);
}
// A request's length as the scheduler takes it: sparse lengths are clamped to topk (with a second index
// list: the main list padded to whole blocks, then the extra list's clamped length, the walk of
// sparse/cursor.cuh); dense lengths outside [0, max_valid_len] (negative, or past the block table) are
// errors and scheduled as empty (0: out 0, lse +inf) instead of reading zeros for the tokens the table
// cannot name. Returns the error code.
__device__ __forceinline__ int checked_length(const mla::SchedParams& p, int i, int& used) {
  const int len = p.cache_seqlens[i];
  if (p.max_len > 0) {
    used = min(max(len, 0), p.max_len);
    if (p.extra_max_len > 0) {
      const int extra = p.extra_lengths != nullptr ? p.extra_lengths[i] : p.extra_max_len;
      used = mla::BLOCK_N * (used / mla::BLOCK_N + (used % mla::BLOCK_N != 0)) + min(max(extra, 0), p.extra_max_len);
    }
    return mla::ERR_NONE;
  }
  if (p.max_valid_len > 0 && (len < 0 || len > p.max_valid_len)) {
    used = 0;
    return len < 0 ? mla::ERR_NEGATIVE_LENGTH : mla::ERR_LENGTH_PAST_TABLE;
  }
  used = len;
  return mla::ERR_NONE;
}
__device__ __forceinline__ int length_of(const mla::SchedParams& p, int i) {
  if (p.seqlens_used != nullptr) return p.seqlens_used[i];
  int used;
  checked_length(p, i, used);
  return used;
}
}  // namespace

// Grid 1, 32 threads: the lanes check and sum the lengths, lane 0 walks the greedy cut (b is at most a
// few thousand).
extern "C" __global__ void __launch_bounds__(32) mla_sched_meta(const __grid_constant__ mla::SchedParams p) {
  const int lane = threadIdx.x;
  long long total = 0;
  int first_bad = p.b;  // the lowest request with an invalid length, over the warp
  for (int i = lane; i < p.b; i += 32) {
    int used;
    if (checked_length(p, i, used) != mla::ERR_NONE) first_bad = min(first_bad, i);
    if (p.seqlens_used != nullptr) p.seqlens_used[i] = used;
    total += num_kv_blocks(used) + p.fixed_overhead;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    total += __shfl_xor_sync(0xFFFFFFFFu, total, off);
    first_bad = min(first_bad, __shfl_xor_sync(0xFFFFFFFFu, first_bad, off));
  }
  __syncwarp();  // lane 0 reads the other lanes' seqlens_used below
  if (lane != 0) return;
  if (first_bad < p.b && p.errors != nullptr && p.errors[0] == mla::ERR_NONE) {
    int used;
    p.errors[0] = checked_length(p, first_bad, used);
    p.errors[1] = first_bad;
    p.errors[2] = 0;
    p.errors[3] = p.cache_seqlens[first_bad];
    p.errors[4] = p.max_valid_len;
  }

  const long long payload = (total + p.num_sm_parts - 1) / p.num_sm_parts + p.fixed_overhead;
  int req = 0, blk = 0, split = 0, cum = 0;
  p.num_splits[0] = 0;
  for (int part = 0; part < p.num_sm_parts; ++part) {
    mla::SchedMeta m{};
    if (req >= p.b) {
      m.begin_req_idx = m.end_req_idx = p.b;  // unused part: the kernels return at once
      reinterpret_cast<mla::SchedMeta*>(p.sched_meta)[part] = m;
      continue;
    }
    m.begin_req_idx = req;
    m.begin_block_idx = blk;
    m.begin_split_idx = split;
    const bool began_mid = blk > 0;
    // The last part takes whatever is left, so no block can ever go unscheduled.
    long long budget = part == p.num_sm_parts - 1 ? (1LL << 62) : payload;
    int last_full_req = -1;
    while (req < p.b) {
      const int nblk = num_kv_blocks(length_of(p, req));
      const long long rest = nblk - blk;
      if (rest + p.fixed_overhead <= budget) {
        budget -= rest + p.fixed_overhead;
        cum += split + 1;
        p.num_splits[req + 1] = cum;
        last_full_req = req;
        ++req, blk = 0, split = 0;
      } else {
        if (budget - p.fixed_overhead > 0) {
          blk += static_cast<int>(budget - p.fixed_overhead);
          ++split;
        }
        break;
      }
    }
    const bool ends_mid = blk > 0;
    if (ends_mid) {
      m.end_req_idx = req;
      m.end_block_idx = blk;
    } else {
      m.end_req_idx = last_full_req;
      m.end_block_idx = num_kv_blocks(length_of(p, last_full_req));
    }
    const bool single = m.begin_req_idx == m.end_req_idx;
    m.is_first_req_splitted = (began_mid || (single && ends_mid)) ? 1 : 0;
    m.is_last_req_splitted = (ends_mid || (single && began_mid)) ? 1 : 0;
    reinterpret_cast<mla::SchedMeta*>(p.sched_meta)[part] = m;
  }
}
