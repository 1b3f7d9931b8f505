// What the FP8 KV cache writers share: one warp per token, each lane holding 16 consecutive bf16 values
// of the token's row, and a scale tile spread over a few consecutive lanes whose amax they agree on.
#pragma once
#include <cstdint>

namespace kv_writer {

constexpr int DIMS_PER_LANE = 16;

// A lane's 16 consecutive bf16 values: the 32 raw bytes (for copying) and their exact f32 values.
struct LaneRow {
  uint4 raw0, raw1;
  float x[DIMS_PER_LANE];
};

// Loads 16 bf16 values from `src` (16-byte aligned) and widens them to f32 (exact: bf16 is f32's top half).
__device__ __forceinline__ LaneRow load_lane_row(const uint16_t* src) {
  LaneRow r;
  r.raw0 = *reinterpret_cast<const uint4*>(src);
  r.raw1 = *reinterpret_cast<const uint4*>(src + 8);
  const uint32_t words[8] = {r.raw0.x, r.raw0.y, r.raw0.z, r.raw0.w, r.raw1.x, r.raw1.y, r.raw1.z, r.raw1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    r.x[2 * i] = __uint_as_float(words[i] << 16);
    r.x[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
  }
  return r;
}

// The largest |x| over a tile held by LANES consecutive lanes (groups aligned to LANES), and in `has_nan`
// whether any of its values is NaN: fmaxf drops NaN, so a NaN is tracked on its own and must win.
// Every lane of the warp calls it (the shuffles take the full mask).
template <int LANES>
__device__ __forceinline__ float tile_amax(const float (&x)[DIMS_PER_LANE], bool& has_nan) {
  static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "a power-of-two group of lanes");
  float amax = 0.0f;
  bool nan = false;
#pragma unroll
  for (int i = 0; i < DIMS_PER_LANE; ++i) {
    nan |= isnan(x[i]);
    amax = fmaxf(amax, fabsf(x[i]));
  }
#pragma unroll
  for (int off = 1; off < LANES; off <<= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
    nan |= __shfl_xor_sync(0xFFFFFFFFu, nan ? 1 : 0, off) != 0;
  }
  has_nan = nan;
  return amax;
}

}  // namespace kv_writer
