/**
 * The cases `npm start` benchmarks on a Hopper GPU: the three BENCH.md names as the headline
 * (compute-bound, memory-bound, latency) plus the other dense cases that take seconds, and the sparse
 * FP8 headline case (DeepSeek V3.2's shape).
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
];
