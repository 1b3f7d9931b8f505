// Gather probe: how fast can this GPU read sparse-h16's tokens at all? sparse-h16 (BENCH.md) gathers
// 128 requests x 2 query tokens x 2048 random distinct tokens of 656 bytes (the V32 FP8 layout) from a
// 32,768-token cache per request: 344 MB of tokens spread over a 2.75 GB cache. Its bar is 112.5 µs for
// the whole call, i.e. 3.06 TB/s of token bytes. The h16 kernel's producers alone (consumers ablated)
// took 125-132 µs (docs/sparse-decode.md §21; results §22). This reads the same tokens with nothing else to do, in
// the forms a kernel could use, so the bar can be set against what the memory system gives:
//   ld<U>         a warp per token (32 lanes x 16 B, then 9 lanes x 16 B), U tokens a trip (ptxas issues
//                 about two tokens' loads and then waits, whatever U: see gather_held for forms that hold them)
//   ld256<U>      the same with the L2::256B fetch hint
//   held <L,U>    WT / QTR / LINE layouts with every load of a trip issued before the first use
//   bulk<S,C>     one warp per CTA, C CTAs per SM: a ring of S stages of 32 tokens, each token one
//                 cp.async.bulk of 656 bytes into shared memory (no registers in flight; S*32*C tokens
//                 in flight per SM)
//   cpasync<S,U>  a warp per token, each 16-byte piece by cp.async into a per-warp ring of S stages of U tokens
//   seq-ld<U>     ld<U> over consecutive tokens: the streaming read rate of the same code
// Each form reads every token of the case once per run (4 index sets in turn, each over its own cache
// region so nothing stays in L2), times 20 runs with events after warm-up, and prints the median and
// the token bytes per second. Build and run on the device:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/gather-probe scripts/device/gather-probe.cu && /tmp/gather-probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "../../kernels/common/ptx.cuh"

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int TOKEN_BYTES = 656;  // 512 e4m3 + 4 f32 scales + 64 bf16 RoPE
constexpr int B = 128, S_Q = 2, TOPK = 2048, S_K = 32768;
constexpr int NTOK = B * S_Q * TOPK;
constexpr int SETS = 4;

__device__ __forceinline__ uint4 ld_plain(const void* p) { return ptx::ld_nc_v4(p); }
__device__ __forceinline__ void fold(uint4& a, uint4 v) { a.x ^= v.x; a.y ^= v.y; a.z ^= v.z; a.w ^= v.w; }

// A warp per token: lanes 0-31 read the 512 e4m3 bytes, lanes 0-8 the 144 bytes of scales and RoPE.
template <int U, bool L2_256>
__global__ void __launch_bounds__(256) gather_ld(const uint8_t* __restrict__ cache, const int* __restrict__ idx, uint32_t* sink) {
  const int lane = threadIdx.x & 31;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
  uint4 acc = {0, 0, 0, 0};
  for (int base = warp * U; base < NTOK; base += nwarps * U) {
    uint4 v[U], w[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint8_t* p = cache + static_cast<size_t>(idx[base + u]) * TOKEN_BYTES;
      v[u] = L2_256 ? ptx::ld_nc_v4_l2_256(p + lane * 16) : ld_plain(p + lane * 16);
      w[u] = lane < 9 ? (L2_256 ? ptx::ld_nc_v4_l2_256(p + 512 + lane * 16) : ld_plain(p + 512 + lane * 16)) : uint4{0, 0, 0, 0};
    }
#pragma unroll
    for (int u = 0; u < U; ++u) fold(acc, v[u]), fold(acc, w[u]);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9E3779B9u) sink[0] = 1;  // keeps the loads; never true in practice
}

// Loads held in flight for sure: ptxas interleaved gather_ld's loads with their folds (the SASS had two
// tokens' loads out at a time whatever U was), so these kernels put a fence between the loads and the
// folds, as a producer's buffer wait stands between its loads and its conversion. Per warp, U groups in flight; three layouts:
//   WT    a warp per token: all lanes load the 512 e4m3 bytes, the 8 tokens' 144-byte tails packed
//         over the lanes (9 chunks a token, ceil(9U/32) loads); U tokens
//   QTR   producer_v2's quarters: 8 tokens an instruction, 64 bytes each; U rounds of 8 tokens
//   LINE  4 tokens an instruction, 128 bytes each (lane = token l/8, chunk l%8): 4 e4m3 loads, the RoPE
//         chunks and the scales; U groups of 4 tokens
enum { WT = 0, QTR = 1, LINE = 2 };
// fence.acq_rel.cta: no earlier load may be moved below it, so every load of the trip is issued before
// the first fold (a loop around an opaque value did not stop ptxas from sinking them: 32 registers).
__device__ __forceinline__ void hold_loads() { asm volatile("fence.acq_rel.cta;" ::: "memory"); }
template <int PAT, int U>
__global__ void __launch_bounds__(256) gather_held(const uint8_t* __restrict__ cache, const int* __restrict__ idx, uint32_t* sink) {
  constexpr int TOK = PAT == WT ? U : PAT == QTR ? 8 * U : 4 * U;                       // tokens per warp and trip
  constexpr int NLD = PAT == WT ? U + (9 * U + 31) / 32 : PAT == QTR ? 11 * U : 6 * U;  // loads per lane
  const int lane = threadIdx.x & 31;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
  uint4 acc = {0, 0, 0, 0};
  for (int base = warp * TOK; base < NTOK; base += nwarps * TOK) {
    uint4 r[NLD];
    auto tok = [&](int j) { return cache + static_cast<size_t>(idx[base + j]) * TOKEN_BYTES; };
    if constexpr (PAT == WT) {
#pragma unroll
      for (int j = 0; j < U; ++j) r[j] = ld_plain(tok(j) + 16 * lane);
#pragma unroll
      for (int i = 0; i < (9 * U + 31) / 32; ++i) {
        const int slot = 32 * i + lane, j = min(slot / 9, U - 1);
        r[U + i] = slot < 9 * U ? ld_plain(tok(j) + 512 + 16 * (slot % 9)) : uint4{0, 0, 0, 0};
      }
    } else if constexpr (PAT == QTR) {
      const int q = lane / 8;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint8_t* t = tok(8 * u + lane % 8);
#pragma unroll
        for (int k = 0; k < 8; ++k) r[11 * u + k] = ld_plain(t + 64 * k + 16 * q);
        r[11 * u + 8] = ld_plain(t + 512);
#pragma unroll
        for (int k = 0; k < 2; ++k) r[11 * u + 9 + k] = ld_plain(t + 528 + 64 * k + 16 * q);
      }
    } else {
      const int c = lane % 8;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint8_t* t = tok(4 * u + lane / 8);
#pragma unroll
        for (int k = 0; k < 4; ++k) r[6 * u + k] = ld_plain(t + 128 * k + 16 * c);
        r[6 * u + 4] = ld_plain(t + 528 + 16 * c);
        r[6 * u + 5] = ld_plain(t + 512);
      }
    }
    hold_loads();
#pragma unroll
    for (int k = 0; k < NLD; ++k) fold(acc, r[k]);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9E3779B9u) sink[0] = 1;
}

// One warp per CTA; a ring of S stages of 32 tokens in shared memory, filled by the bulk-copy engine.
template <int S>
__global__ void __launch_bounds__(32) gather_bulk(const uint8_t* __restrict__ cache, const int* __restrict__ idx, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + S * 32 * TOKEN_BYTES);
  const int lane = threadIdx.x;
  if (lane == 0) {
    for (int s = 0; s < S; ++s) ptx::mbarrier_init(&full[s], 1);
    ptx::fence_mbarrier_init();
  }
  __syncwarp();
  const int ngroups = NTOK / 32;
  auto issue = [&](int g, int s) {
    if (lane == 0) ptx::mbarrier_arrive_expect_tx(&full[s], 32 * TOKEN_BYTES);
    __syncwarp();
    const uint8_t* src = cache + static_cast<size_t>(idx[g * 32 + lane]) * TOKEN_BYTES;
    ptx::bulk_copy_global_to_smem(ptx::smem_addr(smem + (s * 32 + lane) * TOKEN_BYTES), src, TOKEN_BYTES, &full[s]);
  };
  int g = blockIdx.x;
  for (int s = 0; s < S && g + s * static_cast<int>(gridDim.x) < ngroups; ++s) issue(g + s * gridDim.x, s);
  uint32_t acc = 0;
  for (int k = 0;; ++k) {
    const int s = k % S, gk = g + k * gridDim.x;
    if (gk >= ngroups) break;
    ptx::mbarrier_wait(&full[s], (k / S) & 1);
    acc ^= reinterpret_cast<const uint32_t*>(smem + (s * 32 + lane) * TOKEN_BYTES)[lane];
    __syncwarp();
    const int gn = gk + S * gridDim.x;
    if (gn < ngroups) issue(gn, s);
  }
  if (acc == 0x9E3779B9u) sink[0] = 1;
}

// A warp per token as in gather_ld, but each 16-byte piece copied by cp.async into a per-warp ring of S
// stages of U tokens in shared memory: no registers hold the data in flight, the copies bypass L1.
template <int S, int U>
__global__ void __launch_bounds__(256) gather_cpasync(const uint8_t* __restrict__ cache, const int* __restrict__ idx, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  uint8_t* ring = smem + wib * S * U * TOKEN_BYTES;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
  const int nbatches = NTOK / U;
  uint32_t acc = 0;
  auto issue = [&](int batch, int s) {
    if (batch < nbatches)
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint8_t* p = cache + static_cast<size_t>(idx[batch * U + u]) * TOKEN_BYTES;
        const uint32_t dst = ptx::smem_addr(ring + (s * U + u) * TOKEN_BYTES);
        ptx::cp_async_16(dst + lane * 16, p + lane * 16, 16);
        if (lane < 9) ptx::cp_async_16(dst + 512 + lane * 16, p + 512 + lane * 16, 16);
      }
    ptx::cp_async_commit();  // an empty group past the end keeps the wait count uniform
  };
  for (int s = 0; s < S - 1; ++s) issue(warp + s * nwarps, s);
  for (int k = 0; warp + k * nwarps < nbatches; ++k) {
    issue(warp + (k + S - 1) * nwarps, (k + S - 1) % S);
    ptx::cp_async_wait<S - 1>();
    __syncwarp();
    acc ^= reinterpret_cast<const uint32_t*>(ring + (k % S) * U * TOKEN_BYTES)[lane];
    __syncwarp();
  }
  if (acc == 0x9E3779B9u) sink[0] = 1;
}

template <typename F>
static float time_median(F launch, int runs) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 8; ++i) launch(i % SETS);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < runs; ++i) {
    CHECK(cudaEventRecord(a));
    launch(i % SETS);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

int main() {
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t region = static_cast<size_t>(B) * S_K * TOKEN_BYTES;  // one set's cache, 2.75 GB
  uint8_t* cache;
  CHECK(cudaMalloc(&cache, region * SETS));
  CHECK(cudaMemset(cache, 0x3C, region * SETS));
  // Per set and per (request, query token): TOPK distinct random tokens of that request's S_K. Tokens are
  // ids into the set's region; the random ones and, for the streaming reference, consecutive ones.
  std::mt19937 rng(7);
  std::vector<int> perm(S_K), h_idx(static_cast<size_t>(NTOK) * SETS), h_seq(static_cast<size_t>(NTOK) * SETS);
  for (int set = 0; set < SETS; ++set)
    for (int r = 0; r < B * S_Q; ++r) {
      for (int i = 0; i < S_K; ++i) perm[i] = i;
      for (int i = 0; i < TOPK; ++i) std::swap(perm[i], perm[i + rng() % (S_K - i)]);
      const int req = r / S_Q;
      for (int i = 0; i < TOPK; ++i) h_idx[static_cast<size_t>(set) * NTOK + r * TOPK + i] = req * S_K + perm[i];
    }
  for (int set = 0; set < SETS; ++set)
    for (int i = 0; i < NTOK; ++i) h_seq[static_cast<size_t>(set) * NTOK + i] = i;
  int *idx, *seq;
  uint32_t* sink;
  CHECK(cudaMalloc(&idx, h_idx.size() * 4));
  CHECK(cudaMalloc(&seq, h_seq.size() * 4));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemcpy(idx, h_idx.data(), h_idx.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(seq, h_seq.data(), h_seq.size() * 4, cudaMemcpyHostToDevice));
  const double bytes = static_cast<double>(NTOK) * TOKEN_BYTES;
  printf("gather probe: %d SMs, %d tokens x %d B = %.1f MB per run; sparse-h16's bar (112.5 us for the call) = %.0f GB/s\n", sms, NTOK,
         TOKEN_BYTES, bytes / 1e6, bytes / 112.5e3);
  // Every form has the same parameters; one runner times any of them.
  using Gather = void (*)(const uint8_t*, const int*, uint32_t*);
  auto run = [&](Gather kernel, int ctas_per_sm, int threads, int smem, const int* src, const char* fmt, auto... args) {
    if (smem > 0) CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const float us = time_median([&](int set) {
      kernel<<<sms * ctas_per_sm, threads, smem>>>(cache + region * set, src + static_cast<size_t>(set) * NTOK, sink);
    }, 20);
    char name[64];
    if constexpr (sizeof...(args) == 0)
      snprintf(name, sizeof name, "%s", fmt);
    else
      snprintf(name, sizeof name, fmt, args...);
    printf("%-40s %8.1f us  %6.0f GB/s of tokens\n", name, us, bytes / us / 1e3);
  };
  run(gather_ld<4, false>, 8, 256, 0, seq, "seq-ld U=4 8x256");
  run(gather_ld<1, false>, 4, 256, 0, idx, "ld U=1 4x256 (32 tokens/SM)");
  run(gather_ld<1, false>, 8, 256, 0, idx, "ld U=1 8x256 (64 tokens/SM)");
  run(gather_ld<2, false>, 8, 256, 0, idx, "ld U=2 8x256");
  run(gather_ld<4, true>, 8, 256, 0, idx, "ld256 U=4 8x256");
  const char* held = "held %s U=%d %dx256 (%d tokens/SM)";
  run(gather_held<WT, 8>, 1, 256, 0, idx, held, "WT", 8, 1, 64);
  run(gather_held<WT, 16>, 1, 256, 0, idx, held, "WT", 16, 1, 128);
  run(gather_held<WT, 4>, 2, 256, 0, idx, held, "WT", 4, 2, 64);
  run(gather_held<WT, 8>, 2, 256, 0, idx, held, "WT", 8, 2, 128);
  run(gather_held<QTR, 1>, 1, 256, 0, idx, held, "QTR", 1, 1, 64);
  run(gather_held<QTR, 2>, 1, 256, 0, idx, held, "QTR", 2, 1, 128);
  run(gather_held<QTR, 1>, 2, 256, 0, idx, held, "QTR", 1, 2, 128);
  run(gather_held<LINE, 2>, 1, 256, 0, idx, held, "LINE", 2, 1, 64);
  run(gather_held<LINE, 4>, 1, 256, 0, idx, held, "LINE", 4, 1, 128);
  run(gather_held<LINE, 2>, 2, 256, 0, idx, held, "LINE", 2, 2, 128);
  run(gather_held<LINE, 4>, 2, 256, 0, idx, held, "LINE", 4, 2, 256);
  const char* bulk = "bulk S=%d C=%d (%d KB/SM)";
  auto bulk_smem = [](int stages) { return stages * 32 * TOKEN_BYTES + stages * 8; };
  run(gather_bulk<2>, 1, 32, bulk_smem(2), idx, bulk, 2, 1, 1 * bulk_smem(2) / 1024);
  run(gather_bulk<4>, 1, 32, bulk_smem(4), idx, bulk, 4, 1, 1 * bulk_smem(4) / 1024);
  run(gather_bulk<2>, 4, 32, bulk_smem(2), idx, bulk, 2, 4, 4 * bulk_smem(2) / 1024);
  run(gather_bulk<4>, 2, 32, bulk_smem(4), idx, bulk, 4, 2, 2 * bulk_smem(4) / 1024);
  run(gather_bulk<10>, 1, 32, bulk_smem(10), idx, bulk, 10, 1, 1 * bulk_smem(10) / 1024);
  run(gather_bulk<3>, 3, 32, bulk_smem(3), idx, bulk, 3, 3, 3 * bulk_smem(3) / 1024);
  const char* cpa = "cpasync S=%d U=%d %dx256 (%d KB/SM)";
  auto cpa_smem = [](int stages, int u) { return 8 * stages * u * TOKEN_BYTES; };
  run(gather_cpasync<4, 2>, 2, 256, cpa_smem(4, 2), idx, cpa, 4, 2, 2, 2 * cpa_smem(4, 2) / 1024);
  run(gather_cpasync<4, 4>, 1, 256, cpa_smem(4, 4), idx, cpa, 4, 4, 1, 1 * cpa_smem(4, 4) / 1024);
  run(gather_cpasync<3, 4>, 2, 256, cpa_smem(3, 4), idx, cpa, 3, 4, 2, 2 * cpa_smem(3, 4) / 1024);
  CHECK(cudaFree(cache));
  CHECK(cudaFree(idx));
  CHECK(cudaFree(seq));
  CHECK(cudaFree(sink));
  return 0;
}
