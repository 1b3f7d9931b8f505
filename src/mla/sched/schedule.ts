/**
 * The tile scheduler (FLASHMLA.md §2.1-2.2), CPU twin of kernels/decode/sched_meta.cu: same
 * algorithm, same records, so tests can compare the GPU's metadata with this one and both with the
 * invariants in `checkSchedule`. The sparse path reuses it on the lengths of `sparseScheduleLengths`.
 */
import { ArgumentError } from "../../errors/ArgumentError.js";
import { BLOCK_M, BLOCK_N, SCHED_META_INTS, SPARSE_HEADS_PER_CTA } from "../contract/shape.js";
/**
 * Each piece of work also costs this many blocks (prologue, Q load, epilogue, combine) when the parts
 * are balanced: FlashMLA's value, which the sparse path keeps.
 */
export const SCHED_FIXED_OVERHEAD = 5;
/**
 * The dense path's per-piece cost. Traced on the H200 at dense-compute (docs/dense-decode.md): a
 * part of 248 blocks in three pieces took 797 k cycles and one of 253 blocks in two 787 k, so a piece
 * costs ~24 k cycles, ~8 blocks of ~2.9 k (the Q load, the epilogue, and the merge or the combine of
 * the split request's partials). With 5, 62 of dense-compute's 128 requests were cut in two; with 8
 * none is (two whole requests a part, 64 parts), and the call takes 454 µs against 466.
 */
export const DENSE_SCHED_FIXED_OVERHEAD = 8;

/** One SM part's slice: requests begin..end (inclusive), blocks [beginBlock of the first, endBlock of the last). */
export interface SchedPart {
  beginReq: number;
  endReq: number;
  beginBlock: number;
  endBlock: number;
  beginSplit: number;
  firstSplitted: boolean;
  lastSplitted: boolean;
}

export interface Schedule {
  /** [numSmParts, 8] int32 records (the layout of params.h SchedMeta). */
  schedMeta: Int32Array;
  /** [b + 1] prefix sum: request i owns accumulator slots [numSplits[i], numSplits[i+1]). */
  numSplits: Int32Array;
}

/** KV blocks a request costs; an empty request still costs one (its CTA writes out 0 and lse +inf). */
export function numKvBlocks(seqlen: number): number {
  return seqlen <= 0 ? 1 : Math.ceil(seqlen / BLOCK_N);
}

/** FlashMLA's dense part count: about one CTA per SM over the (m-block, kv head) grid. */
export function numSmPartsDense(smCount: number, s_q: number, h_q: number, h_kv: number): number {
  const numMBlocks = Math.ceil((s_q * h_q) / h_kv / BLOCK_M);
  return Math.max(Math.floor(smCount / h_kv / numMBlocks), 1);
}

/**
 * FlashMLA's sm90 sparse part count, `max(SMs / s_q / (h_q / 64), 1)`: one CTA column per query token
 * and per 64-head tile, about one CTA per SM in all. For h_q < 64 (8, 16, 32, which FlashMLA does not
 * run) the kernel still computes one 64-row tile with the rows past h_q masked, so the tile count is
 * ceil(h_q / 64) = 1 where FlashMLA's integer h_q / 64 would be 0.
 */
export function numSmPartsSparse(smCount: number, s_q: number, h_q: number): number {
  const numHeadTiles = Math.ceil(h_q / SPARSE_HEADS_PER_CTA);
  return Math.max(Math.floor(Math.floor(smCount / s_q) / numHeadTiles), 1);
}

/**
 * The per-request lengths the scheduler balances on the sparse path (FLASHMLA.md §2.2): request i
 * attends the first `topkLength[i]` entries of each index row, or all `topk` without topkLength. A
 * value is clamped to [0, topk] (the kernel never reads past an index row). With a second index list
 * (DeepSeek-V4's extra cache) the request's walk is the main list padded to whole 64-entry blocks, then
 * the extra list's clamped length. Then 0 is raised to 1 as FlashMLA does, so an empty request still
 * gets the one block whose CTA writes out 0 and lse +inf. Blocks are then 64 consecutive index
 * entries, not 64 cache tokens.
 *
 * @param b - number of requests; needed only without topkLength (with it, it must match).
 * @param extra - the second list: its topk and optional valid lengths.
 * @example computeSchedule(sparseScheduleLengths(2048, undefined, 128), numSmPartsSparse(132, 2, 128))
 */
export function sparseScheduleLengths(
  topk: number,
  topkLength?: ArrayLike<number>,
  b: number | undefined = topkLength?.length,
  extra?: { topk: number; topkLength?: ArrayLike<number> },
): Int32Array {
  const fn = "sparseScheduleLengths";
  if (!Number.isSafeInteger(topk) || topk < 1) throw new ArgumentError(fn, "topk", "an integer >= 1", String(topk));
  if (b === undefined || !Number.isSafeInteger(b) || b < 1) throw new ArgumentError(fn, "b", "an integer >= 1 (or topkLength)", String(b));
  const clamped = (name: string, lengths: ArrayLike<number> | undefined, max: number): ((i: number) => number) => {
    if (lengths === undefined) return () => max;
    if (lengths.length !== b) throw new ArgumentError(fn, name, `${b} lengths (one per request)`, `${lengths.length}`);
    for (let i = 0; i < b; i++) {
      if (!Number.isInteger(lengths[i])) throw new ArgumentError(fn, name, "integers", `${name}[${i}] = ${lengths[i]}`);
    }
    return (i) => Math.min(Math.max(lengths[i], 0), max);
  };
  const main = clamped("topkLength", topkLength, topk);
  let second: ((i: number) => number) | undefined;
  if (extra !== undefined) {
    if (!Number.isSafeInteger(extra.topk) || extra.topk < 1) throw new ArgumentError(fn, "extra.topk", "an integer >= 1", String(extra.topk));
    second = clamped("extra.topkLength", extra.topkLength, extra.topk);
  }
  const lengths = new Int32Array(b);
  for (let i = 0; i < b; i++) {
    const len = second === undefined ? main(i) : BLOCK_N * Math.ceil(main(i) / BLOCK_N) + second(i);
    lengths[i] = Math.max(len, 1);
  }
  return lengths;
}

/** Accumulator slots the split partials can need: every request once, plus one per part boundary. */
export function numSplitSlots(b: number, numSmParts: number): number {
  return b + numSmParts;
}

/**
 * Cuts the requests' KV blocks into `numSmParts` parts of about equal cost, where every piece also costs
 * `fixedOverhead` blocks (the scheduler kernel's algorithm and records).
 *
 * @param fixedOverhead - per-piece cost in blocks, an integer >= 1: SCHED_FIXED_OVERHEAD (FlashMLA's,
 *   the sparse path's; the default) or DENSE_SCHED_FIXED_OVERHEAD (what flashMlaWithKvcache's dense
 *   path schedules with).
 */
export function computeSchedule(cacheSeqlens: ArrayLike<number>, numSmParts: number, fixedOverhead: number = SCHED_FIXED_OVERHEAD): Schedule {
  if (!Number.isSafeInteger(fixedOverhead) || fixedOverhead < 1) {
    throw new ArgumentError("computeSchedule", "fixedOverhead", "an integer >= 1", String(fixedOverhead));
  }
  const b = cacheSeqlens.length;
  const schedMeta = new Int32Array(numSmParts * SCHED_META_INTS);
  const numSplits = new Int32Array(b + 1);
  let total = 0;
  for (let i = 0; i < b; i++) total += numKvBlocks(cacheSeqlens[i]) + fixedOverhead;
  const payload = Math.ceil(total / numSmParts) + fixedOverhead;
  let req = 0, blk = 0, split = 0, cum = 0;
  for (let part = 0; part < numSmParts; part++) {
    const rec = schedMeta.subarray(part * SCHED_META_INTS, (part + 1) * SCHED_META_INTS);
    if (req >= b) {
      rec[0] = rec[1] = b; // unused part
      continue;
    }
    rec[0] = req;
    rec[2] = blk;
    rec[4] = split;
    const beganMid = blk > 0;
    let budget = part === numSmParts - 1 ? Number.MAX_SAFE_INTEGER : payload;
    let lastFullReq = -1;
    while (req < b) {
      const rest = numKvBlocks(cacheSeqlens[req]) - blk;
      if (rest + fixedOverhead <= budget) {
        budget -= rest + fixedOverhead;
        cum += split + 1;
        numSplits[req + 1] = cum;
        lastFullReq = req;
        req++, blk = 0, split = 0;
      } else {
        if (budget - fixedOverhead > 0) {
          blk += budget - fixedOverhead;
          split++;
        }
        break;
      }
    }
    const endsMid = blk > 0;
    if (endsMid) {
      rec[1] = req;
      rec[3] = blk;
    } else {
      rec[1] = lastFullReq;
      rec[3] = numKvBlocks(cacheSeqlens[lastFullReq]);
    }
    const single = rec[0] === rec[1];
    rec[5] = beganMid || (single && endsMid) ? 1 : 0;
    rec[6] = endsMid || (single && beganMid) ? 1 : 0;
  }
  return { schedMeta, numSplits };
}

export function decodePart(schedMeta: Int32Array, part: number): SchedPart {
  const r = schedMeta.subarray(part * SCHED_META_INTS, (part + 1) * SCHED_META_INTS);
  return { beginReq: r[0], endReq: r[1], beginBlock: r[2], endBlock: r[3], beginSplit: r[4], firstSplitted: r[5] !== 0, lastSplitted: r[6] !== 0 };
}

/**
 * Checks what the kernels rely on, throwing an Error that names the broken invariant: every block of
 * every request is covered exactly once, in order; a request is "split" in a part exactly when another
 * part also covers it; split slots are consecutive, distinct and within numSplits; numSplits is the
 * prefix sum of the pieces per request; unused parts come last.
 */
export function checkSchedule(cacheSeqlens: ArrayLike<number>, s: Schedule, numSmParts: number): void {
  const b = cacheSeqlens.length;
  const covered = Array.from({ length: b }, (_, i) => new Uint8Array(numKvBlocks(cacheSeqlens[i])));
  const pieces = new Array<number>(b).fill(0);
  const slotsSeen = new Set<number>();
  let sawUnused = false;
  if (s.numSplits[0] !== 0) throw new Error("numSplits[0] must be 0");
  const pieceRecords: Array<{ req: number; part: number; split: boolean; slot: number }> = [];
  for (let part = 0; part < numSmParts; part++) {
    const p = decodePart(s.schedMeta, part);
    if (p.beginReq >= b) {
      sawUnused = true;
      continue;
    }
    if (sawUnused) throw new Error(`part ${part} is used after an unused part`);
    if (p.endReq < p.beginReq || p.endReq >= b) throw new Error(`part ${part}: bad request range ${p.beginReq}..${p.endReq}`);
    for (let req = p.beginReq; req <= p.endReq; req++) {
      const start = req === p.beginReq ? p.beginBlock : 0;
      const end = req === p.endReq ? p.endBlock : numKvBlocks(cacheSeqlens[req]);
      if (!(start < end) || end > covered[req].length) throw new Error(`part ${part}, request ${req}: bad block range [${start}, ${end})`);
      for (let blk = start; blk < end; blk++) {
        if (covered[req][blk]) throw new Error(`request ${req} block ${blk} is covered twice (part ${part})`);
        covered[req][blk] = 1;
      }
      const split = (req === p.beginReq && p.firstSplitted) || (req === p.endReq && p.lastSplitted);
      const slot = s.numSplits[req] + (req === p.beginReq ? p.beginSplit : 0);
      pieces[req]++;
      pieceRecords.push({ req, part, split, slot });
    }
  }
  for (let req = 0; req < b; req++) {
    const missing = covered[req].indexOf(0);
    if (missing >= 0) throw new Error(`request ${req} block ${missing} is never scheduled`);
    const n = s.numSplits[req + 1] - s.numSplits[req];
    if (n !== pieces[req]) throw new Error(`request ${req}: numSplits says ${n} pieces, the parts hold ${pieces[req]}`);
  }
  for (const r of pieceRecords) {
    const shared = pieces[r.req] > 1;
    if (r.split !== shared) throw new Error(`request ${r.req} in part ${r.part}: split flag ${r.split} but ${pieces[r.req]} piece(s)`);
    if (shared) {
      if (r.slot < s.numSplits[r.req] || r.slot >= s.numSplits[r.req + 1]) throw new Error(`request ${r.req}: slot ${r.slot} outside its range`);
      if (slotsSeen.has(r.slot)) throw new Error(`slot ${r.slot} used twice`);
      slotsSeen.add(r.slot);
    }
  }
  if (s.numSplits[b] > numSplitSlots(b, numSmParts)) throw new Error(`${s.numSplits[b]} slots exceed the workspace's ${numSplitSlots(b, numSmParts)}`);
}

/**
 * The most pieces any request of a schedule has, from its split prefix sums (num_splits, [b + 1]): 1 when
 * nothing is split, or undefined when the words are not such sums (not yet written).
 */
export function scheduleMaxPieces(numSplits: ArrayLike<number>): number | undefined {
  if (numSplits.length < 2 || numSplits[0] !== 0) return undefined;
  let most = 0;
  for (let i = 1; i < numSplits.length; i++) {
    const n = numSplits[i] - numSplits[i - 1];
    if (!Number.isInteger(n) || n < 0) return undefined;
    most = Math.max(most, n);
  }
  return most;
}
