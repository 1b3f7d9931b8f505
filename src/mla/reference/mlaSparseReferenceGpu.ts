import { ArgumentError, formatShape } from "../../errors/ArgumentError.js";
import type { Tensor } from "../../runtime/Tensor.js";
import type { FlashMlaWithKvcacheArgs } from "../args.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { SparseRefParamsStruct } from "../contract/params.js";
import { decodeOutputs } from "../decodeOutputs.js";
import { MlaSchedMeta } from "../sched/MlaSchedMeta.js";
import { validateSparseArgs } from "../sparse/validateSparse.js";

const FN = "mlaSparseReferenceGpu";

/**
 * A deliberately simple fp32 GPU reference of sparse FP8 decode (one CTA per output row, plain loops,
 * per-element dequantization): for checking every element of sparse shapes too large for the float64 CPU
 * reference. Same arguments as a sparse flashMlaWithKvcache call (schedMeta is not used); q and indices
 * must be contiguous. Returns out [b, s_q, h_q, 512] and lse [b, h_q, s_q], f32 on the GPU, with the
 * sink applied to out. Invalid indices (-1, outside the cache, or past topkLength) are skipped.
 */
export function mlaSparseReferenceGpu(args: Omit<FlashMlaWithKvcacheArgs, "schedMeta"> & { schedMeta?: unknown }): { out: Tensor; lse: Tensor } {
  if (args.out !== undefined || args.lse !== undefined) throw new ArgumentError(FN, args.out !== undefined ? "out" : "lse", "nothing (this reference allocates its own f32 outputs)", "a tensor");
  // The sparse checks match the metadata's config; a fresh one matches any.
  const call = validateSparseArgs({ ...args, schedMeta: new MlaSchedMeta() });
  for (const [name, t] of [["q", call.q], ["indices", call.indices]] as const) {
    if (!t.isContiguous()) throw new ArgumentError(FN, name, "a contiguous tensor", `strides ${formatShape(t.strides)}`);
  }
  const ordinal = call.q.deviceOrdinal;
  const kernel = loadKernel(ordinal, "sparse_reference_fp32");
  const { out, lse } = decodeOutputs(call, "f32", ordinal);
  const params = SparseRefParamsStruct.pack({
    q: call.q.ptr,
    kv: call.kCache.ptr,
    indices: call.indices.ptr,
    topk_length: args.topkLength?.ptr ?? 0n,
    attn_sink: args.attnSink?.ptr ?? 0n,
    out: out.ptr,
    lse: lse.ptr,
    kv_block_stride: BigInt(call.block_stride_bytes),
    b: call.b,
    s_q: call.s_q,
    h_q: call.h_q,
    topk: call.topk,
    page_block_size: call.page_block_size,
    num_slots: call.num_blocks * call.page_block_size,
    softmax_scale: call.softmax_scale,
    pad0: 0,
  });
  launchKernel(kernel, [call.h_q, call.s_q, call.b], params, { stream: args.stream });
  return { out, lse };
}
