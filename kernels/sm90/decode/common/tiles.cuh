// The shared-memory geometry of the sm90 decode kernels: 64x64 16-bit tiles in the 128-byte swizzle
// (SW128) that TMA writes and wgmma reads, their descriptors, and the softmax constants.
#pragma once
#include <cuda/std/type_traits>

#include "../../../common/ptx.cuh"
#include "../../../decode/pieces.cuh"
#include "../../../mla/params.h"

namespace mla {

constexpr int NUM_TILES = D_QK / 64;              // 9 tiles of 64 dims; tiles 0..7 are also V
constexpr int V_TILES = D_V / 64;                 // 8: the tiles of a key that are also its V
constexpr int TILE_BYTES = 64 * 128;              // 64 rows x 64 dims x 2 B, SW128
constexpr int QK_BYTES = NUM_TILES * TILE_BYTES;  // 73,728 B for Q or one K block
constexpr float MASKED = -INFINITY;
constexpr float M_INIT = -1e30f;                  // finite, so exp2(M_INIT - M_INIT) = 1 for empty rows
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.69314718055994530942f;

// A CTA whose pieces are all unsplit writes no partials, so the combine may launch at its start (its
// end triggers as well; a second trigger does nothing) and a call that splits nothing does not wait for
// the combine after its main kernel.
__device__ __forceinline__ void pdl_launch_if_unsplit(const SchedMeta& meta) {
  if (!meta.is_first_req_splitted && !meta.is_last_req_splitted) ptx::pdl_launch_dependents();
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a 1024-B aligned SW128 tile (HOPPER-NOTES §1.6).
__device__ __forceinline__ int sw128(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

// The kernel's shared-memory struct at the first 1024-B boundary of the dynamic shared memory (SW128
// tiles need it), reached by pointer arithmetic on the __shared__ array so the compiler still knows every
// access through it is a shared one (st.shared / ld.shared). Rounding through uintptr_t, as the kernels
// did before, lost that: every such access compiled to a generic ld/st.
template <typename S>
__device__ __forceinline__ S& smem_struct_1024(uint8_t* raw) {
  return *reinterpret_cast<S*>(raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u));
}

// The SW128 wgmma descriptor (leading byte offset `lbo`) of base + off, as the tile's base descriptor
// plus the offset (one add; the unrolled k-steps share the base) rather than built from the address
// (five uniform instructions before each wgmma, ~17 % of a consumer's samples in ncu).
__device__ __forceinline__ uint64_t sw128_at(uint32_t base, uint32_t off, uint32_t lbo) {
  return ptx::desc_advance(ptx::smem_desc_sw128(base, lbo, 1024), off);
}

}  // namespace mla
