// The two ceilings of the roofline, measured with our own kernels (`flashmla ceilings`):
//   - memory: a streaming device-to-device copy and a read-only stream, 16-byte vector accesses,
//     grid-stride, four independent loads in flight per thread;
//   - compute: a bf16 wgmma loop (m64n256k16, both operands resident in shared memory, f32
//     accumulators) on every SM, the rate dense MLA decode's two GEMMs run at.
// The host side times them with CUDA events (src/bench/measureCeilings.ts) and owns the arithmetic.
#include <cstdint>
#include <cuda_bf16.h>

#include "../common/ptx.cuh"

namespace {

__device__ __forceinline__ uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// A bf16 in roughly [-1, 1) that is never zero: the tensor cores run faster on zeros, so the
// operands must look like real data.
__device__ __forceinline__ uint16_t nonzero_bf16(uint32_t i, uint32_t seed) {
  const uint32_t h = hash32(i * 0x9E3779B9u ^ seed);
  const float v = (static_cast<float>(h >> 8) + 0.5f) * (2.0f / 16777216.0f) - 1.0f;
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// wgmma.mma_async m64n256k16, A and B both from shared memory, K-major (PTX ISA §9.7.15.5.2,
// https://docs.nvidia.com/cuda/parallel-thread-execution/#asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async).
// Always accumulates (scale-d = 1): the loop only needs the rate, and the sum keeps the work live.
__device__ __forceinline__ void wgmma_m64n256k16_ss_bf16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " FLASHMLA_ACC128_OPS
               ", %128, %129, p, 1, 1, 0, 0;\n}\n"
               : FLASHMLA_ACC128(d)
               : "l"(desc_a), "l"(desc_b));
}

}  // namespace

// dst[i] = hash(i, seed) for i < n: a source for the streams that is neither zero nor constant.
extern "C" __global__ void ceil_fill_u32(uint32_t* dst, long long n, unsigned int seed) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    dst[i] = hash32(static_cast<uint32_t>(i) ^ seed) | 1u;
  }
}

// dst[i] = src[i] for n 16-byte vectors. Bytes moved = 2 · 16 · n (read + write), the figure
// BENCH.md's "device-to-device copy" ceiling counts.
extern "C" __global__ void ceil_copy_v4(const uint4* __restrict__ src, uint4* __restrict__ dst, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  // Four loads issued before the first store keep enough bytes in flight to cover HBM latency.
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i];
    const uint4 b = src[i + stride];
    const uint4 c = src[i + 2 * stride];
    const uint4 d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// Reads n 16-byte vectors and folds them with xor. Bytes moved = 16 · n. The fold is written only
// when it equals `sentinel` (practically never), which the compiler cannot know, so no load is dropped
// and almost nothing is written.
extern "C" __global__ void ceil_read_v4(const uint4* __restrict__ src, long long n, unsigned int sentinel,
                                        unsigned int* sink) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i];
    const uint4 b = src[i + stride];
    const uint4 c = src[i + 2 * stride];
    const uint4 d = src[i + 3 * stride];
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = src[i];
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == sentinel) sink[0] = acc;
}

namespace ceilings {
// One warpgroup per 64 rows of A; two warpgroups per CTA so one issues while the other waits.
constexpr int WARPGROUPS = 2;
constexpr int THREADS = WARPGROUPS * 128;
// A: 64 rows × 64 K, B: 256 rows × 64 K, both K-major with the 128-byte swizzle (rows of 128 B).
constexpr int A_BYTES = 64 * 64 * 2;
constexpr int B_BYTES = 256 * 64 * 2;
// Wgmmas between two commits: 4 passes over the 4 K-steps of the tiles.
constexpr int WGMMAS_PER_ITER = 16;
}  // namespace ceilings

// Dynamic shared memory the wgmma loop needs: both tiles plus slack to align them to 1024 B.
extern "C" __device__ const int ceil_wgmma_smem_bytes = ceilings::A_BYTES + ceilings::B_BYTES + 1024;
// Launch facts the host needs for the FLOP count: threads per CTA and wgmmas per warpgroup per iteration.
extern "C" __device__ const int ceil_wgmma_layout[3] = {ceilings::THREADS, ceilings::WARPGROUPS, ceilings::WGMMAS_PER_ITER};

// Grid: one CTA per SM. Each warpgroup runs `iters` × 16 wgmma m64n256k16 (2·64·256·16 FLOP each)
// over operands that never leave shared memory, then writes one f32 per thread to sink[grid · THREADS].
extern "C" __global__ void __launch_bounds__(ceilings::THREADS, 1) ceil_wgmma_bf16(float* sink, int iters, unsigned int seed) {
  using namespace ceilings;
  extern __shared__ uint8_t smem_raw[];
  // SW128 tiles must start on a 1024-byte boundary (HOPPER-NOTES §1.6); dynamic smem is not.
  const uint32_t raw = ptx::smem_addr(smem_raw);
  uint8_t* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);
  uint16_t* halves = reinterpret_cast<uint16_t*>(smem);
  for (int i = threadIdx.x; i < (A_BYTES + B_BYTES) / 2; i += THREADS) halves[i] = nonzero_bf16(i, seed ^ blockIdx.x);
  ptx::fence_proxy_async_smem();
  __syncthreads();

  const uint32_t a_base = ptx::smem_addr(smem);
  const uint32_t b_base = a_base + A_BYTES;
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

  for (int it = 0; it < iters; ++it) {
    ptx::wgmma_fence();
#pragma unroll
    for (int pass = 0; pass < WGMMAS_PER_ITER / 4; ++pass) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        // K-step kk is 16 elements = 32 bytes into each 128-byte row (HOPPER-NOTES §1.1).
        const uint64_t da = ptx::smem_desc_sw128(a_base + kk * 32, 16, 1024);
        const uint64_t db = ptx::smem_desc_sw128(b_base + kk * 32, 16, 1024);
        wgmma_m64n256k16_ss_bf16(acc, da, db);
      }
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::fence_regs(acc);
  }

  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 128; ++i) sum += acc[i];
  sink[blockIdx.x * THREADS + threadIdx.x] = sum;
}
