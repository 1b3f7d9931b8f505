// m64: the 64-row consumers without crossover (h_q other than 128 and above 16), bf16 Q and output;
// grid (ceil(h_q / 64), s_q, num_sm_parts).
// DeepSeek-V4's MODEL1 tokens (584 bytes, d_qk 512, V the whole row), a second cache and index list in the
// same softmax (extraKCache).
#include "../kernel.cuh"

MLA_EXPORT_LAYOUT(mla_params_layout, mla::SparseParams, MLA_OFFSETS_SPARSE)

extern "C" __global__ void __launch_bounds__(mla::sparse::THREADS, 1) mla_sparse_m64_model1_extra_sm90(const __grid_constant__ mla::SparseParams p) {
  mla::sparse::decode_m64<mla::sparse::Model1, false, true>(p);
}

// {dynamic shared memory bytes, threads per CTA, cluster x}
extern "C" __device__ const int mla_kernel_facts[3] = {mla::sparse::SMEM_BYTES, mla::sparse::THREADS, 1};
