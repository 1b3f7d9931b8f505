import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { decodeKernels } from "./decodeKernels.js";
import { validateDenseArgs, type FlashMlaWithKvcacheArgs } from "./flashMlaWithKvcache.js";
import { RefParamsStruct } from "./params.js";

/**
 * A deliberately simple fp32 GPU reference of dense decode (one CTA per output row, plain loops): for
 * checking every element of shapes too large for the float64 CPU reference. Takes the same arguments
 * as flashMlaWithKvcache (schedMeta is not used); q, kCache and blockTable must be contiguous.
 * Returns out [b, s_q, h_q, 512] and lse [b, h_q, s_q], both f32 on the GPU.
 */
export function mlaDecodeReferenceGpu(args: Omit<FlashMlaWithKvcacheArgs, "schedMeta"> & { schedMeta?: unknown; stream?: Stream }): { out: Tensor; lse: Tensor } {
  const shape = validateDenseArgs({ ...args, schedMeta: placeholderMeta } as FlashMlaWithKvcacheArgs);
  for (const [name, t] of [["q", args.q], ["kCache", args.kCache], ["blockTable", args.blockTable!]] as const) {
    if (!t.isContiguous()) throw new Error(`mlaDecodeReferenceGpu(): '${name}' must be contiguous`);
  }
  const ordinal = Number(args.q.device.slice(5));
  const out = Tensor.emptyDevice([shape.b, shape.s_q, shape.h_q, 512], "f32", ordinal);
  const lse = Tensor.emptyDevice([shape.b, shape.h_q, shape.s_q], "f32", ordinal);
  const params = RefParamsStruct.pack({
    q: args.q.ptr,
    kv: args.kCache.ptr,
    block_table: args.blockTable!.ptr,
    cache_seqlens: args.cacheSeqlens!.ptr,
    out: out.ptr,
    lse: lse.ptr,
    b: shape.b,
    s_q: shape.s_q,
    h_q: shape.h_q,
    h_kv: shape.h_kv,
    max_blocks_per_seq: shape.max_blocks_per_seq,
    causal: shape.causal ? 1 : 0,
    is_fp16: args.q.dtype === "fp16" ? 1 : 0,
    softmax_scale: shape.softmax_scale,
  });
  decodeKernels(ordinal).referenceFp32.launch({ grid: [shape.h_q, shape.s_q, shape.b], block: 256, stream: args.stream }, [{ kind: "bytes", value: params }]);
  return { out, lse };
}

import { MlaSchedMeta } from "./MlaSchedMeta.js";
const placeholderMeta = new MlaSchedMeta();
