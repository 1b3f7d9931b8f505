import { ArgumentError, formatGot, formatShape } from "../../errors/ArgumentError.js";
import type { Stream } from "../../runtime/Stream.js";
import type { Tensor } from "../../runtime/Tensor.js";
import type { FlashMlaWithKvcacheArgs } from "../args.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { RefParamsStruct } from "../contract/params.js";
import { decodeOutputs } from "../decodeOutputs.js";
import { validateDenseArgs, type DenseCall } from "../dense/validateDense.js";
import { MlaSchedMeta } from "../sched/MlaSchedMeta.js";

const FN = "mlaDecodeReferenceGpu";
/** The dense checks require metadata; the reference uses none, so they see one that is never filled. */
const unusedMeta = new MlaSchedMeta();

/** Arguments of {@link mlaDecodeReferenceGpu}: flashMlaWithKvcache's, without schedMeta. */
export type MlaDecodeReferenceGpuArgs = Omit<FlashMlaWithKvcacheArgs, "schedMeta"> & { schedMeta?: unknown; stream?: Stream };

/**
 * Checks the arguments of {@link mlaDecodeReferenceGpu} (flashMlaWithKvcache's checks, named after this
 * function, plus contiguous q, kCache and blockTable and no `out`/`lse`, which it would not fill).
 * `requireCuda = false` checks everything but residency.
 */
export function validateReferenceGpuArgs(args: MlaDecodeReferenceGpuArgs, requireCuda = true): DenseCall {
  if (args === null || typeof args !== "object") throw new ArgumentError(FN, "args", "an options object", formatGot(args));
  const call = validateDenseArgs({ ...args, schedMeta: unusedMeta }, requireCuda, FN);
  // Its grid is (h_q, s_q, b).
  if (call.s_q > 65535) throw new ArgumentError(FN, "q", "s_q <= 65535 (a launch grid dimension)", `s_q = ${call.s_q}`);
  // The kernel indexes q, the cache and the table as dense row-major arrays.
  for (const [name, t] of [["q", call.q], ["kCache", call.kCache], ["blockTable", call.blockTable]] as const) {
    if (!t.isContiguous()) throw new ArgumentError(FN, name, "a contiguous tensor (the fp32 reference reads it row-major)", `strides ${formatShape(t.strides)}`);
  }
  for (const name of ["out", "lse"] as const) {
    if (args[name] !== undefined) throw new ArgumentError(FN, name, "undefined (the fp32 reference returns new f32 out and lse)", "a value");
  }
  return call;
}

/**
 * A deliberately simple fp32 GPU reference of dense decode (one CTA per output row, plain loops): for
 * checking every element of shapes too large for the float64 CPU reference. Takes the same arguments
 * as flashMlaWithKvcache (schedMeta is not used), at either head (q's d_qk 576, or DeepSeek-V4's 512
 * with V the whole row); q, kCache and blockTable must be contiguous.
 * Returns out [b, s_q, h_q, 512] and lse [b, h_q, s_q], both f32 on the GPU.
 *
 * A test oracle: unlike flashMlaWithKvcache it trusts its data, so every used block id must be in
 * [0, num_blocks) and every length within the block table.
 */
export function mlaDecodeReferenceGpu(args: MlaDecodeReferenceGpuArgs): { out: Tensor; lse: Tensor } {
  const call = validateReferenceGpuArgs(args);
  const ordinal = call.q.deviceOrdinal;
  const kernel = loadKernel(ordinal, "dense_reference_fp32");
  const { out, lse } = decodeOutputs(call, "f32", ordinal);
  const params = RefParamsStruct.pack({
    q: call.q.ptr,
    kv: call.kCache.ptr,
    block_table: call.blockTable.ptr,
    cache_seqlens: call.cacheSeqlens.ptr,
    out: out.ptr,
    lse: lse.ptr,
    b: call.b,
    s_q: call.s_q,
    h_q: call.h_q,
    h_kv: call.h_kv,
    d_qk: call.d_qk,
    max_blocks_per_seq: call.max_blocks_per_seq,
    causal: call.causal ? 1 : 0,
    is_fp16: call.q.dtype === "fp16" ? 1 : 0,
    softmax_scale: call.softmax_scale,
    pad0: 0,
  });
  launchKernel(kernel, [call.h_q, call.s_q, call.b], params, { stream: args.stream });
  return { out, lse };
}
