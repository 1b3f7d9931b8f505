import { ArgumentError } from "../errors/ArgumentError.js";
import type { FlashMlaResult, FlashMlaWithKvcacheArgs } from "./args.js";
import { launchDense, type DenseOverrides } from "./dense/launchDense.js";
import { launchSparse, type SparseOverrides } from "./sparse/launchSparse.js";
import { isSparseCall } from "./sparse/validateSparse.js";

const FN = "flashMlaWithKvcache";

/** What tests and A/B timing may force (internal: not part of the package's API). */
export type DecodeOverrides = DenseOverrides & SparseOverrides;

/**
 * MLA decode attention over a paged latent KV cache on a Hopper GPU (FlashMLA's flash_mla_with_kvcache).
 * Dense (bf16/fp16 cache, block table) without `indices`; sparse (V32 FP8 cache, top-k token ids) with
 * them. The first call of a decode step fills `schedMeta` with the tile scheduler's split of the work
 * over the SMs; then the main kernel for the call's shape runs the split-KV attention, and the combine
 * merges the split partials. Every argument is checked before anything touches the GPU (ArgumentError);
 * everything is enqueued on `stream`, and nothing syncs with the host.
 *
 * @example
 * const meta = getMlaMetadata();
 * for (const layer of layers) {
 *   const { out, lse } = flashMlaWithKvcache({ q, kCache: layer.kCache, blockTable, cacheSeqlens, headDimV: 512, schedMeta: meta, causal: true });
 * }
 */
export function flashMlaWithKvcache(args: FlashMlaWithKvcacheArgs): FlashMlaResult {
  return isSparseCall(args) ? launchSparse(args) : launchDense(args);
}

/**
 * flashMlaWithKvcache with a forced kernel choice: a dense form, pairs left to the combine, or a sparse
 * head plan. For tests (two forms on one shape) and A/B timing; refused (ArgumentError) where the choice
 * cannot run the call.
 */
export function decodeWithOverrides(args: FlashMlaWithKvcacheArgs, overrides: DecodeOverrides): FlashMlaResult {
  const { denseForm, mergeSplitPairs, sparsePlan } = overrides;
  if (isSparseCall(args)) {
    if (denseForm !== undefined || mergeSplitPairs !== undefined) {
      throw new ArgumentError(FN, denseForm !== undefined ? "overrides.denseForm" : "overrides.mergeSplitPairs", "undefined on the sparse path", String(denseForm ?? mergeSplitPairs));
    }
    return launchSparse(args, { sparsePlan });
  }
  if (sparsePlan !== undefined) throw new ArgumentError(FN, "overrides.sparsePlan", "undefined on the dense path", String(sparsePlan));
  return launchDense(args, { denseForm, mergeSplitPairs });
}
