/**
 * flashmla-ts/dcp: decode context parallelism, one request's cache split by token over N GPUs
 * (docs/dcp.md). The per-step plan and the per-layer call, the merge kernels, the placement and
 * sharding helpers, the global causal mask per rank, and the float64 model of the merge.
 * Communicators come from flashmla-ts/nccl.
 */
export { DcpStep, type DcpDenseStepOptions, type DcpSparseStepOptions } from "./DcpStep.js";
export { dcpDecode, type DcpCommunicator, type DcpForm, type DcpGroup, type DcpRankArgs } from "./dcpDecode.js";
export { dcpMerge, dcpRescale, type DcpMergeArgs, type DcpRescaleArgs } from "./merge.js";
export {
  dcpGlobalPosition,
  dcpLocalLength,
  dcpOwner,
  dcpPageMapFromRequests,
  dcpPageMapRoundRobin,
  planDcpShards,
  shardDenseCacheHost,
  shardSparseCacheHost,
  shardSparseIndicesHost,
  type DcpPageMap,
  type DcpRankShard,
  type DcpShardPlan,
  type DcpShardPlanOptions,
  type DcpSlot,
} from "./shard.js";
export { dcpCausalForm, dcpFlattenBlockTable, dcpVisibleLengths, type DcpCausalForm, type DcpCausalFormName } from "./causal.js";
export { dcpHeadSlice, dcpMergeModel, dcpRescaleModel } from "./mergeModel.js";
