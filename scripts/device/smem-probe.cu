// Shared-memory probe: how much do the h16 consumer's wgmma chains slow down when other warps keep the
// SM's shared memory busy, and how many bytes a clock does shared memory give all of them together?
// docs/sparse-decode.md §23 counts ~335 KB of shared-memory traffic per sparse-h16 block (the consumer's
// operand reads, the producers' bf16 stores, the gathers' L1 fills and reads) against ~3,700 clocks a
// block, and argues the 112.5 µs bar needs that traffic near 128 B a clock. This measures the pieces:
//   WG0 runs the shipped block step's two chains from decode_common.cuh on a resident 64-token block:
//   Q·Kᵀ (h16_qk: 36 wgmma m64n16k16, A = K from shared memory, B = Q) and P·V (h16_pv_mma: 32 wgmma, A = V
//   read transposed, B = Pᵀ), each waited for, `ITERS` times, timing each chain with clock64;
//   WG1-2 (256 threads, the producers' count) meanwhile do one of:
//     idle      nothing (the chains alone)
//     sts       16-byte shared stores as fast as they issue (the producers' bf16 stores, unthrottled)
//     lds       16-byte shared loads as fast as they issue
//     sts-rate  the producers' store rate in the shipped kernel: 73.7 KB a block of ~3,700 clocks
//               (18 stores of 16 bytes a thread, spread over the block)
// and count the bytes they moved, so the table gives the chains' clocks and the hammer's bytes a clock,
// with and without the other. One CTA per SM, every SM; the median over CTAs of each mean is printed.
// Written in the fourteenth session after its last device call: compile-checked (no spills), not yet run.
// Build and run on the device:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/smem-probe scripts/device/smem-probe.cu && /tmp/smem-probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../kernels/mla_decode/decode_common.cuh"

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

using mla::H16_TILE;
using mla::NUM_TILES;
using mla::QK_BYTES;
using mla::TILE_BYTES;

constexpr int ITERS = 200;
constexpr int HAMMER_BYTES = 64 * 1024;  // the region WG1-2 store to or load from
constexpr int Q_OFF = QK_BYTES, PT_OFF = Q_OFF + NUM_TILES * H16_TILE, HAMMER_OFF = PT_OFF + 4096;
constexpr int SMEM = HAMMER_OFF + HAMMER_BYTES + 1024;  // + alignment slack
enum Mode { IDLE = 0, STS = 1, LDS = 2, STS_RATE = 3 };
const char* const MODE_NAMES[] = {"idle", "sts", "lds", "sts-rate"};

struct Result {  // per CTA
  unsigned long long qk_clk, pv_clk, hammer_bytes, hammer_clk;
};

__device__ __forceinline__ uint32_t mix(uint32_t x) {  // small non-zero bf16 pairs, so the tensor cores see data
  x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15;
  return (x & 0x3F7F3F7Fu) | 0x3C003C00u;
}

// WG1-2's side (h = 0..255): 16-byte stores or loads over the hammer region until `done`, then the
// bytes they moved and the clocks it took into `out`. sts-rate spaces the stores ~205 clocks apart.
__device__ void hammer(int mode, uint32_t region, int h, volatile int& done, Result& out) {
  unsigned long long n = 0;
  uint32_t acc = 0;
  const long long t0 = clock64();
  if (mode != IDLE) {
    for (uint32_t i = 0; !done; ++i) {
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        const uint32_t a = region + (((i * 16 + u) * 256 + h) * 16) % HAMMER_BYTES;
        if (mode == LDS) {
          uint32_t x, y, z, w;
          asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(a));
          acc ^= x ^ y ^ z ^ w;
        } else {
          asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(a), "r"(i + u) : "memory");
        }
        if (mode == STS_RATE) {  // 18 stores a thread every ~3,700 clocks: one every ~205
          const long long s = clock64();
          while (clock64() - s < 205) {
          }
        }
      }
      n += 16;
    }
  }
  const long long t1 = clock64();
  __shared__ unsigned long long bytes_total;
  if (h == 0) bytes_total = 0;
  asm volatile("bar.sync 2, 256;" ::: "memory");
  atomicAdd(&bytes_total, n * 16);
  asm volatile("bar.sync 2, 256;" ::: "memory");
  if (h == 0) {
    out.hammer_bytes = bytes_total;
    out.hammer_clk = t1 - t0;
    if (acc == 0x9E3779B9u) out.hammer_clk = 0;  // keeps the loads; never true in practice
  }
}

__global__ void __launch_bounds__(384, 1) smem_probe(int mode, Result* out) {
  extern __shared__ uint8_t raw[];
  uint8_t* sm = raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u);
  __shared__ volatile int done;
  const int tid = threadIdx.x;
  for (int i = tid; i < (HAMMER_OFF + HAMMER_BYTES) / 4; i += 384) reinterpret_cast<uint32_t*>(sm)[i] = mix(i * 2654435761u + blockIdx.x);
  if (tid == 0) done = 0;
  ptx::fence_proxy_async_smem();
  __syncthreads();
  const uint32_t base = ptx::smem_addr(sm);
  if (tid < 128) {
    const int warp = tid / 32, lane = tid % 32;
    float st[8], ot[8][8];
    for (int mb = 0; mb < 8; ++mb)
      for (int e = 0; e < 8; ++e) ot[mb][e] = 0.0f;
    unsigned long long qk = 0, pv = 0;
    for (int it = 0; it < ITERS; ++it) {
      const long long t0 = clock64();
      mla::h16_qk<ptx::bf16_t>(st, base, base + Q_OFF);
      const long long t1 = clock64();
      // Pᵀ from the scores (kept small so nothing overflows), as the kernel stores it before P·V.
      for (int e = 0; e < 8; ++e) st[e] = st[e] * 1e-3f;
      mla::h16_store_pt<ptx::bf16_t>(st, base + PT_OFF, warp, lane);
      ptx::named_barrier_sync(1, 128);
      const long long t2 = clock64();
      mla::h16_pv_mma<ptx::bf16_t>(ot, base, base + PT_OFF);
      const long long t3 = clock64();
      qk += t1 - t0, pv += t3 - t2;
    }
    if (tid == 0) {
      done = 1;
      float keep = 0.0f;
      for (int mb = 0; mb < 8; ++mb) keep += ot[mb][0];
      out[blockIdx.x].qk_clk = qk / ITERS;
      out[blockIdx.x].pv_clk = pv / ITERS;
      if (keep == 12345.0f) out[blockIdx.x].qk_clk = 0;  // keeps the accumulators live; never true in practice
    }
  } else {
    hammer(mode, base + HAMMER_OFF, tid - 128, done, out[blockIdx.x]);
  }
}

// The hammer alone: WG1-2 for `clocks` clocks, no MMA (WG0 only raises `done` after them).
__global__ void __launch_bounds__(384, 1) hammer_alone(int mode, Result* out, long long clocks) {
  extern __shared__ uint8_t raw[];
  uint8_t* sm = raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u);
  __shared__ volatile int done;
  const int tid = threadIdx.x;
  if (tid == 0) done = 0;
  __syncthreads();
  const uint32_t region = ptx::smem_addr(sm) + HAMMER_OFF;
  if (tid < 128) {
    if (tid == 0) {
      const long long s = clock64();
      while (clock64() - s < clocks) {
      }
      done = 1;
    }
    return;
  }
  hammer(mode, region, tid - 128, done, out[blockIdx.x]);
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

int main() {
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Result* d_out;
  CHECK(cudaMalloc(&d_out, sizeof(Result) * sms));
  CHECK(cudaFuncSetAttribute(smem_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  CHECK(cudaFuncSetAttribute(hammer_alone, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  std::vector<Result> h(sms);
  // Bytes the chains read from shared memory per call: Q·Kᵀ 36 x (2 KB of K + 512 B of Q), P·V 32 x (2 KB of V + 512 B of Pᵀ).
  const double qk_bytes = 36.0 * (2048 + 512), pv_bytes = 32.0 * (2048 + 512);
  printf("smem probe: %d SMs, one CTA each; WG0 runs the h16 chains %d times, WG1-2 (256 threads) the hammer\n", sms, ITERS);
  printf("chains read %.1f KB (Q·Kᵀ) and %.1f KB (P·V) of operands a call\n", qk_bytes / 1024, pv_bytes / 1024);
  printf("%-9s %10s %10s %14s %14s %14s\n", "hammer", "QK clk", "PV clk", "chains B/clk", "hammer B/clk", "sum B/clk");
  for (int mode = IDLE; mode <= STS_RATE; ++mode) {
    for (int rep = 0; rep < 2; ++rep) smem_probe<<<sms, 384, SMEM>>>(mode, d_out);  // the first is warm-up
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h.data(), d_out, sizeof(Result) * sms, cudaMemcpyDeviceToHost));
    std::vector<double> qk, pv, hb;
    for (const Result& r : h) {
      qk.push_back(static_cast<double>(r.qk_clk));
      pv.push_back(static_cast<double>(r.pv_clk));
      hb.push_back(r.hammer_clk > 0 ? static_cast<double>(r.hammer_bytes) / r.hammer_clk : 0.0);
    }
    const double q = median(qk), p = median(pv), chains = (qk_bytes + pv_bytes) / (q + p), hm = median(hb);
    printf("%-9s %10.0f %10.0f %14.1f %14.1f %14.1f\n", MODE_NAMES[mode], q, p, chains, hm, chains + hm);
  }
  for (int mode : {STS, LDS}) {
    for (int rep = 0; rep < 2; ++rep) hammer_alone<<<sms, 384, SMEM>>>(mode, d_out, 2000000);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h.data(), d_out, sizeof(Result) * sms, cudaMemcpyDeviceToHost));
    std::vector<double> hb;
    for (const Result& r : h) hb.push_back(r.hammer_clk > 0 ? static_cast<double>(r.hammer_bytes) / r.hammer_clk : 0.0);
    printf("%-9s alone: %.1f B/clk\n", MODE_NAMES[mode], median(hb));
  }
  CHECK(cudaFree(d_out));
  return 0;
}
