// The data generators of the benchmark's cases (and the tests'), on the GPU: FlashMLA's large shapes
// hold billions of values, far too many to draw in JavaScript. A counter-based hash (splitmix64) gives
// each element its own normal draw, so the data depend only on (seed, element index), never on the
// launch shape.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {
__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// N(0, 1) by Box-Muller from one 64-bit hash (two 32-bit uniforms in (0, 1]).
__device__ __forceinline__ float normal_at(uint64_t seed, uint64_t i) {
  const uint64_t h = splitmix64(seed * 0x100000001B3ull ^ splitmix64(i));
  const float u1 = (static_cast<uint32_t>(h) + 1.0f) * 2.3283064e-10f;
  const float u2 = static_cast<uint32_t>(h >> 32) * 2.3283064e-10f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

__device__ __forceinline__ uint16_t to_half_bits(float v, int is_fp16) {
  return is_fp16 ? __half_as_ushort(__float2half_rn(v)) : __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
}  // namespace

// dst[i] = half(clamp(N(0,1) * scale, -clamp, clamp)) for i < n. Grid-stride.
extern "C" __global__ void fill_normal_half(uint16_t* dst, long long n, unsigned long long seed, float scale, float clamp, int is_fp16) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float v = fminf(fmaxf(normal_at(seed, i) * scale, -clamp), clamp);
    dst[i] = to_half_bits(v, is_fp16);
  }
}

// Fills the cache slots the requests use (token t < seqlen of request r, all h_kv heads, d_qk dims: 576,
// or DeepSeek-V4's 512) of a contiguous [num_blocks, 64, h_kv, d_qk] cache with normal draws indexed by
// the slot; the caller first fills the whole cache with NaN, so every slot no request owns stays
// poisoned. Grid (min(max_seqlen, 4096), b), 256 threads: one token row per CTA per pass.
extern "C" __global__ void fill_kv_used_slots(uint16_t* kv, const int* block_table, const int* seqlens, int max_blocks_per_seq, int h_kv,
                                              int d_qk, unsigned long long seed, float scale, float clamp, int is_fp16) {
  const int req = blockIdx.y;
  const int len = seqlens[req];
  const int row_elems = h_kv * d_qk;
  for (int t = blockIdx.x; t < len; t += gridDim.x) {
    const long long blk = block_table[static_cast<long long>(req) * max_blocks_per_seq + t / 64];
    const long long base = (blk * 64 + t % 64) * row_elems;
    for (int e = threadIdx.x; e < row_elems; e += blockDim.x) {
      const float v = fminf(fmaxf(normal_at(seed, base + e) * scale, -clamp), clamp);
      kv[base + e] = to_half_bits(v, is_fp16);
    }
  }
}
