import { Device } from "../../runtime/Device.js";
import type { FlashMlaResult, FlashMlaWithKvcacheArgs } from "../args.js";
import { launchCombine } from "../combine/launchCombine.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { SparseParamsStruct } from "../contract/params.js";
import { decodeOutputs } from "../decodeOutputs.js";
import { launchScheduler } from "../sched/launchScheduler.js";
import { numSmPartsSparse, numSplitSlots, SCHED_FIXED_OVERHEAD } from "../sched/schedule.js";
import { checkPlanFitsHeads, checkSparsePlan, chooseSparseKernel, sparseKernelName, type SparsePlan } from "./chooseSparseKernel.js";
import { validateSparseArgs } from "./validateSparse.js";

const FN = "flashMlaWithKvcache";

/** What tests and A/B timing may force on the sparse path; the API forces nothing. */
export interface SparseOverrides {
  /** The head plan instead of chooseSparseKernel's; refused where the head count does not fit it. */
  sparsePlan?: SparsePlan;
}

/**
 * Sparse FP8 decode on the GPU: validation, the scheduler over each request's valid top-k entries (and
 * the second list's after them; first call of a step), the main kernel of the format and head plan
 * over (64-head tile, query token, SM part), then the combine (which applies the attention sink to
 * split rows). Everything is enqueued on `args.stream`.
 */
export function launchSparse(args: FlashMlaWithKvcacheArgs, overrides: SparseOverrides = {}): FlashMlaResult {
  // The overrides first (no tensor needed), then the arguments; all before anything is allocated.
  const forced = checkSparsePlan(FN, overrides.sparsePlan);
  const call = validateSparseArgs(args);
  if (forced !== undefined) checkPlanFitsHeads(FN, forced, call.h_q);
  const { q, kCache, indices, extra, extraKCache, extraIndices } = call;
  const { stream, schedMeta: meta } = args;
  const ordinal = q.deviceOrdinal;
  const main = loadKernel(ordinal, sparseKernelName(forced ?? chooseSparseKernel(call.h_q), call.format, extra !== undefined));

  const ws = meta.sparseWorkspace(
    FN,
    call.config,
    stream,
    () => {
      const numSmParts = numSmPartsSparse(Device.get(ordinal).smCount, call.s_q, call.h_q);
      return { deviceOrdinal: ordinal, numSmParts, numSplitSlots: numSplitSlots(call.b, numSmParts), b: call.b, rows: [call.s_q * call.h_q], topk: call.topk };
    },
    // Sparse lengths are clamped to [0, topk] (FlashMLA's topk_length rule), never errors; without
    // topkLength every request attends all topk entries. A second list's blocks follow the first's.
    (w) =>
      launchScheduler(
        w,
        {
          lengths: args.topkLength ?? w.fullLengths,
          b: call.b,
          maxLen: call.topk,
          maxValidLen: 0,
          fixedOverhead: SCHED_FIXED_OVERHEAD,
          ...(extra !== undefined ? { extra: { maxLen: extra.topk, lengths: args.extraTopkLength } } : {}),
        },
        stream,
      ),
  );

  const { out, lse } = decodeOutputs(call, "bf16", ordinal, args);
  const params = SparseParamsStruct.pack({
    q: q.ptr,
    kv: kCache.ptr,
    indices: indices.ptr,
    lengths: (args.topkLength ?? ws.fullLengths).ptr,
    extra_kv: extraKCache?.ptr ?? 0n,
    extra_indices: extraIndices?.ptr ?? 0n,
    extra_lengths: args.extraTopkLength?.ptr ?? 0n,
    attn_sink: args.attnSink?.ptr ?? 0n,
    out: out.ptr,
    lse: lse.ptr,
    o_accum: ws.oAccum.ptr,
    lse_accum: ws.lseAccum.ptr,
    sched_meta: ws.schedMeta.ptr,
    num_splits: ws.numSplits.ptr,
    q_batch_stride: BigInt(q.strides[0]),
    q_token_stride: BigInt(q.strides[1]),
    q_head_stride: BigInt(q.strides[2]),
    indices_batch_stride: BigInt(indices.strides[0]),
    indices_token_stride: BigInt(indices.strides[1]),
    kv_block_stride: BigInt(call.block_stride_bytes),
    extra_indices_batch_stride: BigInt(extraIndices?.strides[0] ?? 0),
    extra_indices_token_stride: BigInt(extraIndices?.strides[1] ?? 0),
    extra_kv_block_stride: BigInt(extra?.block_stride_bytes ?? 0),
    b: call.b,
    s_q: call.s_q,
    h_q: call.h_q,
    topk: call.topk,
    page_block_size: call.page_block_size,
    num_slots: call.num_blocks * call.page_block_size,
    extra_topk: extra?.topk ?? 0,
    extra_page_block_size: extra?.page_block_size ?? 1,
    extra_num_slots: extra !== undefined ? extra.num_blocks * extra.page_block_size : 0,
    num_sm_parts: ws.numSmParts,
    softmax_scale: call.softmax_scale,
    scale_log2: call.softmax_scale * Math.LOG2E,
  });
  launchKernel(main, [call.num_head_tiles, call.s_q, ws.numSmParts], params, { stream, pdl: true });
  launchCombine(ws, { b: call.b, s_q: call.s_q, h_q: call.h_q, h_kv: 1 }, out, lse, { stream, maxPieces: meta.knownMaxPieces(), attnSink: args.attnSink });
  return { out, lse };
}
