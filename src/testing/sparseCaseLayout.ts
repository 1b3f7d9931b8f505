import { ArgumentError } from "../errors/ArgumentError.js";
import type { Rng } from "../numeric/random.js";

/**
 * Where the tokens of a sparse case live: each request's cache occupies its own blocks of
 * `pageBlockSize` tokens, in a random permutation of the physical blocks, plus one spare block that
 * no request owns (so an all-poison block always exists).
 */
export interface SparseLayout {
  /** Tokens cached per request. */
  seqlens: number[];
  pageBlockSize: number;
  numBlocks: number;
  /** Slot of logical block k of request i: physical[firstBlock[i] + k]. */
  physical: Int32Array;
  firstBlock: number[];
}

/** Lengths of a sparse case: given per request, or all `s_k`, or FlashMLA's varlen draw round(max(N(s_k, s_k/2), 1)). */
export type SparseSeqlens = readonly number[] | { s_k: number; varlen: boolean };

/**
 * Draws the lengths (when not given) and the block permutation of a sparse case from `rng`: the first
 * draws of every sparse case generator, host or GPU, so both lay out the same case alike.
 */
export function drawSparseLayout(rng: Rng, opts: { b: number; seqlens: SparseSeqlens; pageBlockSize: number }): SparseLayout {
  const fn = "drawSparseLayout";
  const { b, pageBlockSize } = opts;
  if (!Number.isInteger(b) || b < 1) throw new ArgumentError(fn, "opts.b", "an integer >= 1", String(b));
  if (!Number.isInteger(pageBlockSize) || pageBlockSize < 1) throw new ArgumentError(fn, "opts.pageBlockSize", "an integer >= 1", String(pageBlockSize));
  let seqlens: number[];
  if (Array.isArray(opts.seqlens)) {
    const given = opts.seqlens as readonly number[];
    if (given.length !== b || given.some((n) => !Number.isInteger(n) || n < 0)) throw new ArgumentError(fn, "opts.seqlens", `${b} integers >= 0`, JSON.stringify(given));
    seqlens = [...given];
  } else {
    const { s_k, varlen } = opts.seqlens as { s_k: number; varlen: boolean };
    if (!Number.isInteger(s_k) || s_k < 0) throw new ArgumentError(fn, "opts.seqlens.s_k", "an integer >= 0", String(s_k));
    seqlens = Array.from({ length: b }, () => (varlen ? Math.round(Math.max(s_k + (s_k / 2) * rng.normal(), 1)) : s_k));
  }
  const blocksOf = seqlens.map((len) => Math.ceil(len / pageBlockSize));
  const numBlocks = blocksOf.reduce((a, n) => a + n, 0) + 1;
  const physical = rng.permutation(numBlocks);
  const firstBlock: number[] = [];
  let next = 0;
  for (let i = 0; i < b; i++) {
    firstBlock.push(next);
    next += blocksOf[i];
  }
  return { seqlens, pageBlockSize, numBlocks, physical, firstBlock };
}

/** Physical token id (block · pageBlockSize + offset) of position `pos` of request `i`. */
export function physicalTokenId(layout: SparseLayout, i: number, pos: number): number {
  const { physical, firstBlock, pageBlockSize } = layout;
  return physical[firstBlock[i] + Math.floor(pos / pageBlockSize)] * pageBlockSize + (pos % pageBlockSize);
}

/** What {@link drawSparseIndices} draws. */
export interface SparseIndexDraw {
  /** [b, s_q, topk] physical token ids, −1 = invalid. */
  indices: Int32Array;
  /** [b], values in [0, topk], when asked for. */
  topkLength: Int32Array | undefined;
  /** [numBlocks · pageBlockSize]: 1 where an entry inside its row's topkLength points at the token. */
  referenced: Uint8Array;
}

/** Options of {@link drawSparseIndices}. */
export interface SparseIndexOptions {
  s_q: number;
  topk: number;
  /** Draw a topkLength [b] from U[0, topk]. */
  topkLength: boolean;
  /** Probability that a filled entry becomes −1. */
  invalidFraction: number;
  /** Probability that a filled entry (after the first) repeats an earlier one of its row. */
  repeat: number;
}

/**
 * FlashMLA's sparse test indices: each row of request i holds min(topk, seqlens[i]) distinct random
 * positions below the request's length, as physical token ids, then −1; on request, some entries
 * repeat earlier ones or become −1. The tokens that entries inside topkLength point at are marked,
 * so generators can poison every other token.
 */
export function drawSparseIndices(rng: Rng, layout: SparseLayout, opts: SparseIndexOptions): SparseIndexDraw {
  const { s_q, topk, invalidFraction, repeat } = opts;
  const b = layout.seqlens.length;
  const fn = "drawSparseIndices";
  if (!Number.isInteger(s_q) || s_q < 1) throw new ArgumentError(fn, "opts.s_q", "an integer >= 1", String(s_q));
  if (!Number.isInteger(topk) || topk < 1) throw new ArgumentError(fn, "opts.topk", "an integer >= 1", String(topk));
  const topkLength = opts.topkLength ? Int32Array.from({ length: b }, () => rng.int(0, topk + 1)) : undefined;
  const indices = new Int32Array(b * s_q * topk).fill(-1); // [b, s_q, topk]
  const referenced = new Uint8Array(layout.numBlocks * layout.pageBlockSize);
  for (let i = 0; i < b; i++) {
    const limit = topkLength?.[i] ?? topk;
    for (let j = 0; j < s_q; j++) {
      const row = (i * s_q + j) * topk;
      const positions = rng.permutation(layout.seqlens[i]);
      const filled = Math.min(topk, layout.seqlens[i]);
      for (let k = 0; k < filled; k++) indices[row + k] = physicalTokenId(layout, i, positions[k]);
      for (let k = 0; k < filled; k++) {
        // What is drawn does not depend on the options, so they do not shift the rest of the stream.
        if (k > 0 && rng.uniform() < repeat) indices[row + k] = indices[row + rng.int(0, k)];
        if (rng.uniform() < invalidFraction) indices[row + k] = -1;
      }
      for (let k = 0; k < limit; k++) if (indices[row + k] >= 0) referenced[indices[row + k]] = 1;
    }
  }
  return { indices, topkLength, referenced };
}

/** FlashMLA's sparse test sinks: about 31% +inf, 31% −inf, the rest N(0,1). */
export function drawAttnSink(rng: Rng, h_q: number): Float32Array {
  return Float32Array.from({ length: h_q }, () => {
    const u = rng.uniform();
    return u < 0.31 ? Infinity : u < 0.62 ? -Infinity : rng.normal();
  });
}
