import { ArgumentError, describeValue } from "../errors/ArgumentError.js";
import type { FlashMlaResult } from "../mla/args.js";
import { D_V } from "../mla/contract/shape.js";
import { flashMlaWithKvcache } from "../mla/flashMlaWithKvcache.js";
import type { MlaSchedMeta } from "../mla/sched/MlaSchedMeta.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { DcpStep } from "./DcpStep.js";
import { dcpMerge, dcpRescale } from "./merge.js";

/**
 * How the ranks' partial outputs meet (per layer; the volume does not grow with the context):
 * - "allGather": every rank gathers every rank's out and lse, then merges them (one kernel): every
 *   rank ends with the whole output. Sends (N − 1)/N of N outputs per rank.
 * - "allReduce": the lse are gathered (small), each rank weights its own out, an all-reduce sums them:
 *   every rank ends with the whole output.
 * - "reduceScatter": as allReduce, but a reduce-scatter over head chunks leaves rank r the merged
 *   output of heads [r·h_q/N, (r+1)·h_q/N) only, [b, s_q, h_q/N, 512] (vLLM's "ag_rs": what tensor
 *   parallelism's output projection takes). Sends (N − 1)/N of one output per rank.
 * The sums of allReduce and reduceScatter run in the output's dtype (bf16: NCCL rounds each partial
 * sum); allGather merges in f32 from the bf16 parts.
 */
export type DcpForm = "allGather" | "allReduce" | "reduceScatter";

/** What a decode-context-parallel call needs of a communicator (NcclComm has it). */
export interface DcpCommunicator {
  readonly rank: number;
  readonly size: number;
  allGather(send: Tensor, recv: Tensor, options?: { stream?: Stream }): void;
  allReduce(send: Tensor, recv: Tensor, options?: { op?: "sum"; stream?: Stream }): void;
  reduceScatter(send: Tensor, recv: Tensor, options?: { op?: "sum"; stream?: Stream }): void;
}

/** One rank's arguments of a layer: the FlashMLA call on its shard, and its communicator. */
export interface DcpRankArgs {
  /** This rank's step (DcpStep.dense / DcpStep.sparse), built once per decode step. */
  step: DcpStep;
  /**
   * This rank's communicator (size = step.ranks, rank = step.rank). Omitted only for virtual ranks: all
   * ranks' shards on one GPU in one call, merged without communication (form "allGather").
   */
  comm?: DcpCommunicator;
  /**
   * [b, s_q, h_q, d_qk] on this rank's GPU (every rank has the whole q). Dense: d_qk 576, or DeepSeek-V4's
   * 512 (V the whole row); sparse: 576 with the V32 cache, 512 with the MODEL1 cache.
   */
  q: Tensor;
  /** This rank's cache: dense [blocks, 64, h_kv, d_qk] in q's dtype; sparse the FP8 cache of its tokens. */
  kCache: Tensor;
  /** Sparse: [b, s_q, topk] int32, this rank's local token ids; -1 where another rank holds the entry. */
  indices?: Tensor;
  /** Sparse: [b] int32, the valid prefix of each request's index rows (the same on every rank). */
  topkLength?: Tensor;
  isFp8Kvcache?: boolean;
  /** [h_q] f32 on this rank's GPU: applied once, to the merged output. */
  attnSink?: Tensor;
  /** This rank's metadata for its shard's schedule, as for flashMlaWithKvcache. */
  schedMeta: MlaSchedMeta;
  headDimV: number;
  softmaxScale?: number;
  stream?: Stream;
  /** Preallocated output in the form's layout (needed inside CUDA graph capture). */
  out?: Tensor;
  /** Preallocated [b, h_q, s_q] f32 lse. */
  lse?: Tensor;
}

/** Collectives of several communicators driven by one thread must be issued inside one NCCL group. */
export type DcpGroup = (issue: () => void) => void;

/**
 * One layer of a decode step with the context split over N ranks (decode context parallelism): each
 * rank decodes its share of every request's cache with flashMlaWithKvcache, and the partial outputs
 * are merged by their log-sum-exp through `form`'s communication, the attention sink applied once.
 * `ranks` are the ranks this process drives: one (one process per GPU), or all of them (one process,
 * several GPUs; then `group` must be the NCCL group call), or all of them without communicators
 * (virtual ranks on one GPU: one result). Everything is enqueued on each rank's stream; nothing syncs.
 *
 * Returns one result per driven rank (one for virtual ranks): out [b, s_q, h_q, 512] and lse
 * [b, h_q, s_q], or for "reduceScatter" out [b, s_q, h_q / N, 512] (this rank's heads) and lse of all
 * heads.
 */
export function dcpDecode(ranks: readonly DcpRankArgs[], opts: { form: DcpForm; group?: DcpGroup }): FlashMlaResult[] {
  const fn = "dcpDecode";
  if (!Array.isArray(ranks) || ranks.length === 0) throw new ArgumentError(fn, "ranks", "a non-empty array of DcpRankArgs", describeValue(ranks));
  const form = opts?.form;
  if (form !== "allGather" && form !== "allReduce" && form !== "reduceScatter") throw new ArgumentError(fn, "opts.form", '"allGather", "allReduce" or "reduceScatter"', describeValue(form));
  const n = ranks[0].step instanceof DcpStep ? ranks[0].step.ranks : 0;
  ranks.forEach((r, i) => checkRankArgs(fn, r, i, n));
  const virtual = ranks[0].comm === undefined;
  if (virtual) {
    if (ranks.some((r) => r.comm !== undefined)) throw new ArgumentError(fn, "ranks[].comm", "on every rank or on none", "on some");
    if (ranks.length !== n) throw new ArgumentError(fn, "ranks", `all ${n} ranks (virtual ranks: no communicators)`, `${ranks.length}`);
    if (form !== "allGather") throw new ArgumentError(fn, "opts.form", '"allGather" for virtual ranks', form);
    if (ranks.some((r) => r.q.deviceOrdinal !== ranks[0].q.deviceOrdinal)) throw new ArgumentError(fn, "ranks[].q", "one device for virtual ranks", "several");
  } else if (ranks.some((r) => r.comm === undefined)) {
    throw new ArgumentError(fn, "ranks[].comm", "on every rank or on none", "on some");
  }
  const group: DcpGroup = opts.group ?? ((issue) => issue());
  if (!virtual && ranks.length > 1 && opts.group === undefined) throw new ArgumentError(fn, "opts.group", "the NCCL group call when one process drives several ranks", "undefined");

  const [b, s_q, h_q] = ranks[0].q.shape;
  const dtype = ranks[0].q.dtype === "fp16" ? "fp16" : "bf16";
  // Virtual ranks share rank 0's buffers; each real rank gathers into its own.
  const bufs = ranks.map((r, i) => (virtual && i > 0 ? undefined : r.step.gatherBuffers({ b, s_q, h_q }, dtype)));
  const buf = (i: number) => bufs[virtual ? 0 : i]!;
  const slots = ranks.map((r, i) => sliceParts(buf(i), r.step.rank, { b, s_q, h_q }));
  const slot = (i: number) => slots[i];

  // 1. Each rank decodes its shard into its slot of the gather buffers, without the sink.
  ranks.forEach((r, i) => decodeShard(r, slot(i)));
  if (virtual) {
    return [dcpMerge({ outParts: buf(0).outParts, lseParts: lseView(buf(0).lseParts, ranks[0].step, { b, s_q, h_q }), attnSink: ranks[0].attnSink, stream: ranks[0].stream })];
  }
  const comms = ranks.map((r) => r.comm!);
  if (form === "allGather") {
    // 2. In-place all-gather of out and lse, 3. the merge.
    group(() => ranks.forEach((r, i) => {
      comms[i].allGather(slot(i).out, buf(i).outParts, { stream: r.stream });
      comms[i].allGather(slot(i).lse, buf(i).lseParts, { stream: r.stream });
    }));
    return ranks.map((r, i) => dcpMerge({ outParts: buf(i).outParts, lseParts: lseView(buf(i).lseParts, r.step, { b, s_q, h_q }), attnSink: r.attnSink, stream: r.stream, out: r.out, lse: r.lse }));
  }
  // 2. All-gather of the lse, 3. each rank's weighted term, 4. the sum.
  group(() => ranks.forEach((r, i) => comms[i].allGather(slot(i).lse, buf(i).lseParts, { stream: r.stream })));
  const rescale = (r: DcpRankArgs, i: number, layout: "heads" | "headChunks", term: Tensor | undefined) =>
    dcpRescale({ out: slot(i).out, lseParts: lseView(buf(i).lseParts, r.step, { b, s_q, h_q }), rank: r.step.rank, layout, attnSink: r.attnSink, stream: r.stream, term, lse: r.lse });
  if (form === "allReduce") {
    // The term is the output: summed in place.
    const terms = ranks.map((r, i) => rescale(r, i, "heads", r.out));
    group(() => ranks.forEach((r, i) => comms[i].allReduce(terms[i].term, terms[i].term, { op: "sum", stream: r.stream })));
    return terms.map((t) => ({ out: t.term as Tensor<"bf16" | "fp16">, lse: t.lse }));
  }
  const terms = ranks.map((r, i) => rescale(r, i, "headChunks", buf(i).term.view([n, b, s_q, h_q / n, D_V])));
  const outs = ranks.map((r) => (r.out as Tensor<"bf16" | "fp16"> | undefined) ?? Tensor.emptyDevice([b, s_q, h_q / n, D_V], dtype, r.step.deviceOrdinal));
  group(() => ranks.forEach((r, i) => comms[i].reduceScatter(terms[i].term, outs[i], { op: "sum", stream: r.stream })));
  return outs.map((out, i) => ({ out, lse: terms[i].lse }));
}

/** Rank `rank`'s out [b, s_q, h_q, 512] and lse (b·h_q·s_q floats) inside the gather buffers. */
function sliceParts(buf: { outParts: Tensor; lseParts: Tensor<"f32"> }, rank: number, s: { b: number; s_q: number; h_q: number }): { out: Tensor; lse: Tensor<"f32"> } {
  const outCount = s.b * s.s_q * s.h_q * D_V, lseCount = s.b * s.h_q * s.s_q;
  return {
    out: Tensor.fromDeviceBuffer(buf.outParts.buffer!, [s.b, s.s_q, s.h_q, D_V], buf.outParts.dtype, { byteOffset: rank * outCount * buf.outParts.elementSize }),
    lse: Tensor.fromDeviceBuffer(buf.lseParts.buffer!, [s.b, s.h_q, s.s_q], "f32", { byteOffset: rank * lseCount * 4 }),
  };
}

/**
 * The gathered lse as [ranks, b, h_q, s_q] with the strides its writer used: a flattened decode of
 * b·s_q rows wrote each part as [b, s_q, h_q].
 */
function lseView(lseParts: Tensor<"f32">, step: DcpStep, s: { b: number; s_q: number; h_q: number }): Tensor<"f32"> {
  const part = s.b * s.h_q * s.s_q;
  const strides = step.form === "flatten" ? [part, s.s_q * s.h_q, 1, s.h_q] : [part, s.h_q * s.s_q, s.s_q, 1];
  return lseParts.view([step.ranks, s.b, s.h_q, s.s_q], strides);
}

/** One rank's flashMlaWithKvcache on its shard, writing into its slot; the flattened form as b·s_q rows of one token. */
function decodeShard(r: DcpRankArgs, into: { out: Tensor; lse: Tensor<"f32"> }): void {
  const { step, q } = r;
  const common = { kCache: r.kCache, headDimV: r.headDimV, schedMeta: r.schedMeta, softmaxScale: r.softmaxScale, stream: r.stream };
  if (step.kind === "sparse") {
    flashMlaWithKvcache({ ...common, q, indices: r.indices, topkLength: r.topkLength, isFp8Kvcache: r.isFp8Kvcache, out: into.out, lse: into.lse });
    return;
  }
  if (step.form !== "flatten") {
    flashMlaWithKvcache({ ...common, q, blockTable: step.blockTable, cacheSeqlens: step.cacheSeqlens, causal: step.form === "causal", out: into.out, lse: into.lse });
    return;
  }
  const [b, s_q, h_q, d_qk] = q.shape;
  if (q.strides[0] !== s_q * q.strides[1]) throw new ArgumentError("dcpDecode", "ranks[].q", "[b, s_q, h_q, d_qk] with the batch stride s_q times the token stride (a causal step flattens its query tokens)", `strides [${q.strides.join(", ")}]`);
  // Either head: flashMlaWithKvcache checks d_qk (576 or 512) and the cache's width against it.
  const flatQ = q.view([b * s_q, 1, h_q, d_qk], [q.strides[1], q.strides[1], q.strides[2], 1]);
  const flatOut = into.out.view([b * s_q, 1, h_q, D_V]);
  const flatLse = into.lse.view([b * s_q, h_q, 1]);
  flashMlaWithKvcache({ ...common, q: flatQ, blockTable: step.blockTable, cacheSeqlens: step.cacheSeqlens, causal: false, out: flatOut, lse: flatLse });
}

function checkRankArgs(fn: string, r: DcpRankArgs, i: number, n: number): void {
  if (r === null || typeof r !== "object") throw new ArgumentError(fn, `ranks[${i}]`, "a DcpRankArgs object", describeValue(r));
  if (!(r.step instanceof DcpStep)) throw new ArgumentError(fn, `ranks[${i}].step`, "a DcpStep", describeValue(r.step));
  if (r.step.ranks !== n) throw new ArgumentError(fn, `ranks[${i}].step`, `a step of ${n} ranks (as ranks[0])`, `${r.step.ranks} ranks`);
  if (r.attnSink !== undefined && r.step.kind === "dense") throw new ArgumentError(fn, `ranks[${i}].attnSink`, "undefined on the dense path", "a tensor");
  if (r.comm !== undefined && (r.comm.size !== n || r.comm.rank !== r.step.rank)) {
    throw new ArgumentError(fn, `ranks[${i}].comm`, `a communicator of size ${n} and rank ${r.step.rank} (the step's)`, `size ${r.comm.size}, rank ${r.comm.rank}`);
  }
  if (!(r.q instanceof Tensor)) throw new ArgumentError(fn, `ranks[${i}].q`, "a Tensor", describeValue(r.q));
}
