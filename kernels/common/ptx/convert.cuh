// Number formats: the 16-bit element types, packing and conversions, the softmax exponent.
// One named inline wrapper per PTX instruction, each with its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/). Hopper facts verified on the H200 are in
// HOPPER-NOTES.md of the design notes; the few that bit us are repeated beside the wrapper.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
namespace ptx {


// Element type tags for the wgmma wrappers: bf16 and f16 inputs, f32 accumulators.
struct bf16_t { static constexpr bool is_fp16 = false; };
struct fp16_t { static constexpr bool is_fp16 = true; };

// ---- conversions -----------------------------------------------------------------------------------

// cvt.rn.satfinite.e4m3x2.f32: two f32 -> two e4m3 (hi goes to the upper byte). Round to nearest even;
// NaN stays NaN; |x| > 448 saturates (never reached: the FP8 cache writer scales into [-448, 448]).
__device__ __forceinline__ uint16_t cvt_e4m3x2_f32(float hi, float lo) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

// cvt.rn.f16x2.e4m3x2: two e4m3 bytes (low byte -> low half) to f16x2. There is no e4m3 -> bf16 cvt on
// sm_90; f16 holds every e4m3 value exactly, so e4m3 -> f16 -> f32 -> bf16 is exact (HOPPER-NOTES §7).
__device__ __forceinline__ uint32_t cvt_f16x2_e4m3x2(uint16_t two) {
  uint32_t r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(two));
  return r;
}

// prmt.b32: result byte i = byte (sel >> 4i) & 7 of {b, a} (a: bytes 0-3, b: bytes 4-7), or, where bit 3
// of that selector nibble is set, that byte's sign bit replicated (0x00 or 0xFF).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (T::is_fp16) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// The inverse of pack2: two 16-bit elements (low half first) to f32, exactly.
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t two) {
  if constexpr (T::is_fp16) {
    return __half22float2(*reinterpret_cast<const __half2*>(&two));
  } else {
    return make_float2(__uint_as_float(two << 16), __uint_as_float(two & 0xFFFF0000u));
  }
}

// ex2.approx.ftz.f32: the softmax exponent in base 2 (FlashAttention's scale·log2e trick).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace ptx
