import { ArgumentError } from "../errors/ArgumentError.js";
import { Tensor } from "../runtime/Tensor.js";
import { decodeKernels } from "./decodeKernels.js";
import { decodeOutputs, deviceOrdinalOf } from "./decodeOutputs.js";
import type { FlashMlaWithKvcacheArgs } from "./flashMlaWithKvcache.js";
import { MlaSchedMeta } from "./MlaSchedMeta.js";
import { SparseRefParamsStruct } from "./params.js";
import { validateSparseArgs } from "./sparseArgs.js";

/**
 * A deliberately simple fp32 GPU reference of sparse FP8 decode (one CTA per output row, plain loops,
 * per-element dequantization): for checking every element of sparse shapes too large for the float64 CPU
 * reference. Same arguments as a sparse flashMlaWithKvcache call (schedMeta is not used); q and indices
 * must be contiguous. Returns out [b, s_q, h_q, 512] and lse [b, h_q, s_q], f32 on the GPU, with the
 * sink applied to out. Invalid indices (-1, outside the cache, or past topkLength) are skipped.
 */
export function mlaSparseReferenceGpu(args: Omit<FlashMlaWithKvcacheArgs, "schedMeta"> & { schedMeta?: unknown }): { out: Tensor; lse: Tensor } {
  const fn = "mlaSparseReferenceGpu";
  if (args.out !== undefined || args.lse !== undefined) throw new ArgumentError(fn, args.out !== undefined ? "out" : "lse", "nothing (this reference allocates its own f32 outputs)", "a tensor");
  const shape = validateSparseArgs({ ...args, schedMeta: new MlaSchedMeta() } as FlashMlaWithKvcacheArgs);
  for (const [name, t] of [["q", args.q], ["indices", args.indices!]] as const) {
    if (!t.isContiguous()) throw new ArgumentError(fn, name, "a contiguous tensor", `strides [${t.strides.join(", ")}]`);
  }
  const ordinal = deviceOrdinalOf(args.q);
  const { out, lse } = decodeOutputs(shape, "f32", ordinal);
  const params = SparseRefParamsStruct.pack({
    q: args.q.ptr,
    kv: args.kCache.ptr,
    indices: args.indices!.ptr,
    topk_length: args.topkLength?.ptr ?? 0n,
    attn_sink: args.attnSink?.ptr ?? 0n,
    out: out.ptr,
    lse: lse.ptr,
    kv_block_stride: BigInt(shape.block_stride_bytes),
    b: shape.b,
    s_q: shape.s_q,
    h_q: shape.h_q,
    topk: shape.topk,
    page_block_size: shape.page_block_size,
    num_slots: shape.num_blocks * shape.page_block_size,
    softmax_scale: shape.softmax_scale,
    pad0: 0,
  });
  decodeKernels(ordinal).sparseReferenceFp32.launch({ grid: [shape.h_q, shape.s_q, shape.b], block: 256, stream: args.stream }, [{ kind: "bytes", value: params }]);
  return { out, lse };
}
