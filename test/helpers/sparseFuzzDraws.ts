import type { Rng } from "../../src/numeric/random.js";

/** How a fuzz case gives one index list's valid lengths (topkLength or extraTopkLength). */
export type FuzzTopkLength =
  /** No lengths: every entry of a row counts. */
  | "none"
  /**
   * The case generator's lengths in [0, topk] (tokens past them are poisoned), with 0 and topk sometimes
   * handed to the GPU as a negative value and as one > topk: the kernels clamp to [0, topk].
   */
  | "generator"
  /** Lengths of this helper's drawing (0, negative, topk, > topk, tiny, any) over a case made without any. */
  | "extreme";

/** How a fuzz case gives attnSink. */
export type FuzzSink =
  /** No sinks. */
  | "none"
  /** The case generator's (FlashMLA's: about 31% +inf, 31% −inf). */
  | "generator"
  /** {@link drawCustomSink}'s. */
  | "custom";

/** Tokens per request relative to topk: none, fewer (rows padded with -1), a few, or at least topk. */
export function drawTokensPerRequest(rng: Rng, topk: number): number {
  const u = rng.uniform();
  if (u < 0.04) return 0;
  if (u < 0.24) return rng.int(1, topk + 1);
  if (u < 0.34) return rng.int(1, 70);
  return topk + rng.int(0, topk + 64);
}

/**
 * Turns each entry of `indices` into an out-of-range id with the given probability: ids just past the
 * cache's `numSlots` (= num_blocks · page_block_size), far past it, int32's ends and negatives below −1.
 * The kernels and the reference must both skip them as −1. Draws nothing at probability 0.
 */
export function scatterOutOfRangeIds(rng: Rng, indices: Int32Array, numSlots: number, pageBlockSize: number, probability: number): void {
  if (probability === 0) return;
  const bad = [numSlots, numSlots + 1, numSlots + pageBlockSize, 2 ** 31 - 1, -2, -1000, -(2 ** 31)];
  for (let k = 0; k < indices.length; k++) {
    if (rng.uniform() < probability) indices[k] = rng.uniform() < 0.5 ? rng.pick(bad) : numSlots + rng.int(0, 100_000);
  }
}

/**
 * One list's valid lengths as the GPU gets them and as the reference does: the kernels and their
 * scheduler clamp each value to [0, topk] (FlashMlaWithKvcacheArgs says so); the reference accepts only
 * [0, topk], so it gets the clamped values. `caseLengths` is the case's own, for "generator".
 */
export function drawFuzzTopkLength(rng: Rng, mode: FuzzTopkLength, caseLengths: Int32Array | undefined, b: number, topk: number): { gpu: Int32Array; ref: Int32Array } | undefined {
  let gpu: Int32Array;
  if (mode === "none") return undefined;
  if (mode === "generator") {
    if (caseLengths === undefined) throw new Error("test bug: topkLength \"generator\" over a case made without valid lengths");
    gpu = Int32Array.from(caseLengths);
    for (let i = 0; i < b; i++) {
      if (gpu[i] === 0 && rng.uniform() < 0.5) gpu[i] = rng.pick([-1, -64, -(2 ** 31)]);
      else if (gpu[i] === topk && rng.uniform() < 0.5) gpu[i] = rng.pick([topk + 1, topk + 63, 2 ** 31 - 1]);
    }
  } else {
    gpu = Int32Array.from({ length: b }, () => {
      const u = rng.uniform();
      if (u < 0.15) return 0;
      if (u < 0.25) return rng.pick([-1, -7, -(2 ** 31)]);
      if (u < 0.4) return topk;
      if (u < 0.55) return rng.pick([topk + 1, topk + 64, 2 ** 31 - 1]);
      if (u < 0.65) return Math.min(topk, rng.int(1, 4));
      return rng.int(0, topk + 1);
    });
  }
  return { gpu, ref: Int32Array.from(gpu, (v) => Math.min(Math.max(v, 0), topk)) };
}

/** Sinks [h_q] unlike the generator's: N(0, 2), with occasional ±inf and ±30 (a sink that dominates or vanishes). */
export function drawCustomSink(rng: Rng, h_q: number): Float32Array {
  return Float32Array.from({ length: h_q }, () => {
    const u = rng.uniform();
    if (u < 0.04) return Infinity;
    if (u < 0.08) return -Infinity;
    if (u < 0.12) return rng.pick([30, -30]);
    return 2 * rng.normal();
  });
}

/** Valid entries (in-range ids within each request's length) of one [b, s_q, topk] index list, for a run's summary. */
export function countAttended(indices: Int32Array, lengths: Int32Array | undefined, dims: { b: number; s_q: number; topk: number }, numSlots: number): number {
  let n = 0;
  for (let i = 0; i < dims.b; i++) {
    const limit = lengths?.[i] ?? dims.topk;
    for (let j = 0; j < dims.s_q; j++) {
      const row = (i * dims.s_q + j) * dims.topk;
      for (let k = 0; k < limit; k++) if (indices[row + k] >= 0 && indices[row + k] < numSlots) n++;
    }
  }
  return n;
}
