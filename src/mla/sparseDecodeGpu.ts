import { ArgumentError } from "../errors/ArgumentError.js";
import { Device } from "../runtime/Device.js";
import { Tensor } from "../runtime/Tensor.js";
import { decodeKernels } from "./decodeKernels.js";
import { decodeOutputs, deviceOrdinalOf } from "./decodeOutputs.js";
import type { FlashMlaResult, FlashMlaWithKvcacheArgs } from "./flashMlaWithKvcache.js";
import { SchedParamsStruct, SparseParamsStruct } from "./params.js";
import { launchCombine } from "./launchCombine.js";
import { numSmPartsSparse, numSplitSlots, SCHED_FIXED_OVERHEAD } from "./schedule.js";
import { validateSparseArgs } from "./sparseArgs.js";

const FN = "sparseDecodeGpu";

export interface SparseDecodeOptions {
  /**
   * Run the two 64-head CTAs of a query token as a cluster in which each dequantizes half of every block
   * and copies it into the other's shared memory (the seed's "crossover"; h_q = 128 only). "h128": where
   * h_q = 128, else the plain kernel (flashMlaWithKvcache's choice).
   * @default false
   */
  crossover?: boolean | "h128";
  /**
   * Which producer gathers and dequantizes the tokens: "v1" (two threads per token, 16-byte pieces),
   * "v2" (a warp takes 8 tokens, 64 contiguous bytes of each per load, L2 256-byte fetches, every load
   * of a block in flight at once) or "v3" (the v2 producer in two warpgroups of a 512-thread CTA, each
   * converting half of every block; with `crossover` they split the dims of the CTA's half). Outputs are
   * bit-identical. On the H200 at sparse-v32: v1 778 µs, v2 438, v3 404; with crossover v2 445, v3 384
   * (bench/results/2026-11-30-h200-*.json).
   * @default "v3"
   */
  producer?: "v1" | "v2" | "v3";
  /**
   * The consumer with the tokens as wgmma's M and the heads as N, for h_q <= 16 (a quarter of the 64-row
   * consumers' tensor work there), in a 512-thread CTA like v3's (so `producer` must be "v3"), whose two
   * producer warpgroups gather a warp per token; not with crossover. "auto": where h_q <= 16, the
   * producer is v3, there is no crossover and h16x does not take the call (flashMlaWithKvcache's choice
   * until h16x; on the H200 at sparse-h16 152.1 µs against 186.6 for the 64-row v3 kernel).
   * @default false
   */
  h16?: boolean | "auto";
  /**
   * h_q <= 16 (docs/sparse-decode.md §24): the tokens land in shared memory by bulk copy as stored (no
   * producer conversion), and two consumer warpgroups, taking the blocks in turn, convert the FP8 bytes
   * themselves into wgmma's register operands (Q·Kᵀ in f16 per scale group; P·V in bf16 with V's e4m3
   * codes as bf16 bits and each token's scales folded into P, one rounding of p·scale instead of one of
   * V and one of P, §25: V values beyond ~3e19 or outputs below ~1e-21 are outside its range); 512
   * threads like v3. Not with `h16: true`, crossover or another producer than v3. "auto": where h_q <= 16,
   * the producer is v3, there is no crossover and h16 is not forced (flashMlaWithKvcache's choice; on the
   * H200 at sparse-h16 109.1-112.2 µs against 152.2-152.8 for h16).
   * @default false
   */
  h16x?: boolean | "auto";
}

/** The kernel `opts` selects for a call of `h_q` heads (num_head_tiles 64-head CTAs per query token). */
export interface SparseKernelChoice {
  producer: "v1" | "v2" | "v3";
  crossover: boolean;
  h16: boolean;
  h16x: boolean;
}

/** The options' values alone (no tensor needed), refused with an ArgumentError naming the option; the producer. */
function checkSparseOptions(opts: SparseDecodeOptions): "v1" | "v2" | "v3" {
  const producer = sparseProducer(opts);
  if (opts.crossover !== undefined && typeof opts.crossover !== "boolean" && opts.crossover !== "h128") {
    throw new ArgumentError(FN, "crossover", 'true, false or "h128"', String(opts.crossover));
  }
  if (opts.h16 !== undefined && typeof opts.h16 !== "boolean" && opts.h16 !== "auto") throw new ArgumentError(FN, "h16", 'true, false or "auto"', String(opts.h16));
  if (opts.h16x !== undefined && typeof opts.h16x !== "boolean" && opts.h16x !== "auto") throw new ArgumentError(FN, "h16x", 'true, false or "auto"', String(opts.h16x));
  return producer;
}

/** Resolves `opts` against the call's head count, refusing what no kernel runs (ArgumentError). */
export function sparseKernelChoice(opts: SparseDecodeOptions, shape: { h_q: number; num_head_tiles: number }): SparseKernelChoice {
  const producer = checkSparseOptions(opts);
  const crossover = opts.crossover === "h128" ? shape.num_head_tiles === 2 : opts.crossover === true;
  if (crossover && shape.num_head_tiles !== 2) {
    throw new ArgumentError(FN, "crossover", "h_q = 128 (a cluster of the two 64-head CTAs of a query token)", `h_q = ${shape.h_q}`);
  }
  const h16x = opts.h16x === "auto" ? shape.h_q <= 16 && producer === "v3" && !crossover && opts.h16 !== true : opts.h16x === true;
  if (h16x && shape.h_q > 16) throw new ArgumentError(FN, "h16x", "h_q <= 16 (the heads are wgmma's N)", `h_q = ${shape.h_q}`);
  if (h16x && (crossover || producer !== "v3" || opts.h16 === true)) {
    throw new ArgumentError(FN, "h16x", "no h16, no crossover and the v3 producer (its CTA shape)", `h16 ${String(opts.h16)}, producer ${producer}, crossover ${crossover}`);
  }
  const h16 = !h16x && (opts.h16 === "auto" ? shape.h_q <= 16 && producer === "v3" && !crossover : opts.h16 === true);
  if (h16 && shape.h_q > 16) throw new ArgumentError(FN, "h16", "h_q <= 16 (the heads are wgmma's N)", `h_q = ${shape.h_q}`);
  if (h16 && (crossover || producer !== "v3")) throw new ArgumentError(FN, "h16", "the v3 producers without crossover", `producer ${producer}, crossover ${crossover}`);
  return { producer, crossover, h16, h16x };
}

/**
 * Sparse FP8 decode on the GPU (kernels/mla_decode/sparse_decode_sm90.cu): validation, the scheduler over
 * each request's valid top-k entries, the main kernel (plain, or at h_q = 128 with `crossover` a 2-CTA
 * cluster sharing the dequantization), then the dense combine (which applies the attention sink to split
 * rows). flashMlaWithKvcache calls it for `indices` (SPARSE_DEFAULT: producer v3, crossover at h_q = 128);
 * test/gpu/mla/sparseDecode.test.ts and test/gpu/variants check every kernel against mlaDecodeReference on the H200.
 */
/** The producer `opts` selects: the one named, else v3 (the fastest with and without crossover). */
export function sparseProducer(opts: SparseDecodeOptions): "v1" | "v2" | "v3" {
  const producer = opts.producer ?? "v3";
  if (producer !== "v1" && producer !== "v2" && producer !== "v3") throw new ArgumentError(FN, "producer", '"v1", "v2" or "v3"', String(producer));
  return producer;
}

export function sparseDecodeGpu(args: FlashMlaWithKvcacheArgs, opts: SparseDecodeOptions = {}): FlashMlaResult {
  // The options first (those that need no tensor), then the arguments; all before anything is allocated.
  checkSparseOptions(opts);
  const shape = validateSparseArgs(args);
  const { producer, crossover: xo, h16, h16x } = sparseKernelChoice(opts, shape);
  const { q, kCache, stream } = args;
  const indices = args.indices!;
  const meta = args.schedMeta;
  meta.checkConfig(FN, shape.config);
  const ordinal = deviceOrdinalOf(q);
  const k = decodeKernels(ordinal);
  const rows = shape.s_q * shape.h_q;

  if (!meta.initialized) {
    const parts = numSmPartsSparse(Device.get(ordinal).smCount, shape.s_q, shape.h_q);
    const slots = numSplitSlots(shape.b, parts);
    meta.allocateWorkspace(ordinal, { parts, slots, b: shape.b, rows: [rows] }, () => {
      if (args.topkLength === undefined) {
        // Without topkLength every request attends all topk entries.
        meta.lengths = Tensor.emptyDevice([shape.b], "i32", ordinal);
        meta.lengths.buffer!.memset32(shape.topk, 0, shape.b, stream);
      }
    });
    const lengths = args.topkLength?.ptr ?? meta.lengths!.ptr;
    // Sparse lengths are clamped to [0, topk] (FlashMLA's topk_length rule), never errors.
    const sched = SchedParamsStruct.pack({ cache_seqlens: lengths, sched_meta: meta.schedMeta!.ptr, num_splits: meta.numSplits!.ptr, seqlens_used: 0n, errors: 0n, b: shape.b, num_sm_parts: parts, max_len: shape.topk, max_valid_len: 0, fixed_overhead: SCHED_FIXED_OVERHEAD, pad0: 0 });
    k.sched.launch({ grid: 1, block: 32, stream }, [{ kind: "bytes", value: sched }]);
    meta.probeSplits(stream);
    meta.config = shape.config;
  }

  const { out, lse } = decodeOutputs(shape, "bf16", ordinal, args);
  const lengths = args.topkLength?.ptr ?? meta.lengths!.ptr;
  const sink = args.attnSink?.ptr ?? 0n;
  const params = SparseParamsStruct.pack({
    q: q.ptr,
    kv: kCache.ptr,
    indices: indices.ptr,
    lengths,
    attn_sink: sink,
    out: out.ptr,
    lse: lse.ptr,
    o_accum: meta.oAccum!.ptr,
    lse_accum: meta.lseAccum!.ptr,
    sched_meta: meta.schedMeta!.ptr,
    num_splits: meta.numSplits!.ptr,
    q_batch_stride: BigInt(q.strides[0]),
    q_token_stride: BigInt(q.strides[1]),
    q_head_stride: BigInt(q.strides[2]),
    indices_batch_stride: BigInt(indices.strides[0]),
    indices_token_stride: BigInt(indices.strides[1]),
    kv_block_stride: BigInt(shape.block_stride_bytes),
    b: shape.b,
    s_q: shape.s_q,
    h_q: shape.h_q,
    topk: shape.topk,
    page_block_size: shape.page_block_size,
    num_slots: shape.num_blocks * shape.page_block_size,
    num_sm_parts: meta.numSmParts,
    softmax_scale: shape.softmax_scale,
    scale_log2: shape.softmax_scale * Math.LOG2E,
    pad0: 0,
  });
  const main = h16x
    ? k.sparseH16xBf16
    : h16
    ? k.sparseH16Bf16
    : producer === "v3" ? (xo ? k.sparseCrossoverV3Bf16 : k.sparseV3Bf16) : producer === "v2" ? (xo ? k.sparseCrossoverV2Bf16 : k.sparseV2Bf16) : xo ? k.sparseCrossoverBf16 : k.sparseBf16;
  main.launch(
    {
      grid: [shape.num_head_tiles, shape.s_q, meta.numSmParts],
      block: producer === "v3" ? 512 : 384,
      sharedMemBytes: h16x ? k.sparseH16xSmemBytes : k.sparseSmemBytes,
      stream,
      ...(xo ? { cluster: [2, 1, 1] as [number, number, number] } : {}),
    },
    [{ kind: "bytes", value: params }],
  );
  launchCombine(k, meta, { b: shape.b, s_q: shape.s_q, h_q: shape.h_q, h_kv: 1 }, out, lse, stream, { attnSink: args.attnSink });
  return { out, lse };
}
