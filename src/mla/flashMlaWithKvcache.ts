import { ArgumentError } from "../errors/ArgumentError.js";
import { Device } from "../runtime/Device.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { TensorMap } from "../runtime/TensorMap.js";
import { checkSameDevice, checkScalar, checkStream, checkTensor } from "./checkTensor.js";
import { decodeKernels } from "./decodeKernels.js";
import { DEVICE_ERROR_WORDS, MlaSchedMeta, type MlaSchedConfig } from "./MlaSchedMeta.js";
import { D_V, DenseParamsStruct, SchedParamsStruct } from "./params.js";
import { launchCombine } from "./launchCombine.js";
import { DENSE_SCHED_FIXED_OVERHEAD, numSmPartsDense, numSplitSlots } from "./schedule.js";
import { decodeOutputs, deviceOrdinalOf } from "./decodeOutputs.js";
import { isSparseCall } from "./sparseArgs.js";
import { sparseDecodeGpu, type SparseDecodeOptions } from "./sparseDecodeGpu.js";

const FN = "flashMlaWithKvcache";
export const D_QK = 576;
export { D_V };
export const DENSE_PAGE_BLOCK_SIZE = 64;
const BLOCK_M = 64;
/** CUDA's limit on grid dimensions y and z. */
const MAX_GRID_YZ = 65535;

/** Arguments of {@link flashMlaWithKvcache} (FlashMLA's `flash_mla_with_kvcache`, camelCased). */
export interface FlashMlaWithKvcacheArgs {
  /** [b, s_q, h_q, 576] bf16 or fp16 on the GPU; last dim contiguous, strides multiples of 8 elements. */
  q: Tensor;
  /** Dense: [num_blocks, 64, h_kv, 576] in q's dtype (page size 64); last dim contiguous. */
  kCache: Tensor;
  /** [b, max_blocks_per_seq] int32: physical block of each 64-token page of each request. */
  blockTable?: Tensor;
  /** [b] int32: tokens in each request's cache (0 gives out 0 and lse +inf). */
  cacheSeqlens?: Tensor;
  /** Must be 512. */
  headDimV: number;
  /** From getMlaMetadata(): filled by the first call of a decode step and reused by its layers. */
  schedMeta: MlaSchedMeta;
  /** @default 1 / sqrt(576) */
  softmaxScale?: number;
  /** With s_q > 1, query token j sees keys [0, s_k - (s_q - 1 - j)). Ignored when s_q = 1. @default false */
  causal?: boolean;
  /**
   * Sparse FP8 decode (DeepSeek Sparse Attention): with `indices` [b, s_q, topk] the call reads the V32
   * FP8 cache (656 bytes per token) and must set this true; `topkLength` [b] and `attnSink` [h_q] are
   * optional (FlashMLA's semantics). blockTable, cacheSeqlens and causal belong to the dense path.
   */
  isFp8Kvcache?: boolean;
  indices?: Tensor;
  topkLength?: Tensor;
  attnSink?: Tensor;
  /** Stream to enqueue on. @default the legacy default stream */
  stream?: Stream;
  /**
   * Which dense main kernel runs: "seesaw_fast" (two warpgroups sharing one online softmax, FlashMLA's
   * schedule, with warp-uniform fast paths: no masking in full blocks, no rescale by exactly 1; its
   * outputs are bit-identical to "seesaw"), "seesaw" (the same without the fast paths), "seesaw_mc"
   * (experimental: seesaw_pipe whose two m-block CTAs of a KV head form a cluster and receive each K
   * tile by one TMA multicast, issued by rank 1 once rank 0 has freed the tile too; same bits as
   * seesaw_pipe, 2.9 % slower on the H200; where the m-block count is odd it runs seesaw_pipe),
   * "seesaw_pipe" (seesaw_fast with FlashMLA's rotated loop: each warpgroup queues its next Q·Kᵀ behind
   * its last P·V; may differ from seesaw_fast in the last bits), "h16" (experimental, at most 16 rows per
   * KV head: the block's tokens as wgmma's M and the rows as N, a quarter of the seesaw's tensor work;
   * docs/dense-decode.md §12) or "v1" (the first tensor-core kernel, kept for comparison). @default defaultDenseKernel(b, rows per KV head): "seesaw_pipe" for
   * compute-bound batches, else "seesaw_fast"
   */
  kernel?: DenseKernelName;
  /**
   * The seesaw kernels merge a request the scheduler split into exactly two pieces themselves: the piece
   * that finishes second reads the other's partial and writes out and lse, so the combine has nothing to
   * do for it (docs/dense-decode.md §20). The outputs are the same bits either way; false leaves every
   * split to the combine (for A/B timing and the tests). @default true
   */
  mergeSplitPairs?: boolean;
  /** Preallocated [b, s_q, h_q, 512] output in q's dtype (needed inside CUDA graph capture). */
  out?: Tensor;
  /** Preallocated [b, h_q, s_q] f32 output. */
  lse?: Tensor;
}

export type DenseKernelName = "seesaw" | "seesaw_fast" | "seesaw_mc" | "seesaw_pipe" | "h16" | "v1";
/** The dense kernels verified on a GPU (the test suites run each of these). */
export const DENSE_KERNELS: readonly DenseKernelName[] = ["seesaw", "seesaw_fast", "seesaw_pipe", "v1"];
/** The most rows per KV head (s_q · h_q / h_kv) the "h16" kernel takes: its wgmma N. */
export const H16_MAX_ROWS = 16;
/**
 * Accepted as well, but experimental: tested in test/gpu/variants/ only (where they were first run), so a
 * fault in one cannot stop the suites of the verified kernels.
 */
export const EXPERIMENTAL_DENSE_KERNELS: readonly DenseKernelName[] = ["seesaw_mc", "h16"];
const ALL_DENSE_KERNELS: readonly DenseKernelName[] = [...DENSE_KERNELS, ...EXPERIMENTAL_DENSE_KERNELS];

/**
 * The dense kernel a call gets when it names none. seesaw_pipe where the work is compute-bound (at least
 * 128 query rows per KV head: h_q / h_kv · s_q) and the batch long enough that each SM part walks many
 * blocks (b ≥ 16), seesaw_fast elsewhere. H200, one call: dense-compute (b 128, 128 rows) 522.2 vs
 * 531.7 µs, dense-compute-mtp (256 rows) 939.3 vs 1002.0; dense-b1 (b 1, 128 rows) 42.4 vs 42.2 and the
 * memory-bound cases (16 and 64 rows) 0–2 µs slower with seesaw_pipe (docs/dense-decode.md §10).
 */
export function defaultDenseKernel(b: number, rows_per_kv: number): DenseKernelName {
  return rows_per_kv >= 128 && b >= 16 ? "seesaw_pipe" : "seesaw_fast";
}

export interface FlashMlaResult {
  /** [b, s_q, h_q, 512], q's dtype. */
  out: Tensor;
  /** [b, h_q, s_q] f32, natural log. */
  lse: Tensor;
}

interface DenseShape {
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  num_blocks: number;
  max_blocks_per_seq: number;
  softmax_scale: number;
  causal: boolean;
}

/**
 * Validates every argument of the dense path before anything touches the GPU. Exported for tests:
 * `requireCuda = false` checks everything but residency, so host tensors can stand in for GPU ones.
 * `fn` names the public function in messages (mlaDecodeReferenceGpu shares these checks).
 */
export function validateDenseArgs(a: FlashMlaWithKvcacheArgs, requireCuda = true, fn = FN): DenseShape {
  if (a === null || typeof a !== "object") throw new ArgumentError(fn, "args", "an options object", String(a));
  if (a.indices !== undefined || a.isFp8Kvcache || a.topkLength !== undefined || a.attnSink !== undefined) {
    throw new ArgumentError(fn, a.indices !== undefined ? "indices" : a.isFp8Kvcache ? "isFp8Kvcache" : a.topkLength !== undefined ? "topkLength" : "attnSink",
      "the dense path here (isFp8Kvcache, topkLength and attnSink belong to a sparse call, which passes indices)", "a sparse argument");
  }
  const device = requireCuda ? ("cuda" as const) : undefined;
  const q = checkTensor(fn, "q", a.q, { dtypes: ["bf16", "fp16"], shape: [undefined, undefined, undefined, D_QK], dims: ["b", "s_q", "h_q", "d_qk"], lastDimContiguous: true, alignBytes: 16, device });
  const [b, s_q, h_q] = q.shape;
  if (b < 1) throw new ArgumentError(fn, "q", "b >= 1 (shape [b, s_q, h_q, 576])", `b = ${b}`);
  if (s_q < 1) throw new ArgumentError(fn, "q", "s_q >= 1", `s_q = ${s_q}`);
  if (h_q < 1) throw new ArgumentError(fn, "q", "h_q >= 1", `h_q = ${h_q}`);
  // The combine kernel's grid is (rows, h_kv, b): CUDA caps grid y and z at 65535.
  if (b > MAX_GRID_YZ) throw new ArgumentError(fn, "q", `b <= ${MAX_GRID_YZ} (a launch grid dimension)`, `b = ${b}`);
  const k = checkTensor(fn, "kCache", a.kCache, { dtypes: [q.dtype], shape: [undefined, undefined, undefined, D_QK], dims: ["num_blocks", "page_block_size", "h_kv", "d_qk"], lastDimContiguous: true, alignBytes: 16, device });
  if (k.shape[1] !== DENSE_PAGE_BLOCK_SIZE) throw new ArgumentError(fn, "kCache", `page_block_size = ${DENSE_PAGE_BLOCK_SIZE} (dense decode pages hold 64 tokens)`, `${k.shape[1]}`);
  const h_kv = k.shape[2];
  if (h_kv < 1 || h_q % h_kv !== 0) throw new ArgumentError(fn, "kCache", `h_kv >= 1 dividing h_q = ${h_q}`, `h_kv = ${h_kv}`);
  if (h_kv > MAX_GRID_YZ) throw new ArgumentError(fn, "kCache", `h_kv <= ${MAX_GRID_YZ} (a launch grid dimension)`, `h_kv = ${h_kv}`);
  if (k.shape[0] < 1) throw new ArgumentError(fn, "kCache", "num_blocks >= 1", `${k.shape[0]}`);
  if (a.blockTable === undefined) throw new ArgumentError(fn, "blockTable", "an int32 tensor [b, max_blocks_per_seq] (dense decode)", "undefined");
  const bt = checkTensor(fn, "blockTable", a.blockTable, { dtypes: ["i32"], shape: [b, undefined], dims: ["b", "max_blocks_per_seq"], lastDimContiguous: true, device });
  if (a.cacheSeqlens === undefined) throw new ArgumentError(fn, "cacheSeqlens", "an int32 tensor [b] (dense decode)", "undefined");
  checkTensor(fn, "cacheSeqlens", a.cacheSeqlens, { dtypes: ["i32"], shape: [b], dims: ["b"], contiguous: true, device });
  checkScalar(fn, "headDimV", a.headDimV, (v) => v === D_V, "512");
  const softmax_scale = a.softmaxScale === undefined ? 1 / Math.sqrt(D_QK) : checkScalar(fn, "softmaxScale", a.softmaxScale, (v) => Number.isFinite(v) && v > 0, "a finite number > 0");
  if (a.causal !== undefined && typeof a.causal !== "boolean") throw new ArgumentError(fn, "causal", "a boolean", typeof a.causal);
  if (a.mergeSplitPairs !== undefined && typeof a.mergeSplitPairs !== "boolean") throw new ArgumentError(fn, "mergeSplitPairs", "a boolean", typeof a.mergeSplitPairs);
  if (!(a.schedMeta instanceof MlaSchedMeta)) throw new ArgumentError(fn, "schedMeta", "the object getMlaMetadata() returns", a.schedMeta === undefined ? "undefined" : String(a.schedMeta));
  // Metadata filled on one GPU holds that GPU's pointers; another GPU's kernels must not read them.
  const metaDevice = a.schedMeta.schedMeta?.device;
  if (metaDevice !== undefined && q.isCuda && metaDevice !== q.device) {
    throw new ArgumentError(fn, "schedMeta", `metadata filled on q's device (${q.device})`, `metadata filled on ${metaDevice}`);
  }
  checkStream(fn, a.stream, { name: "q", tensor: q });
  if (a.kernel !== undefined && !ALL_DENSE_KERNELS.includes(a.kernel)) throw new ArgumentError(fn, "kernel", ALL_DENSE_KERNELS.map((k) => `"${k}"`).join(" or "), JSON.stringify(a.kernel));
  if (a.kernel === "h16" && s_q * (h_q / h_kv) > H16_MAX_ROWS) {
    throw new ArgumentError(fn, "kernel", `"h16" only where s_q · h_q / h_kv <= ${H16_MAX_ROWS}`, `"h16" with ${s_q} · ${h_q} / ${h_kv} = ${s_q * (h_q / h_kv)} rows per KV head`);
  }
  if (a.out !== undefined) checkTensor(fn, "out", a.out, { dtypes: [q.dtype], shape: [b, s_q, h_q, D_V], dims: ["b", "s_q", "h_q", "d_v"], contiguous: true, alignBytes: 16, device });
  if (a.lse !== undefined) checkTensor(fn, "lse", a.lse, { dtypes: ["f32"], shape: [b, h_q, s_q], dims: ["b", "h_q", "s_q"], contiguous: true, device });
  checkSameDevice(fn, { q, kCache: k, blockTable: bt, cacheSeqlens: a.cacheSeqlens, out: a.out, lse: a.lse });
  return { b, s_q, h_q, h_kv, num_blocks: k.shape[0], max_blocks_per_seq: bt.shape[1], softmax_scale, causal: s_q > 1 && a.causal === true };
}

/** Fills the metadata on the GPU from cacheSeqlens (first call of a step) and sizes the workspace. */
function initSchedMeta(meta: MlaSchedMeta, config: MlaSchedConfig, shape: DenseShape, cacheSeqlens: Tensor, stream: Stream | undefined): void {
  const ordinal = deviceOrdinalOf(cacheSeqlens);
  const k = decodeKernels(ordinal);
  const device = Device.get(ordinal);
  const parts = numSmPartsDense(device.smCount, shape.s_q, shape.h_q, shape.h_kv);
  const slots = numSplitSlots(shape.b, parts);
  const rowsPerKv = (shape.s_q * shape.h_q) / shape.h_kv;
  meta.allocateWorkspace(ordinal, { parts, slots, b: shape.b, rows: [shape.h_kv, rowsPerKv] }, () => {
    meta.seqlensUsed = Tensor.emptyDevice([shape.b], "i32", ordinal);
    meta.errors = Tensor.emptyDevice([DEVICE_ERROR_WORDS], "i32", ordinal);
    meta.errors.buffer!.memset32(0, 0, DEVICE_ERROR_WORDS, stream);
    meta.mergeFlags = Tensor.emptyDevice([shape.b, shape.h_kv, Math.ceil(rowsPerKv / BLOCK_M)], "i32", ordinal);
    meta.mergeFlags.buffer!.memset32(0, 0, undefined, stream);
  });
  // The scheduler checks the lengths against the table (errors recorded, bad requests scheduled as
  // empty) and writes the lengths it scheduled, which the main kernels then read.
  const params = SchedParamsStruct.pack({
    cache_seqlens: cacheSeqlens.ptr,
    sched_meta: meta.schedMeta!.ptr,
    num_splits: meta.numSplits!.ptr,
    seqlens_used: meta.seqlensUsed!.ptr,
    errors: meta.errors!.ptr,
    b: shape.b,
    num_sm_parts: parts,
    max_len: 0,
    max_valid_len: DENSE_PAGE_BLOCK_SIZE * shape.max_blocks_per_seq,
    fixed_overhead: DENSE_SCHED_FIXED_OVERHEAD,
    pad0: 0,
  });
  k.sched.launch({ grid: 1, block: 32, stream }, [{ kind: "bytes", value: params }]);
  meta.probeSplits(stream);
  meta.config = config;
}

/** The tensor-map geometry of {@link denseQTensorMapView}: what TensorMap.encodeTiled takes. */
export interface DenseQTensorMapView {
  globalDim: number[];
  globalStrides: number[];
  boxDim: number[];
}

/**
 * The seesaw kernels' TMA view of q (DenseParams.tmap_q): {576 dims, heads_per_kv, h_kv, s_q, b}, one box =
 * one m-block (64 flattened rows of one KV head) x 64 dims, landing as the nine SW128 tiles the kernel's
 * ld.global path writes. A box holds whole tokens' heads, so heads_per_kv must divide 64 or be a multiple
 * of it; otherwise (or with strides TMA cannot take) undefined, and the kernel loads Q with ld.global.
 * `qStrides` are q's element strides [b, s_q, h_q, d].
 */
export function denseQTensorMapView(shape: { b: number; s_q: number; h_kv: number }, heads_per_kv: number, qStrides: readonly number[], elementSize: number): DenseQTensorMapView | undefined {
  if (heads_per_kv % BLOCK_M !== 0 && BLOCK_M % heads_per_kv !== 0) return undefined;
  const globalDim = [D_QK, heads_per_kv, shape.h_kv, shape.s_q, shape.b];
  const globalStrides = [qStrides[2], heads_per_kv * qStrides[2], qStrides[1], qStrides[0]].map((s) => s * elementSize);
  // An extent-1 dimension's stride is never followed (a view may carry 0 there): give TMA a dense one.
  for (let i = 0; i < globalStrides.length; i++) {
    if (globalDim[i + 1] === 1) globalStrides[i] = i === 0 ? D_QK * elementSize : globalStrides[i - 1] * globalDim[i];
  }
  if (globalStrides.some((s) => s <= 0 || s % 16 !== 0 || s >= 2 ** 40)) return undefined;
  return { globalDim, globalStrides, boxDim: [64, Math.min(heads_per_kv, BLOCK_M), 1, Math.max(1, BLOCK_M / heads_per_kv), 1] };
}

function encodeQTensorMap(q: Tensor, shape: DenseShape, heads_per_kv: number, ordinal: number): Uint8Array | undefined {
  const view = denseQTensorMapView(shape, heads_per_kv, q.strides, q.elementSize);
  if (view === undefined) return undefined;
  return TensorMap.encodeTiled({ dataType: q.dtype === "bf16" ? "bf16" : "fp16", globalAddress: q.ptr, ...view, swizzle: "128B", deviceOrdinal: ordinal });
}

/**
 * MLA decode attention over a paged latent KV cache on a Hopper GPU (FlashMLA's flash_mla_with_kvcache):
 * split-KV main kernel over SM parts from the tile scheduler, then the log-sum-exp combine (launched
 * with programmatic dependent launch). Everything is enqueued on `stream`; nothing syncs with the host.
 *
 * @example
 * const meta = getMlaMetadata();
 * for (const layer of layers) {
 *   const { out, lse } = flashMlaWithKvcache({ q, kCache: layer.kCache, blockTable, cacheSeqlens, headDimV: 512, schedMeta: meta, causal: true });
 * }
 */
/** What flashMlaWithKvcache runs for a sparse call (see the comment there). */
export const SPARSE_DEFAULT: Readonly<SparseDecodeOptions> = Object.freeze({ crossover: "h128", producer: "v3", h16: "auto", h16x: "auto" });

export function flashMlaWithKvcache(args: FlashMlaWithKvcacheArgs): FlashMlaResult {
  // Sparse FP8 decode (indices given): the v3 producer (two producer warpgroups), with crossover at
  // h_q = 128: on the H200 at sparse-v32 383.7 µs against 403.7 for the plain v3 kernel, once crossover
  // sent each warp's rows with bulk copies (docs/sparse-decode.md §14); at h_q <= 16 the h16 consumer
  // (tokens as wgmma's M: 171.3 against 186.6 µs at sparse-h16, §21), now h16x there (the consumers convert
  // FP8 themselves from bulk-copied tokens: 123.3 against 152.8 µs, §24; 109.8 µs after §25); plain v3
  // at other head counts.
  if (isSparseCall(args)) return sparseDecodeGpu(args, SPARSE_DEFAULT);
  const shape = validateDenseArgs(args);
  const { q, kCache, stream } = args;
  const blockTable = args.blockTable!;
  const cacheSeqlens = args.cacheSeqlens!;
  const meta = args.schedMeta;
  const config: MlaSchedConfig = { b: shape.b, s_q: shape.s_q, h_q: shape.h_q, h_kv: shape.h_kv, page_block_size: DENSE_PAGE_BLOCK_SIZE, causal: shape.causal, is_fp8_kvcache: false, topk: null };
  meta.checkConfig(FN, config);
  const ordinal = deviceOrdinalOf(q);
  const k = decodeKernels(ordinal);
  if (!meta.initialized) initSchedMeta(meta, config, shape, cacheSeqlens, stream);

  const { out, lse } = decodeOutputs(shape, q.dtype, ordinal, args);
  const heads_per_kv = shape.h_q / shape.h_kv;
  const rows_per_kv = shape.s_q * heads_per_kv;
  const num_m_blocks = Math.ceil(rows_per_kv / BLOCK_M);

  // [num_blocks, 64, h_kv, 576] viewed by TMA innermost first: {576 dims, h_kv, 64 tokens, num_blocks}.
  const es = kCache.elementSize;
  const tmap = TensorMap.encodeTiled({
    dataType: q.dtype === "bf16" ? "bf16" : "fp16",
    globalAddress: kCache.ptr,
    globalDim: [D_QK, shape.h_kv, DENSE_PAGE_BLOCK_SIZE, shape.num_blocks],
    globalStrides: [kCache.strides[2] * es, kCache.strides[1] * es, kCache.strides[0] * es],
    boxDim: [64, 1, DENSE_PAGE_BLOCK_SIZE, 1],
    swizzle: "128B",
    // A box row is 128 bytes of one token (rows 1152 bytes apart). H200, one call (`…-exp11c-l2-*`): dense-mem-h16
    // 287.4 µs with 128-byte L2 promotion, 288.0 with none, 296.9 with 256 bytes; the other cases within 0.4 %.
    l2Promotion: "128B",
    deviceOrdinal: ordinal,
  });
  const qMap = encodeQTensorMap(q, shape, heads_per_kv, ordinal);
  const grid: [number, number, number] = [num_m_blocks, shape.h_kv, meta.numSmParts];
  const kernel = args.kernel ?? defaultDenseKernel(shape.b, rows_per_kv);
  // The seesaw family (seesaw_mc included) merges two-piece requests itself; v1 and h16 leave every split
  // to the combine.
  const pairsMerged = kernel !== "v1" && kernel !== "h16" && args.mergeSplitPairs !== false;
  const params = DenseParamsStruct.pack({
    tmap_kv: tmap,
    tmap_q: qMap ?? new Uint8Array(128),
    q: q.ptr,
    out: out.ptr,
    lse: lse.ptr,
    o_accum: meta.oAccum!.ptr,
    lse_accum: meta.lseAccum!.ptr,
    block_table: blockTable.ptr,
    cache_seqlens: meta.seqlensUsed!.ptr,  // the lengths the scheduler checked and scheduled
    sched_meta: meta.schedMeta!.ptr,
    num_splits: meta.numSplits!.ptr,
    errors: meta.errors!.ptr,
    merge_flags: meta.mergeFlags!.ptr,
    q_batch_stride: BigInt(q.strides[0]),
    q_token_stride: BigInt(q.strides[1]),
    q_head_stride: BigInt(q.strides[2]),
    block_table_stride: BigInt(blockTable.strides[0]),
    b: shape.b,
    s_q: shape.s_q,
    h_q: shape.h_q,
    h_kv: shape.h_kv,
    heads_per_kv,
    rows_per_kv,
    num_m_blocks,
    max_blocks_per_seq: shape.max_blocks_per_seq,
    num_sm_parts: meta.numSmParts,
    num_blocks: shape.num_blocks,
    causal: shape.causal ? 1 : 0,
    softmax_scale: shape.softmax_scale,
    scale_log2: shape.softmax_scale * Math.LOG2E,
    q_tma: qMap === undefined ? 0 : 1,
    merge_pairs: pairsMerged ? 1 : 0,
  });

  if (kernel === "seesaw_mc" && num_m_blocks % 2 === 0) {
    // Clusters pair m-blocks (0, 1), (2, 3), ...: same KV head, same part, so the same K tiles.
    const main = q.dtype === "bf16" ? k.seesawMcBf16 : k.seesawMcFp16;
    main.launch({ grid, block: 256, sharedMemBytes: k.seesawSmemBytes, stream, cluster: [2, 1, 1] }, [{ kind: "bytes", value: params }]);
  } else if (kernel === "h16") {
    const main = q.dtype === "bf16" ? k.h16Bf16 : k.h16Fp16;
    main.launch({ grid, block: 128, sharedMemBytes: k.h16SmemBytes, stream }, [{ kind: "bytes", value: params }]);
  } else if (kernel !== "v1") {
    // seesaw, seesaw_pipe, seesaw_fast, and seesaw_mc where the m-block count is odd (it runs seesaw_pipe).
    const bf16 = q.dtype === "bf16";
    const pipe = kernel === "seesaw_pipe" || kernel === "seesaw_mc";
    const main = kernel === "seesaw" ? (bf16 ? k.seesawBf16 : k.seesawFp16) : pipe ? (bf16 ? k.seesawPipeBf16 : k.seesawPipeFp16) : bf16 ? k.seesawFastBf16 : k.seesawFastFp16;
    main.launch({ grid, block: 256, sharedMemBytes: k.seesawSmemBytes, stream }, [{ kind: "bytes", value: params }]);
  } else {
    const main = q.dtype === "bf16" ? k.denseBf16 : k.denseFp16;
    main.launch({ grid, block: 384, sharedMemBytes: k.denseSmemBytes, stream }, [{ kind: "bytes", value: params }]);
  }

  launchCombine(k, meta, shape, out, lse, stream, { pairsMerged });
  return { out, lse };
}
