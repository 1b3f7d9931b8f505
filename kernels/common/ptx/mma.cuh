// Tensor cores: wgmma and its shared-memory descriptors, stmatrix, setmaxnreg.
// One named inline wrapper per PTX instruction, each with its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/). Hopper facts verified on the H200 are in
// HOPPER-NOTES.md of the design notes; the few that bit us are repeated beside the wrapper.
#pragma once
#include <cstdint>
#include "convert.cuh"
namespace ptx {

// ---- wgmma (PTX ISA §9.7.15) -----------------------------------------------------------------------

// wgmma.fence: order register/accumulator writes by ordinary instructions before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// wgmma.commit_group: close the group of wgmmas issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// wgmma.wait_group N: wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads above a wgmma wait (HOPPER-NOTES §1.4 step 6).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Shared-memory matrix descriptor for a 128-byte-swizzled tile (HOPPER-NOTES §1.1): start address,
// leading and stride byte offsets (>>4), swizzle mode 1 = 128B in bits 62-63. Tiles are 1024-B aligned
// so the base offset field stays 0.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t smem_address, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_address & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

// A descriptor of smem_desc_sw128 moved on by `offset_bytes` (16-byte multiple): only the address field in
// the low word changes, and it cannot carry (shared memory ends below 256 KB), so the high word stays as
// it is and a chain of wgmmas over one tile's parts costs an add each, not a descriptor built anew.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t offset_bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (offset_bytes >> 4), hi = static_cast<uint32_t>(desc >> 32);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
#define FLASHMLA_ACC32(a)                                                                                   \
  "+f"(a[0]), "+f"(a[1]), "+f"(a[2]), "+f"(a[3]), "+f"(a[4]), "+f"(a[5]), "+f"(a[6]), "+f"(a[7]), "+f"(a[8]), \
      "+f"(a[9]), "+f"(a[10]), "+f"(a[11]), "+f"(a[12]), "+f"(a[13]), "+f"(a[14]), "+f"(a[15]), "+f"(a[16]),   \
      "+f"(a[17]), "+f"(a[18]), "+f"(a[19]), "+f"(a[20]), "+f"(a[21]), "+f"(a[22]), "+f"(a[23]), "+f"(a[24]),  \
      "+f"(a[25]), "+f"(a[26]), "+f"(a[27]), "+f"(a[28]), "+f"(a[29]), "+f"(a[30]), "+f"(a[31])

// wgmma.mma_async m64n64k16, A and B from shared memory (K-major both): S (+)= Q·Kᵀ.
// scale_d = 0 overwrites the accumulator (first K step).
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (T::is_fp16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
        "27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : FLASHMLA_ACC32(d)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
        "27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : FLASHMLA_ACC32(d)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

// wgmma.mma_async m64n16k16, A and B from shared memory, B K-major; TRANS_A = 1 reads A MN-major
// (imm-trans-a): the transposed 16-head design (docs/dense-decode.md §12), Sᵀ = K·Qᵀ with A = the K tile
// as it is, and Oᵀ += Vᵀ·Pᵀ with A = the same tile read transposed (LBO: next 64 rows of M, SBO: next 8
// rows of K, as for trans-b). scale_d = 0 overwrites the accumulator (first K step).
template <typename T, int TRANS_A>
__device__ __forceinline__ void wgmma_m64n16k16_ss(float (&d)[8], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(TRANS_A == 0 || TRANS_A == 1, "imm-trans-a is 0 or 1");
  if constexpr (T::is_fp16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, %11, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, %11, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A));
  }
}

// wgmma.mma_async m64n64k16 with A from registers and B from shared memory (K-major): the RoPE tile of
// Q·Kᵀ once Q's last tile has been moved to registers (its smem then holds a P tile).
// wgmma.mma_async m64n16k16, A from registers (the m16n8k16 A fragment of each warp's 16 rows), B
// K-major in shared memory: the h16x consumers' Sᵀ = K·Qᵀ and Oᵀ += Vᵀ·Pᵀ with K and V converted from
// FP8 in registers (docs/sparse-decode.md §24). scale_d = 0 overwrites the accumulator.
template <typename T>
__device__ __forceinline__ void wgmma_m64n16k16_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
  if constexpr (T::is_fp16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
  }
}

template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (T::is_fp16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
        "27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
        : FLASHMLA_ACC32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
        "27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
        : FLASHMLA_ACC32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
}

// wgmma.mma_async m64n256k16 with A from registers (4 x b32 of 16-bit pairs) and B from shared memory
// read MN-major (imm-trans-b = 1): O (+)= P·V where V is the K tile itself (HOPPER-NOTES §1.2).
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_rs_transb(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b) {
#define FLASHMLA_ACC128_OPS                                                                              \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28," \
  "%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55," \
  "%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82," \
  "%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107," \
  "%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"
#define FLASHMLA_ACC128(a)                                                                                  \
  FLASHMLA_ACC32_AT(a, 0), FLASHMLA_ACC32_AT(a, 32), FLASHMLA_ACC32_AT(a, 64), FLASHMLA_ACC32_AT(a, 96)
#define FLASHMLA_ACC32_AT(a, o)                                                                              \
  "+f"(a[o + 0]), "+f"(a[o + 1]), "+f"(a[o + 2]), "+f"(a[o + 3]), "+f"(a[o + 4]), "+f"(a[o + 5]), "+f"(a[o + 6]), \
      "+f"(a[o + 7]), "+f"(a[o + 8]), "+f"(a[o + 9]), "+f"(a[o + 10]), "+f"(a[o + 11]), "+f"(a[o + 12]),         \
      "+f"(a[o + 13]), "+f"(a[o + 14]), "+f"(a[o + 15]), "+f"(a[o + 16]), "+f"(a[o + 17]), "+f"(a[o + 18]),      \
      "+f"(a[o + 19]), "+f"(a[o + 20]), "+f"(a[o + 21]), "+f"(a[o + 22]), "+f"(a[o + 23]), "+f"(a[o + 24]),      \
      "+f"(a[o + 25]), "+f"(a[o + 26]), "+f"(a[o + 27]), "+f"(a[o + 28]), "+f"(a[o + 29]), "+f"(a[o + 30]),      \
      "+f"(a[o + 31])
  if constexpr (T::is_fp16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " FLASHMLA_ACC128_OPS
                 ", {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
                 : FLASHMLA_ACC128(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " FLASHMLA_ACC128_OPS
                 ", {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
                 : FLASHMLA_ACC128(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
}

// wgmma.mma_async m64n256k16 with A from shared memory (K-major, e.g. a P tile another warpgroup stored)
// and B read MN-major (imm-trans-b = 1): O += P·V.
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_ss_transb(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (T::is_fp16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " FLASHMLA_ACC128_OPS
                 ", %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : FLASHMLA_ACC128(d)
                 : "l"(desc_a), "l"(desc_b));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " FLASHMLA_ACC128_OPS
                 ", %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : FLASHMLA_ACC128(d)
                 : "l"(desc_a), "l"(desc_b));
  }
}

// wgmma.mma_async m64n128k16, A from shared memory, B read MN-major: half of an m64n256 P·V, into
// accumulator registers d[OFF .. OFF + 63], which hold columns 2·OFF .. 2·OFF + 127 of the m64n256 layout
// (a thread's fragments are ordered by 8-column group). For kernels launched with fewer than 154
// registers per thread: ptxas sizes a wgmma against the launch bound even where setmaxnreg.inc gave the
// warpgroup more, and refuses the m64n256 form below 154 (C7602).
#define FLASHMLA_ACC64_OPS                                                                               \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28," \
  "%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55," \
  "%56,%57,%58,%59,%60,%61,%62,%63}"
template <typename T, int OFF>
__device__ __forceinline__ void wgmma_m64n128k16_ss_transb(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  static_assert(OFF == 0 || OFF == 64, "the left or the right half of the accumulator");
  if constexpr (T::is_fp16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FLASHMLA_ACC64_OPS
                 ", %64, %65, p, 1, 1, 0, 1;\n}\n"
                 : FLASHMLA_ACC32_AT(d, OFF), FLASHMLA_ACC32_AT(d, OFF + 32)
                 : "l"(desc_a), "l"(desc_b));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FLASHMLA_ACC64_OPS
                 ", %64, %65, p, 1, 1, 0, 1;\n}\n"
                 : FLASHMLA_ACC32_AT(d, OFF), FLASHMLA_ACC32_AT(d, OFF + 32)
                 : "l"(desc_a), "l"(desc_b));
  }
}

// The same with A from registers (4 x b32 of 16-bit pairs, as wgmma_m64n256k16_rs_transb).
template <typename T, int OFF>
__device__ __forceinline__ void wgmma_m64n128k16_rs_transb(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b) {
  static_assert(OFF == 0 || OFF == 64, "the left or the right half of the accumulator");
  if constexpr (T::is_fp16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FLASHMLA_ACC64_OPS
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
                 : FLASHMLA_ACC32_AT(d, OFF), FLASHMLA_ACC32_AT(d, OFF + 32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FLASHMLA_ACC64_OPS
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
                 : FLASHMLA_ACC32_AT(d, OFF), FLASHMLA_ACC32_AT(d, OFF + 32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
}

// ---- matrix stores (PTX ISA: stmatrix) ------------------------------------------------------------

// stmatrix.sync.aligned.m8n8.x4.shared.b16: the warp stores four 8x8 16-bit matrices; register i of
// lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix i (an mma accumulator fragment's layout),
// and lane l gives the address of row l%8 of matrix l/8.
__device__ __forceinline__ void stmatrix_x4(uint32_t row_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// The same, .trans: the matrices are stored transposed (lane l gives the address of row l%8 of the
// transpose of matrix l/8, i.e. of its column l%8): P fragments (rows = tokens) into a Pᵀ tile (rows = heads).
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t row_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// ---- register reallocation between warpgroups (PTX ISA §9.7.17.x setmaxnreg) ----------------------

// setmaxnreg.inc / .dec: hand registers from the producer warpgroup to the consumers. Needs a register
// cap at entry (__launch_bounds__(threads, 1)); the totals must fit the CTA's registers or .inc spins.
// The "memory" clobber keeps the compiler from hoisting the roles' common loads above the reallocation,
// which would keep them live across it (and made ptxas spill).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N) : "memory");
}

}  // namespace ptx
