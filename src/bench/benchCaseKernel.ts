import { ArgumentError } from "../errors/ArgumentError.js";
import { chooseKernel } from "../mla/chooseKernel.js";
import type { KernelName } from "../mla/contract/kernelRegistry.js";
import type { DecodeOverrides } from "../mla/flashMlaWithKvcache.js";
import { benchCaseSeqlens } from "./benchCaseSeqlens.js";
import type { BenchCase } from "./cases.js";

/** The main kernel a bench case names: a registry kernel, or "none" where no kernel can serve the case. */
export type BenchKernel = KernelName | "none";

/**
 * The main kernel that serves bench case `c`: flashMlaWithKvcache's choice for its shape and cache format
 * (a DeepSeek-V4 case reads the MODEL1 cache: sparse_m64_model1, or sparse_h128x_model1 at 128 heads, each
 * with `_extra` where the case has a second cache), or
 * the one `overrides` force; "none" for a forced plan that has no kernel for the format (sparseKernelName
 * refuses it: h16x over MODEL1).
 */
export function benchCaseKernel(c: BenchCase, overrides: DecodeOverrides = {}, seed = 1): BenchKernel {
  // A dense case's form depends on its block table's width: its longest request as runBenchCase draws it.
  if (c.kind === "dense") return chooseKernel({ ...c, maxLen: Math.max(...benchCaseSeqlens(c, seed)) }, overrides);
  if (c.model1 === undefined) return chooseKernel(c, overrides);
  try {
    return chooseKernel({ kind: c.kind, b: c.b, s_q: c.s_q, h_q: c.h_q, format: "MODEL1", extra: c.model1.extra !== undefined }, overrides);
  } catch (e) {
    if (e instanceof ArgumentError && overrides.sparsePlan !== undefined) return "none";
    throw e;
  }
}
