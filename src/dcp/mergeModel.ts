/**
 * The float64 model of the DCP merge: N ranks each decoded their shard of every request into out_r
 * [b, s_q, h_q, d_v] and natural-log lse_r [b, h_q, s_q]; per row (request, query token, head):
 *
 *   M = max_r L_r over the non-empty shards     (L_r = +inf or −inf: the shard saw no key)
 *   L = M + ln Σ_r exp(L_r − M)
 *   w_r = exp(L_r − L)                            (0 for an empty shard)
 *   O = Σ_r w_r · O_r
 *
 * With no non-empty shard, O = 0 and L = +inf (FlashMLA's empty row). The attention sink acts once,
 * on the merged row: O *= 1 / (1 + exp(sink − L)), L unchanged; a shard must not apply it. Its factor
 * is folded into the weights, and a shard whose weight is 0 (empty, a +inf sink, or underflow) is not
 * read, so NaN poison in an empty shard's out cannot leak. The GPU merge kernel (kernels/decode/
 * dcp_merge.cu) is checked against this model.
 */
import { ArgumentError, describeValue, formatShape } from "../errors/ArgumentError.js";
import { D_V } from "../mla/contract/shape.js";
import { intAtLeast } from "./shard.js";

/** Host float arrays the model reads (f32 as the kernels write, or f64). */
export type DcpFloats = Float32Array | Float64Array;

/** Dimensions of every shard's out [b, s_q, h_q, d_v] and lse [b, h_q, s_q]. */
export interface DcpMergeDims {
  b: number;
  s_q: number;
  h_q: number;
  /** @default 512 */
  d_v?: number;
}

/** Arguments of {@link dcpMergeModel}. */
export interface DcpMergeModelArgs {
  /** N shards' out, each [b, s_q, h_q, d_v] row-major. */
  outs: readonly DcpFloats[];
  /** N shards' lse, each [b, h_q, s_q] row-major, natural log; ±inf for a shard that saw no key. */
  lses: readonly DcpFloats[];
  dims: DcpMergeDims;
  /** [h_q] the attention sink, applied after the merge. */
  attnSink?: DcpFloats;
}

/** Merged results, f64: out [b, s_q, h_q, d_v] and lse [b, h_q, s_q]. */
export interface DcpMergeResult {
  out: Float64Array;
  lse: Float64Array;
}

/**
 * Merges N shards' decodes of the same rows (see the file comment for the rule). A NaN lse, or a NaN in
 * the out of a shard with a nonzero weight, makes the row NaN; a shard of weight 0 is not read.
 *
 * @example
 * const { out, lse } = dcpMergeModel({ outs: [out0, out1], lses: [lse0, lse1], dims: { b, s_q, h_q }, attnSink });
 */
export function dcpMergeModel(args: DcpMergeModelArgs): DcpMergeResult {
  const fn = "dcpMergeModel";
  const { outs, lses, attnSink, dims } = checkMergeArgs(fn, args, undefined);
  const { b, s_q, h_q, d_v } = dims;
  const out = new Float64Array(b * s_q * h_q * d_v); // [b, s_q, h_q, d_v]
  const lse = new Float64Array(b * h_q * s_q); // [b, h_q, s_q]
  const scale = new Float64Array(lses.length);
  forEachRow(dims, (lseAt, outAt, h) => {
    lse[lseAt] = mergeRow(lses, lseAt, attnSink?.[h], scale);
    for (let r = 0; r < lses.length; r++) {
      if (scale[r] === 0) continue; // not read: 0 · NaN would poison the row
      for (let d = 0; d < d_v; d++) out[outAt + d] += scale[r] * outs[r][outAt + d];
    }
  });
  return { out, lse };
}

/** Arguments of {@link dcpRescaleModel}. */
export interface DcpRescaleModelArgs {
  /** Rank `rank`'s out, [b, s_q, h_q, d_v]. */
  out: DcpFloats;
  /** Every rank's lse (after an all-gather), N × [b, h_q, s_q]. */
  lses: readonly DcpFloats[];
  rank: number;
  dims: DcpMergeDims;
  /** [h_q] the attention sink, folded into every rank's weight. */
  attnSink?: DcpFloats;
}

/** What {@link dcpRescaleModel} returns for one rank. */
export interface DcpRescaleResult {
  /** [b, s_q, h_q, d_v] w_r · sinkFactor · O_r (0 where that weight is 0: O_r is not read). */
  partial: Float64Array;
  /** [b, h_q, s_q] the merged L (the same on every rank). */
  lse: Float64Array;
}

/**
 * One rank's step of the `ag_rs` merge (vLLM's all-gather + reduce-scatter): with every rank's lse
 * gathered, rank r scales its own out by w_r · 1 / (1 + exp(sink − L)); a sum of the ranks' partials
 * (the reduce-scatter, head slices per {@link dcpHeadSlice}) is the merged out. Adding the partials in
 * rank order from 0 gives exactly dcpMergeModel's out, which sums the same products in the same order.
 */
export function dcpRescaleModel(args: DcpRescaleModelArgs): DcpRescaleResult {
  const fn = "dcpRescaleModel";
  const { outs, lses, attnSink, dims } = checkMergeArgs(fn, args, args?.rank);
  const { b, s_q, h_q, d_v } = dims;
  const rank = args.rank;
  const partial = new Float64Array(b * s_q * h_q * d_v); // [b, s_q, h_q, d_v]
  const lse = new Float64Array(b * h_q * s_q); // [b, h_q, s_q]
  const scale = new Float64Array(lses.length);
  forEachRow(dims, (lseAt, outAt, h) => {
    lse[lseAt] = mergeRow(lses, lseAt, attnSink?.[h], scale);
    if (scale[rank] === 0) return;
    for (let d = 0; d < d_v; d++) partial[outAt + d] = scale[rank] * outs[0][outAt + d];
  });
  return { partial, lse };
}

/** The query heads one rank receives from a reduce-scatter over heads: [start, start + count). */
export interface DcpHeadSlice {
  start: number;
  count: number;
}

/**
 * Rank `rank`'s heads after a reduce-scatter of out over the head dim: h_q / ranks contiguous heads,
 * rank r getting heads [r · h_q / ranks, (r + 1) · h_q / ranks). Needs h_q % ranks == 0.
 */
export function dcpHeadSlice(hQ: number, ranks: number, rank: number): DcpHeadSlice {
  const fn = "dcpHeadSlice";
  intAtLeast(fn, "ranks", ranks, 1);
  intAtLeast(fn, "hQ", hQ, 1);
  if (hQ % ranks !== 0) throw new ArgumentError(fn, "hQ", `a multiple of ranks = ${ranks}`, `${hQ}`);
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= ranks) throw new ArgumentError(fn, "rank", `an integer in [0, ${ranks})`, describeValue(rank));
  const count = hQ / ranks;
  return { start: rank * count, count };
}

/** ±inf: the shard saw no key of the row (FlashMLA writes +inf, a split-KV partial −inf). */
function isEmptyLse(x: number): boolean {
  return x === Infinity || x === -Infinity;
}

/**
 * One row's merge: fills scale[r] = w_r · sinkFactor (0 for an empty shard) and returns L, or +inf
 * (all scales 0) when every shard is empty. A NaN L_r makes M, L and every scale NaN.
 */
function mergeRow(lses: readonly DcpFloats[], at: number, sink: number | undefined, scale: Float64Array): number {
  let M = -Infinity;
  let nonEmpty = 0;
  for (const lse of lses) {
    if (isEmptyLse(lse[at])) continue;
    M = Math.max(M, lse[at]); // NaN in, NaN out
    nonEmpty++;
  }
  if (nonEmpty === 0) {
    scale.fill(0);
    return Infinity;
  }
  let sum = 0;
  for (const lse of lses) if (!isEmptyLse(lse[at])) sum += Math.exp(lse[at] - M);
  const L = M + Math.log(sum);
  const sinkFactor = sink === undefined ? 1 : 1 / (1 + Math.exp(sink - L));
  lses.forEach((lse, r) => {
    scale[r] = isEmptyLse(lse[at]) ? 0 : Math.exp(lse[at] - L) * sinkFactor;
  });
  return L;
}

/** Calls `body(lseAt, outAt, h)` for every row (i, j, h): its lse element and the start of its out row. */
function forEachRow(dims: Required<DcpMergeDims>, body: (lseAt: number, outAt: number, h: number) => void): void {
  const { b, s_q, h_q, d_v } = dims;
  for (let i = 0; i < b; i++) {
    for (let j = 0; j < s_q; j++) {
      for (let h = 0; h < h_q; h++) body((i * h_q + h) * s_q + j, ((i * s_q + j) * h_q + h) * d_v, h);
    }
  }
}

/**
 * Checks the merge arguments. With `rank` undefined, `args.outs` holds one out per lse (the merge);
 * otherwise `args.out` is rank `rank`'s out (the rescale), returned as `outs[0]`.
 */
function checkMergeArgs(
  fn: string,
  args: Partial<DcpMergeModelArgs & DcpRescaleModelArgs>,
  rank: number | undefined,
): { outs: DcpFloats[]; lses: readonly DcpFloats[]; attnSink: DcpFloats | undefined; dims: Required<DcpMergeDims> } {
  if (args === null || typeof args !== "object") throw new ArgumentError(fn, "args", "an options object", describeValue(args));
  const dims = args.dims;
  if (dims === null || typeof dims !== "object") throw new ArgumentError(fn, "dims", "{ b, s_q, h_q, d_v? }", describeValue(dims));
  for (const name of ["b", "s_q", "h_q"] as const) intAtLeast(fn, `dims.${name}`, dims[name], 1);
  const d_v = dims.d_v ?? D_V;
  intAtLeast(fn, "dims.d_v", d_v, 1);
  const { b, s_q, h_q } = dims;

  const lses = args.lses;
  if (!Array.isArray(lses) || lses.length < 1) throw new ArgumentError(fn, "lses", "an array of N ≥ 1 lse arrays", describeValue(lses));
  const lseShape = [b, h_q, s_q];
  lses.forEach((lse, r) => checkFloats(fn, `lses[${r}]`, lse, lseShape));
  const outShape = [b, s_q, h_q, d_v];
  let outs: DcpFloats[];
  if (rank === undefined) {
    if (!Array.isArray(args.outs) || args.outs.length !== lses.length) {
      throw new ArgumentError(fn, "outs", `an array of ${lses.length} out arrays (one per lse)`, describeValue(args.outs));
    }
    outs = args.outs;
    outs.forEach((out, r) => checkFloats(fn, `outs[${r}]`, out, outShape));
  } else {
    if (!Number.isSafeInteger(rank) || rank < 0 || rank >= lses.length) throw new ArgumentError(fn, "rank", `an integer in [0, ${lses.length})`, describeValue(rank));
    checkFloats(fn, "out", args.out, outShape);
    outs = [args.out as DcpFloats];
  }
  if (args.attnSink !== undefined) checkFloats(fn, "attnSink", args.attnSink, [h_q]);
  return { outs, lses, attnSink: args.attnSink, dims: { b, s_q, h_q, d_v } };
}

function checkFloats(fn: string, name: string, a: unknown, shape: number[]): void {
  if (!(a instanceof Float32Array || a instanceof Float64Array)) throw new ArgumentError(fn, name, "a Float32Array or Float64Array", describeValue(a));
  const n = shape.reduce((x, y) => x * y, 1);
  if (a.length !== n) throw new ArgumentError(fn, name, `${formatShape(shape)}: ${n} elements`, `${a.length}`);
}
