import { dcpMerge } from "../dcp/merge.js";
import { D_QK, D_V } from "../mla/contract/shape.js";
import { flashMlaWithKvcache } from "../mla/flashMlaWithKvcache.js";
import { getMlaMetadata } from "../mla/sched/MlaSchedMeta.js";
import { f32ArrayToBf16 } from "../numeric/bf16.js";
import { Rng } from "../numeric/random.js";
import type { Device } from "../runtime/Device.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { makeGpuDenseCase } from "../testing/gpuDenseCase.js";
import { makeGpuSparseCase, type GpuSparseCase } from "../testing/gpuSparseCase.js";
import { FP8_TOKEN_BYTES } from "../numeric/kvCacheFp8.js";
import type { Kernel } from "../runtime/Kernel.js";
import { benchSpinKernel } from "./benchSpin.js";
import { timeGpuCalls } from "./timeGpuCalls.js";
import { timingStats, type TimingStats } from "./timingStats.js";

/** A decode-context-parallel bench case: one decode step's layer split over N ranks. */
export interface DcpBenchCase {
  name: string;
  b: number;
  h_q: number;
  s_q: number;
  /** Global tokens per request. */
  s_k: number;
  causal: boolean;
  /** Sparse FP8 decode (V3.2 cache, 64-token pages) with this many index entries per query token. */
  topk?: number;
}

/** The case DCP is for: a batch of long requests whose cache one GPU holds with difficulty. */
export const DCP_BENCH_CASES: readonly DcpBenchCase[] = Object.freeze([
  { name: "dcp-long", b: 16, h_q: 128, s_q: 1, s_k: 131072, causal: false },
  { name: "dcp-long-mtp", b: 16, h_q: 128, s_q: 2, s_k: 131072, causal: true },
  // sparse-v32's shape: a rank holds 1/N of the pages, so 1/N of each row's entries; it still walks all
  // topk of them (the others are -1). What DCP buys sparse decode is the cache's memory.
  { name: "dcp-sparse", b: 128, h_q: 128, s_q: 2, s_k: 32768, causal: false, topk: 2048 },
]);

/**
 * The communication model of one layer, until the two-GPU machine measures it: each collective costs
 * `latencyUs` plus its bytes on the wire over `busGBs` (NCCL's bus bandwidth). The defaults are
 * assumptions for H200 NVLink (450 GB/s per direction, ~360 GB/s reached by NCCL's large collectives),
 * not measurements.
 */
export interface DcpCommModel {
  latencyUs: number;
  busGBs: number;
}
export const DCP_COMM_MODEL: DcpCommModel = Object.freeze({ latencyUs: 10, busGBs: 360 });

/** Page size of the sparse case's cache (the benchmark's sparse cases use 64). */
const SPARSE_PAGE = 64;

/** One rank count of a DCP bench case. */
export interface DcpBenchRow {
  ranks: number;
  /** Tokens per request on each rank (ceil of s_k / ranks: the busiest rank). */
  localTokens: number;
  /** This rank's flashMlaWithKvcache on its shard, measured. */
  decodeUs: TimingStats;
  /** The all-gather form's merge of N parts (dcpMerge), measured; 0 parts to merge at N = 1. */
  mergeUs: TimingStats | undefined;
  /** Modeled, per form: the collectives of the layer (DCP_COMM_MODEL). */
  commUs: { allGather: number; reduceScatter: number };
  /** decode + merge + modeled all-gather: one layer's step time on N GPUs. */
  stepUs: number;
  /** The unsharded decode's median over stepUs. */
  speedup: number;
  /** The floor: KV bytes of one rank at the read roof, plus the modeled communication. */
  floorUs: number;
  /** KV bytes one rank reads per layer. */
  kvBytes: number;
}

/** Options of {@link runDcpBench}. */
export interface DcpBenchOptions {
  device: Device;
  stream: Stream;
  ranks?: readonly number[];
  iters?: number;
  /** Read roof for the floor, GB/s. @default 4485 (our ceilings kernel on the H200) */
  readGBs?: number;
  comm?: DcpCommModel;
  seed?: number;
}

/**
 * Times one layer of `c` as each rank of N would run it on one GPU: the rank's decode of its shard of
 * every request (s_k / N tokens, measured), the merge of the N partial outputs (measured), and the
 * communication between them (modeled: one GPU cannot measure it). The causal mask of an s_q > 1 case
 * is taken on the shard's own positions, which costs what the global mask costs to within a token.
 */
export function runDcpBench(c: DcpBenchCase, opts: DcpBenchOptions): DcpBenchRow[] {
  const { stream } = opts;
  const iters = opts.iters ?? 40;
  const readGBs = opts.readGBs ?? 4485;
  const comm = opts.comm ?? DCP_COMM_MODEL;
  const spin = benchSpinKernel(opts.device.ordinal);
  const rows: DcpBenchRow[] = [];
  let baseUs = 0;
  const sparse = c.topk !== undefined ? makeGpuSparseCase({ b: c.b, s_q: c.s_q, h_q: c.h_q, topk: c.topk, seqlens: Array(c.b).fill(c.s_k), pageBlockSize: SPARSE_PAGE, withSink: false, withTopkLength: false }, { seed: opts.seed ?? 1, stream }) : undefined;
  try {
    for (const ranks of opts.ranks ?? [1, 2, 4, 8]) {
      const row = sparse === undefined ? denseRow(c, ranks, opts, spin, iters) : sparseRow(c, sparse, ranks, opts, spin, iters);
      const outBytes = c.b * c.s_q * c.h_q * D_V * 2, lseBytes = c.b * c.h_q * c.s_q * 4;
      const wire = (bytes: number) => (ranks === 1 ? 0 : comm.latencyUs + (bytes * (ranks - 1)) / ranks / (comm.busGBs * 1e3));
      // All-gather: every rank receives the others' out and lse. Reduce-scatter: the lse gathered, then a
      // reduce-scatter whose bus traffic is (N - 1)/N of one output.
      const commUs = { allGather: wire(ranks * (outBytes + lseBytes)), reduceScatter: wire(ranks * lseBytes) + wire(outBytes) };
      const stepUs = row.decodeUs.median + (row.mergeUs?.median ?? 0) + commUs.allGather;
      if (ranks === 1) baseUs = row.decodeUs.median;
      rows.push({ ranks, ...row, commUs, stepUs, speedup: baseUs / stepUs, floorUs: row.kvBytes / (readGBs * 1e3) + commUs.reduceScatter });
    }
  } finally {
    sparse?.dispose();
  }
  return rows;
}

type MeasuredRow = Pick<DcpBenchRow, "localTokens" | "decodeUs" | "mergeUs" | "kvBytes">;

/** One rank of N on a dense case: its decode of ceil(s_k / N) tokens per request, and the N-part merge. */
function denseRow(c: DcpBenchCase, ranks: number, opts: DcpBenchOptions, spin: Kernel, iters: number): MeasuredRow {
  const { stream } = opts;
  const localTokens = Math.ceil(c.s_k / ranks);
  const gc = makeGpuDenseCase({ b: c.b, s_q: c.s_q, h_q: c.h_q, h_kv: 1, seqlens: Array(c.b).fill(localTokens), causal: c.causal, dtype: "bf16" }, { seed: opts.seed ?? 1, stream });
  const meta = getMlaMetadata();
  const owned: Tensor[] = [];
  try {
    stream.synchronize();
    const out = own(owned, Tensor.emptyDevice([c.b, c.s_q, c.h_q, D_V], "bf16", opts.device.ordinal));
    const lse = own(owned, Tensor.emptyDevice([c.b, c.h_q, c.s_q], "f32", opts.device.ordinal));
    const decode = () => void flashMlaWithKvcache({ q: gc.q, kCache: gc.kCache, blockTable: gc.blockTable, cacheSeqlens: gc.cacheSeqlens, headDimV: D_V, schedMeta: meta, causal: c.causal, softmaxScale: gc.softmaxScale, stream, out, lse });
    const decodeUs = timingStats(timeGpuCalls([decode], { stream, iters, spin }).samplesUs);
    return { localTokens, decodeUs, mergeUs: timeMerge(c, ranks, opts, spin, iters, owned), kvBytes: c.b * localTokens * D_QK * 2 };
  } finally {
    owned.forEach((t) => t.dispose());
    meta.dispose();
    gc.dispose();
  }
}

/**
 * One rank of N on a sparse case: the whole cache stays in place and rank 0 keeps the index entries of
 * the pages a round-robin deal gives it (page % N = 0), the others -1: the entries, tokens and bytes one
 * rank of N reads, without copying the cache.
 */
function sparseRow(c: DcpBenchCase, sc: GpuSparseCase, ranks: number, opts: DcpBenchOptions, spin: Kernel, iters: number): MeasuredRow {
  const { stream } = opts;
  const mine = sc.indicesHost.map((id) => (id >= 0 && Math.floor(id / SPARSE_PAGE) % ranks === 0 ? id : -1));
  const owned: Tensor[] = [];
  const meta = getMlaMetadata();
  try {
    const indices = own(owned, Tensor.toDevice(Tensor.fromHost(mine, [c.b, c.s_q, c.topk!], "i32"), opts.device.ordinal));
    const out = own(owned, Tensor.emptyDevice([c.b, c.s_q, c.h_q, D_V], "bf16", opts.device.ordinal));
    const lse = own(owned, Tensor.emptyDevice([c.b, c.h_q, c.s_q], "f32", opts.device.ordinal));
    const decode = () => void flashMlaWithKvcache({ q: sc.q, kCache: sc.kCache, indices, isFp8Kvcache: true, headDimV: D_V, schedMeta: meta, softmaxScale: sc.softmaxScale, stream, out, lse });
    const decodeUs = timingStats(timeGpuCalls([decode], { stream, iters, spin }).samplesUs);
    const unique = new Set(Array.from(mine).filter((id) => id >= 0)).size;
    return { localTokens: Math.ceil(c.s_k / ranks), decodeUs, mergeUs: timeMerge(c, ranks, opts, spin, iters, owned), kvBytes: unique * FP8_TOKEN_BYTES };
  } finally {
    owned.forEach((t) => t.dispose());
    meta.dispose();
  }
}

/** The all-gather form's merge of N parts of the case's shape (random parts), timed; undefined at N = 1. */
function timeMerge(c: DcpBenchCase, ranks: number, opts: DcpBenchOptions, spin: Kernel, iters: number, owned: Tensor[]): TimingStats | undefined {
  if (ranks === 1) return undefined;
  const { stream } = opts;
  const parts = mergeInputs(c, ranks, opts.device.ordinal, opts.seed ?? 1);
  owned.push(parts.outParts, parts.lseParts);
  const out = own(owned, Tensor.emptyDevice([c.b, c.s_q, c.h_q, D_V], "bf16", opts.device.ordinal));
  const lse = own(owned, Tensor.emptyDevice([c.b, c.h_q, c.s_q], "f32", opts.device.ordinal));
  const merge = () => void dcpMerge({ ...parts, out, lse, stream });
  return timingStats(timeGpuCalls([merge], { stream, iters, spin }).samplesUs);
}

function own<T extends Tensor>(owned: Tensor[], t: T): T {
  owned.push(t);
  return t;
}

/** N ranks' outputs and lse of the case's shape, random (finite, a few empty rows). */
function mergeInputs(c: DcpBenchCase, ranks: number, ordinal: number, seed: number): { outParts: Tensor; lseParts: Tensor } {
  const rng = new Rng(seed + ranks);
  const rows = c.b * c.s_q * c.h_q;
  const out = f32ArrayToBf16(Float32Array.from({ length: ranks * rows * D_V }, () => rng.normal() / 10));
  const lse = Float32Array.from({ length: ranks * rows }, () => 8 + rng.normal());
  return {
    outParts: Tensor.toDevice(Tensor.fromHost(out, [ranks, c.b, c.s_q, c.h_q, D_V], "bf16"), ordinal),
    lseParts: Tensor.toDevice(Tensor.fromHost(lse, [ranks, c.b, c.h_q, c.s_q], "f32"), ordinal),
  };
}
