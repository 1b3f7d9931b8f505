// The shared-memory plans of the sparse kernels, their barriers' arrival counts, and the size checks.
#pragma once
#include "../common/heads_as_n.cuh"
#include "../common/tiles.cuh"
#include "config.h"
#include "format_model1.cuh"
#include "format_v32.cuh"

namespace mla::sparse {

// The opt-in shared memory of an H100/H200 SM.
constexpr int MAX_SMEM_BYTES = 232448;

// m64 and h128x: K blocks as bf16 SW128 tiles (the producers dequantize), Q likewise.
struct __align__(1024) Smem {
  uint8_t q[QK_BYTES];
  uint8_t k[K_STAGES][QK_BYTES];
  uint8_t p[TILE_BYTES];        // P of the current block, 64 rows x 64 tokens SW128 (WG0 -> WG1)
  float scale[64];              // row rescale factor of the current block (WG0 -> WG1)
  float l[64];                  // final row sums (WG0 -> WG1)
  float m[64];                  // final row maxima, log2 domain
  float sink[64];               // the rows' attention sinks, log2 domain (-inf: none; WG0 writes them once)
  alignas(8) uint8_t valid[K_STAGES][8];  // per K buffer: bit i of byte j = token 8j + i holds a valid index
  uint64_t kfull[K_STAGES];     // the producers' threads arrive once the block is written (+ the peer's half by complete_tx)
  uint64_t kempty[K_STAGES];    // the consumers' warps (of both CTAs with crossover) arrive once they no longer read it
};
// The struct sits at the first 1024-B boundary of the dynamic shared memory (smem_struct_1024).
constexpr int SMEM_BYTES = sizeof(Smem) + 1024;
static_assert(SMEM_BYTES <= MAX_SMEM_BYTES, "fits the opt-in shared memory of an H100/H200 SM");

// Every producer thread arrives on kfull; every consumer warp (lane 0) on kempty, the peer CTA's too with
// crossover, whose producers also write this CTA's buffers.
template <bool XO>
__device__ __forceinline__ void init_barriers(Smem& sm) {
  for (int s = 0; s < K_STAGES; ++s) {
    ptx::mbarrier_init(&sm.kfull[s], 128 * PRODUCER_WARPGROUPS);
    ptx::mbarrier_init(&sm.kempty[s], (XO ? 2 : 1) * CONSUMER_THREADS / 32);
  }
  ptx::fence_mbarrier_init();
}

namespace h16x {

// How h16x stages a format's tokens and tiles its operands.
template <class Fmt>
struct Geometry;
// V3.2: each token's 656 bytes as stored. Q: 8 f16 tiles (NoPE, permuted) + 1 bf16 tile (RoPE); Pᵀ: one
// tile per 128-dim scale group (P·V multiplies the scales into Pᵀ).
template <>
struct Geometry<V32> {
  static constexpr int TOKEN_STRIDE = V32::TOKEN_BYTES;
  static constexpr int COPY_BYTES = V32::TOKEN_BYTES;  // a token's bulk copy
  static constexpr int Q_TILES = V32::QK_TILES;
  static constexpr int PT_TILES = V32::NUM_SCALES;
};
// MODEL1: a token's 576 data bytes (one bulk copy), then its 8-byte scale record (the producer lane's
// own store) and 8 bytes of padding. 592 = 148 words, 20 mod 32 banks: the P·V loads of tokens 2q
// (q = 0..3) fall in four different bank octets, where 576 (16 mod 32) put all four in the same one.
// Q: 7 f16 NoPE tiles + the bf16 RoPE tile; Pᵀ: one tile per 64-dim scale tile and one for RoPE.
template <>
struct Geometry<Model1> {
  static constexpr int COPY_BYTES = Model1::DATA_BYTES;  // a token's bulk copy: its data, not its record
  static constexpr int RECORD_AT = Model1::DATA_BYTES;
  static constexpr int TOKEN_STRIDE = RECORD_AT + Model1::RECORD_BYTES + 8;
  static constexpr int Q_TILES = Model1::QK_TILES;
  static constexpr int PT_TILES = Model1::QK_TILES;
};
static_assert(Geometry<Model1>::TOKEN_STRIDE % 16 == 0, "bulk copies land on 16-byte boundaries");
static_assert((2 * Geometry<Model1>::TOKEN_STRIDE / 4) % 32 == 8, "tokens 2q, q = 0..3, start in four different bank octets");

// The tokens stay as stored in the cache; the consumers read their bytes into wgmma's A fragments.
template <class Fmt>
struct __align__(1024) Smem {
  uint8_t raw[STAGES][64 * Geometry<Fmt>::TOKEN_STRIDE];  // a block's tokens as stored in the cache
  uint8_t q[Geometry<Fmt>::Q_TILES * H16_TILE];           // 1024-aligned: a stage is 41 (V32) or 37 (MODEL1) x 1024 bytes
  uint8_t pt[2][Geometry<Fmt>::PT_TILES][H16_TILE];       // Pᵀ of each consumer warpgroup
  float merge_ot[32 * 128];                    // WG1's Oᵀ tiles 0-3 at a request's end (tiles 4-7 go to pt)
  float red[2][4][H16_ROWS];
  float merge_ml[2][H16_ROWS];                 // WG1's m and L
  float qexp[H16_ROWS];                        // 2^k of each head (Q is scaled into f16's range)
  uint8_t valid[STAGES][64];
  uint64_t full[STAGES];                       // FULL_ARRIVALS: lanes 0-7 of each producer warp (each with its token's bytes)
  uint64_t empty[STAGES];                      // the consuming warpgroup's 128 threads arrive
};
template <class Fmt>
constexpr int smem_bytes = sizeof(Smem<Fmt>) + 1024;
static_assert(smem_bytes<V32> <= MAX_SMEM_BYTES && smem_bytes<Model1> <= MAX_SMEM_BYTES, "fits the opt-in shared memory of an H100/H200 SM");
static_assert((64 * Geometry<V32>::TOKEN_STRIDE) % 1024 == 0 && (64 * Geometry<Model1>::TOKEN_STRIDE) % 1024 == 0, "the stages keep sQ and Pᵀ 1024-aligned");
static_assert(sizeof(Smem<V32>::pt) >= 4 * 128 * 4 * 8 && sizeof(Smem<Model1>::pt) >= 4 * 128 * 4 * 8, "Oᵀ tiles 4-7 fit in Pᵀ at a request's end");

template <class Fmt>
__device__ __forceinline__ void init_barriers(Smem<Fmt>& sm) {
  for (int s = 0; s < STAGES; ++s) {
    ptx::mbarrier_init(&sm.full[s], FULL_ARRIVALS);
    ptx::mbarrier_init(&sm.empty[s], 128);
  }
  ptx::fence_mbarrier_init();
}

}  // namespace h16x
}  // namespace mla::sparse
