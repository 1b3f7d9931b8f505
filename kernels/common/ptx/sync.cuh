// Synchronization: mbarriers, named barriers, proxy fences, clusters, PDL and GPU-scope flags.
// One named inline wrapper per PTX instruction, each with its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/). Hopper facts verified on the H200 are in
// HOPPER-NOTES.md of the design notes; the few that bit us are repeated beside the wrapper.
#pragma once
#include <cstdint>

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

// mbarrier.arrive.relaxed.cluster on a peer's barrier: the arrival orders nothing. For "this thread no
// longer reads that buffer" once its reads have completed (wgmma_wait), it needs no fence; the release
// form waits for every outstanding memory operation of the thread (ERRBAR in SASS).
__device__ __forceinline__ void mbarrier_arrive_remote_relaxed(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_addr) : "memory");
}

// ---- clusters and distributed shared memory (PTX ISA §9.7.x mapa, barrier.cluster) --------

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
// bar.arrive: signal a named barrier without waiting (the producer side of a bar.arrive/bar.sync pair;
// like bar.sync it orders this thread's earlier shared-memory writes before the waiters continue).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  __syncwarp();  // .aligned, as bar.sync
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
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

// mov.u64 %globaltimer: nanoseconds of the GPU's global timer (the bench's spin kernel measures its
// launch gaps with it).
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace ptx
