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
  dense_v1: {
    name: "dense_v1",
    description: "flashMlaWithKvcache: the dense wgmma split-KV kernel with the combine (PDL)",
    kinds: ["dense"],
    run: flashMlaWithKvcache,
  },
});

/** The default implementation of each decode kind. */
export const DEFAULT_BENCH_KERNEL = "dense_v1";

/** Why a case of `kind` cannot be run with `kernel`, or undefined when it can. */
export function benchKernelUnsupported(kernel: BenchKernel, kind: "dense" | "sparse"): string | undefined {
  if (kernel.kinds.includes(kind)) return undefined;
  const others = Object.values(BENCH_KERNELS).filter((k) => k.kinds.includes(kind)).map((k) => k.name);
  if (others.length > 0) return `not available: kernel ${kernel.name} does not do ${kind} decode (try --kernel ${others[0]})`;
  return kind === "sparse" ? "not available: sparse GPU kernel not built yet" : `not available: no ${kind} GPU kernel`;
}
