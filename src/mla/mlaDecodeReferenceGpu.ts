import { ArgumentError, formatShape } from "../errors/ArgumentError.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { decodeKernels } from "./decodeKernels.js";
import { decodeOutputs, deviceOrdinalOf } from "./decodeOutputs.js";
import { validateDenseArgs, type FlashMlaWithKvcacheArgs } from "./flashMlaWithKvcache.js";
import { RefParamsStruct } from "./params.js";

const FN = "mlaDecodeReferenceGpu";

/** Arguments of {@link mlaDecodeReferenceGpu}: flashMlaWithKvcache's, without schedMeta. */
export type MlaDecodeReferenceGpuArgs = Omit<FlashMlaWithKvcacheArgs, "schedMeta"> & { schedMeta?: unknown; stream?: Stream };

/**
 * Checks the arguments of {@link mlaDecodeReferenceGpu} (flashMlaWithKvcache's checks, named after this
 * function, plus contiguous q, kCache and blockTable and no `out`/`lse`, which it would not fill).
 * `requireCuda = false` checks everything but residency. Exported for tests.
 */
export function validateReferenceGpuArgs(args: MlaDecodeReferenceGpuArgs, requireCuda = true): ReturnType<typeof validateDenseArgs> {
  if (args === null || typeof args !== "object") throw new ArgumentError(FN, "args", "an options object", String(args));
  const shape = validateDenseArgs({ ...args, schedMeta: placeholderMeta } as FlashMlaWithKvcacheArgs, requireCuda, FN);
  // Its grid is (h_q, s_q, b).
  if (shape.s_q > 65535) throw new ArgumentError(FN, "q", "s_q <= 65535 (a launch grid dimension)", `s_q = ${shape.s_q}`);
  // The kernel indexes q, the cache and the table as dense row-major arrays.
  for (const [name, t] of [["q", args.q], ["kCache", args.kCache], ["blockTable", args.blockTable!]] as const) {
    if (!t.isContiguous()) throw new ArgumentError(FN, name, "a contiguous tensor (the fp32 reference reads it row-major)", `strides ${formatShape(t.strides)}`);
  }
  for (const name of ["out", "lse"] as const) {
    if (args[name] !== undefined) throw new ArgumentError(FN, name, "undefined (the fp32 reference returns new f32 out and lse)", "a value");
  }
  return shape;
}

/**
 * A deliberately simple fp32 GPU reference of dense decode (one CTA per output row, plain loops): for
 * checking every element of shapes too large for the float64 CPU reference. Takes the same arguments
 * as flashMlaWithKvcache (schedMeta is not used); q, kCache and blockTable must be contiguous.
 * Returns out [b, s_q, h_q, 512] and lse [b, h_q, s_q], both f32 on the GPU.
 *
 * A test oracle: unlike flashMlaWithKvcache it trusts its data, so every used block id must be in
 * [0, num_blocks) and every length within the block table (docs/reliability.md).
 */
export function mlaDecodeReferenceGpu(args: MlaDecodeReferenceGpuArgs): { out: Tensor; lse: Tensor } {
  const shape = validateReferenceGpuArgs(args);
  const ordinal = deviceOrdinalOf(args.q);
  const { out, lse } = decodeOutputs(shape, "f32", ordinal);
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
