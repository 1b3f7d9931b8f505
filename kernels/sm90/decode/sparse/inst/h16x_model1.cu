// h16x: h_q <= 16, tokens as wgmma's M and heads as N, the consumers converting FP8 themselves; bf16 Q and
// output. Grid (1, s_q, num_sm_parts).
// MODEL1 FP8 tokens (DeepSeek-V4: 584 bytes, the scales in the page's footer), one cache.
#include "../kernel.cuh"

MLA_EXPORT_LAYOUT(mla_params_layout, mla::SparseParams, MLA_OFFSETS_SPARSE)

extern "C" __global__ void __launch_bounds__(mla::sparse::THREADS, 1) mla_sparse_h16x_model1_sm90(const __grid_constant__ mla::SparseParams p) {
  mla::sparse::decode_h16x<mla::sparse::Model1, false>(p);
}

// {dynamic shared memory bytes, threads per CTA, cluster x}
extern "C" __device__ const int mla_kernel_facts[3] = {mla::sparse::h16x::smem_bytes<mla::sparse::Model1>, mla::sparse::THREADS, 1};
