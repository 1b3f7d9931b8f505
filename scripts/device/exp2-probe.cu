// Exp2 probe: what the softmax's exponentials cost on this GPU, and how accurate the cheaper forms are.
// The seesaw's softmax chain sits between MMAs (docs/dense-decode.md §10); per 64x64 block and thread it
// is 32 exponentials, 16 pack conversions and 32 adds. This measures, per SM and clock:
//   ex2.approx.ftz.f32, ex2.approx.ftz.bf16x2 (two values per lane: sm_90), ex2.approx.f16x2,
//   cvt.rn.bf16x2.f32 (the P pack), a degree-3 polynomial 2^x on the FMA pipe, and whole 32-value
//   "exponentiate, pack, row-sum" sequences in each form, with 8 warps per SM (two per scheduler, as the
//   two consumer warpgroups);
// and the error of each form against exp2 in double over x in [-40, 0], measured on the bf16 P the MMA
// reads. Build and run on the device:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/exp2-probe scripts/device/exp2-probe.cu && /tmp/exp2-probe
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ float ex2_f32(float x) { float y; asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ uint32_t ex2_bf16x2(uint32_t x) { uint32_t y; asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x)); return y; }
__device__ __forceinline__ uint32_t ex2_f16x2(uint32_t x) { uint32_t y; asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x)); return y; }
__device__ __forceinline__ uint32_t cvt_bf16x2(float hi, float lo) { uint32_t y; asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(hi), "f"(lo)); return y; }
__device__ __forceinline__ uint32_t cvt_f16x2(float hi, float lo) { uint32_t y; asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(hi), "f"(lo)); return y; }

// 2^x on the FMA pipe for x <= 0: j = round(x) by the 1.5·2^23 trick, 2^(x - j) by a degree-3 polynomial
// on [-0.5, 0.5], j added into the exponent field. x is clamped at -126 (the exponent field stays >= 0);
// below that the result is flushed to 0 so a masked score (-inf) gives exactly 0.
__device__ __forceinline__ float ex2_poly(float x) {
  const float xc = fmaxf(x, -126.0f);
  const float t = xc + 12582912.0f;
  const float f = xc - (t - 12582912.0f);
  float p = fmaf(fmaf(fmaf(0.05508877f, f, 0.24260466f), f, 0.69327628f), f, 0.9999289f);  // least squares in relative error, 7.7e-5
  const uint32_t bits = __float_as_uint(p) + (__float_as_uint(t) << 23);
  return x < -126.0f ? 0.0f : __uint_as_float(bits);
}

__device__ __forceinline__ float lo_bf16(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float hi_bf16(uint32_t v) { return __uint_as_float(v & 0xFFFF0000u); }

constexpr int ITERS = 2048;

// Throughput kernels: 8 independent chains per thread so latency does not set the rate.
template <int OP>
__global__ void __launch_bounds__(256) thr(float* out, float seed, long long* cycles) {
  float f[8];
  uint32_t u[8];
  for (int i = 0; i < 8; ++i) { f[i] = -seed * (threadIdx.x % 7 + i); u[i] = cvt_bf16x2(f[i], f[i] * 0.5f); }
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < ITERS; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if constexpr (OP == 0) f[i] = ex2_f32(f[i]);
      if constexpr (OP == 1) u[i] = ex2_bf16x2(u[i]);
      if constexpr (OP == 2) u[i] = ex2_f16x2(u[i]);
      if constexpr (OP == 3) u[i] = cvt_bf16x2(__uint_as_float(u[i]), f[i]);
      if constexpr (OP == 4) f[i] = ex2_poly(f[i]) - 1.0f;
      if constexpr (OP == 5) f[i] = fmaf(f[i], 0.999f, -0.5f);
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  float acc = 0.0f;
  for (int i = 0; i < 8; ++i) acc += f[i] + __uint_as_float(u[i]);
  if (acc == 1.2345f) out[threadIdx.x] = acc;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// The softmax body on one thread's 32 scores of a 64x64 block, repeated: FORM 0 = today's (f32 ex2 per
// element, f32 sum, pack); 1 = arguments packed to bf16x2 and one bf16x2 ex2 per pair (the pack is the
// exponent's input, the output is already P), the sum from the unpacked halves; 2 = half of the pairs
// by the polynomial, half by f32 ex2; 3 = f16x2 form (for fp16 P).
template <int FORM>
__global__ void __launch_bounds__(256) body(float* out, float seed, long long* cycles) {
  float s[32];
  for (int i = 0; i < 32; ++i) s[i] = seed * ((threadIdx.x * 7 + i * 13) % 29);
  uint32_t sink = 0;
  float lsum = 0.0f, m = 4.0f;
  const float sc = 0.0625f;
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < ITERS / 8; ++it) {
    uint32_t p[16];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const float a = fmaf(s[2 * k], sc, -m), b = fmaf(s[2 * k + 1], sc, -m);
      if constexpr (FORM == 0) {
        const float ea = ex2_f32(a), eb = ex2_f32(b);
        sum += ea + eb;
        p[k] = cvt_bf16x2(eb, ea);
      } else if constexpr (FORM == 1) {
        p[k] = ex2_bf16x2(cvt_bf16x2(b, a));
        sum += lo_bf16(p[k]) + hi_bf16(p[k]);
      } else if constexpr (FORM == 2) {
        const float ea = (k & 1) ? ex2_poly(a) : ex2_f32(a), eb = (k & 1) ? ex2_poly(b) : ex2_f32(b);
        sum += ea + eb;
        p[k] = cvt_bf16x2(eb, ea);
      } else {
        p[k] = ex2_f16x2(cvt_f16x2(b, a));
        const float2 h = __half22float2(*reinterpret_cast<__half2*>(&p[k]));
        sum += h.x + h.y;
      }
    }
#pragma unroll
    for (int k = 0; k < 16; ++k) sink ^= p[k];
    lsum += sum;
    m += 1e-7f * lsum;  // a dependence between iterations, as the running max makes one
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = __uint_as_float(__float_as_uint(s[i]) ^ (sink & 1u));
  }
  __syncthreads();
  const long long t1 = clock64();
  if (lsum == 1.2345f || sink == 12345u) out[threadIdx.x] = lsum;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// Accuracy: every x on a grid over [-40, 0] in each form, the P the MMA would read (rounded to bf16 /
// f16) against 2^x in double; max absolute error (P is <= 1: the row max maps to 2^0).
__global__ void accuracy(double* err, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = -40.0f * i / (n - 1);
  const double ref = exp2((double)x);
  const float a = ex2_f32(x);
  const float p0 = __bfloat162float(__float2bfloat16_rn(a));
  const uint32_t b = ex2_bf16x2(cvt_bf16x2(x, x));
  const float p1 = lo_bf16(b);
  const float p2 = __bfloat162float(__float2bfloat16_rn(ex2_poly(x)));
  const uint32_t h = ex2_f16x2(cvt_f16x2(x, x));
  const float p3 = __half2float(*reinterpret_cast<const __half*>(&h));
  const float p4 = __half2float(__float2half_rn(a));
  const double e[5] = {fabs(p0 - ref), fabs(p1 - ref), fabs(p2 - ref), fabs(p3 - ref), fabs(p4 - ref)};
  for (int k = 0; k < 5; ++k) {
    unsigned long long* slot = reinterpret_cast<unsigned long long*>(err + k);
    atomicMax(slot, __double_as_longlong(e[k]));  // non-negative doubles order as their bit patterns
  }
}

template <typename K>
double per_sm_clock(K kernel, const char* name, double ops_per_thread_iter, int threads, float* out, long long* cyc, int sms) {
  kernel<<<sms, threads>>>(out, 0.37f, cyc);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  long long h[1024];
  CHECK(cudaMemcpy(h, cyc, sizeof(long long) * sms, cudaMemcpyDeviceToHost));
  long long mx = 0;
  for (int i = 0; i < sms; ++i) mx = h[i] > mx ? h[i] : mx;
  const double rate = ops_per_thread_iter * ITERS * threads / (double)mx;
  printf("%-44s %8.2f per SM per clock (%lld cycles)\n", name, rate, mx);
  return rate;
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* out;
  long long* cyc;
  double* err;
  CHECK(cudaMalloc(&out, 4096));
  CHECK(cudaMalloc(&cyc, sizeof(long long) * 1024));
  CHECK(cudaMalloc(&err, sizeof(double) * 5));
  printf("mode: throughput, %d CTAs of 256 threads (8 warps per SM)\n", sms);
  per_sm_clock(thr<0>, "ex2.approx.ftz.f32 (values)", 8, 256, out, cyc, sms);
  per_sm_clock(thr<1>, "ex2.approx.ftz.bf16x2 (instructions)", 8, 256, out, cyc, sms);
  per_sm_clock(thr<2>, "ex2.approx.f16x2 (instructions)", 8, 256, out, cyc, sms);
  per_sm_clock(thr<3>, "cvt.rn.bf16x2.f32 (instructions)", 8, 256, out, cyc, sms);
  per_sm_clock(thr<4>, "polynomial 2^x + fadd (values)", 8, 256, out, cyc, sms);
  per_sm_clock(thr<5>, "ffma (instructions)", 8, 256, out, cyc, sms);
  printf("mode: the 32-value softmax body (blocks of 32 scores per SM per clock; x4096/SM = one 64x64 block per warpgroup)\n");
  const double b0 = per_sm_clock(body<0>, "f32 ex2, f32 sum, pack (today)", 1.0 / 8, 256, out, cyc, sms);
  const double b1 = per_sm_clock(body<1>, "pack args, bf16x2 ex2, unpack sum", 1.0 / 8, 256, out, cyc, sms);
  const double b2 = per_sm_clock(body<2>, "half polynomial, half f32 ex2", 1.0 / 8, 256, out, cyc, sms);
  const double b3 = per_sm_clock(body<3>, "pack args, f16x2 ex2, unpack sum", 1.0 / 8, 256, out, cyc, sms);
  printf("cycles per 64x64 block per warpgroup (128 threads x 32 scores, whole SM's pipes): today %.0f, bf16x2 %.0f, poly-half %.0f, f16x2 %.0f\n",
         128 / b0, 128 / b1, 128 / b2, 128 / b3);
  CHECK(cudaMemset(err, 0, sizeof(double) * 5));
  const int n = 1 << 22;
  accuracy<<<(n + 255) / 256, 256>>>(err, n);
  CHECK(cudaGetLastError());
  double e[5];
  CHECK(cudaMemcpy(e, err, sizeof(e), cudaMemcpyDeviceToHost));
  printf("accuracy, max |P - 2^x| over x in [-40, 0] (P as the MMA reads it): f32 ex2 -> bf16 %.3e; bf16x2 ex2 %.3e; "
         "polynomial -> bf16 %.3e; f16x2 ex2 %.3e; f32 ex2 -> f16 %.3e\n", e[0], e[1], e[2], e[3], e[4]);
  CHECK(cudaFree(out));
  CHECK(cudaFree(cyc));
  CHECK(cudaFree(err));
  return 0;
}
