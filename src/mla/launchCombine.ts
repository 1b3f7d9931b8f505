import type { Stream } from "../runtime/Stream.js";
import type { Tensor } from "../runtime/Tensor.js";
import type { DecodeKernels } from "./decodeKernels.js";
import type { MlaSchedMeta } from "./MlaSchedMeta.js";
import { CombineParamsStruct } from "./params.js";

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
 * Grid (rows_per_kv, h_kv, b): one CTA per flattened row, rows of unsplit requests return at once.
 */
export function launchCombine(k: DecodeKernels, meta: MlaSchedMeta, shape: CombineShape, out: Tensor, lse: Tensor, stream: Stream | undefined, attnSink?: Tensor): void {
  const heads_per_kv = shape.h_q / shape.h_kv;
  const rows_per_kv = shape.s_q * heads_per_kv;
  const params = CombineParamsStruct.pack({
    o_accum: meta.oAccum!.ptr,
    lse_accum: meta.lseAccum!.ptr,
    num_splits: meta.numSplits!.ptr,
    out: out.ptr,
    lse: lse.ptr,
    attn_sink: attnSink?.ptr ?? 0n,
    b: shape.b,
    s_q: shape.s_q,
    h_q: shape.h_q,
    h_kv: shape.h_kv,
    heads_per_kv,
    rows_per_kv,
    num_split_slots: meta.numSplitSlots,
    pad0: 0,
  });
  const kernel = out.dtype === "fp16" ? k.combineFp16 : k.combineBf16;
  kernel.launch({ grid: [rows_per_kv, shape.h_kv, shape.b], block: 128, stream, pdl: true }, [{ kind: "bytes", value: params }]);
}
