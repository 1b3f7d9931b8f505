import { Device } from "../runtime/Device.js";
import type { Stream } from "../runtime/Stream.js";
import type { Tensor } from "../runtime/Tensor.js";
import type { DecodeKernels } from "./decodeKernels.js";
import { deviceOrdinalOf } from "./decodeOutputs.js";
import type { MlaSchedMeta } from "./MlaSchedMeta.js";
import { CombineParamsStruct } from "./params.js";

/** combine.cu's CTA size. */
export const COMBINE_THREADS = 512;
/** Most rows one combine CTA merges (the loop is per row; beyond this the grid gains nothing). */
export const COMBINE_MAX_ROWS_PER_CTA = 16;

/**
 * Rows per combine CTA for `rows` rows in all: as many as leave at least two CTAs per SM, 1 to 16.
 * One CTA per row (the first combine) launched 32,768 CTAs at sparse-v32, most of which returned at
 * once; one CTA for all of a long request's rows would leave SMs idle at b = 1.
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

/**
 * Enqueues the log-sum-exp merge of the split partials in `meta`'s workspace into out/lse, with
 * programmatic dependent launch after the main kernel; `attnSink` (sparse) scales split rows' out.
 * Grid (ceil(rows_per_kv / rowsPerCta), h_kv, b) of 512-thread CTAs; a CTA of an unsplit request returns
 * at once, so each CTA takes as many rows as still leave two CTAs per SM (combineRowsPerCta).
 * `pairsMerged`: the main kernel merged the requests in exactly two pieces itself (DenseParams.merge_pairs),
 * so their CTAs return at once too. Not launched once the host knows that no request has more pieces
 * than that (MlaSchedMeta.knownMaxPieces): its CTAs would all return at once, and the launch alone cost
 * the call 0.8-1.0 µs on the H200.
 */
export function launchCombine(
  k: DecodeKernels,
  meta: MlaSchedMeta,
  shape: CombineShape,
  out: Tensor,
  lse: Tensor,
  stream: Stream | undefined,
  opts: { attnSink?: Tensor; pairsMerged?: boolean } = {},
): void {
  const most = meta.knownMaxPieces();
  if (most !== undefined && most <= (opts.pairsMerged === true ? 2 : 1)) return;
  const heads_per_kv = shape.h_q / shape.h_kv;
  const rows_per_kv = shape.s_q * heads_per_kv;
  const rows_per_cta = combineRowsPerCta(shape.b * shape.h_kv * rows_per_kv, Device.get(deviceOrdinalOf(out)).smCount);
  const params = CombineParamsStruct.pack({
    o_accum: meta.oAccum!.ptr,
    lse_accum: meta.lseAccum!.ptr,
    num_splits: meta.numSplits!.ptr,
    out: out.ptr,
    lse: lse.ptr,
    attn_sink: opts.attnSink?.ptr ?? 0n,
    b: shape.b,
    s_q: shape.s_q,
    h_q: shape.h_q,
    h_kv: shape.h_kv,
    heads_per_kv,
    rows_per_kv,
    num_split_slots: meta.numSplitSlots,
    rows_per_cta,
    skip_pairs: opts.pairsMerged === true ? 1 : 0,
    pad0: 0,
  });
  const kernel = out.dtype === "fp16" ? k.combineFp16 : k.combineBf16;
  kernel.launch({ grid: [Math.ceil(rows_per_kv / rows_per_cta), shape.h_kv, shape.b], block: COMBINE_THREADS, stream, pdl: true }, [{ kind: "bytes", value: params }]);
}
