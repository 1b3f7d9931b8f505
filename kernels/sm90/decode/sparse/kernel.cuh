// The sparse kernels' bodies: barriers, then each warpgroup's role and register budget. Grid
// (ceil(h_q / 64), s_q, num_sm_parts) for m64 and h128x (a (2, 1, 1) cluster over the two head tiles),
// (1, s_q, num_sm_parts) for h16x; THREADS threads.
#pragma once
#include "consumer_m64.cuh"
#include "h16x/consumer.cuh"
#include "h16x/producer.cuh"
#include "producer.cuh"

namespace mla::sparse {

// m64 (XO = false) and h128x (XO = true: h_q = 128, the two CTAs of a query token in a cluster, each
// dequantizing half of every block for both). EXTRA: the walk has a second index list over a second
// cache (cursor.cuh).
template <class Fmt, bool XO, bool EXTRA>
__device__ __forceinline__ void decode_m64(const SparseParams& p) {
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = smem_struct_1024<Smem>(smem_raw);
  ptx::pdl_wait();  // launched with programmatic dependent launch: nothing global is read before it
  // Each role reads the part's record itself, so nothing but the params stays live across the role
  // branches (their registers are allocated separately after setmaxnreg).
  const SchedMeta* meta = reinterpret_cast<const SchedMeta*>(p.sched_meta) + blockIdx.z;
  if (meta->begin_req_idx >= p.b) {  // both CTAs of a cluster share the record, so both leave here
    ptx::pdl_launch_dependents();
    return;
  }
  pdl_launch_if_unsplit(*meta);
  if (threadIdx.x == 0) init_barriers<XO>(sm);
  // The peer may arrive on these barriers and write this buffer only once they exist.
  if constexpr (XO) ptx::cluster_sync();
  else __syncthreads();
  // Warp-uniform by construction (a shuffle from lane 0), so the role branch needs no divergence tracking.
  const int wg = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg >= 2) {
    ptx::setmaxnreg_dec<PRODUCER_REGS>();
    producer<Fmt, XO, EXTRA>(p, sm, *meta, blockIdx.y, wg - 2);
  } else if (wg == 0) {
    ptx::setmaxnreg_inc<WG0_REGS>();
    consumer<ptx::bf16_t, Fmt, 0, XO, EXTRA>(p, sm, *meta, blockIdx.x * 64, blockIdx.y);
  } else {
    ptx::setmaxnreg_inc<WG1_REGS>();
    consumer<ptx::bf16_t, Fmt, 1, XO, EXTRA>(p, sm, *meta, blockIdx.x * 64, blockIdx.y);
  }
  ptx::pdl_launch_dependents();
  // No CTA may leave while its peer can still write its buffers or arrive on its barriers.
  if constexpr (XO) ptx::cluster_sync();
}

// h16x (h_q <= 16): WG0 and WG1 consume the walk's blocks in turn, converting FP8 themselves; WG2 and
// WG3 only move bytes.
template <class Fmt, bool EXTRA>
__device__ __forceinline__ void decode_h16x(const SparseParams& p) {
  extern __shared__ uint8_t smem_raw[];
  h16x::Smem<Fmt>& sm = smem_struct_1024<h16x::Smem<Fmt>>(smem_raw);
  ptx::pdl_wait();  // launched with programmatic dependent launch: nothing global is read before it
  const SchedMeta* meta = reinterpret_cast<const SchedMeta*>(p.sched_meta) + blockIdx.z;
  if (meta->begin_req_idx >= p.b) {
    ptx::pdl_launch_dependents();
    return;
  }
  pdl_launch_if_unsplit(*meta);
  if (threadIdx.x == 0) h16x::init_barriers(sm);
  __syncthreads();
  const int wg = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg >= 2) {
    ptx::setmaxnreg_dec<h16x::PRODUCER_REGS>();
    h16x::producer<Fmt, EXTRA>(p, sm, *meta, blockIdx.y, wg - 2);
  } else {
    ptx::setmaxnreg_inc<h16x::CONSUMER_REGS>();
    h16x::consumer<Fmt, EXTRA>(p, sm, *meta, blockIdx.y, wg);
  }
  ptx::pdl_launch_dependents();
}

}  // namespace mla::sparse
