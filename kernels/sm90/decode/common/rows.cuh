// Writing out a 64-row consumer warpgroup's accumulator rows (wgmma's C layout: thread lane holds, of
// rows lane / 4 and + 8, columns 8j + 2 (lane % 4) and + 1) as 16-byte stores. The four lanes of a quad
// hold 8 consecutive columns of a row, 2 each; exchanged first, each lane stores 16 contiguous bytes: a
// quarter (16-bit out) or a half (fp32) of the 4- and 8-byte stores the layout gives directly. Every lane
// runs the exchanges (they are warp shuffles); `stored` only guards the stores.
#pragma once
#include "tiles.cuh"

namespace mla {

// A 4x4 matrix of 32-bit words over the four lanes of a quad (lane c holds row c in w) becomes its
// transpose (lane c then holds column c): two exchanges of two words each.
__device__ __forceinline__ void quad_transpose(uint32_t (&w)[4], int lane) {
  const bool hi = lane & 2, odd = lane & 1;
  const uint32_t a0 = __shfl_xor_sync(0xFFFFFFFFu, hi ? w[0] : w[2], 2), a1 = __shfl_xor_sync(0xFFFFFFFFu, hi ? w[1] : w[3], 2);
  if (hi) w[0] = a0, w[1] = a1;
  else w[2] = a0, w[3] = a1;
  const uint32_t b0 = __shfl_xor_sync(0xFFFFFFFFu, odd ? w[0] : w[1], 1), b1 = __shfl_xor_sync(0xFFFFFFFFu, odd ? w[2] : w[3], 1);
  if (odd) w[0] = b0, w[2] = b1;
  else w[1] = b0, w[3] = b1;
}

// Row `half` (lane / 4 + 8 half) of o, times inv, as T into the 256 columns at `out`.
template <typename T>
__device__ __forceinline__ void store_row_16bit(uint16_t* out, const float (&o)[128], int half, float inv, int lane, bool stored) {
  const int c = lane % 4;
#pragma unroll
  for (int g = 0; g < 8; ++g) {  // columns 32g .. + 31: lane c stores 8 (4g + c) .. + 7
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int i = 2 * half + 4 * (4 * g + k);
      w[k] = ptx::pack2<T>(o[i] * inv, o[i + 1] * inv);
    }
    quad_transpose(w, c);
    if (stored) *reinterpret_cast<uint4*>(out + 8 * (4 * g + c)) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// The same row as fp32 into the 256 columns at `out`: lanes 2e and 2e + 1 trade one column pair each.
__device__ __forceinline__ void store_row_f32(float* out, const float (&o)[128], int half, float inv, int lane, bool stored) {
  const bool odd = lane & 1;
#pragma unroll
  for (int t = 0; t < 16; ++t) {  // columns 16t .. + 15: lanes 2e and 2e + 1 store 8j + 4e .. + 3 of j = 2t and 2t + 1
    const int i0 = 2 * half + 8 * t, i1 = i0 + 4;
    const float x0 = __shfl_xor_sync(0xFFFFFFFFu, (odd ? o[i0] : o[i1]) * inv, 1);
    const float x1 = __shfl_xor_sync(0xFFFFFFFFu, (odd ? o[i0 + 1] : o[i1 + 1]) * inv, 1);
    const float4 v = odd ? make_float4(x0, x1, o[i1] * inv, o[i1 + 1] * inv) : make_float4(o[i0] * inv, o[i0 + 1] * inv, x0, x1);
    if (stored) *reinterpret_cast<float4*>(out + 8 * (2 * t + odd) + 4 * ((lane % 4) / 2)) = v;
  }
}

}  // namespace mla
