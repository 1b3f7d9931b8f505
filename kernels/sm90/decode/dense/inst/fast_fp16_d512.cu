// The dense seesaw decode, fast schedule, fp16, d_qk 512 (DeepSeek-V4's head: Q·Kᵀ over tiles 0-7, which
// are also V; kernel.cuh).
#include "../kernel.cuh"

MLA_EXPORT_LAYOUT(mla_params_layout, mla::DenseParams, MLA_OFFSETS_DENSE)

// {dynamic shared memory bytes, threads per CTA, cluster x}: the launch facts the host checks at load.
extern "C" __device__ const int mla_kernel_facts[3] = {mla::dense::SMEM_BYTES, mla::dense::THREADS, 1};

extern "C" __global__ void __launch_bounds__(256, 1) mla_dense_fast_fp16_d512_sm90(const __grid_constant__ mla::DenseParams p) {
  static_assert(mla::dense::THREADS == 256, "__launch_bounds__ above");
  mla::dense::dense_seesaw<ptx::fp16_t, false, mla::V_TILES>(p);
}
