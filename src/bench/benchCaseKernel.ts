import { chooseKernel } from "../mla/chooseKernel.js";
import type { KernelName } from "../mla/contract/kernelRegistry.js";
import type { DecodeOverrides } from "../mla/flashMlaWithKvcache.js";
import { benchCaseSeqlens } from "./benchCaseSeqlens.js";
import type { BenchCase } from "./cases.js";

/** The main kernel a bench case names: a registry kernel. */
export type BenchKernel = KernelName;

/**
 * The main kernel that serves bench case `c`: flashMlaWithKvcache's choice for its shape and cache format
 * (a DeepSeek-V4 case reads the MODEL1 cache: sparse_h16x_model1 at up to 16 heads, sparse_h128x_model1
 * at 128, sparse_m64_model1 otherwise, each with `_extra` where the case has a second cache), or the one
 * `overrides` force (runBenchCase reports a forced plan the head count does not fit as not available).
 */
export function benchCaseKernel(c: BenchCase, overrides: DecodeOverrides = {}, seed = 1): BenchKernel {
  // A dense case's form depends on its block table's width: its longest request as runBenchCase draws it.
  if (c.kind === "dense") return chooseKernel({ ...c, maxLen: Math.max(...benchCaseSeqlens(c, seed)) }, overrides);
  if (c.model1 === undefined) return chooseKernel(c, overrides);
  return chooseKernel({ kind: c.kind, b: c.b, s_q: c.s_q, h_q: c.h_q, format: "MODEL1", extra: c.model1.extra !== undefined }, overrides);
}
