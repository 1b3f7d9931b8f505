// Conversion-throughput probe: how many of each instruction an H200 SM retires a clock, for the
// instructions a register-side FP8 -> 16-bit conversion is made of (docs/sparse-decode.md §24 costs a
// sparse-h16 consumer that converts K and V itself; whether that fits depends on these rates):
//   unpack   cvt.rn.f16x2.e4m3x2      (SASS F2FP.F16.E4M3.UNPACK_B)
//   pack     cvt.rn.bf16x2.f32        (F2FP.BF16.F32.PACK_AB)
//   h2f      cvt.f32.f16              (HADD2.F32)
//   prmt     prmt.b32
//   lop3     lop3.b32
//   hmul2    mul.rn.bf16x2            (HMUL2.BF16)
//   fmul     mul.rn.f32               (FMUL, the reference: 128 a clock per SM)
// Each thread runs CHAINS independent dependent chains of the instruction, 1024 threads a CTA, one CTA
// per SM on every SM; clock64 around the loop; the median over CTAs of instructions a clock is printed.
// Build and run on the device:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/cvt-probe scripts/device/cvt-probe.cu && /tmp/cvt-probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int THREADS = 1024, CHAINS = 8, ITERS = 2048;
enum Op { UNPACK, PACK, H2F, PRMT, LOP3, HMUL2, FMUL, NUM_OPS };
const char* const NAMES[] = {"unpack cvt.rn.f16x2.e4m3x2", "pack cvt.rn.bf16x2.f32", "h2f cvt.f32.f16", "prmt.b32", "lop3.b32", "hmul2 mul.rn.bf16x2", "fmul mul.rn.f32"};

template <int OP>
__device__ __forceinline__ uint32_t step(uint32_t x, uint32_t k) {
  uint32_t r;
  if constexpr (OP == UNPACK) {
    // The previous result's low half as the next two codes (NaN codes or not: the rate is the same).
    asm volatile("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(static_cast<uint16_t>(x)));
  } else if constexpr (OP == PACK) {
    asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(__uint_as_float(x)), "f"(__uint_as_float(k)));
  } else if constexpr (OP == H2F) {
    float f;
    asm volatile("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<uint16_t>(x)));
    r = __float_as_uint(f);
  } else if constexpr (OP == PRMT) {
    asm volatile("prmt.b32 %0, %1, %2, 0x5140;" : "=r"(r) : "r"(x), "r"(k));
  } else if constexpr (OP == LOP3) {
    asm volatile("lop3.b32 %0, %1, %2, 0x0F0F0F0F, 0x96;" : "=r"(r) : "r"(x), "r"(k));
  } else if constexpr (OP == HMUL2) {
    asm volatile("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(k));
  } else {
    float f;
    asm volatile("mul.rn.f32 %0, %1, %2;" : "=f"(f) : "f"(__uint_as_float(x)), "f"(__uint_as_float(k)));
    r = __float_as_uint(f);
  }
  return r;
}

template <int OP>
__global__ void __launch_bounds__(THREADS, 1) probe(uint32_t seed, unsigned long long* clocks, uint32_t* sink) {
  uint32_t x[CHAINS];
  const uint32_t k = 0x3F803F80u ^ (seed & 0x00010001u);  // bf16x2 1.0 (or 1.0078) / f32 ~1.0
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = 0x3F803F80u + threadIdx.x * 17u + c;
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < ITERS; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = step<OP>(x[c], k);
  }
  __syncthreads();
  const long long t1 = clock64();
  uint32_t acc = 0;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) acc ^= x[c];
  if (acc == seed) sink[0] = acc;  // keeps the chains live
  if (threadIdx.x == 0) clocks[blockIdx.x] = static_cast<unsigned long long>(t1 - t0);
}

template <int OP>
double run(int sms, unsigned long long* d_clocks, uint32_t* d_sink) {
  probe<OP><<<sms, THREADS>>>(1u, d_clocks, d_sink);  // warm-up
  CHECK(cudaGetLastError());
  probe<OP><<<sms, THREADS>>>(2u, d_clocks, d_sink);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<unsigned long long> h(sms);
  CHECK(cudaMemcpy(h.data(), d_clocks, sms * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  std::sort(h.begin(), h.end());
  return static_cast<double>(THREADS) * CHAINS * ITERS / static_cast<double>(h[sms / 2]);
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned long long* d_clocks;
  uint32_t* d_sink;
  CHECK(cudaMalloc(&d_clocks, sms * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&d_sink, sizeof(uint32_t)));
  const double rates[NUM_OPS] = {run<UNPACK>(sms, d_clocks, d_sink), run<PACK>(sms, d_clocks, d_sink), run<H2F>(sms, d_clocks, d_sink),
                                 run<PRMT>(sms, d_clocks, d_sink), run<LOP3>(sms, d_clocks, d_sink), run<HMUL2>(sms, d_clocks, d_sink),
                                 run<FMUL>(sms, d_clocks, d_sink)};
  printf("cvt probe: %d SMs, %d threads a CTA, %d chains x %d iterations a thread; thread-instructions a clock per SM (median CTA)\n", sms, THREADS, CHAINS, ITERS);
  for (int o = 0; o < NUM_OPS; ++o) printf("  %-30s %7.1f\n", NAMES[o], rates[o]);
  CHECK(cudaFree(d_clocks));
  CHECK(cudaFree(d_sink));
  return 0;
}
