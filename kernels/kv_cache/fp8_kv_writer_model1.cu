// MODEL1 KV cache writer: bf16 tokens (512 dims) -> DeepSeek-V4's 584-byte MODEL1 tokens at given slots
// of a paged cache (DEEPSEEK-V4.md). Bit-identical to quantizeKvCacheModel1 in
// src/numeric/kvCacheModel1.ts. Per 64-dim NoPE tile: amax / 448 rounded to f32, clamped below at
// f32(1e-4), s = 2^ceil(log2 of that) read exactly off its bits (the e8m0 byte is the biased exponent,
// plus one when the mantissa is not zero), q = e4m3(x / s) rounded to nearest even; RoPE copied.
// The page's token data and scale footer are apart: token r's 576 data bytes at page + r * 576, its
// scale record (7 e8m0 bytes, pad byte 0) at page + page_block_size * 576 + r * 8.
#include "../common/ptx.cuh"
#include "../mla/params.h"
#include "lane_row.cuh"

namespace {

constexpr int WARPS_PER_CTA = 8;
constexpr int D_NOPE = 448;
constexpr int D_QK = 512;
constexpr int TILES = 7;
constexpr int DATA_BYTES = 576;    // 448 e4m3 codes + 64 bf16 RoPE values
constexpr int RECORD_BYTES = 8;    // 7 e8m0 scales + 1 pad byte
constexpr int DIMS_PER_LANE = kv_writer::DIMS_PER_LANE;  // one warp per token: 32 lanes x 16 dims = 512
constexpr int LANES_PER_TILE = 64 / DIMS_PER_LANE;
constexpr int NOPE_LANES = D_NOPE / DIMS_PER_LANE;  // lanes 0..27 quantize, 28..31 copy RoPE
constexpr float E4M3_MAX = 448.0f;
constexpr float MIN_SCALE_INV = 1e-4f;  // FlashMLA's clamp of amax / 448, as torch compares it (in f32)
constexpr uint32_t E8M0_NAN = 0xFF;
static_assert(NOPE_LANES * DIMS_PER_LANE == D_NOPE && NOPE_LANES % LANES_PER_TILE == 0, "tiles map onto whole lanes");
static_assert(DIMS_PER_LANE * 32 == D_QK, "one warp covers a token");

// The e8m0 byte of a tile: ceil(log2(max(amax / 448, 1e-4))) + 127 from the f32 bits of the clamped
// quotient, a normal f32 (>= 1e-4) or +inf. For +inf the exponent field is 0xFF, the e8m0 NaN, which
// is also what a tile holding NaN stores.
__device__ __forceinline__ uint32_t e8m0_scale_byte(float amax, bool has_nan) {
  if (has_nan) return E8M0_NAN;
  const uint32_t bits = __float_as_uint(fmaxf(__fdiv_rn(amax, E4M3_MAX), MIN_SCALE_INV));
  return (bits >> 23) + ((bits & 0x7FFFFFu) != 0 ? 1u : 0u);
}

// 1 / s for the scale byte: 2^(127 - byte) as an f32 with biased exponent 254 - byte (byte is in
// [114, 247] for finite bf16 input); 0 for an inf tile (finite values become +-0, inf * 0 NaN) and NaN
// for a NaN tile (every code NaN), as x / inf and x / NaN give on the CPU.
__device__ __forceinline__ float inverse_scale(uint32_t byte, bool has_nan) {
  if (byte != E8M0_NAN) return __uint_as_float((254u - byte) << 23);
  return has_nan ? __uint_as_float(0x7FC00000u) : 0.0f;
}

}  // namespace

MLA_EXPORT_LAYOUT(model1_kv_write_params_layout, mla::Model1KvWriteParams, MLA_OFFSETS_MODEL1W)

// Grid: ceil(num_tokens / 8) CTAs of 256 threads; one warp per token. Lane l < 28 quantizes NoPE dims
// [16l, 16l + 16) (tile l / 4, whose amax the 4 lanes share by shuffles) and stores their 16 codes; lanes
// 28..31 copy RoPE dims [16l, 16l + 16) as 32 raw bytes; lane 0 stores the 8-byte scale record.
extern "C" __global__ void __launch_bounds__(256) fp8_kv_write_model1(const __grid_constant__ mla::Model1KvWriteParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int token = blockIdx.x * WARPS_PER_CTA + warp;
  if (token >= p.num_tokens) return;
  const int slot = p.slot_mapping[token];
  if (slot < 0 || slot >= p.num_slots) return;  // -1 (and anything outside the cache) writes nothing

  const kv_writer::LaneRow v = kv_writer::load_lane_row(p.kv + token * p.kv_stride + lane * DIMS_PER_LANE);
  const long long page = slot / p.page_block_size, row = slot % p.page_block_size;
  uint8_t* const page_base = p.cache + page * p.cache_block_stride;
  uint8_t* const data = page_base + row * DATA_BYTES;

  bool has_nan;
  const float amax = kv_writer::tile_amax<LANES_PER_TILE>(v.x, has_nan);  // RoPE lanes compute one too, unused
  const uint32_t scale_byte = e8m0_scale_byte(amax, has_nan);

  // The scale record: the first lane of each tile holds its byte; lane 0 gathers the 7 of them.
  uint32_t record_lo = 0, record_hi = 0;
#pragma unroll
  for (int t = 0; t < TILES; ++t) {
    const uint32_t b = __shfl_sync(0xFFFFFFFFu, scale_byte, t * LANES_PER_TILE);
    if (t < 4) record_lo |= b << (8 * t);
    else record_hi |= b << (8 * (t - 4));  // byte 7, the pad, stays 0
  }

  if (lane < NOPE_LANES) {
    const float inv = inverse_scale(scale_byte, has_nan);  // x * inv == x / s exactly: s is a power of two
    uint32_t q[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = ptx::cvt_e4m3x2_f32(v.x[4 * i + 1] * inv, v.x[4 * i] * inv);
      const uint32_t hi = ptx::cvt_e4m3x2_f32(v.x[4 * i + 3] * inv, v.x[4 * i + 2] * inv);
      q[i] = lo | (hi << 16);
    }
    // 576, the page base and the block stride (checked on the host) are multiples of 16: aligned stores.
    *reinterpret_cast<uint4*>(data + lane * DIMS_PER_LANE) = make_uint4(q[0], q[1], q[2], q[3]);
  } else {
    uint4* rope = reinterpret_cast<uint4*>(data + D_NOPE + (lane - NOPE_LANES) * 2 * DIMS_PER_LANE);
    rope[0] = v.raw0;
    rope[1] = v.raw1;
  }
  if (lane == 0) {
    // page_block_size * 576 + row * 8 is a multiple of 8.
    *reinterpret_cast<uint2*>(page_base + static_cast<long long>(p.page_block_size) * DATA_BYTES + row * RECORD_BYTES) = make_uint2(record_lo, record_hi);
  }
}
