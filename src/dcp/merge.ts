import { ArgumentError } from "../errors/ArgumentError.js";
import { checkSameDevice, checkScalar, checkStream, checkTensor } from "../mla/checkTensor.js";
import { launchKernel, loadKernel } from "../mla/contract/kernelRegistry.js";
import { DcpMergeParamsStruct } from "../mla/contract/params.js";
import { D_V } from "../mla/contract/shape.js";
import { decodeOutputs } from "../mla/decodeOutputs.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";

/** Rows (request, query token, head) one merge CTA takes: 64 threads per 512-column row. */
const ROWS_PER_CTA = 4;

/** Arguments of `dcpMerge`: every rank's decode output of the same step, side by side. */
export interface DcpMergeArgs {
  /**
   * [ranks, b, s_q, h_q, 512] bf16 or fp16: rank r's `out` at [r] (each part contiguous; the part stride
   * may be anything, e.g. an all-gather's receive buffer or N decode outputs of one allocation).
   */
  outParts: Tensor;
  /** [ranks, b, h_q, s_q] f32, natural log (+inf or -inf: the rank saw no key of that row); any strides. */
  lseParts: Tensor;
  /** [h_q] f32: out *= 1 / (1 + exp(sink - lse)), applied once to the merged row; lse is unchanged. */
  attnSink?: Tensor;
  /** Preallocated [b, s_q, h_q, 512] output in outParts' dtype. */
  out?: Tensor;
  /** Preallocated [b, h_q, s_q] f32 output. */
  lse?: Tensor;
  stream?: Stream;
}

/** Arguments of `dcpRescale`: one rank's term of the merge, for a collective to sum. */
export interface DcpRescaleArgs {
  /** [b, s_q, h_q, 512] bf16 or fp16: this rank's decode output, contiguous. */
  out: Tensor;
  /** [ranks, b, h_q, s_q] f32: every rank's lse (an all-gather of each rank's decode lse). */
  lseParts: Tensor;
  /** This rank: 0 <= rank < ranks. */
  rank: number;
  /**
   * "heads": the term in out's layout [b, s_q, h_q, 512], for an all-reduce (every rank gets every head).
   * "headChunks": [ranks, b, s_q, h_q / ranks, 512], chunk c holding heads [c·h_q/ranks, (c+1)·h_q/ranks),
   * for a reduce-scatter that leaves rank c its heads as [b, s_q, h_q / ranks, 512].
   */
  layout: "heads" | "headChunks";
  attnSink?: Tensor;
  /** Preallocated term: out's shape for "heads", [ranks, b, s_q, h_q / ranks, 512] for "headChunks". */
  term?: Tensor;
  /** Preallocated [b, h_q, s_q] f32: the merged lse (every rank computes all of it). */
  lse?: Tensor;
  stream?: Stream;
}

interface MergeLaunch {
  o: Tensor;
  oPartStride: number;
  oFirst: number;
  oCount: number;
  lseParts: Tensor;
  attnSink: Tensor | undefined;
  dst: Tensor;
  lse: Tensor | undefined;
  headsPerChunk: number;
  chunkStride: number;
  shape: { b: number; s_q: number; h_q: number };
  stream: Stream | undefined;
}

function launchDcpMerge(m: MergeLaunch): void {
  const { b, s_q, h_q } = m.shape;
  const rows = b * s_q * h_q;
  if (rows === 0) return;
  const [ranks, sb, sh, ss] = [m.lseParts.shape[0], m.lseParts.strides[1], m.lseParts.strides[2], m.lseParts.strides[3]];
  const params = DcpMergeParamsStruct.pack({
    o_parts: m.o.ptr,
    lse_parts: m.lseParts.ptr,
    attn_sink: m.attnSink?.ptr ?? 0n,
    out: m.dst.ptr,
    lse: m.lse?.ptr ?? 0n,
    o_part_stride: m.oPartStride,
    lse_part_stride: m.lseParts.strides[0],
    lse_stride_b: sb,
    lse_stride_h: sh,
    lse_stride_s: ss,
    chunk_stride: m.chunkStride,
    b,
    s_q,
    h_q,
    ranks,
    o_first: m.oFirst,
    o_count: m.oCount,
    heads_per_chunk: m.headsPerChunk,
    pad0: 0,
  });
  const kernel = loadKernel(m.dst.deviceOrdinal, m.dst.dtype === "fp16" ? "dcp_merge_fp16" : "dcp_merge_bf16");
  launchKernel(kernel, Math.ceil(rows / ROWS_PER_CTA), params, { stream: m.stream });
}

/** Checks lseParts [ranks, b, h_q, s_q] and attnSink [h_q]; returns ranks. */
function checkLseAndSink(fn: string, lseParts: unknown, attnSink: unknown, shape: { b: number; s_q: number; h_q: number }, ranks?: number): number {
  const lse = checkTensor(fn, "lseParts", lseParts, { dtypes: ["f32"], shape: [ranks, shape.b, shape.h_q, shape.s_q], dims: ["ranks", "b", "h_q", "s_q"], device: "cuda" });
  if (lse.shape[0] < 1) throw new ArgumentError(fn, "lseParts", "at least one rank", "ranks = 0");
  if (attnSink !== undefined) checkTensor(fn, "attnSink", attnSink, { dtypes: ["f32"], shape: [shape.h_q], dims: ["h_q"], contiguous: true, device: "cuda" });
  return lse.shape[0];
}

/** Checks an optional preallocated lse [b, h_q, s_q] f32, contiguous. */
function checkLseOut(fn: string, lse: unknown, shape: { b: number; s_q: number; h_q: number }): void {
  if (lse !== undefined) checkTensor(fn, "lse", lse, { dtypes: ["f32"], shape: [shape.b, shape.h_q, shape.s_q], dims: ["b", "h_q", "s_q"], contiguous: true, device: "cuda" });
}

/**
 * Merges the ranks' partial decode outputs of one step into the output of the whole context, by their
 * log-sum-exp, with the attention sink applied once to the merged rows; one kernel. The all-gather form
 * of decode context parallelism (each rank holds every rank's out and lse) and N virtual shards on one
 * GPU both end here. A row no rank saw a key of gives out 0 and lse +inf.
 */
export function dcpMerge(args: DcpMergeArgs): { out: Tensor<"bf16" | "fp16">; lse: Tensor<"f32"> } {
  const fn = "dcpMerge";
  const parts = checkTensor(fn, "outParts", args.outParts, { dtypes: ["bf16", "fp16"], shape: [undefined, undefined, undefined, undefined, D_V], dims: ["ranks", "b", "s_q", "h_q", "d_v"], device: "cuda", alignBytes: 16 });
  const [, b, s_q, h_q] = parts.shape;
  const shape = { b, s_q, h_q };
  if (!isContiguousPart(parts)) throw new ArgumentError(fn, "outParts", "each part [b, s_q, h_q, 512] contiguous", `strides [${parts.strides.join(", ")}]`);
  const ranks = checkLseAndSink(fn, args.lseParts, args.attnSink, shape, parts.shape[0]);
  if (args.out !== undefined) checkTensor(fn, "out", args.out, { dtypes: [parts.dtype], shape: [b, s_q, h_q, D_V], dims: ["b", "s_q", "h_q", "d_v"], contiguous: true, device: "cuda", alignBytes: 16 });
  checkLseOut(fn, args.lse, shape);
  checkSameDevice(fn, { outParts: parts, lseParts: args.lseParts, attnSink: args.attnSink, out: args.out, lse: args.lse });
  const stream = checkStream(fn, args.stream, { name: "outParts", tensor: parts });
  const { out, lse } = decodeOutputs(shape, parts.dtype, parts.deviceOrdinal, { out: args.out, lse: args.lse });
  launchDcpMerge({ o: parts, oPartStride: parts.strides[0], oFirst: 0, oCount: ranks, lseParts: args.lseParts, attnSink: args.attnSink, dst: out, lse, headsPerChunk: h_q, chunkStride: 0, shape, stream });
  return { out: out as Tensor<"bf16" | "fp16">, lse };
}

/**
 * This rank's term of the merge, w_r · o_r with w_r = e^(lse_r − L) · sink(L), in the layout the
 * following collective sums: an all-reduce ("heads") leaves every rank the merged output, a
 * reduce-scatter over head chunks ("headChunks") leaves rank c the merged output of its h_q / ranks
 * heads (what tensor parallelism's output projection takes). Also writes the merged lse of every row.
 */
export function dcpRescale(args: DcpRescaleArgs): { term: Tensor; lse: Tensor<"f32"> } {
  const fn = "dcpRescale";
  const o = checkTensor(fn, "out", args.out, { dtypes: ["bf16", "fp16"], shape: [undefined, undefined, undefined, D_V], dims: ["b", "s_q", "h_q", "d_v"], contiguous: true, device: "cuda", alignBytes: 16 });
  const [b, s_q, h_q] = o.shape;
  const shape = { b, s_q, h_q };
  const ranks = checkLseAndSink(fn, args.lseParts, args.attnSink, shape);
  const rank = checkScalar(fn, "rank", args.rank, (r) => Number.isInteger(r) && r >= 0 && r < ranks, `an integer in [0, ${ranks}) (lseParts has ${ranks} ranks)`);
  if (args.layout !== "heads" && args.layout !== "headChunks") throw new ArgumentError(fn, "layout", '"heads" or "headChunks"', String(args.layout));
  const chunks = args.layout === "heads" ? 1 : ranks;
  if (h_q % chunks !== 0) throw new ArgumentError(fn, "out", `h_q a multiple of the ${ranks} ranks (layout "headChunks")`, `h_q = ${h_q}`);
  const termShape = args.layout === "heads" ? [b, s_q, h_q, D_V] : [ranks, b, s_q, h_q / ranks, D_V];
  const termDims = args.layout === "heads" ? ["b", "s_q", "h_q", "d_v"] : ["ranks", "b", "s_q", "h_q / ranks", "d_v"];
  if (args.term !== undefined) checkTensor(fn, "term", args.term, { dtypes: [o.dtype], shape: termShape, dims: termDims, contiguous: true, device: "cuda", alignBytes: 16 });
  checkLseOut(fn, args.lse, shape);
  checkSameDevice(fn, { out: o, lseParts: args.lseParts, attnSink: args.attnSink, term: args.term, lse: args.lse });
  const stream = checkStream(fn, args.stream, { name: "out", tensor: o });
  const { out: term, lse } = decodeOutputs(shape, o.dtype, o.deviceOrdinal, { out: args.term, lse: args.lse }, termShape);
  const headsPerChunk = h_q / chunks;
  launchDcpMerge({ o, oPartStride: 0, oFirst: rank, oCount: 1, lseParts: args.lseParts, attnSink: args.attnSink, dst: term, lse, headsPerChunk, chunkStride: b * s_q * headsPerChunk * D_V, shape, stream });
  return { term, lse };
}

function isContiguousPart(t: Tensor): boolean {
  const [, , s_q, h_q] = t.shape;
  return t.strides[4] === 1 && t.strides[3] === D_V && t.strides[2] === h_q * D_V && t.strides[1] === s_q * h_q * D_V;
}
