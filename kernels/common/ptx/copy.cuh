// Data movement: TMA, bulk copies, prefetches and the special global loads.
// One named inline wrapper per PTX instruction, each with its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/). Hopper facts verified on the H200 are in
// HOPPER-NOTES.md of the design notes; the few that bit us are repeated beside the wrapper.
#pragma once
#include <cstdint>
#include "sync.cuh"
namespace ptx {

// ---- bulk copies between shared memories and from global memory (PTX ISA §9.7.9.25) --------------

// cp.async.bulk.shared::cluster.shared::cta ... mbarrier::complete_tx::bytes: copies `bytes` (a multiple
// of 16, both addresses 16-byte aligned) of this CTA's shared memory into a peer CTA's, crediting the
// bytes to the peer's mbarrier (destination and barrier addresses from mapa). The source must have been
// published to the async proxy (fence_proxy_async_smem) by the threads that wrote it.
__device__ __forceinline__ void bulk_copy_smem_to_cluster(uint32_t cluster_dst, uint32_t smem_src, uint32_t bytes, uint32_t cluster_bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(cluster_dst), "r"(smem_src),
               "r"(bytes), "r"(cluster_bar)
               : "memory");
}

// cp.async.bulk.shared::cluster.global ... mbarrier::complete_tx::bytes: the bulk-copy engine copies
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory into this CTA's shared
// memory, crediting them to `bar` (a CTA-local address is a valid shared::cluster one without a cluster
// launch). No registers hold the data in flight, so the number of copies in flight is bounded by the
// staging memory, not by the issuing threads.
__device__ __forceinline__ void bulk_copy_global_to_smem(uint32_t smem_dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_dst), "l"(src),
               "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

// ---- TMA: cp.async.bulk.tensor (PTX ISA §9.7.9.25) -------------------------------------------------

// createpolicy.fractional.L2::evict_first: the K/V stream is read once per CTA (FlashMLA's hint).
__device__ __forceinline__ uint64_t policy_evict_first() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// 4-D tiled load into CTA shared memory, completing `bytes` on `bar`. Coordinates are signed element
// indices, innermost first; out-of-range boxes are zero-filled and still credit full bytes.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* tmap, uint64_t* bar, int c0, int c1, int c2,
                                           int c3, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;" ::"r"(smem_addr(dst)),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// 5-D tiled load into CTA shared memory without a cache hint (Q: read by every CTA of a split request,
// so neither evict-first nor evict-last is right), completing on `bar` like tma_load_4d.
__device__ __forceinline__ void tma_load_5d(void* dst, const void* tmap, uint64_t* bar, int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(smem_addr(dst)),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_addr(bar))
      : "memory");
}

// prefetch.tensormap: pull the descriptor into the TMA unit's cache before the first load.
__device__ __forceinline__ void prefetch_tensormap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tmap) : "memory");
}

// ---- loads past L1 (another SM's data, written during this kernel) -----------------------------------

// ld.global.cg.v2.f32: two floats from L2, past L1 (another SM's partial, written during this kernel).
__device__ __forceinline__ float2 ld_cg_f32x2(const float* p) {
  float2 v;
  asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p) : "memory");
  return v;
}

// ld.global.cg.f32: one float from L2, past L1.
__device__ __forceinline__ float ld_cg_f32(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}

// ---- copies into shared memory through no registers (PTX ISA: cp.async, non-bulk) ------------------

// cp.async.cg.shared.global: 16 bytes from global into shared memory (through L2, not L1) without
// holding a register or waiting; `src_bytes` below 16 zero-fills the rest (0: a zero chunk, nothing read).
__device__ __forceinline__ void cp_async_16(uint32_t smem_dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_dst), "l"(src), "r"(src_bytes) : "memory");
}

// cp.async.wait_all: this thread's cp.async copies have landed. Other threads see them after a barrier,
// wgmma (the async proxy) after fence_proxy_async_smem too.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// ---- prefetches ------------------------------------------------------------------------------------

// cp.async.bulk.prefetch.L2: pull `bytes` (a multiple of 16, 16-byte aligned) into L2 without waiting or
// using registers; a gather can then find its lines (and their address translation) warm.
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// prefetch.global.L2: pull the line holding `p` into L2. Per-thread addresses (the bulk form above takes
// uniform operands, so a warp prefetching eight tokens runs it in an eight-trip loop).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// ---- read-only global loads ------------------------------------------------------------------------

// The gather loads below allocate in L1 (evict_last, as FlashMLA's gathers): the sparse kernels are
// bound by the L1 data pipe (LSU wavefronts at 77-83 % of peak in ncu), and with allocation the second
// 64-byte piece of a 128-byte line is an L1 hit (L2 -> L1 bytes 916 -> 782 MB per launch). Against
// L1::no_allocate: 403.0 vs 448.3 µs at sparse-v32 on the H200 (evict_normal 405.5).

// ld.global.nc.L1::evict_last.v4: a 16-byte read-only load (a gathered KV token piece).
__device__ __forceinline__ uint4 ld_nc_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::evict_last.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// ld.global.nc.L1::evict_last.v2: an 8-byte read-only load (a MODEL1 token's scale record).
__device__ __forceinline__ uint2 ld_nc_v2(const void* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::evict_last.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// ld.global.nc.L1::evict_last.L2::256B.v4: the same load, asking L2 to fetch the whole 256-byte
// block around it on a miss (a 656-byte FP8 token spans three: the neighbours' loads then hit L2).
__device__ __forceinline__ uint4 ld_nc_v4_l2_256(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::evict_last.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

}  // namespace ptx
