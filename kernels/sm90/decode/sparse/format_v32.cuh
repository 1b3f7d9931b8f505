// The V3.2 FP8 cache format (DeepSeek-V3.2, FlashMLA's "V32"): 656 bytes per token, laid out per token
//   [0, 512)    512 e4m3 NoPE codes, dims 0-511
//   [512, 528)  4 fp32 scales, one per 128-dim group (powers of two: dequantization is exact)
//   [528, 656)  64 bf16 RoPE values, dims 512-575, stored as they are
// Row r of a page at page + r * 656. V is the first 512 dims. The kernels read a format only through
// such a struct (format_model1.cuh is the other).
#pragma once
#include "format.cuh"

namespace mla::sparse {

struct V32 {
  static constexpr int TOKEN_BYTES = 656;
  static constexpr int D_QK = 576;          // Q and K dims: 9 SW128 tiles
  static constexpr int QK_TILES = D_QK / 64;
  static constexpr int NOPE_DIMS = 512;     // e4m3 codes at byte 0: tiles 0-7
  static constexpr int NOPE_TILES = NOPE_DIMS / 64;
  static constexpr int ROPE_TILE = 8;       // the bf16 RoPE dims' tile in Q and K
  static constexpr int SCALE_GROUP = 128;   // dims per scale
  static constexpr int NUM_SCALES = NOPE_DIMS / SCALE_GROUP;
  static constexpr int SCALE_OFFSET = NOPE_DIMS;  // fp32 scales
  static constexpr int ROPE_OFFSET = SCALE_OFFSET + 4 * NUM_SCALES;  // bf16 RoPE
  static constexpr int ROPE_DIMS = 64;
  // With crossover, producer warpgroup 0 converts tiles 0-3 and copies RoPE, warpgroup 1 tiles 4-7.
  static constexpr int XO_ROPE_WG = 0;

  static __device__ __forceinline__ const uint8_t* token(const TokenPlace& at) { return at.page + static_cast<long long>(at.row) * TOKEN_BYTES; }

  // The producers' view: a token's bytes and its scales.
  struct Token {
    const uint8_t* data;
  };
  using Scales = uint4;
  static __device__ __forceinline__ Token locate(const TokenPlace& at) { return {token(at)}; }
  static __device__ __forceinline__ Scales load_scales(const Token& t) { return ptx::ld_nc_v4(t.data + SCALE_OFFSET); }
  static __device__ __forceinline__ const uint8_t* rope(const Token& t) { return t.data + ROPE_OFFSET; }
  // The scale of 64-dim tile g in two steps, its stored word (g a compile-time constant in the unrolled
  // loops: no select survives) and the bf16 pair the conversion multiplies by, so that a producer that
  // picks between two tiles' scales selects words and converts once.
  static __device__ __forceinline__ uint32_t scale_word(const Scales& s, int g) { return g < 2 ? s.x : g < 4 ? s.y : g < 6 ? s.z : s.w; }
  static __device__ __forceinline__ __nv_bfloat162 scale_bf16(uint32_t w) { return __float2bfloat162_rn(__uint_as_float(w)); }
  // L2 prefetch of a token: lane q touches lines q and q + 4 (the last clamped onto the token's last byte).
  static __device__ __forceinline__ void prefetch(const TokenPlace& at, int q) {
    const uint8_t* tok = token(at);
    ptx::prefetch_l2(tok + 128 * q);
    if (q < 3) ptx::prefetch_l2(tok + min(128 * (q + 4), TOKEN_BYTES - 1));
  }
};
static_assert(V32::ROPE_OFFSET == 528 && V32::ROPE_OFFSET + 2 * V32::ROPE_DIMS == V32::TOKEN_BYTES, "the 656-byte token");
static_assert(V32::NOPE_DIMS + V32::ROPE_DIMS == V32::D_QK && V32::D_QK == D_QK, "NoPE + RoPE = d_qk");
static_assert(V32::TOKEN_BYTES <= 5 * 128 + 129, "offsets 0, 128, ..., 640 and the last byte touch every line of a token");

}  // namespace mla::sparse
