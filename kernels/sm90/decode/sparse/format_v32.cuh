// The V3.2 FP8 cache format (DeepSeek-V3.2, FlashMLA's "V32"): 656 bytes per token, laid out per token
//   [0, 512)    512 e4m3 NoPE codes, dims 0-511
//   [512, 528)  4 fp32 scales, one per 128-dim group (powers of two: dequantization is exact)
//   [528, 656)  64 bf16 RoPE values, dims 512-575, stored as they are
// Token `slot` of the paged cache: kv + (slot / page_block_size) * kv_block_stride + (slot % page_block_size) * 656.
// The kernels read the format only through this struct; another format is another such struct.
#pragma once
#include "../../../common/ptx.cuh"
#include "../../../mla/params.h"

namespace mla::sparse {

struct V32 {
  static constexpr int TOKEN_BYTES = 656;
  static constexpr int NOPE_DIMS = 512;     // e4m3 codes at byte 0
  static constexpr int SCALE_GROUP = 128;   // dims per scale
  static constexpr int NUM_SCALES = NOPE_DIMS / SCALE_GROUP;
  static constexpr int SCALE_OFFSET = NOPE_DIMS;  // fp32 scales
  static constexpr int ROPE_OFFSET = SCALE_OFFSET + 4 * NUM_SCALES;  // bf16 RoPE
  static constexpr int ROPE_DIMS = 64;

  static __device__ __forceinline__ const uint8_t* token(const SparseParams& p, int slot) {
    return p.kv + static_cast<long long>(slot / p.page_block_size) * p.kv_block_stride + static_cast<long long>(slot % p.page_block_size) * TOKEN_BYTES;
  }

  // Four e4m3 codes -> two bf16x2 words times the group's bf16 scale, through the conversion units
  // (e4m3x2 -> f16x2 -> f32 -> bf16x2, exact). An integer path (the bytes moved into bf16's fields, then
  // times 2^120 and the scale) was slower: 1041 against 803 µs at sparse-v32 on the H200.
  static __device__ __forceinline__ void dequant4(uint32_t w, __nv_bfloat162 scale, uint32_t& lo, uint32_t& hi) {
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
  static __device__ __forceinline__ void dequant16(uint4 raw, __nv_bfloat162 scale, uint4& a, uint4& b) {
    dequant4(raw.x, scale, a.x, a.y);
    dequant4(raw.y, scale, a.z, a.w);
    dequant4(raw.z, scale, b.x, b.y);
    dequant4(raw.w, scale, b.z, b.w);
  }
};
static_assert(V32::ROPE_OFFSET == 528 && V32::ROPE_OFFSET + 2 * V32::ROPE_DIMS == V32::TOKEN_BYTES, "the 656-byte token");
static_assert(V32::NOPE_DIMS + V32::ROPE_DIMS == D_QK, "NoPE + RoPE = d_qk");

}  // namespace mla::sparse
