/**
 * The causal mask of a DCP decode with s_q > 1. It is defined in GLOBAL positions: with a request of
 * global length S, query token j (0-based, of s_q) sees the positions p < S − (s_q − 1 − j). On one
 * rank that is a count of local tokens, which the dense kernel can take as a plain length, as its own
 * causal mask, or only row by row.
 */
import { ArgumentError, describeValue } from "../errors/ArgumentError.js";
import { checkTypedArray } from "../numeric/checkArrayArgument.js";
import { checkLayout, checkLengths, checkRank, intAtLeast, localLength } from "./shard.js";

/** The query shape and the rank: what both {@link dcpVisibleLengths} and {@link dcpCausalForm} take. */
export interface DcpQueryRank {
  /** Query tokens per request (s_q ≥ 1). */
  sQ: number;
  /** This rank, in [0, ranks). */
  rank: number;
  /** Number of DCP ranks N (≥ 1). */
  ranks: number;
  /** Tokens per run dealt to one rank (≥ 1). */
  interleave: number;
}

/** Options of {@link dcpVisibleLengths}. */
export interface DcpVisibleLengthsOptions extends DcpQueryRank {
  /** Global length S of the request. */
  globalLength: number;
}

/**
 * [s_q] the number of rank `rank`'s tokens that query token j sees under the global causal mask: its
 * tokens with global position below max(0, S − (s_q − 1 − j)). Closed form, no walk over the tokens.
 *
 * @example
 * dcpVisibleLengths({ globalLength: 10, sQ: 2, rank: 1, ranks: 2, interleave: 1 }); // Int32Array [4, 5]
 */
export function dcpVisibleLengths(opts: DcpVisibleLengthsOptions): Int32Array {
  const fn = "dcpVisibleLengths";
  const { globalLength, sQ, rank, ranks, interleave } = checkQueryRank(fn, opts);
  intAtLeast(fn, "globalLength", globalLength, 0);
  return visibleOf(globalLength, sQ, rank, ranks, interleave);
}

/**
 * How one rank runs its causal shard with the dense kernel:
 * - `"nonCausal"`: every query token sees all local tokens: causal = false with `localSeqlens`.
 * - `"causal"`: query token j sees localSeqlens[i] − (s_q − 1 − j) tokens (at least 0) for every
 *   request: the kernel's own causal mask with `localSeqlens`.
 * - `"flatten"`: neither; run b·s_q rows of s_q = 1, row i·s_q + j with length visibleLengths[i·s_q + j].
 */
export type DcpCausalFormName = "nonCausal" | "causal" | "flatten";

/** What {@link dcpCausalForm} returns. */
export interface DcpCausalForm {
  form: DcpCausalFormName;
  /** [b] tokens of each request on this rank. */
  localSeqlens: Int32Array;
  /** [b, s_q] local tokens that query token j of request i sees (whatever the form). */
  visibleLengths: Int32Array;
}

/** Options of {@link dcpCausalForm}. */
export interface DcpCausalFormOptions extends DcpQueryRank {
  /** [b] global length of each request. */
  cacheSeqlens: Int32Array;
}

/**
 * Decides how rank `rank` decodes a causal batch (see {@link DcpCausalFormName}); "nonCausal" wins when
 * both plain forms fit (s_q = 1, or a rank whose tokens all lie before every query's limit). A
 * non-causal decode needs none of this: each rank runs causal = false with its local lengths.
 *
 * @example
 * const { form, localSeqlens } = dcpCausalForm({ cacheSeqlens, sQ: 2, rank, ranks: 4, interleave: 64 });
 */
export function dcpCausalForm(opts: DcpCausalFormOptions): DcpCausalForm {
  const fn = "dcpCausalForm";
  const { sQ, rank, ranks, interleave } = checkQueryRank(fn, opts);
  const cacheSeqlens = checkLengths(fn, "cacheSeqlens", opts.cacheSeqlens);
  const b = cacheSeqlens.length;

  const localSeqlens = cacheSeqlens.map((len) => localLength(len, rank, ranks, interleave));
  const visibleLengths = new Int32Array(b * sQ); // [b, s_q]
  let nonCausal = true;
  let causal = true;
  for (let i = 0; i < b; i++) {
    visibleLengths.set(visibleOf(cacheSeqlens[i], sQ, rank, ranks, interleave), i * sQ);
    for (let j = 0; j < sQ; j++) {
      const visible = visibleLengths[i * sQ + j];
      if (visible !== localSeqlens[i]) nonCausal = false;
      if (visible !== Math.max(0, localSeqlens[i] - (sQ - 1 - j))) causal = false;
    }
  }
  const form: DcpCausalFormName = nonCausal ? "nonCausal" : causal ? "causal" : "flatten";
  return { form, localSeqlens, visibleLengths };
}

/**
 * The block table of the "flatten" form: [b, max_blocks] → [b·s_q, max_blocks], row i·s_q + j a copy of
 * row i. With it, q viewed as [b·s_q, 1, h_q, d_qk] and cacheSeqlens = visibleLengths, one s_q = 1 decode
 * gives out as [b·s_q, 1, h_q, 512] (the same memory as [b, s_q, h_q, 512]) and lse as [b·s_q, h_q, 1],
 * whose element (i·s_q + j, h) is element (i, h, j) of the [b, h_q, s_q] lse.
 */
export function dcpFlattenBlockTable(blockTable: Int32Array, b: number, sQ: number): Int32Array {
  const fn = "dcpFlattenBlockTable";
  checkTypedArray(fn, "blockTable", blockTable, Int32Array, "page ids [b, max_blocks]");
  intAtLeast(fn, "b", b, 1);
  intAtLeast(fn, "sQ", sQ, 1);
  if (blockTable.length % b !== 0) throw new ArgumentError(fn, "blockTable", `[b=${b}, max_blocks]: a multiple of ${b} entries`, `${blockTable.length}`);
  const cols = blockTable.length / b;
  const flat = new Int32Array(b * sQ * cols); // [b·s_q, max_blocks]
  for (let i = 0; i < b; i++) {
    const row = blockTable.subarray(i * cols, (i + 1) * cols);
    for (let j = 0; j < sQ; j++) flat.set(row, (i * sQ + j) * cols);
  }
  return flat;
}

/** Checks the options object and its {@link DcpQueryRank} fields. */
function checkQueryRank<T extends DcpQueryRank>(fn: string, opts: T): T {
  if (opts === null || typeof opts !== "object") throw new ArgumentError(fn, "opts", "an options object", describeValue(opts));
  checkLayout(fn, opts.ranks, opts.interleave);
  checkRank(fn, opts.rank, opts.ranks);
  intAtLeast(fn, "sQ", opts.sQ, 1);
  return opts;
}

/** {@link dcpVisibleLengths} on checked arguments. */
function visibleOf(globalLength: number, sQ: number, rank: number, ranks: number, interleave: number): Int32Array {
  return Int32Array.from({ length: sQ }, (_, j) => localLength(Math.max(0, globalLength - (sQ - 1 - j)), rank, ranks, interleave));
}
