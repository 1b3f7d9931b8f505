// L2 probe: what bounds dense-compute's K stream? Its two m-block CTAs of a request read every 73,728-byte
// K block (64 tokens x 576 bf16), so at 463 µs the SMs pull ~5.3 TB/s out of L2 (2.65 TB/s of it from HBM),
// ~26 B a clock per SM, and the trace has the consumers waiting ~2 k cycles for each refill
// (docs/dense-decode.md §18, §20). If the L2's aggregate output is the bound, a 2-CTA cluster receiving
// each block by multicast (read once from L2 for both SMs) would lift it; if each SM's ingress is, it
// would not. This moves the same bytes with nothing else to do, one thread a CTA, a ring of STAGES
// blocks in shared memory, each block as nine 8 KB bulk copies (the nine 64-dim tiles):
//   solo       every CTA its own blocks (distinct data: the HBM streaming rate through the same path)
//   pair       CTAs 2i and 2i+1 read the same blocks (the dense-compute pattern: the second read hits L2)
//   multicast  CTAs 2i and 2i+1 a cluster; each issues half of every block's copies with multicast to
//              both (each line read once from L2), and a stage is refilled once both have taken it
// each over a stream of 248 blocks per CTA (dense-compute's share: 128 requests x 128 blocks / 66 parts)
// from a 1.2-2.4 GB region (HBM), and again over 4 blocks reused (L2-resident: the L2-to-SM rate alone).
// Prints µs (median of 20, events after warm-up) and the bytes the SMs received per second and per clock.
// Build and run on the device:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/l2-probe scripts/device/l2-probe.cu && /tmp/l2-probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../kernels/common/ptx.cuh"

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int BLOCK_BYTES = 73728, PIECES = 9, PIECE_BYTES = BLOCK_BYTES / PIECES;
constexpr int BLOCKS_PER_CTA = 248;
enum Mode { SOLO = 0, PAIR = 1, MULTICAST = 2 };

// One thread issues and waits; the block sequence of CTA x is blocks [region(x), + n) of `base`, taken
// modulo `wrap` (wrap = n: a stream; small: the same few blocks again and again).
template <int MODE, int STAGES>
__global__ void __launch_bounds__(32) l2_probe(const uint8_t* __restrict__ base, int n, int wrap, unsigned long long* clocks) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint64_t full[STAGES], empty[STAGES];
  const int x = blockIdx.x;
  const long long region = static_cast<long long>(MODE == SOLO ? x : x / 2) * wrap;
  const uint32_t rank = MODE == MULTICAST ? ptx::cluster_ctarank() : 0, peer = rank ^ 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) ptx::mbarrier_init(&full[s], 1), ptx::mbarrier_init(&empty[s], 2);
    ptx::fence_mbarrier_init();
  }
  if constexpr (MODE == MULTICAST) ptx::cluster_sync();
  else __syncwarp();
  if (threadIdx.x != 0) return;
  auto issue = [&](int i) {
    const int s = i % STAGES;
    const uint8_t* src = base + (region + i % wrap) * BLOCK_BYTES;
    const uint32_t dst = ptx::smem_addr(smem + s * BLOCK_BYTES);
    ptx::mbarrier_arrive_expect_tx(&full[s], BLOCK_BYTES);
    for (int t = 0; t < PIECES; ++t) {
      if constexpr (MODE == MULTICAST) {
        if (t % 2 == static_cast<int>(rank)) ptx::bulk_copy_global_to_smem_multicast(dst + t * PIECE_BYTES, src + t * PIECE_BYTES, PIECE_BYTES, &full[s], 0x3);
      } else {
        ptx::bulk_copy_global_to_smem(dst + t * PIECE_BYTES, src + t * PIECE_BYTES, PIECE_BYTES, &full[s]);
      }
    }
  };
  const unsigned long long t0 = clock64();
  for (int i = 0; i < STAGES && i < n; ++i) issue(i);
  for (int i = 0; i < n; ++i) {
    const int s = i % STAGES;
    ptx::mbarrier_wait(&full[s], (i / STAGES) & 1);
    if (i + STAGES >= n) continue;
    if constexpr (MODE == MULTICAST) {
      // Both CTAs have taken stage s before either writes it again (the peer's copies land here too).
      ptx::mbarrier_arrive(&empty[s]);
      ptx::mbarrier_arrive_remote(ptx::mapa_shared(ptx::smem_addr(&empty[s]), peer));
      ptx::mbarrier_wait_cluster(&empty[s], (i / STAGES) & 1);
    }
    issue(i + STAGES);
  }
  // A CTA may leave now: every copy and remote arrival aimed at it came before the last block it waited
  // for (the peer arrives on stage s before it issues block i + STAGES, which this CTA waits for).
  clocks[x] = clock64() - t0;
}

template <int MODE, int STAGES>
static void run(const char* name, const uint8_t* base, int sms, int wrap, unsigned long long* clocks) {
  auto kernel = l2_probe<MODE, STAGES>;
  const int smem = STAGES * BLOCK_BYTES;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int ctas = sms / 2 * 2;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(32);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = MODE == MULTICAST ? 2 : 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  auto launch = [&]() { CHECK(cudaLaunchKernelEx(&cfg, kernel, base, BLOCKS_PER_CTA, wrap, clocks)); };
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f);
  }
  std::sort(t.begin(), t.end());
  std::vector<unsigned long long> c(ctas);
  CHECK(cudaMemcpy(c.data(), clocks, ctas * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  std::sort(c.begin(), c.end());
  const double us = t[t.size() / 2], received = static_cast<double>(ctas) * BLOCKS_PER_CTA * BLOCK_BYTES;
  const double cyc = static_cast<double>(c[c.size() / 2]);
  printf("%-34s %8.1f µs  SMs received %6.0f GB/s  %5.1f B/clock per SM (median CTA %.0f clocks)\n", name, us, received / us / 1e3,
         static_cast<double>(BLOCKS_PER_CTA) * BLOCK_BYTES / cyc, cyc);
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t bytes = static_cast<size_t>(sms) * BLOCKS_PER_CTA * BLOCK_BYTES;  // solo's distinct blocks
  uint8_t* base;
  CHECK(cudaMalloc(&base, bytes));
  CHECK(cudaMemset(base, 0x3c, bytes));
  unsigned long long* clocks;
  CHECK(cudaMalloc(&clocks, sms * sizeof(unsigned long long)));
  printf("%d SMs, %d blocks of %d B per CTA\n", sms, BLOCKS_PER_CTA, BLOCK_BYTES);
  run<SOLO, 2>("solo, stream, 2 stages", base, sms, BLOCKS_PER_CTA, clocks);
  run<PAIR, 2>("pair, stream, 2 stages", base, sms, BLOCKS_PER_CTA, clocks);
  run<MULTICAST, 2>("multicast pair, stream, 2 stages", base, sms, BLOCKS_PER_CTA, clocks);
  run<SOLO, 3>("solo, stream, 3 stages", base, sms, BLOCKS_PER_CTA, clocks);
  run<PAIR, 3>("pair, stream, 3 stages", base, sms, BLOCKS_PER_CTA, clocks);
  run<MULTICAST, 3>("multicast pair, stream, 3 stages", base, sms, BLOCKS_PER_CTA, clocks);
  run<SOLO, 2>("solo, 4 blocks reused (L2)", base, sms, 4, clocks);
  run<PAIR, 2>("pair, 4 blocks reused (L2)", base, sms, 4, clocks);
  run<MULTICAST, 2>("multicast pair, 4 blocks reused (L2)", base, sms, 4, clocks);
  CHECK(cudaFree(base));
  CHECK(cudaFree(clocks));
  return 0;
}
