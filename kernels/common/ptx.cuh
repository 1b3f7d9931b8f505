// One named inline wrapper per PTX instruction used by the kernels. Each names its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/). Facts verified on the H200 are in
// ../shared/design/HOPPER-NOTES.md; the few that bit us are repeated where the wrapper is.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ptx {

// ---- special registers / addresses -----------------------------------------------------------

// cvta.to.shared: generic -> 32-bit shared address (what mbarrier/TMA/wgmma descriptors take).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier (PTX ISA §9.7.13.15) ----------------------------------------------------------------

// mbarrier.init: `count` arrivals complete a phase.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// fence.mbarrier_init: make initialised barriers visible to the async proxy and the cluster.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// mbarrier.arrive.expect_tx: one arrival plus `bytes` of transaction count (TMA will complete_tx).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

// mbarrier.arrive: one plain arrival.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// mbarrier.try_wait.parity in a loop. A fresh barrier reports parity 1 as complete (HOPPER-NOTES §3),
// so a producer waiting for an "empty" slot starts at parity 1 and consumers at 0.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_addr(bar);
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
}

// mbarrier.try_wait.parity.acquire.cluster in a loop: for barriers that a peer CTA of the cluster
// completes (st.async complete_tx, remote arrivals), so the peer's writes are visible after the wait.
__device__ __forceinline__ void mbarrier_wait_cluster(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_addr(bar);
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
}

// mbarrier.arrive.release.cluster on a barrier of another CTA of the cluster (address from mapa).
__device__ __forceinline__ void mbarrier_arrive_remote(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_addr) : "memory");
}

// mbarrier.arrive.relaxed.cluster on a peer's barrier: the arrival orders nothing. For "this thread no
// longer reads that buffer" once its reads have completed (wgmma_wait), it needs no fence; the release
// form above waits for every outstanding memory operation of the thread (ERRBAR in SASS).
__device__ __forceinline__ void mbarrier_arrive_remote_relaxed(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_addr) : "memory");
}

// ---- clusters and distributed shared memory (PTX ISA §9.7.x mapa, st.async, barrier.cluster) --------

// %cluster_ctarank: this CTA's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// mapa.shared::cluster: the address of the same shared-memory offset in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t mapa_shared(uint32_t smem_address, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_address), "r"(rank));
  return r;
}

// st.async ... mbarrier::complete_tx::bytes.v4.b32: 16 bytes into a peer CTA's shared memory, crediting
// 16 bytes to the peer's mbarrier (both addresses from mapa).
__device__ __forceinline__ void st_async_v4(uint32_t cluster_addr, uint4 v, uint32_t cluster_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(cluster_addr),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(cluster_bar)
               : "memory");
}

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

// The same, multicast: `bytes` land at smem_dst in every CTA of cta_mask, each crediting its own barrier
// at the offset of `bar` (scripts/device/l2-probe.cu: whether halving L2 reads raises what SMs receive).
__device__ __forceinline__ void bulk_copy_global_to_smem_multicast(uint32_t smem_dst, const void* src, uint32_t bytes, uint64_t* bar, uint16_t cta_mask) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(smem_dst),
               "l"(src), "r"(bytes), "r"(smem_addr(bar)), "h"(cta_mask)
               : "memory");
}

// barrier.cluster.arrive.release + wait.acquire: every thread of every CTA of the cluster.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- proxies and barriers -------------------------------------------------------------------------

// fence.proxy.async.shared::cta: generic-proxy smem writes become visible to wgmma / TMA (async proxy).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// bar.sync with a named barrier id and a thread count (multiple of 32). bar.sync and bar.arrive are the
// .aligned forms: all threads of a warp must execute them together, so the warp reconverges first (after
// lane-conditional code the compiler need not have; racecheck and synccheck flagged such call sites).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  __syncwarp();
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// bar.red.or.pred: named_barrier_sync that also returns whether `pred` held in any of the `threads`
// threads, so a decision that needs a whole warpgroup's vote costs no barrier of its own.
__device__ __forceinline__ bool named_barrier_sync_or(uint32_t id, uint32_t threads, bool pred) {
  __syncwarp();
  uint32_t any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}"
      : "=r"(any)
      : "r"(static_cast<uint32_t>(pred)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}

// barrier.sync / barrier.arrive without .aligned: for roles that reach the same named barrier from
// different code (templated per warpgroup), where the .aligned forms (bar.sync, bar.arrive) are undefined
// (PTX: every participating thread must execute the same aligned barrier instruction; synccheck flags it).
// These need no reconverged warp.
__device__ __forceinline__ void named_barrier_sync_unaligned(uint32_t id, uint32_t threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// MLA_RACECHECK_ARRIVE_AS_SYNC (a racecheck build only, never shipped): every arrive waits as a sync.
// racecheck does not model bar.arrive's ordering (scripts/device/racecheck-probe.cu: it flags correct
// arrive/sync exchanges, and full-barrier exchanges in a kernel that also uses an arrive). Each arrive in
// these kernels is matched by exactly one sync of the other side, so waiting there cannot deadlock; it
// only serializes. On the H200 this build still drew the same four reports (docs/reliability.md §3).
__device__ __forceinline__ void named_barrier_arrive_unaligned(uint32_t id, uint32_t threads) {
#ifdef MLA_RACECHECK_ARRIVE_AS_SYNC
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
#else
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
#endif
}

// bar.arrive: signal a named barrier without waiting (the producer side of a bar.arrive/bar.sync pair;
// like bar.sync it orders this thread's earlier shared-memory writes before the waiters continue).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  __syncwarp();  // .aligned, as bar.sync
#ifdef MLA_RACECHECK_ARRIVE_AS_SYNC  // see named_barrier_arrive_unaligned
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
#else
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
#endif
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

// cp.async.bulk.prefetch.tensor.4d.L2: the box tma_load_4d would load, into L2 only, with its cache policy.
__device__ __forceinline__ void tma_prefetch_4d(const void* tmap, int c0, int c1, int c2, int c3, uint64_t policy) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile.L2::cache_hint [%0, {%1, %2, %3, %4}], %5;" ::"l"(tmap), "r"(c0), "r"(c1), "r"(c2),
               "r"(c3), "l"(policy)
               : "memory");
}

// The same load multicast to every CTA of the cluster in cta_mask: each receives the tile at the same
// shared-memory offset and its own mbarrier at `bar`'s offset gets the complete_tx.
__device__ __forceinline__ void tma_load_4d_multicast(void* dst, const void* tmap, uint64_t* bar, int c0, int c1, int c2, int c3,
                                                     uint16_t cta_mask, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7, %8;" ::"r"(smem_addr(dst)),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar)), "h"(cta_mask), "l"(policy)
      : "memory");
}

// ---- wgmma (PTX ISA §9.7.15) -----------------------------------------------------------------------

// wgmma.fence: order register/accumulator writes by ordinary instructions before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// wgmma.commit_group: close the group of wgmmas issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// wgmma.wait_group N: wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads above a wgmma wait (HOPPER-NOTES §1.4 step 6).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Shared-memory matrix descriptor for a 128-byte-swizzled tile (HOPPER-NOTES §1.1): start address,
// leading and stride byte offsets (>>4), swizzle mode 1 = 128B in bits 62-63. Tiles are 1024-B aligned
// so the base offset field stays 0.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t smem_address, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_address & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

// A descriptor of smem_desc_sw128 moved on by `offset_bytes` (16-byte multiple): only the address field in
// the low word changes, and it cannot carry (shared memory ends below 256 KB), so the high word stays as
// it is and a chain of wgmmas over one tile's parts costs an add each, not a descriptor built anew.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t offset_bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (offset_bytes >> 4), hi = static_cast<uint32_t>(desc >> 32);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Element type tags for the wgmma wrappers: bf16 and f16 inputs, f32 accumulators.
struct bf16_t { static constexpr bool is_fp16 = false; };
struct fp16_t { static constexpr bool is_fp16 = true; };

#define FLASHMLA_ACC32(a)                                                                                   \
  "+f"(a[0]), "+f"(a[1]), "+f"(a[2]), "+f"(a[3]), "+f"(a[4]), "+f"(a[5]), "+f"(a[6]), "+f"(a[7]), "+f"(a[8]), \
      "+f"(a[9]), "+f"(a[10]), "+f"(a[11]), "+f"(a[12]), "+f"(a[13]), "+f"(a[14]), "+f"(a[15]), "+f"(a[16]),   \
      "+f"(a[17]), "+f"(a[18]), "+f"(a[19]), "+f"(a[20]), "+f"(a[21]), "+f"(a[22]), "+f"(a[23]), "+f"(a[24]),  \
      "+f"(a[25]), "+f"(a[26]), "+f"(a[27]), "+f"(a[28]), "+f"(a[29]), "+f"(a[30]), "+f"(a[31])

// wgmma.mma_async m64n64k16, A and B from shared memory (K-major both): S (+)= Q·Kᵀ.
// scale_d = 0 overwrites the accumulator (first K step).
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if defined(MLA_ABLATE_MMA) || defined(MLA_ABLATE_QK_MMA)  // timing experiments only: no tensor-core work
  return;
#endif
  if constexpr (T::is_fp16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
        "27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : FLASHMLA_ACC32(d)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
        "27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : FLASHMLA_ACC32(d)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

// wgmma.mma_async m64n16k16, A and B from shared memory, B K-major; TRANS_A = 1 reads A MN-major
// (imm-trans-a): the transposed 16-head design (docs/dense-decode.md §12), Sᵀ = K·Qᵀ with A = the K tile
// as it is, and Oᵀ += Vᵀ·Pᵀ with A = the same tile read transposed (LBO: next 64 rows of M, SBO: next 8
// rows of K, as for trans-b). scale_d = 0 overwrites the accumulator (first K step).
template <typename T, int TRANS_A>
__device__ __forceinline__ void wgmma_m64n16k16_ss(float (&d)[8], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(TRANS_A == 0 || TRANS_A == 1, "imm-trans-a is 0 or 1");
  if constexpr (T::is_fp16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, %11, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, %11, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A));
  }
}

// wgmma.mma_async m64n64k16 with A from registers and B from shared memory (K-major): the RoPE tile of
// Q·Kᵀ once Q's last tile has been moved to registers (its smem then holds a P tile).
// wgmma.mma_async m64n16k16, A from registers (the m16n8k16 A fragment of each warp's 16 rows), B
// K-major in shared memory: the h16x consumers' Sᵀ = K·Qᵀ and Oᵀ += Vᵀ·Pᵀ with K and V converted from
// FP8 in registers (docs/sparse-decode.md §24). scale_d = 0 overwrites the accumulator.
template <typename T>
__device__ __forceinline__ void wgmma_m64n16k16_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
  if constexpr (T::is_fp16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
  }
}

template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (T::is_fp16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
        "27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
        : FLASHMLA_ACC32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
        "27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
        : FLASHMLA_ACC32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
}

// wgmma.mma_async m64n256k16 with A from registers (4 x b32 of 16-bit pairs) and B from shared memory
// read MN-major (imm-trans-b = 1): O (+)= P·V where V is the K tile itself (HOPPER-NOTES §1.2).
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_rs_transb(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b) {
#if defined(MLA_ABLATE_MMA) || defined(MLA_ABLATE_PV_MMA)  // timing experiments only: no tensor-core work
  return;
#endif
#define FLASHMLA_ACC128_OPS                                                                              \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28," \
  "%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55," \
  "%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82," \
  "%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107," \
  "%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"
#define FLASHMLA_ACC128(a)                                                                                  \
  FLASHMLA_ACC32_AT(a, 0), FLASHMLA_ACC32_AT(a, 32), FLASHMLA_ACC32_AT(a, 64), FLASHMLA_ACC32_AT(a, 96)
#define FLASHMLA_ACC32_AT(a, o)                                                                              \
  "+f"(a[o + 0]), "+f"(a[o + 1]), "+f"(a[o + 2]), "+f"(a[o + 3]), "+f"(a[o + 4]), "+f"(a[o + 5]), "+f"(a[o + 6]), \
      "+f"(a[o + 7]), "+f"(a[o + 8]), "+f"(a[o + 9]), "+f"(a[o + 10]), "+f"(a[o + 11]), "+f"(a[o + 12]),         \
      "+f"(a[o + 13]), "+f"(a[o + 14]), "+f"(a[o + 15]), "+f"(a[o + 16]), "+f"(a[o + 17]), "+f"(a[o + 18]),      \
      "+f"(a[o + 19]), "+f"(a[o + 20]), "+f"(a[o + 21]), "+f"(a[o + 22]), "+f"(a[o + 23]), "+f"(a[o + 24]),      \
      "+f"(a[o + 25]), "+f"(a[o + 26]), "+f"(a[o + 27]), "+f"(a[o + 28]), "+f"(a[o + 29]), "+f"(a[o + 30]),      \
      "+f"(a[o + 31])
  if constexpr (T::is_fp16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " FLASHMLA_ACC128_OPS
                 ", {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
                 : FLASHMLA_ACC128(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " FLASHMLA_ACC128_OPS
                 ", {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
                 : FLASHMLA_ACC128(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
}

// wgmma.mma_async m64n256k16 with A from shared memory (K-major, e.g. a P tile another warpgroup stored)
// and B read MN-major (imm-trans-b = 1): O += P·V.
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_ss_transb(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
#if defined(MLA_ABLATE_MMA) || defined(MLA_ABLATE_PV_MMA)  // timing experiments only: no tensor-core work
  return;
#endif
  if constexpr (T::is_fp16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " FLASHMLA_ACC128_OPS
                 ", %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : FLASHMLA_ACC128(d)
                 : "l"(desc_a), "l"(desc_b));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " FLASHMLA_ACC128_OPS
                 ", %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : FLASHMLA_ACC128(d)
                 : "l"(desc_a), "l"(desc_b));
  }
}

// wgmma.mma_async m64n128k16, A from shared memory, B read MN-major: half of an m64n256 P·V, into
// accumulator registers d[OFF .. OFF + 63], which hold columns 2·OFF .. 2·OFF + 127 of the m64n256 layout
// (a thread's fragments are ordered by 8-column group). For kernels launched with fewer than 154
// registers per thread: ptxas sizes a wgmma against the launch bound even where setmaxnreg.inc gave the
// warpgroup more, and refuses the m64n256 form below 154 (C7602).
#define FLASHMLA_ACC64_OPS                                                                               \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28," \
  "%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55," \
  "%56,%57,%58,%59,%60,%61,%62,%63}"
template <typename T, int OFF>
__device__ __forceinline__ void wgmma_m64n128k16_ss_transb(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  static_assert(OFF == 0 || OFF == 64, "the left or the right half of the accumulator");
#if defined(MLA_ABLATE_MMA) || defined(MLA_ABLATE_PV_MMA)  // timing experiments only: no tensor-core work
  return;
#endif
  if constexpr (T::is_fp16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FLASHMLA_ACC64_OPS
                 ", %64, %65, p, 1, 1, 0, 1;\n}\n"
                 : FLASHMLA_ACC32_AT(d, OFF), FLASHMLA_ACC32_AT(d, OFF + 32)
                 : "l"(desc_a), "l"(desc_b));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FLASHMLA_ACC64_OPS
                 ", %64, %65, p, 1, 1, 0, 1;\n}\n"
                 : FLASHMLA_ACC32_AT(d, OFF), FLASHMLA_ACC32_AT(d, OFF + 32)
                 : "l"(desc_a), "l"(desc_b));
  }
}

// The same with A from registers (4 x b32 of 16-bit pairs, as wgmma_m64n256k16_rs_transb).
template <typename T, int OFF>
__device__ __forceinline__ void wgmma_m64n128k16_rs_transb(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b) {
  static_assert(OFF == 0 || OFF == 64, "the left or the right half of the accumulator");
#if defined(MLA_ABLATE_MMA) || defined(MLA_ABLATE_PV_MMA)  // timing experiments only: no tensor-core work
  return;
#endif
  if constexpr (T::is_fp16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FLASHMLA_ACC64_OPS
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
                 : FLASHMLA_ACC32_AT(d, OFF), FLASHMLA_ACC32_AT(d, OFF + 32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FLASHMLA_ACC64_OPS
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
                 : FLASHMLA_ACC32_AT(d, OFF), FLASHMLA_ACC32_AT(d, OFF + 32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
}

// ---- matrix stores (PTX ISA: stmatrix) ------------------------------------------------------------

// stmatrix.sync.aligned.m8n8.x4.shared.b16: the warp stores four 8x8 16-bit matrices; register i of
// lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix i (an mma accumulator fragment's layout),
// and lane l gives the address of row l%8 of matrix l/8.
__device__ __forceinline__ void stmatrix_x4(uint32_t row_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// The same, .trans: the matrices are stored transposed (lane l gives the address of row l%8 of the
// transpose of matrix l/8, i.e. of its column l%8): P fragments (rows = tokens) into a Pᵀ tile (rows = heads).
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t row_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// ---- register reallocation between warpgroups (PTX ISA §9.7.17.x setmaxnreg) ----------------------

// setmaxnreg.inc / .dec: hand registers from the producer warpgroup to the consumers. Needs a register
// cap at entry (__launch_bounds__(threads, 1)); the totals must fit the CTA's registers or .inc spins.
// The "memory" clobber keeps the compiler from hoisting the roles' common loads above the reallocation,
// which would keep them live across it (and made ptxas spill).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N) : "memory");
}

// ---- programmatic dependent launch (PTX ISA §9.7.12.x griddepcontrol) ------------------------------

// griddepcontrol.launch_dependents: let the next kernel in the stream (launched with PDL) start.
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// griddepcontrol.wait: wait until the previous grid has completed and its memory is visible.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// ---- GPU-scope synchronization between CTAs (the dense kernels' in-kernel merge of a request's two pieces)

// ld.acquire.gpu.global.b32: a flag another CTA released; what that CTA wrote before it is visible after.
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// atom.acq_rel.gpu.global.add.u32: returns the old value; releases this thread's earlier writes (and
// what its CTA ordered before them) and acquires those of the CTA that added before.
__device__ __forceinline__ int atom_add_acq_rel_gpu(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

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

// ---- conversions -----------------------------------------------------------------------------------

// cvt.rn.satfinite.e4m3x2.f32: two f32 -> two e4m3 (hi goes to the upper byte). Round to nearest even;
// NaN stays NaN; |x| > 448 saturates (never reached: the FP8 cache writer scales into [-448, 448]).
__device__ __forceinline__ uint16_t cvt_e4m3x2_f32(float hi, float lo) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

// cvt.rn.f16x2.e4m3x2: two e4m3 bytes (low byte -> low half) to f16x2. There is no e4m3 -> bf16 cvt on
// sm_90; f16 holds every e4m3 value exactly, so e4m3 -> f16 -> f32 -> bf16 is exact (HOPPER-NOTES §7).
__device__ __forceinline__ uint32_t cvt_f16x2_e4m3x2(uint16_t two) {
  uint32_t r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(two));
  return r;
}

// prmt.b32: result byte i = byte (sel >> 4i) & 7 of {b, a} (a: bytes 0-3, b: bytes 4-7), or, where bit 3
// of that selector nibble is set, that byte's sign bit replicated (0x00 or 0xFF).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// cp.async.cg.shared.global (16 bytes, L2 only): copies 16 bytes into shared memory without registers;
// `src_bytes` 0 writes zeros and reads nothing (src must still be a valid address form).
__device__ __forceinline__ void cp_async_16(uint32_t smem_dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_dst), "l"(src), "r"(src_bytes) : "memory");
}

// cp.async.commit_group: closes this thread's cp.async issued so far into a group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// cp.async.wait_group N: waits until at most N of this thread's groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

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

// The L1 policy of the gather loads below (a PTX qualifier; MLA_GATHER_L1 overrides it for timing).
// Allocating in L1 (evict_last, as FlashMLA's gathers) rather than L1::no_allocate took the sparse v3
// kernel from 448.3 to 403.0 µs at sparse-v32 on the H200 (evict_normal: 405.5): the kernels are bound
// by the L1 data pipe (LSU wavefronts at 77-83 % of peak in ncu), and with allocation the second 64-byte
// piece of a 128-byte line is an L1 hit (L2 -> L1 bytes 916 -> 782 MB per launch).
#ifndef MLA_GATHER_L1
#define MLA_GATHER_L1 "L1::evict_last"
#endif

// ld.global.nc.L1::evict_last.v4: a 16-byte read-only load (a gathered KV token piece).
__device__ __forceinline__ uint4 ld_nc_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc." MLA_GATHER_L1 ".v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// ld.global.nc.L1::evict_last.f32: one 4-byte read-only load (a token's dequantization scale).
__device__ __forceinline__ float ld_nc_f32(const void* p) {
  float v;
  asm volatile("ld.global.nc." MLA_GATHER_L1 ".f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

// ld.global.nc.L1::evict_last.L2::256B.v4: the same load, asking L2 to fetch the whole 256-byte
// block around it on a miss (a 656-byte FP8 token spans three: the neighbours' loads then hit L2).
__device__ __forceinline__ uint4 ld_nc_v4_l2_256(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc." MLA_GATHER_L1 ".L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Packs two f32 into 16-bit pairs (low half = first argument), the A-fragment format of wgmma.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (T::is_fp16) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// ex2.approx.ftz.f32: the softmax exponent in base 2 (FlashAttention's scale·log2e trick).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// mov.u64 %globaltimer: nanoseconds of the GPU's global timer (diagnostic builds: with clock64 over the
// same span it gives the SM clock the kernel ran at).
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// mov.u32 %smid: the SM this thread runs on (diagnostic builds: which SMs the late CTAs ran on).
__device__ __forceinline__ unsigned smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

}  // namespace ptx
