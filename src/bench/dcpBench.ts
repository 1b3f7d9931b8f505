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
import { benchSpinKernel } from "./benchSpin.js";
import { timeGpuCalls } from "./timeGpuCalls.js";
import { timingStats, type TimingStats } from "./timingStats.js";

/** A decode-context-parallel bench case: one dense decode step's layer split over N ranks. */
export interface DcpBenchCase {
  name: string;
  b: number;
  h_q: number;
  s_q: number;
  /** Global tokens per request. */
  s_k: number;
  causal: boolean;
}

/** The case DCP is for: a batch of long requests whose cache one GPU holds with difficulty. */
export const DCP_BENCH_CASES: readonly DcpBenchCase[] = Object.freeze([
  { name: "dcp-long", b: 16, h_q: 128, s_q: 1, s_k: 131072, causal: false },
  { name: "dcp-long-mtp", b: 16, h_q: 128, s_q: 2, s_k: 131072, causal: true },
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
  for (const ranks of opts.ranks ?? [1, 2, 4, 8]) {
    const localTokens = Math.ceil(c.s_k / ranks);
    const gc = makeGpuDenseCase({ b: c.b, s_q: c.s_q, h_q: c.h_q, h_kv: 1, seqlens: Array(c.b).fill(localTokens), causal: c.causal, dtype: "bf16" }, { seed: opts.seed ?? 1, stream });
    const meta = getMlaMetadata();
    const outs: Tensor[] = [];
    try {
      stream.synchronize();
      const out = Tensor.emptyDevice([c.b, c.s_q, c.h_q, D_V], "bf16", opts.device.ordinal);
      const lse = Tensor.emptyDevice([c.b, c.h_q, c.s_q], "f32", opts.device.ordinal);
      outs.push(out, lse);
      const decode = () => void flashMlaWithKvcache({ q: gc.q, kCache: gc.kCache, blockTable: gc.blockTable, cacheSeqlens: gc.cacheSeqlens, headDimV: D_V, schedMeta: meta, causal: c.causal, softmaxScale: gc.softmaxScale, stream, out, lse });
      const decodeUs = timingStats(timeGpuCalls([decode], { stream, iters, spin }).samplesUs);
      let mergeUs: TimingStats | undefined;
      if (ranks > 1) {
        const parts = mergeInputs(c, ranks, opts.device.ordinal, opts.seed ?? 1);
        outs.push(parts.outParts, parts.lseParts);
        const mOut = Tensor.emptyDevice([c.b, c.s_q, c.h_q, D_V], "bf16", opts.device.ordinal);
        const mLse = Tensor.emptyDevice([c.b, c.h_q, c.s_q], "f32", opts.device.ordinal);
        outs.push(mOut, mLse);
        const merge = () => void dcpMerge({ ...parts, out: mOut, lse: mLse, stream });
        mergeUs = timingStats(timeGpuCalls([merge], { stream, iters, spin }).samplesUs);
      }
      const outBytes = c.b * c.s_q * c.h_q * D_V * 2, lseBytes = c.b * c.h_q * c.s_q * 4;
      const wire = (bytes: number) => (ranks === 1 ? 0 : comm.latencyUs + (bytes * (ranks - 1)) / ranks / (comm.busGBs * 1e3));
      // All-gather: every rank receives the others' out and lse. Reduce-scatter: the lse gathered, then a
      // reduce-scatter whose bus traffic is (N - 1)/N of one output.
      const commUs = { allGather: wire(ranks * (outBytes + lseBytes)), reduceScatter: wire(ranks * lseBytes) + wire(outBytes) };
      const stepUs = decodeUs.median + (mergeUs?.median ?? 0) + commUs.allGather;
      if (ranks === 1) baseUs = decodeUs.median;
      const kvBytes = c.b * localTokens * D_QK * 2;
      rows.push({ ranks, localTokens, decodeUs, mergeUs, commUs, stepUs, speedup: baseUs / stepUs, floorUs: kvBytes / (readGBs * 1e3) + commUs.reduceScatter, kvBytes });
    } finally {
      outs.forEach((t) => t.dispose());
      meta.dispose();
      gc.dispose();
    }
  }
  return rows;
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
