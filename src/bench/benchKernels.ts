import { flashMlaWithKvcache, type FlashMlaResult, type FlashMlaWithKvcacheArgs } from "../mla/flashMlaWithKvcache.js";

/** One implementation the benchmark and `flashmla check` can run; all share flashMlaWithKvcache's signature. */
export interface BenchKernel {
  name: string;
  description: string;
  /** Which decode the implementation does: dense (paged bf16/fp16 cache) or sparse (FP8 cache, indices). */
  kinds: ReadonlyArray<"dense" | "sparse">;
  run(args: FlashMlaWithKvcacheArgs): FlashMlaResult;
}

/**
 * The implementations by name (`flashmla bench --kernel NAME`), so comparing two kernels is one flag.
 * A new kernel is one entry here.
 */
export const BENCH_KERNELS: Readonly<Record<string, BenchKernel>> = Object.freeze({
  dense_seesaw: {
    name: "dense_seesaw",
    description: "flashMlaWithKvcache, kernel \"seesaw\": two warpgroups share one online softmax (FlashMLA's schedule), then the combine",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "seesaw" }),
  },
  dense_seesaw_fast: {
    name: "dense_seesaw_fast",
    description: "flashMlaWithKvcache, kernel \"seesaw_fast\": the seesaw with warp-uniform fast paths (no masks in full blocks, no rescale by 1); experimental",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "seesaw_fast" }),
  },
  dense_v1: {
    name: "dense_v1",
    description: "flashMlaWithKvcache, kernel \"v1\": the first wgmma split-KV kernel, then the combine",
    kinds: ["dense"],
    run: (args: FlashMlaWithKvcacheArgs) => flashMlaWithKvcache({ ...args, kernel: "v1" }),
  },
});

/** The implementation the commands use unless told otherwise: flashMlaWithKvcache's default kernel. */
export const DEFAULT_BENCH_KERNEL = "dense_seesaw";

/** Why a case of `kind` cannot be run with `kernel`, or undefined when it can. */
export function benchKernelUnsupported(kernel: BenchKernel, kind: "dense" | "sparse"): string | undefined {
  if (kernel.kinds.includes(kind)) return undefined;
  const others = Object.values(BENCH_KERNELS).filter((k) => k.kinds.includes(kind)).map((k) => k.name);
  if (others.length > 0) return `not available: kernel ${kernel.name} does not do ${kind} decode (try --kernel ${others[0]})`;
  return kind === "sparse" ? "not available: sparse GPU kernel not built yet" : `not available: no ${kind} GPU kernel`;
}
