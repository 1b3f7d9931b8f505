import { chooseKernel } from "../mla/chooseKernel.js";
import type { KernelName } from "../mla/contract/kernelRegistry.js";
import type { DecodeOverrides } from "../mla/flashMlaWithKvcache.js";
import type { BenchCase } from "./cases.js";

/** The main kernel a bench case names: a registry kernel, or "none" where no kernel serves the case yet. */
export type BenchKernel = KernelName | "none";

/**
 * The main kernel that serves bench case `c`: flashMlaWithKvcache's choice for its shape, or the one
 * `overrides` force; "none" for a DeepSeek-V4 (MODEL1) case, which no decode kernel serves yet
 * (docs/deepseek-v4.md).
 */
export function benchCaseKernel(c: BenchCase, overrides: DecodeOverrides = {}): BenchKernel {
  return c.model1 !== undefined ? "none" : chooseKernel(c, overrides);
}
