import { ArgumentError } from "../../errors/ArgumentError.js";
import { Device } from "../../runtime/Device.js";
import type { FlashMlaResult, FlashMlaWithKvcacheArgs } from "../args.js";
import { launchCombine } from "../combine/launchCombine.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { DenseParamsStruct } from "../contract/params.js";
import { BLOCK_M, DENSE_PAGE_BLOCK_SIZE } from "../contract/shape.js";
import { decodeOutputs } from "../decodeOutputs.js";
import { launchScheduler } from "../sched/launchScheduler.js";
import type { MlaSchedConfig } from "../sched/MlaSchedMeta.js";
import { DENSE_SCHED_FIXED_OVERHEAD, numSmPartsDense, numSplitSlots } from "../sched/schedule.js";
import { checkDenseForm, chooseDenseKernel, denseBlocksPerPart, denseKernelName, type DenseForm } from "./chooseDenseKernel.js";
import { encodeDenseKvMap, encodeDenseQMap } from "./denseTensorMaps.js";
import { validateDenseArgs } from "./validateDense.js";

const FN = "flashMlaWithKvcache";

/** What tests and A/B timing may force on the dense path; the API forces nothing. */
export interface DenseOverrides {
  /** The main kernel's form instead of chooseDenseKernel's. */
  denseForm?: DenseForm;
  /**
   * The main kernels merge a request the scheduler split into exactly two pieces themselves: the piece
   * that finishes second reads the other's partial and writes out and lse, so the combine has nothing to
   * do for it. The outputs are the same bits either way; false leaves every split to the combine.
   * @default true
   */
  mergeSplitPairs?: boolean;
}

/**
 * Dense decode on the GPU: validation, the scheduler over the cache lengths (first call of a step), the
 * main kernel chosen by shape over (m-block, KV head, SM part), then the combine of the split partials
 * (with programmatic dependent launch). Everything is enqueued on `args.stream`.
 */
export function launchDense(args: FlashMlaWithKvcacheArgs, overrides: DenseOverrides = {}): FlashMlaResult {
  const forced = checkDenseForm(FN, overrides.denseForm);
  if (overrides.mergeSplitPairs !== undefined && typeof overrides.mergeSplitPairs !== "boolean") {
    throw new ArgumentError(FN, "overrides.mergeSplitPairs", "a boolean", typeof overrides.mergeSplitPairs);
  }
  const call = validateDenseArgs(args);
  const { q, kCache, blockTable, cacheSeqlens } = call;
  const { stream, schedMeta: meta } = args;
  const config: MlaSchedConfig = { b: call.b, s_q: call.s_q, h_q: call.h_q, h_kv: call.h_kv, page_block_size: DENSE_PAGE_BLOCK_SIZE, causal: call.causal, is_fp8_kvcache: false, topk: null };
  meta.checkConfig(FN, config);
  const heads_per_kv = call.h_q / call.h_kv;
  const rows_per_kv = call.s_q * heads_per_kv;
  const num_m_blocks = Math.ceil(rows_per_kv / BLOCK_M);
  const ordinal = q.deviceOrdinal;
  const numSmParts = numSmPartsDense(Device.get(ordinal).smCount, call.s_q, call.h_q, call.h_kv);
  const form = forced ?? chooseDenseKernel(rows_per_kv, denseBlocksPerPart(call.b, call.max_blocks_per_seq, numSmParts));
  const main = loadKernel(ordinal, denseKernelName(form, q.dtype === "fp16" ? "fp16" : "bf16", call.d_qk));

  const ws = meta.denseWorkspace(
    FN,
    config,
    stream,
    () => {
      return { deviceOrdinal: ordinal, numSmParts, numSplitSlots: numSplitSlots(call.b, numSmParts), b: call.b, rows: [call.h_kv, rows_per_kv], h_kv: call.h_kv, numMBlocks: num_m_blocks };
    },
    // The scheduler checks the lengths against the table (errors recorded, bad requests scheduled as
    // empty) and writes the lengths it scheduled, which the main kernels then read.
    (w) => launchScheduler(w, { lengths: cacheSeqlens, b: call.b, maxLen: 0, maxValidLen: DENSE_PAGE_BLOCK_SIZE * call.max_blocks_per_seq, fixedOverhead: DENSE_SCHED_FIXED_OVERHEAD }, stream),
  );

  const { out, lse } = decodeOutputs(call, q.dtype === "fp16" ? "fp16" : "bf16", ordinal, args);
  const qMap = encodeDenseQMap(q, call, heads_per_kv);
  const pairsMerged = overrides.mergeSplitPairs !== false;
  const params = DenseParamsStruct.pack({
    tmap_kv: encodeDenseKvMap(kCache, call),
    tmap_q: qMap ?? new Uint8Array(128),
    q: q.ptr,
    out: out.ptr,
    lse: lse.ptr,
    o_accum: ws.oAccum.ptr,
    lse_accum: ws.lseAccum.ptr,
    block_table: blockTable.ptr,
    cache_seqlens: ws.seqlensUsed.ptr,  // the lengths the scheduler checked and scheduled
    sched_meta: ws.schedMeta.ptr,
    num_splits: ws.numSplits.ptr,
    errors: ws.errors.ptr,
    merge_flags: ws.mergeFlags.ptr,
    q_batch_stride: BigInt(q.strides[0]),
    q_token_stride: BigInt(q.strides[1]),
    q_head_stride: BigInt(q.strides[2]),
    block_table_stride: BigInt(blockTable.strides[0]),
    b: call.b,
    s_q: call.s_q,
    h_q: call.h_q,
    h_kv: call.h_kv,
    heads_per_kv,
    rows_per_kv,
    num_m_blocks,
    max_blocks_per_seq: call.max_blocks_per_seq,
    num_sm_parts: ws.numSmParts,
    num_blocks: call.num_blocks,
    causal: call.causal ? 1 : 0,
    softmax_scale: call.softmax_scale,
    scale_log2: call.softmax_scale * Math.LOG2E,
    q_tma: qMap === undefined ? 0 : 1,
    merge_pairs: pairsMerged ? 1 : 0,
  });
  launchKernel(main, [num_m_blocks, call.h_kv, ws.numSmParts], params, { stream });
  launchCombine(ws, call, out, lse, { stream, maxPieces: meta.knownMaxPieces(), pairsMerged });
  return { out, lse };
}
