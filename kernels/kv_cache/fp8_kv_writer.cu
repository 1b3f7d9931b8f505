// FP8 KV cache writer: bf16 latent tokens -> 656-byte V32 tokens (FLASHMLA.md §3) at given slots of a
// paged cache. Bit-identical to quantizeKvTokenV32 in src/numeric/kvCacheFp8.ts: the scale of each
// 128-value tile is the smallest power of two s >= 2^-13 with s*448 >= amax, found exactly (no log2
// rounding), and q = e4m3(x / s) with round-to-nearest-even (exact division: s is a power of two).
#include "../common/ptx.cuh"
#include "../mla/params.h"
#include "lane_row.cuh"

namespace {

constexpr int WARPS_PER_CTA = 8;
constexpr float MIN_SCALE = 1.0f / 8192.0f;  // 2^-13, FlashMLA's 1e-4 floor rounded up to a power of two
constexpr float E4M3_MAX = 448.0f;

// Exact tile scale; NaN amax gives NaN, +inf gives +inf (then finite values quantize to 0).
__device__ __forceinline__ float tile_scale(float amax) {
  if (isnan(amax)) return amax;
  if (isinf(amax)) return amax;
  const float a = fmaxf(amax, MIN_SCALE * E4M3_MAX);
  // A first guess from the exponent, then exact fix-ups: p*448 and p*224 are exact in f32.
  float p = exp2f(ceilf(log2f(a / E4M3_MAX)));
  while (p * E4M3_MAX < a) p *= 2.0f;
  while (p * 0.5f * E4M3_MAX >= a) p *= 0.5f;
  return p;
}

}  // namespace

MLA_EXPORT_LAYOUT(fp8_kv_write_params_layout, mla::Fp8KvWriteParams, MLA_OFFSETS_FP8W)

// Grid: ceil(num_tokens / 8) CTAs of 256 threads; one warp per token. Lane l quantizes dims
// [16l, 16l+16) (tile l/8) and copies RoPE dims 512 + 2l, 512 + 2l + 1.
extern "C" __global__ void __launch_bounds__(256) fp8_kv_write_v32(const __grid_constant__ mla::Fp8KvWriteParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int token = blockIdx.x * WARPS_PER_CTA + warp;
  if (token >= p.num_tokens) return;
  const int slot = p.slot_mapping[token];
  if (slot < 0 || slot >= p.num_slots) return;  // -1 (and anything outside the cache) writes nothing

  const uint16_t* src = p.kv + token * p.kv_stride;
  const kv_writer::LaneRow v = kv_writer::load_lane_row(src + lane * kv_writer::DIMS_PER_LANE);
  const float* x = v.x;
  bool has_nan;
  const float amax = kv_writer::tile_amax<8>(v.x, has_nan);  // tile l/8: 8 lanes x 16 values
  const float s = tile_scale(has_nan ? __int_as_float(0x7FC00000) : amax);
  const float inv = 1.0f / s;  // exact: s is a power of two (or NaN / inf)

  uint32_t q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = ptx::cvt_e4m3x2_f32(x[4 * i + 1] * inv, x[4 * i] * inv);
    const uint32_t hi = ptx::cvt_e4m3x2_f32(x[4 * i + 3] * inv, x[4 * i + 2] * inv);
    q[i] = lo | (hi << 16);
  }
  const long long slot_block = slot / p.page_block_size, slot_row = slot % p.page_block_size;
  uint8_t* dst = p.cache + slot_block * p.cache_block_stride + slot_row * 656;
  // 656 is a multiple of 16, and so must the block stride be (checked on the host): 16-B stores are aligned.
  *reinterpret_cast<uint4*>(dst + lane * 16) = make_uint4(q[0], q[1], q[2], q[3]);
  if (lane % 8 == 0) reinterpret_cast<float*>(dst + 512)[lane / 8] = s;
  reinterpret_cast<uint32_t*>(dst + 528)[lane] = reinterpret_cast<const uint32_t*>(src + 512)[lane];
}
