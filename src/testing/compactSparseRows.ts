import { ArgumentError } from "../errors/ArgumentError.js";
import type { ReferenceRow } from "../mla/reference/referenceArgs.js";

/** The index side of a sparse case, on the host. */
export interface SparseIndexSource {
  b: number;
  s_q: number;
  topk: number;
  /** num_blocks · page_block_size: ids outside [0, numSlots) are invalid, like −1. */
  numSlots: number;
  /** [b, s_q, topk] */
  indices: Int32Array;
  /** [b] */
  topkLength?: Int32Array;
}

/** A small sparse case that computes the chosen rows exactly as the full one does. */
export interface CompactSparseSelection {
  /** The original requests kept, ascending: compact request r is requests[r]. */
  requests: number[];
  /** The original token ids the kept rows read, ascending and distinct: compact token n is tokenIds[n]. */
  tokenIds: Int32Array;
  /**
   * [requests.length, s_q, topk]: each kept (request, query token) row's entries as compact ids, in
   * the same order (repeats kept); invalid entries, entries past topkLength and rows not asked for are −1.
   */
  indices: Int32Array;
  /** [requests.length]: the kept requests' topkLength, when the source has one. */
  topkLength?: Int32Array;
  /** The rows asked for, in compact request numbering. */
  rows: ReferenceRow[];
}

/**
 * Shrinks a sparse case to what `rows` read, so the float64 CPU reference can check a sample of a
 * multi-gigabyte case from a few megabytes of host copies: the requests the rows belong to, and the
 * distinct tokens that their valid entries (within topkLength) point at, renumbered 0.. in id order.
 * Attending the compact indices over a cache holding token tokenIds[n] at slot n gives every asked
 * row the same keys in the same order as the full case.
 */
export function compactSparseRows(src: SparseIndexSource, rows: readonly ReferenceRow[]): CompactSparseSelection {
  const fn = "compactSparseRows";
  const { b, s_q, topk, numSlots, indices } = src;
  if (indices.length !== b * s_q * topk) throw new ArgumentError(fn, "src.indices", `${b * s_q * topk} entries ([b, s_q, topk])`, `${indices.length}`);
  if (src.topkLength !== undefined && src.topkLength.length !== b) throw new ArgumentError(fn, "src.topkLength", `${b} entries`, `${src.topkLength.length}`);
  rows.forEach((r, n) => {
    const ok = (x: number, end: number) => Number.isInteger(x) && x >= 0 && x < end;
    // Heads are the reference's business: the index side does not know h_q.
    if (!ok(r.batch, b) || !ok(r.token, s_q)) {
      throw new ArgumentError(fn, "rows", `integers batch < ${b} and token < ${s_q}`, `rows[${n}] = ${JSON.stringify(r)}`);
    }
  });
  const requests = [...new Set(rows.map((r) => r.batch))].sort((x, y) => x - y);
  const compactOf = new Map(requests.map((i, r) => [i, r]));
  const groups = new Set(rows.map((r) => r.batch * s_q + r.token));
  const limitOf = (i: number) => Math.max(0, Math.min(topk, src.topkLength?.[i] ?? topk));

  const ids = new Set<number>();
  for (const g of groups) {
    const i = Math.floor(g / s_q);
    const row = g * topk;
    for (let k = 0; k < limitOf(i); k++) {
      const id = indices[row + k];
      if (id >= 0 && id < numSlots) ids.add(id);
    }
  }
  const tokenIds = Int32Array.from(ids).sort();
  const slotOf = new Map<number, number>();
  tokenIds.forEach((id, n) => slotOf.set(id, n));

  const out = new Int32Array(requests.length * s_q * topk).fill(-1);
  for (const g of groups) {
    const i = Math.floor(g / s_q);
    const j = g % s_q;
    const from = g * topk;
    const to = (compactOf.get(i)! * s_q + j) * topk;
    for (let k = 0; k < limitOf(i); k++) {
      const id = indices[from + k];
      if (id >= 0 && id < numSlots) out[to + k] = slotOf.get(id)!;
    }
  }
  const selection: CompactSparseSelection = {
    requests,
    tokenIds,
    indices: out,
    rows: rows.map((r) => ({ batch: compactOf.get(r.batch)!, token: r.token, head: r.head })),
  };
  if (src.topkLength !== undefined) selection.topkLength = Int32Array.from(requests, (i) => src.topkLength![i]);
  return selection;
}

/** A stretch of tokens that sit back to back in one KV block: one copy instead of `count`. */
export interface TokenCopyRun {
  /** Position of the first token in tokenIds (its compact id). */
  first: number;
  count: number;
  block: number;
  /** Row of the first token within its block. */
  offset: number;
}

/**
 * Groups ascending token ids into runs of consecutive ids within one block of `pageBlockSize`
 * tokens (consecutive rows of a block are adjacent in memory; blocks may be padded apart), so the
 * compact copy costs one device-to-host copy per run.
 */
export function tokenCopyRuns(tokenIds: Int32Array, pageBlockSize: number): TokenCopyRun[] {
  const runs: TokenCopyRun[] = [];
  for (let n = 0; n < tokenIds.length; n++) {
    const id = tokenIds[n];
    const block = Math.floor(id / pageBlockSize);
    const last = runs[runs.length - 1];
    if (last !== undefined && last.block === block && tokenIds[n - 1] === id - 1) last.count++;
    else runs.push({ first: n, count: 1, block, offset: id % pageBlockSize });
  }
  return runs;
}
