// The MODEL1 FP8 cache format (DeepSeek-V4, FlashMLA's "MODEL1"), per page of page_block_size tokens:
//   [0, pbs * 576)              token r's data at r * 576: 448 e4m3 NoPE codes (dims 0-447), then
//                               64 bf16 RoPE values (dims 448-511) as stored
//   [pbs * 576, pbs * 584)      token r's scale record at pbs * 576 + r * 8: 7 e8m0 bytes, one per
//                               64-dim NoPE tile (2^(byte - 127), 0xFF NaN), and a pad byte
// d_qk = 512 and V is the whole row, RoPE included. In the kernels' SW128 tiles: NoPE in tiles 0-6,
// RoPE in tile 7, so tiles 0-7 are both K and V (V3.2 puts RoPE in tile 8, outside V).
#pragma once
#include "format.cuh"

namespace mla::sparse {

struct Model1 {
  static constexpr int DATA_BYTES = 576;    // a token's codes and RoPE, back to back
  static constexpr int RECORD_BYTES = 8;    // its scale record in the page's footer
  static constexpr int D_QK = 512;
  static constexpr int QK_TILES = D_QK / 64;
  static constexpr int NOPE_DIMS = 448;
  static constexpr int NOPE_TILES = NOPE_DIMS / 64;
  static constexpr int ROPE_TILE = 7;
  static constexpr int ROPE_OFFSET = NOPE_DIMS;
  static constexpr int ROPE_DIMS = 64;
  // With crossover, producer warpgroup 0 converts tiles 0-3, warpgroup 1 tiles 4-6 and copies RoPE:
  // 4 against 3 conversions plus a copy, and each warpgroup then owns 4 consecutive tiles.
  static constexpr int XO_ROPE_WG = 1;

  struct Token {
    const uint8_t* data;
    const uint8_t* scales;
  };
  using Scales = uint2;
  static __device__ __forceinline__ Token locate(const TokenPlace& at) {
    return {at.page + at.row * DATA_BYTES, at.page + at.page_block_size * DATA_BYTES + at.row * RECORD_BYTES};
  }
  static __device__ __forceinline__ Scales load_scales(const Token& t) { return ptx::ld_nc_v2(t.scales); }
  static __device__ __forceinline__ const uint8_t* rope(const Token& t) { return t.data + ROPE_OFFSET; }
  // The scale of tile g: its e8m0 byte, then as bf16, the byte being bf16's exponent field. Byte 0
  // (2^-127) is a bf16 subnormal and 0xFF is NaN in e8m0 (bf16's all-ones exponent with a zero mantissa
  // would be inf).
  static __device__ __forceinline__ uint32_t scale_word(const Scales& s, int g) { return ((g < 4 ? s.x : s.y) >> (8 * (g & 3))) & 0xFFu; }
  static __device__ __forceinline__ __nv_bfloat162 scale_bf16(uint32_t byte) {
    const uint32_t bits = byte == 0xFFu ? 0x7FC0u : byte == 0u ? 0x0040u : byte << 7;
    const uint32_t pair = bits | bits << 16;
    return *reinterpret_cast<const __nv_bfloat162*>(&pair);
  }
  // L2 prefetch: lanes q < 3 touch data offsets 128q and 128(q + 4) clamped onto the last byte, lane 3
  // offset 384 and the scale record (offsets 0, 128, ..., 512 and 575 lie at most 128 bytes apart, so
  // they reach every line the 576 bytes touch).
  static __device__ __forceinline__ void prefetch(const TokenPlace& at, int q) {
    const Token t = locate(at);
    ptx::prefetch_l2(t.data + 128 * q);
    if (q < 3) ptx::prefetch_l2(t.data + min(128 * (q + 4), DATA_BYTES - 1));
    else ptx::prefetch_l2(t.scales);
  }
};
static_assert(Model1::NOPE_DIMS + Model1::ROPE_DIMS == Model1::D_QK && Model1::D_QK == D_V, "V is the whole row");
static_assert(Model1::ROPE_TILE == Model1::NOPE_TILES && Model1::QK_TILES == Model1::ROPE_TILE + 1, "RoPE right after NoPE");

}  // namespace mla::sparse
