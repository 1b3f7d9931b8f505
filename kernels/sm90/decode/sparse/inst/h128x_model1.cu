// h128x: h_q = 128, the two 64-head CTAs of a query token in a (2, 1, 1) cluster, each dequantizing half
// of every block for both; bf16 Q and output. Grid (2, s_q, num_sm_parts).
// DeepSeek-V4's MODEL1 tokens (584 bytes, d_qk 512, V the whole row), one cache.
#include "../kernel.cuh"

MLA_EXPORT_LAYOUT(mla_params_layout, mla::SparseParams, MLA_OFFSETS_SPARSE)

extern "C" __global__ void __launch_bounds__(mla::sparse::THREADS, 1) mla_sparse_h128x_model1_sm90(const __grid_constant__ mla::SparseParams p) {
  mla::sparse::decode_m64<mla::sparse::Model1, true, false>(p);
}

// {dynamic shared memory bytes, threads per CTA, cluster x}
extern "C" __device__ const int mla_kernel_facts[3] = {mla::sparse::SMEM_BYTES, mla::sparse::THREADS, 2};
