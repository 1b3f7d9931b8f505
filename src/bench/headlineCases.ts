/**
 * The cases `npm start` benchmarks on a Hopper GPU: compute-bound, memory-bound and latency dense
 * cases that take seconds, and one sparse FP8 case per sparse kernel (DeepSeek V3.2's shape at 128,
 * 64 and 16 heads), so the first run shows each main kernel (bf16) the library chooses among.
 */
export const HEADLINE_CASES: readonly string[] = [
  "dense-compute",
  "dense-compute-mtp",
  "dense-mem-h16",
  "dense-mem-h64",
  "dense-b1",
  "dense-uneven",
  "dense-short-h16",
  "sparse-v32",
  "sparse-v32-h64",
  "sparse-h16",
];
