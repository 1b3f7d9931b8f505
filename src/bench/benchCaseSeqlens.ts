import type { BenchCase } from "./cases.js";
import { Rng } from "../numeric/random.js";

/**
 * The cache length of each request of a benchmark case: the fixed length, the explicit list, or
 * FlashMLA's varlen draw round(max(N(mean, mean/2), s_q)) from a generator seeded with `seed`.
 */
export function benchCaseSeqlens(c: BenchCase, seed: number): number[] {
  const s = c.seqlens;
  switch (s.kind) {
    case "fixed":
      return Array.from({ length: c.b }, () => s.s_k);
    case "list":
      if (s.values.length !== c.b) throw new RangeError(`benchCaseSeqlens(): case ${c.name} lists ${s.values.length} lengths for b = ${c.b}`);
      return [...s.values];
    case "varlen": {
      const rng = new Rng(seed);
      return Array.from({ length: c.b }, () => Math.round(Math.max(s.mean + (s.mean / 2) * rng.normal(), c.s_q)));
    }
    default:
      return s satisfies never;
  }
}
