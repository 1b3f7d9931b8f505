// What the sparse cache formats share: where a token of the walk lives (which cache, which page, which
// row of it) and the e4m3 -> bf16 conversion. Each format's own layout is a struct beside this file
// (format_v32.cuh, format_model1.cuh); the kernels take it as a template parameter.
#pragma once
#include "../../../common/ptx.cuh"
#include "../../../mla/params.h"

namespace mla::sparse {

// The walk numbers the main cache's tokens [0, num_slots) and the extra cache's after them
// [num_slots, num_slots + extra_num_slots), so one int names a token of either cache and the
// producers keep one register per token, not a pointer.
struct TokenPlace {
  const uint8_t* page;
  int row;
  int page_block_size;
};

// Without a second cache (EXTRA false) only the first branch exists. A branch per cache rather than
// selects: each division is then by a kernel parameter, whose reciprocal the compiler computes once.
template <bool EXTRA>
__device__ __forceinline__ TokenPlace token_place(const SparseParams& p, int slot) {
  if (!EXTRA || slot < p.num_slots) {
    return {p.kv + static_cast<long long>(slot / p.page_block_size) * p.kv_block_stride, slot % p.page_block_size, p.page_block_size};
  }
  const int id = slot - p.num_slots;
  return {p.extra_kv + static_cast<long long>(id / p.extra_page_block_size) * p.extra_kv_block_stride, id % p.extra_page_block_size, p.extra_page_block_size};
}

// Four e4m3 codes -> two bf16x2 words times a bf16 scale (a power of two: exact), through the conversion
// units (e4m3x2 -> f16x2 -> f32 -> bf16x2). An integer path (the bytes moved into bf16's fields, then
// times 2^120 and the scale) was slower: 1041 against 803 µs at sparse-v32 on the H200.
__device__ __forceinline__ void dequant4(uint32_t w, __nv_bfloat162 scale, uint32_t& lo, uint32_t& hi) {
  const uint32_t h01 = ptx::cvt_f16x2_e4m3x2(static_cast<uint16_t>(w & 0xFFFFu));
  const uint32_t h23 = ptx::cvt_f16x2_e4m3x2(static_cast<uint16_t>(w >> 16));
  const float2 f01 = __half22float2(*reinterpret_cast<const __half2*>(&h01));
  const float2 f23 = __half22float2(*reinterpret_cast<const __half2*>(&h23));
  __nv_bfloat162 b01 = __hmul2(__floats2bfloat162_rn(f01.x, f01.y), scale);
  __nv_bfloat162 b23 = __hmul2(__floats2bfloat162_rn(f23.x, f23.y), scale);
  lo = *reinterpret_cast<uint32_t*>(&b01);
  hi = *reinterpret_cast<uint32_t*>(&b23);
}

// Sixteen e4m3 codes (one 16-byte load) -> two 16-byte chunks of bf16.
__device__ __forceinline__ void dequant16(uint4 raw, __nv_bfloat162 scale, uint4& a, uint4& b) {
  dequant4(raw.x, scale, a.x, a.y);
  dequant4(raw.y, scale, a.z, a.w);
  dequant4(raw.z, scale, b.x, b.y);
  dequant4(raw.w, scale, b.z, b.w);
}

}  // namespace mla::sparse
