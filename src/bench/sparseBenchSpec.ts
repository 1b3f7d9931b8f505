import { meanCacheLength, type BenchCase } from "./cases.js";
import { ArgumentError } from "../errors/ArgumentError.js";
import type { SparseCaseSpec } from "../testing/gpuSparseCase.js";
import type { Model1CaseSpec } from "../testing/model1Case.js";

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

/**
 * The recipe of one input set of a DeepSeek-V4 (MODEL1) benchmark case, as FlashMLA's MODEL1 test draws
 * it (makeGpuModel1Case with a seed): per cache its own lengths around the case's mean (varlen) or all at
 * it (fixed), its page size, `topk` distinct random positions per query row; the extra cache's valid
 * lengths U[0, extra topk] where the case asks; sinks as the case says; nothing invalid, no main valid
 * lengths.
 */
export function model1BenchSpec(c: BenchCase): Model1CaseSpec {
  const fn = "model1BenchSpec";
  const m = c.model1;
  if (c.kind !== "sparse" || c.topk === undefined || m === undefined) throw new ArgumentError(fn, "c", "a MODEL1 sparse case with a topk", `${c.kind} case ${c.name}`);
  if (c.seqlens.kind === "list") throw new ArgumentError(fn, "c.seqlens", "fixed or varlen lengths (a MODEL1 case draws its own per cache)", `a list (case ${c.name})`);
  return {
    b: c.b,
    s_q: c.s_q,
    h_q: c.h_q,
    topk: c.topk,
    s_k: meanCacheLength(c.seqlens),
    varlen: c.seqlens.kind === "varlen",
    pageBlockSize: m.pageBlockSize,
    ...(m.extra !== undefined ? { extra: { ...m.extra } } : {}),
    sink: m.attnSink,
  };
}
