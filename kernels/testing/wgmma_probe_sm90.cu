// The primitives of the transposed 16-head design (docs/dense-decode.md §12), each checked on the GPU
// against the CPU (test/gpu/mla/wgmmaProbe.test.ts) before a kernel is built on them:
//   Sᵀ[64 tokens x 16] = K·Qᵀ   wgmma m64n16k16, A = the K tiles as stored (K-major), B = Q's 16 rows;
//   Pᵀ tile                    P in the accumulator layout (rows = tokens) stored with stmatrix .trans
//                              as a K-major SW128 tile of 16 head rows x 64 tokens;
//   Oᵀ[512 x 16] = Vᵀ·Pᵀ        wgmma m64n16k16 with A = the same K tiles read MN-major (imm-trans-a),
//                              one 64-dim tile per M block, B = the Pᵀ tile.
// One CTA of one warpgroup; the inputs are plain row-major arrays.
#include <cstdint>
#include <cuda_bf16.h>

#include "../sm90/decode/common/heads_as_n.cuh"

namespace {
constexpr int PROBE_HEADS = 16;
constexpr int Q_TILE_BYTES = PROBE_HEADS * 128;  // 16 rows x 64 dims x 2 B, SW128

struct ProbeSmem {
  alignas(1024) uint8_t k[mla::QK_BYTES];              // 9 tiles of 64 tokens x 64 dims
  alignas(1024) uint8_t q[mla::NUM_TILES * Q_TILE_BYTES];  // 9 tiles of 16 heads x 64 dims
  alignas(1024) uint8_t pt[Q_TILE_BYTES];              // 16 heads x 64 tokens
};
}  // namespace

// k: [64][576] bf16, q: [16][576] bf16, p: [64][16] f32 (rounded to bf16 here), outputs: s_out [64][16]
// f32 = K·Qᵀ, o_out [512][16] f32 = Vᵀ·bf16(P) with V = k's first 512 columns, pt_out [16][64] bf16 =
// the Pᵀ tile as stored. Grid 1, block 128, dynamic smem sizeof(ProbeSmem) + 1024.
extern "C" __global__ void __launch_bounds__(128, 1)
    mla_wgmma_probe_h16(const uint16_t* k, const uint16_t* q, const float* p, float* s_out, float* o_out, uint16_t* pt_out) {
  extern __shared__ uint8_t smem_raw[];
  ProbeSmem& sm = mla::smem_struct_1024<ProbeSmem>(smem_raw);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int c = tid; c < 64 * 72; c += 128) {
    const int row = c / 72, chunk = c % 72;
    *reinterpret_cast<uint4*>(sm.k + (chunk / 8) * mla::TILE_BYTES + mla::sw128(row, chunk % 8)) = *reinterpret_cast<const uint4*>(k + row * 576 + chunk * 8);
  }
  for (int c = tid; c < PROBE_HEADS * 72; c += 128) {
    const int row = c / 72, chunk = c % 72;
    *reinterpret_cast<uint4*>(sm.q + (chunk / 8) * Q_TILE_BYTES + mla::sw128(row, chunk % 8)) = *reinterpret_cast<const uint4*>(q + row * 576 + chunk * 8);
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();

  // Accumulator element e of an m64n16 fragment: row 16·warp + lane/4 + 8·((e>>1)&1), column
  // 8·(e>>2) + 2·(lane%4) + (e&1).
  auto row_of = [&](int e) { return 16 * warp + lane / 4 + 8 * ((e >> 1) & 1); };
  auto col_of = [&](int e) { return 8 * (e >> 2) + 2 * (lane % 4) + (e & 1); };
  const uint32_t k_base = ptx::smem_addr(sm.k), q_base = ptx::smem_addr(sm.q), pt_base = ptx::smem_addr(sm.pt);

  float st[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) st[e] = 0.0f;
  ptx::wgmma_fence();
#pragma unroll
  for (int t = 0; t < mla::NUM_TILES; ++t)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      ptx::wgmma_m64n16k16_ss<ptx::bf16_t, 0>(st, ptx::smem_desc_sw128(k_base + t * mla::TILE_BYTES + kk * 32, 16, 1024),
                                              ptx::smem_desc_sw128(q_base + t * Q_TILE_BYTES + kk * 32, 16, 1024), t != 0 || kk != 0);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::fence_regs(st);
#pragma unroll
  for (int e = 0; e < 8; ++e) s_out[row_of(e) * PROBE_HEADS + col_of(e)] = st[e];

  // Pᵀ: register x holds elements 2x, 2x+1 (8x8 matrix x: tokens 16·warp + 8·(x&1) + 0..7, heads
  // 8·(x>>1) + 0..7); .trans stores matrix x's column i (head 8·(x>>1) + i) as the tile row of that head,
  // whose 16-byte chunk 2·warp + (x&1) holds those 8 tokens.
  uint32_t r[4];
#pragma unroll
  for (int x = 0; x < 4; ++x) r[x] = ptx::pack2<ptx::bf16_t>(p[row_of(2 * x) * PROBE_HEADS + col_of(2 * x)], p[row_of(2 * x + 1) * PROBE_HEADS + col_of(2 * x + 1)]);
  {
    const int g = lane / 8, head = 8 * (g >> 1) + lane % 8, chunk = 2 * warp + (g & 1);
    ptx::stmatrix_x4_trans(pt_base + head * 128 + ((chunk ^ (head & 7)) << 4), r[0], r[1], r[2], r[3]);
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();

  float ot[8][8];
#pragma unroll
  for (int m = 0; m < 8; ++m)
#pragma unroll
    for (int e = 0; e < 8; ++e) ot[m][e] = 0.0f;
  ptx::wgmma_fence();
#pragma unroll
  for (int m = 0; m < 8; ++m)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      ptx::wgmma_m64n16k16_ss<ptx::bf16_t, 1>(ot[m], ptx::smem_desc_sw128(k_base + m * mla::TILE_BYTES + j * 2048, mla::TILE_BYTES, 1024),
                                              ptx::smem_desc_sw128(pt_base + j * 32, 16, 1024), j != 0);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    ptx::fence_regs(ot[m]);
#pragma unroll
    for (int e = 0; e < 8; ++e) o_out[(64 * m + row_of(e)) * PROBE_HEADS + col_of(e)] = ot[m][e];
  }
  for (int i = tid; i < PROBE_HEADS * 64; i += 128) {
    const int head = i / 64, token = i % 64;
    pt_out[i] = *reinterpret_cast<const uint16_t*>(sm.pt + mla::sw128(head, token / 8) + 2 * (token % 8));
  }
}
