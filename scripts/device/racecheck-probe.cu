// Racecheck probe: does compute-sanitizer's racecheck order shared-memory accesses across a named
// barrier (bar.sync id, count) that only some warpgroups of the CTA use? Each kernel below is a correct
// exchange: warpgroup A writes, both pass a named barrier, warpgroup B reads, and (persistent form) both
// pass a second named barrier before A writes again. Run under
//   compute-sanitizer --tool racecheck ./racecheck-probe
// A hazard reported for one of these kernels is the tool's, not a race (docs/reliability.md §3).
// Build: nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a -lineinfo -o racecheck-probe racecheck-probe.cu
#include <cstdio>
#include <cuda_runtime.h>

__device__ __forceinline__ void bar_sync(unsigned id, unsigned n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void barrier_sync(unsigned id, unsigned n) { asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(unsigned id, unsigned n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
template <int N> __device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> __device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// MODE 0: 256 threads, both warpgroups on barrier 1 with count 256 (every thread of the CTA).
// MODE 1: 384 threads, warpgroup 0 idles (returns at once), warpgroups 1 and 2 exchange on (1, 256).
// MODE 2: as 1, unaligned barrier.sync, reader and writer in different code (as the sparse consumers).
// MODE 3: as 1, four rounds, a second barrier (2, 256) before each rewrite (the persistent request loop).
// MODE 4: as 3, writer releases with bar.arrive, reader waits with bar.sync (the P_FREE pattern).
// MODE 5: as 3 (y exchanged under full barriers 3 and 4 only), plus an unrelated arrive/sync pair on
//         barrier 2 in each round (does an arrive elsewhere make racecheck flag y?).
// MODE 6: as 1 (one round, bar.sync 1,256 only), but warpgroup 0 stays alive through the exchange,
//         polling a global flag the reader sets afterwards (as the kernels' producer warpgroup lives on,
//         waiting on mbarriers, while the consumers use their named barriers).
// MODE 7: the kernels' exchange shape: four rounds; a full barrier (2) before each rewrite; one lane in
//         four of the writer writes y[lane / 4]; a full barrier (1); every reader lane reads it.
// MODE 8: as 7, and before each round both warpgroups wait on an mbarrier that warpgroup 0 (alive)
//         completes, as the consumers wait on the producer's kfull barrier.
// MODES 9-12 add to 7 one more thing the kernels do (7 and 8 drew no report, the kernels still do):
// MODE 9:  setmaxnreg (warpgroup 0 gives registers up, the two exchanging warpgroups take more).
// MODE 10: a 128-thread named barrier (3, 128) inside the writer warpgroup after its write (BAR_WG0).
// MODE 11: fence.proxy.async.shared::cta after the write (the kernels publish P and the scales with it).
// MODE 12: all of 8, 9, 10 and 11 at once.
// MODES 13-15: the sparse consumers' whole protocol, two requests of four blocks: per block the writer
// warpgroup (WG0) waits P_FREE (3) from the second block on, writes x (sm.scale) from one lane in four,
// arrives P_READY (2), and (13 only) passes its own 128-thread barrier (5, as BAR_WG0 did); the reader
// (WG1) syncs P_READY, reads x, arrives P_FREE (15: syncs it). After the blocks WG0 syncs the last
// P_FREE, writes y (sm.l), and both sync L_READY (4) before WG1 reads y; each request starts with a full
// barrier (1). Fourth session: with BAR_WG0 in the kernel racecheck flagged the y exchange, without it
// not; the x exchange stays flagged (its order runs through WG1's arrive).
// MODE 13: as the kernel was at ee32047 (with the 128-thread barrier).
// MODE 14: as it is at d55dbb2 (without).
// MODE 15: as 14 with WG1 syncing P_FREE instead of arriving (MLA_SPARSE_PFREE_SYNC).
// MODES 16-17 (fifth session): is an exchange ordered by mbarriers alone clean? The dense seesaw's last
// reports (MLA_DENSE_WG_MBARRIERS build) are its scale exchange, ordered by arrive -> sync pairs.
// MODE 16: four rounds; the writer (WG1) waits until the reader released round r-1 (mbarrier, 128
//          arrivals), one lane in four writes y, all 128 arrive on round r's "full" mbarrier; the reader
//          (WG2) waits on it, reads, arrives on "free". No named barrier at all.
// MODE 17: as 16, plus an unrelated bar.arrive (WG1) / bar.sync (WG2) pair each round.
__device__ __forceinline__ unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(unsigned long long* b, unsigned n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(n) : "memory"); }
__device__ __forceinline__ void mbar_arrive(unsigned long long* b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory"); }
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {
  asm volatile("{\n.reg .pred d;\nW_%=:\nmbarrier.try_wait.parity.shared::cta.b64 d, [%0], %1;\n@!d bra W_%=;\n}\n" ::"r"(smem_u32(b)), "r"(parity) : "memory");
}

// The warpgroup outside the exchange stays alive until the reader is done, as the kernels' producer
// does (thread 0 polls the block's flag).
__device__ __forceinline__ void idle_until_reader_done(volatile int* flag) {
  if (threadIdx.x == 0)
    while (flag[blockIdx.x] == 0) __nanosleep(100);
  __syncwarp();
}
// The reader's result for its lane, and (lane 0) the flag that releases the idle warpgroup.
__device__ __forceinline__ void reader_done(float* out, volatile int* flag, int lane, float acc) {
  out[blockIdx.x * 128 + lane] = acc;
  if (lane == 0) {
    __threadfence();
    flag[blockIdx.x] = 1;
  }
}

// Bounded wait (modes 16-17): gives up after ~2^24 polls and returns false, so a protocol bug or a tool
// that never lets the other side run shows as a wrong result, not a hung device call (the first run of
// these modes shared a call that timed out).
__device__ __forceinline__ bool mbar_wait_bounded(unsigned long long* b, unsigned parity) {
  for (int i = 0; i < (1 << 24); ++i) {
    unsigned done;
    asm volatile("{\n.reg .pred d;\nmbarrier.test_wait.parity.shared::cta.b64 d, [%1], %2;\nselp.u32 %0, 1, 0, d;\n}\n" : "=r"(done) : "r"(smem_u32(b)), "r"(parity) : "memory");
    if (done) return true;
  }
  return false;
}

template <int MODE>
__global__ void __launch_bounds__(384, 1) probe(float* out, volatile int* flag) {
  __shared__ float x[128];
  __shared__ float y[128];
  __shared__ unsigned long long full[4];  // one per round: each completes once (phase 0)
  constexpr bool MBAR = MODE == 8 || MODE == 12, REGS = MODE == 9 || MODE == 12, BAR128 = MODE == 10 || MODE == 12,
                 FENCE = MODE == 11 || MODE == 12;
  if (REGS) {  // 384 threads start with 168 registers: 40 + 2 x 232 = 504
    if (threadIdx.x < 128) regs_dec<40>();
    else regs_inc<232>();
  }
  if (MBAR) {
    if (threadIdx.x == 0)
      for (int r = 0; r < 4; ++r) mbar_init(&full[r], 128);
    __syncthreads();
    if (threadIdx.x < 128) {  // warpgroup 0: completes each round's barrier, then waits for the reader
      for (int r = 0; r < 4; ++r) mbar_arrive(&full[r]);
      idle_until_reader_done(flag);
      return;
    }
  }
  if (MODE >= 16) {
    __shared__ unsigned long long fullb[4], freeb[4];
    if (threadIdx.x == 0)
      for (int r = 0; r < 4; ++r) mbar_init(&fullb[r], 128), mbar_init(&freeb[r], 128);
    __syncthreads();
    if (threadIdx.x < 128) {
      idle_until_reader_done(flag);
      return;
    }
    const int wg = threadIdx.x / 128, l = threadIdx.x % 128;
    float acc = 0.0f;
    for (int r = 0; r < 4; ++r) {
      if (wg == 1) {
        if (r > 0 && !mbar_wait_bounded(&freeb[r - 1], 0)) acc = -1e9f;
        if (l % 4 == 0) y[l / 4] = float(r * 1000 + l / 4);
        mbar_arrive(&fullb[r]);
        if (MODE == 17) bar_arrive(5, 256);
      } else {
        if (!mbar_wait_bounded(&fullb[r], 0)) acc = -1e9f;
        acc += y[(l / 4 + 1) % 32];
        mbar_arrive(&freeb[r]);
        if (MODE == 17) bar_sync(5, 256);
      }
    }
    if (wg == 2) reader_done(out, flag, l, acc);
    return;
  }
  if (MODE >= 13) {
    if (threadIdx.x < 128) {  // the producer warpgroup, alive until the reader is done
      idle_until_reader_done(flag);
      return;
    }
    const int wg = threadIdx.x / 128 - 1, l = threadIdx.x % 128;  // 0 writes, 1 reads
    float acc = 0.0f;
    for (int req = 0; req < 2; ++req) {
      barrier_sync(1, 256);
      for (int blk = 0; blk < 4; ++blk) {
        if (wg == 0) {
          if (blk > 0) barrier_sync(3, 256);
          if (l % 4 == 0) x[l / 4] = float(req * 100 + blk * 10 + l / 4);
          __syncwarp();
          asm volatile("barrier.arrive 2, 256;" ::: "memory");
          if (MODE == 13) bar_sync(5, 128);
        } else {
          barrier_sync(2, 256);
          acc += x[(l / 4 + 1) % 32];
          __syncwarp();
          if (MODE == 15) barrier_sync(3, 256);
          else asm volatile("barrier.arrive 3, 256;" ::: "memory");
        }
      }
      if (wg == 0) {
        barrier_sync(3, 256);
        if (l % 4 == 0) y[l / 4] = float(1000 * (req + 1) + l / 4);
        __syncwarp();
        barrier_sync(4, 256);
      } else {
        barrier_sync(4, 256);
        acc += y[(l / 4 + 1) % 32];
      }
    }
    if (wg == 1) reader_done(out, flag, l, acc);
    return;
  }
  if (MODE >= 7) {
    if (!MBAR && threadIdx.x < 128) {
      idle_until_reader_done(flag);
      return;
    }
    const int wg7 = threadIdx.x / 128, lane7 = threadIdx.x % 128;
    float acc7 = 0.0f;
    for (int r = 0; r < 4; ++r) {
      if (MBAR) mbar_wait(&full[r], 0);
      if (r > 0) bar_sync(2, 256);
      if (wg7 == 1 && lane7 % 4 == 0) y[lane7 / 4] = float(r * 1000 + lane7 / 4);
      if (FENCE && wg7 == 1) fence_proxy_async();
      if (BAR128 && wg7 == 1) bar_sync(3, 128);
      bar_sync(1, 256);
      if (wg7 == 2) acc7 += y[(lane7 / 4 + 1) % 32];
    }
    if (wg7 == 2) reader_done(out, flag, lane7, acc7);
    return;
  }
  const int t = threadIdx.x, wg = t / 128, lane = t % 128;
  const int writer = MODE == 0 ? 0 : 1;
  if (MODE == 6 && wg == 0) {
    idle_until_reader_done(flag);
    return;
  }
  if (MODE != 0 && wg == 0) return;
  float acc = 0.0f;
  const int rounds = MODE >= 3 && MODE <= 5 ? 4 : 1;
  for (int r = 0; r < rounds; ++r) {
    if (MODE == 5) {
      bar_sync(4, 256);  // the previous round's reads of y are done
      if (wg == writer) {
        y[lane] = float(r * 1000 + lane);
        bar_arrive(2, 256);
      } else {
        bar_sync(2, 256);
      }
      bar_sync(3, 256);
      if (wg != writer) acc += y[(lane + 1) % 128];
      continue;
    }
    if (MODE == 4) {
      // Round r: writer waits until the reader released x (arrive), writes, arrives on "full".
      if (wg == writer) {
        if (r > 0) bar_sync(2, 256);
        x[lane] = float(r * 1000 + lane);
        bar_arrive(1, 256);
      } else {
        bar_sync(1, 256);
        acc += x[(lane + 1) % 128];
        bar_arrive(2, 256);
      }
      continue;
    }
    if (MODE >= 3 && r > 0) bar_sync(2, 256);
    if (wg == writer) x[lane] = float(r * 1000 + lane);
    if (MODE == 2) {
      if (wg == writer) barrier_sync(1, 256);
      else {
        barrier_sync(1, 256);
        acc += x[(lane + 1) % 128];
      }
    } else {
      bar_sync(1, 256);
      if (wg != writer) acc += x[(lane + 1) % 128];
    }
  }
  if (wg != writer) out[blockIdx.x * 128 + lane] = acc;
  if (MODE == 6 && wg != writer && lane == 0) {
    __threadfence();
    flag[blockIdx.x] = 1;
  }
}

template <int MODE>
static int run(const char* what, int threads) {
  float* out = nullptr;
  int* flag = nullptr;
  if (cudaMalloc(&out, 4 * 128 * sizeof(float)) != cudaSuccess || cudaMalloc(&flag, 4 * sizeof(int)) != cudaSuccess) return 1;
  cudaMemset(flag, 0, 4 * sizeof(int));
  probe<MODE><<<4, threads>>>(out, flag);
  cudaError_t e = cudaDeviceSynchronize();
  float h[128];
  cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(out);
  cudaFree(flag);
  // Lane 0 reads element 1: modes 3-12: 1000 (0+1+2+3) + 4 x 1; modes 13-15: x over 2 requests x 4 blocks
  // (100 x 4 + 10 x 6 x 2 + 8 x 1 = 528) plus y (1001 + 2001).
  const float want = MODE >= 16 ? 6000.0f + 4 * 1.0f : MODE >= 13 ? 528.0f + 3002.0f : MODE >= 3 && MODE != 6 ? 6000.0f + 4 * 1.0f : 1.0f;  // lane 0 reads element 1 in each round
  std::printf("mode %d (%s): %s, lane 0 read %.0f (want %.0f)\n", MODE, what, cudaGetErrorString(e), h[0], want);
  return e == cudaSuccess && h[0] == want ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += run<0>("256 threads, bar.sync 1,256", 256);
  bad += run<1>("384 threads, one warpgroup out, bar.sync 1,256", 384);
  bad += run<2>("384 threads, unaligned barrier.sync from different code", 384);
  bad += run<3>("384 threads, 4 rounds, second barrier before each rewrite", 384);
  bad += run<4>("384 threads, 4 rounds, arrive/sync pairs both ways", 384);
  bad += run<6>("384 threads, warpgroup 0 alive (polling), bar.sync 1,256", 384);
  bad += run<7>("384 threads, the kernels' exchange shape (lane-conditional writes, 4 rounds), warpgroup 0 alive", 384);
  bad += run<8>("as 7, both warpgroups waiting on an mbarrier each round", 384);
  bad += run<9>("as 7, with setmaxnreg", 384);
  bad += run<10>("as 7, with a 128-thread named barrier in the writer", 384);
  bad += run<11>("as 7, with fence.proxy.async after the write", 384);
  bad += run<12>("as 7 with all of 8-11", 384);
  bad += run<13>("the sparse consumers' protocol at ee32047 (128-thread barrier in the writer)", 384);
  bad += run<14>("the sparse consumers' protocol at d55dbb2 (no 128-thread barrier)", 384);
  bad += run<15>("as 14, reader syncs P_FREE instead of arriving", 384);
  bad += run<5>("384 threads, 4 rounds, full barriers for y, an arrive/sync pair beside", 384);
  // Last: the first call that ran them timed out (docs/sparse-decode.md §14); the waits are bounded now.
  bad += run<16>("4 rounds ordered by mbarriers alone (full/free per round)", 384);
  bad += run<17>("as 16, with an unrelated bar.arrive/bar.sync pair each round", 384);
  std::printf("%s\n", bad ? "probe: WRONG RESULT" : "probe: all results right");
  return bad;
}
