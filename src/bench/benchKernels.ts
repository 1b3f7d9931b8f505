import { flashMlaWithKvcache, H16_MAX_ROWS, SPARSE_DEFAULT, type FlashMlaResult, type FlashMlaWithKvcacheArgs } from "../mla/flashMlaWithKvcache.js";
import { sparseDecodeGpu } from "../mla/sparseDecodeGpu.js";

/** Which decode a case or an implementation does: dense (paged bf16/fp16 cache) or sparse (FP8 cache, indices). */
export type DecodeKind = "dense" | "sparse";

/** One implementation the benchmark and `flashmla check` can run; all share flashMlaWithKvcache's signature. */
export interface BenchKernel {
  name: string;
  description: string;
  kinds: readonly DecodeKind[];
  /** The query head counts it runs, when it does not run every count its kinds allow. */
  headCounts?: readonly number[];
  /** The most query rows per KV head (s_q · h_q / h_kv) it runs, when it is limited. */
  maxRowsPerKv?: number;
  /**
   * Sparse kernels: whether the CTAs of a query token share each token's dequantization (the
   * crossover rows of the seed's cycle budget): always, never, or "h128" where h_q = 128.
   */
  crossover?: boolean | "h128";
  /** Sparse kernels: the kernel that differs from this one only by crossover (for the measured crossover gain). */
  crossoverPartner?: string;
  run(args: FlashMlaWithKvcacheArgs): FlashMlaResult;
}

/** The entry below that runs sparseDecodeGpu with this producer, with or without crossover. */
function sparseKernelName(crossover: boolean, producer: "v1" | "v2" | "v3"): string {
  if (producer === "v1") return crossover ? "sparse_crossover" : "sparse_v1";
  if (producer === "v2") return crossover ? "sparse_crossover_v2" : "sparse_v2";
  return crossover ? "sparse_crossover_v3" : "sparse_v3";
}

/**
 * The implementations by name (`flashmla bench --kernel NAME`), so comparing two kernels is one flag.
 * A new kernel is one entry here. `sparse` is flashMlaWithKvcache's own choice (SPARSE_DEFAULT); the
 * others force a producer and whether crossover runs.
 */
export const BENCH_KERNELS: Readonly<Record<string, BenchKernel>> = Object.freeze({
  dense: {
    name: "dense",
    description: "flashMlaWithKvcache's own choice (defaultDenseKernel): seesaw_pipe for compute-bound batches (≥ 128 rows per KV head, b ≥ 16), else seesaw_fast; the default",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache(args),
  },
  dense_combine: {
    name: "dense_combine",
    description: "flashMlaWithKvcache's own choice with mergeSplitPairs false: every split request, pairs included, merged by the combine (the form before the main kernel merged pairs itself)",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, mergeSplitPairs: false }),
  },
  dense_seesaw: {
    name: "dense_seesaw",
    description: "flashMlaWithKvcache, kernel \"seesaw\": two warpgroups share one online softmax (FlashMLA's schedule), then the combine",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "seesaw" }),
  },
  dense_seesaw_fast: {
    name: "dense_seesaw_fast",
    description: "flashMlaWithKvcache, kernel \"seesaw_fast\": the seesaw with warp-uniform fast paths (no masks in full blocks, no rescale by 1), bit-identical outputs; the default for memory-bound and latency shapes",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "seesaw_fast" }),
  },
  dense_seesaw_mc: {
    name: "dense_seesaw_mc",
    description: "flashMlaWithKvcache, kernel \"seesaw_mc\": seesaw_pipe with each K tile multicast by TMA to the two m-block CTAs of a cluster, issued by rank 1 once both CTAs freed it (odd m-block counts run seesaw_pipe); experimental: 2.9 % slower than seesaw_pipe at dense-compute (H200)",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "seesaw_mc" }),
  },
  dense_seesaw_pipe: {
    name: "dense_seesaw_pipe",
    description: "flashMlaWithKvcache, kernel \"seesaw_pipe\": seesaw_fast with FlashMLA's rotated loop (each warpgroup queues its next Q·Kᵀ behind its last P·V; W1's P·V first; max published before the exponentials); the default for compute-bound batches",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "seesaw_pipe" }),
  },
  dense_h16: {
    name: "dense_h16",
    description: "flashMlaWithKvcache, kernel \"h16\": at most 16 query rows per KV head, the block's tokens as wgmma's M and the rows as N (a quarter of the seesaw's tensor work); experimental (its GPU test passes on the H200)",
    kinds: ["dense"],
    maxRowsPerKv: H16_MAX_ROWS,
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "h16" }),
  },
  dense_v1: {
    name: "dense_v1",
    description: "flashMlaWithKvcache, kernel \"v1\": the first wgmma split-KV kernel, then the combine",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "v1" }),
  },
  sparse: {
    name: "sparse",
    description: `flashMlaWithKvcache with indices: producer ${SPARSE_DEFAULT.producer ?? "v3"}, crossover where h_q = 128, h16x where h_q <= 16 (SPARSE_DEFAULT); the default`,
    kinds: ["sparse"],
    crossover: SPARSE_DEFAULT.crossover ?? false,
    crossoverPartner: "sparse_v3",
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache(args),
  },
  sparse_v1: {
    name: "sparse_v1",
    description: "sparseDecodeGpu: one producer warpgroup gathers and dequantizes the FP8 tokens for two consumer warpgroups, split-KV, then the combine with the sink",
    kinds: ["sparse"],
    crossover: false,
    crossoverPartner: "sparse_crossover",
    run: (args: FlashMlaWithKvcacheArgs) => sparseDecodeGpu(args, { crossover: false, producer: "v1" }),
  },
  sparse_crossover: {
    name: "sparse_crossover",
    description: "sparseDecodeGpu with crossover: the two 64-head CTAs of a query token form a cluster, each dequantizes half of every block and sends it to the other",
    kinds: ["sparse"],
    headCounts: [128],
    crossover: true,
    crossoverPartner: "sparse_v1",
    run: (args: FlashMlaWithKvcacheArgs) => sparseDecodeGpu(args, { crossover: true, producer: "v1" }),
  },
  sparse_v2: {
    name: "sparse_v2",
    description: "sparseDecodeGpu with the second producer (a warp takes 8 tokens, 64 contiguous bytes of each per load, every load of a block in flight); 438 µs at sparse-v32 on the H200 (v1: 778)",
    kinds: ["sparse"],
    crossover: false,
    crossoverPartner: "sparse_crossover_v2",
    run: (args: FlashMlaWithKvcacheArgs) => sparseDecodeGpu(args, { crossover: false, producer: "v2" }),
  },
  sparse_crossover_v2: {
    name: "sparse_crossover_v2",
    description: "sparse_crossover with the second producer; 445 µs at sparse-v32 on the H200 (plain v2: 443)",
    kinds: ["sparse"],
    headCounts: [128],
    crossover: true,
    crossoverPartner: "sparse_v2",
    run: (args: FlashMlaWithKvcacheArgs) => sparseDecodeGpu(args, { crossover: true, producer: "v2" }),
  },
  sparse_v3: {
    name: "sparse_v3",
    description: "sparseDecodeGpu with producer v3: the v2 producer in two warpgroups of a 512-thread CTA (the API default where h_q < 128); 404 µs at sparse-v32 on the H200 (v2: 443)",
    kinds: ["sparse"],
    crossover: false,
    crossoverPartner: "sparse_crossover_v3",
    run: (args: FlashMlaWithKvcacheArgs) => sparseDecodeGpu(args, { crossover: false, producer: "v3" }),
  },
  sparse_crossover_v3: {
    name: "sparse_crossover_v3",
    description: "sparse_crossover with producer v3 (its two warpgroups split the dims of the CTA's half; the API default at h_q = 128); 384 µs at sparse-v32 on the H200 (plain v3: 404)",
    kinds: ["sparse"],
    headCounts: [128],
    crossover: true,
    crossoverPartner: "sparse_v3",
    run: (args: FlashMlaWithKvcacheArgs) => sparseDecodeGpu(args, { crossover: true, producer: "v3" }),
  },
  sparse_h16: {
    name: "sparse_h16",
    description: "sparseDecodeGpu with the h16 consumer (tokens as wgmma's M, the heads as N; h_q <= 16) and producer v3, forced (the default at h_q <= 16 before h16x)",
    kinds: ["sparse"],
    headCounts: [8, 16],
    crossover: false,
    run: (args: FlashMlaWithKvcacheArgs) => sparseDecodeGpu(args, { crossover: false, producer: "v3", h16: true }),
  },
  sparse_h16x: {
    name: "sparse_h16x",
    description: "sparseDecodeGpu with h16x (h_q <= 16): tokens by bulk copy, the FP8 bytes converted by two consumer warpgroups into wgmma's register operands, forced (`sparse` picks it where h_q <= 16)",
    kinds: ["sparse"],
    headCounts: [8, 16],
    crossover: false,
    run: (args: FlashMlaWithKvcacheArgs) => sparseDecodeGpu(args, { crossover: false, producer: "v3", h16x: true }),
  },
});

/** The implementation the commands use for dense cases unless told otherwise: flashMlaWithKvcache's default kernel. */
export const DEFAULT_BENCH_KERNEL = "dense";

/** The implementation each kind of case gets unless `--kernel` names one. */
export const DEFAULT_BENCH_KERNELS: Readonly<Record<DecodeKind, string>> = Object.freeze({ dense: DEFAULT_BENCH_KERNEL, sparse: "sparse" });

/** The default implementation for cases of `kind`. */
export function defaultBenchKernel(kind: DecodeKind): BenchKernel {
  return BENCH_KERNELS[DEFAULT_BENCH_KERNELS[kind]];
}

/** Why a case of this kind and head count cannot be run with `kernel` ("not available: ..."), or undefined when it can. */
export function benchKernelUnsupported(kernel: BenchKernel, c: { kind: DecodeKind; h_q: number; s_q?: number; h_kv?: number }): string | undefined {
  if (!kernel.kinds.includes(c.kind)) {
    const others = Object.values(BENCH_KERNELS).filter((k) => k.kinds.includes(c.kind)).map((k) => k.name);
    if (others.length > 0) return `not available: kernel ${kernel.name} does not do ${c.kind} decode (try --kernel ${DEFAULT_BENCH_KERNELS[c.kind] ?? others[0]})`;
    return `not available: no ${c.kind} GPU kernel`;
  }
  if (kernel.headCounts !== undefined && !kernel.headCounts.includes(c.h_q)) {
    const why = kernel.crossover === true ? " (a cluster of the two 64-head CTAs of a query token)" : "";
    return `not available: kernel ${kernel.name} runs h_q = ${kernel.headCounts.join(" or ")} only${why}; this case has h_q = ${c.h_q}`;
  }
  const rows = ((c.s_q ?? 1) * c.h_q) / (c.h_kv ?? 1);
  if (kernel.maxRowsPerKv !== undefined && rows > kernel.maxRowsPerKv) {
    return `not available: kernel ${kernel.name} runs at most ${kernel.maxRowsPerKv} query rows per KV head (s_q · h_q / h_kv); this case has ${rows}`;
  }
  return undefined;
}
