// The log-sum-exp merge of one row's split partials (FLASHMLA.md §2.3), shared by the combine and by the
// seesaw kernels' in-kernel merge of a request's two pieces: one formula in one order, so a pair merged
// either way gives the same bits (denseDecode.test checks it).
#pragma once

namespace mla {

// The combine merges a row of at most this many splits from one array of lse2 values (merge_rows), the
// missing ones -inf; the seesaw kernels merge a pair with the same array, so the sums match bit for bit.
constexpr int FEW_SPLITS = 3;

// G from the splits' maximum m and Σ_s 2^(lse2_s - m): +inf when every split was empty (sum 0).
__device__ __forceinline__ float lse2_of_sum(float m, float sum) { return sum == 0.0f ? INFINITY : __log2f(sum) + m; }

// G = log2 Σ_s 2^(lse2_s) over the N splits' lse2 (base 2, -inf for an empty split): +inf when every
// split is empty (`sum` is then 0 and out is 0). A NaN split makes G NaN.
template <int N>
__device__ __forceinline__ float merged_lse2(const float (&lse2)[N], float& sum) {
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < N; ++i) m = fmaxf(m, lse2[i]);
  if (m == -INFINITY) m = 0.0f;  // every split empty: the sum below is 0
  sum = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) sum += exp2f(lse2[i] - m);
  return lse2_of_sum(m, sum);
}

}  // namespace mla
