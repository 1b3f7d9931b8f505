// Test-only: the sparse kernels' FP8 dequantization on its own, for an exhaustive check of every e4m3
// code against the host's conversion (the producers call this same dequant16).
#include "../sm90/decode/sparse/format_v32.cuh"

// Chunk i (16 e4m3 codes) times scales[i / 16] -> 16 bf16 at out[2i], out[2i + 1]. One thread per chunk.
extern "C" __global__ void mla_sparse_dequant_selftest(const uint4* raw, const float* scales, uint4* out, int chunks) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= chunks) return;
  uint4 a, b;
  mla::sparse::dequant16(raw[i], __float2bfloat162_rn(scales[i / 16]), a, b);
  out[2 * i] = a;
  out[2 * i + 1] = b;
}
