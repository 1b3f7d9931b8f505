import type { BenchCase } from "./cases.js";
import { ArgumentError } from "../errors/ArgumentError.js";
import type { SparseCaseSpec } from "../testing/gpuSparseCase.js";

/** The page size of the benchmark's sparse caches (FlashMLA's benchmark uses 64). */
export const SPARSE_BENCH_PAGE_BLOCK_SIZE = 64;

/**
 * The data of one input set of a sparse benchmark case, as FlashMLA's sparse benchmark draws it:
 * every request's cache at its length, `topk` distinct random indices per query token, attn_sink on,
 * no topkLength, nothing invalid, pages of 64 tokens, blocks back to back.
 */
export function sparseBenchSpec(c: BenchCase, seqlens: readonly number[]): SparseCaseSpec {
  const fn = "sparseBenchSpec";
  if (c.kind !== "sparse" || c.topk === undefined) throw new ArgumentError(fn, "c", "a sparse case with a topk", `${c.kind} case ${c.name}`);
  if (c.model1 !== undefined) throw new ArgumentError(fn, "c", "a V3.2 sparse case", `MODEL1 case ${c.name}`);
  if (seqlens.length !== c.b) throw new ArgumentError(fn, "seqlens", `${c.b} lengths`, `${seqlens.length}`);
  return { b: c.b, s_q: c.s_q, h_q: c.h_q, topk: c.topk, seqlens, pageBlockSize: SPARSE_BENCH_PAGE_BLOCK_SIZE, withSink: true, withTopkLength: false };
}
