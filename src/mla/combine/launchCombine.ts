import { Device } from "../../runtime/Device.js";
import type { Stream } from "../../runtime/Stream.js";
import type { Tensor } from "../../runtime/Tensor.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { CombineParamsStruct } from "../contract/params.js";
import type { SplitWorkspace } from "../sched/MlaSchedMeta.js";

/** Most rows one combine CTA merges (the loop is per row; beyond this the grid gains nothing). */
export const COMBINE_MAX_ROWS_PER_CTA = 16;

/**
 * Rows per combine CTA for `rows` rows in all: as many as leave at least two CTAs per SM, 1 to 16.
 * One CTA per row launched 32,768 CTAs at sparse-v32, most of which returned at once; one CTA for all
 * of a long request's rows would leave SMs idle at b = 1.
 */
export function combineRowsPerCta(rows: number, smCount: number): number {
  return Math.min(COMBINE_MAX_ROWS_PER_CTA, Math.max(1, Math.floor(rows / (2 * smCount))));
}

/** The batch shape the combine merges over (sparse decode passes h_kv = 1). */
export interface CombineShape {
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
}

/** What the combine needs besides the workspace and the outputs. */
export interface CombineOptions {
  stream: Stream | undefined;
  /**
   * The most pieces a request of the step's schedule has, once the host knows it
   * (MlaSchedMeta.knownMaxPieces); undefined while unknown.
   */
  maxPieces: number | undefined;
  /** Sparse: [h_q] f32, scales split rows' out. */
  attnSink?: Tensor;
  /** The main kernel merged the requests in exactly two pieces itself (DenseParams.merge_pairs). */
  pairsMerged?: boolean;
}

/**
 * Enqueues the log-sum-exp merge of the split partials in `ws` into out/lse, with programmatic
 * dependent launch after the main kernel. Grid (ceil(rows_per_kv / rowsPerCta), h_kv, b): a CTA of an
 * unsplit request (or, with `pairsMerged`, of a request in two pieces) returns at once, so each CTA
 * takes as many rows as still leave two CTAs per SM (combineRowsPerCta). Not launched once the host
 * knows that no request has more pieces than that: its CTAs would all return at once, and the launch
 * alone cost the call 0.8-1.0 µs on the H200.
 */
export function launchCombine(ws: SplitWorkspace, shape: CombineShape, out: Tensor, lse: Tensor, opts: CombineOptions): void {
  const pairsMerged = opts.pairsMerged === true;
  if (opts.maxPieces !== undefined && opts.maxPieces <= (pairsMerged ? 2 : 1)) return;
  const heads_per_kv = shape.h_q / shape.h_kv;
  const rows_per_kv = shape.s_q * heads_per_kv;
  const rows_per_cta = combineRowsPerCta(shape.b * shape.h_kv * rows_per_kv, Device.get(ws.deviceOrdinal).smCount);
  const params = CombineParamsStruct.pack({
    o_accum: ws.oAccum.ptr,
    lse_accum: ws.lseAccum.ptr,
    num_splits: ws.numSplits.ptr,
    out: out.ptr,
    lse: lse.ptr,
    attn_sink: opts.attnSink?.ptr ?? 0n,
    b: shape.b,
    s_q: shape.s_q,
    h_q: shape.h_q,
    h_kv: shape.h_kv,
    heads_per_kv,
    rows_per_kv,
    num_split_slots: ws.numSplitSlots,
    rows_per_cta,
    skip_pairs: pairsMerged ? 1 : 0,
    pad0: 0,
  });
  const kernel = loadKernel(ws.deviceOrdinal, out.dtype === "fp16" ? "combine_fp16" : "combine_bf16");
  launchKernel(kernel, [Math.ceil(rows_per_kv / rows_per_cta), shape.h_kv, shape.b], params, { stream: opts.stream, pdl: true });
}
