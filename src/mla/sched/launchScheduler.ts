import type { Stream } from "../../runtime/Stream.js";
import type { Tensor } from "../../runtime/Tensor.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { SchedParamsStruct } from "../contract/params.js";
import type { Workspace } from "./MlaSchedMeta.js";

/** What the scheduler balances and how it bounds the lengths. */
export interface SchedulerInput {
  /** [b] int32 on the GPU: each request's length (dense: cache tokens; sparse: valid index entries). */
  lengths: Tensor;
  b: number;
  /** Sparse: lengths are clamped to [0, max_len] (topk). 0: no clamp. */
  maxLen: number;
  /**
   * Dense: a length above this (64 · max_blocks_per_seq) is recorded as an error and its request
   * scheduled as empty; 0: no check.
   */
  maxValidLen: number;
  /** Cost of one piece of work in blocks (schedule.ts's SCHED_FIXED_OVERHEAD or DENSE_SCHED_FIXED_OVERHEAD). */
  fixedOverhead: number;
  /**
   * Sparse with a second index list: its topk, and optionally its [b] int32 valid lengths (without: all
   * of it). A request's walk is its main list padded to whole 64-entry blocks, then the extra list.
   */
  extra?: { maxLen: number; lengths?: Tensor };
}

/**
 * Queues the scheduler kernel (one warp) that fills `ws`'s records and split prefix sums from the
 * lengths on the GPU; on the dense path it also writes the lengths it scheduled and records the first
 * bad one.
 */
export function launchScheduler(ws: Workspace, input: SchedulerInput, stream: Stream | undefined): void {
  const dense = ws.kind === "dense";
  const params = SchedParamsStruct.pack({
    cache_seqlens: input.lengths.ptr,
    sched_meta: ws.schedMeta.ptr,
    num_splits: ws.numSplits.ptr,
    seqlens_used: dense ? ws.seqlensUsed.ptr : 0n,
    errors: dense ? ws.errors.ptr : 0n,
    b: input.b,
    num_sm_parts: ws.numSmParts,
    max_len: input.maxLen,
    max_valid_len: input.maxValidLen,
    fixed_overhead: input.fixedOverhead,
    extra_max_len: input.extra?.maxLen ?? 0,
    extra_lengths: input.extra?.lengths?.ptr ?? 0n,
  });
  launchKernel(loadKernel(ws.deviceOrdinal, "sched_meta"), 1, params, { stream });
}
