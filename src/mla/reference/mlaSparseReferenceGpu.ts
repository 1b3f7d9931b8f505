import { ArgumentError, formatGot, formatShape } from "../../errors/ArgumentError.js";
import { FP8_TOKEN_BYTES } from "../../numeric/kvCacheFp8.js";
import { MODEL1_D_QK, MODEL1_TOKEN_BYTES } from "../../numeric/kvCacheModel1.js";
import { Tensor } from "../../runtime/Tensor.js";
import type { FlashMlaWithKvcacheArgs } from "../args.js";
import { checkSameDevice, checkScalar, checkStream, checkTensor, describe } from "../checkTensor.js";
import { launchKernel, loadKernel } from "../contract/kernelRegistry.js";
import { SparseRefParamsStruct } from "../contract/params.js";
import { D_QK, D_V, MAX_GRID_YZ } from "../contract/shape.js";
import { decodeOutputs } from "../decodeOutputs.js";
import type { SparseFormat } from "./referenceArgs.js";

const FN = "mlaSparseReferenceGpu";
/** Token ids are int32 in the kernel, so each cache's num_blocks · page_block_size must stay below this. */
const MAX_SLOTS = 2 ** 31;

/**
 * Arguments of {@link mlaSparseReferenceGpu}: a sparse flashMlaWithKvcache call's (schedMeta optional and
 * unused), plus DeepSeek-V4's second cache as mlaDecodeReference takes it. q's last dim picks the format
 * of both caches: 576 the V32 cache of 656-byte tokens, 512 the MODEL1 cache of 584-byte tokens.
 */
export type MlaSparseReferenceGpuArgs = Omit<FlashMlaWithKvcacheArgs, "schedMeta"> & { schedMeta?: unknown };

/** One checked cache and the index entries that select from it, in the kernel's names. */
export interface SparseReferenceCache {
  kv: Tensor;
  /** [b, s_q, topk], contiguous. */
  indices: Tensor;
  /** [b], or undefined: all topk entries. */
  topk_length: Tensor | undefined;
  topk: number;
  num_blocks: number;
  page_block_size: number;
  /** Bytes from one page to the next (page_block_size · token bytes for a single page). */
  block_stride_bytes: number;
  /** num_blocks · page_block_size: ids at or past it are skipped. */
  num_slots: number;
}

/** A checked {@link mlaSparseReferenceGpu} call. */
export interface SparseReferenceCall {
  b: number;
  s_q: number;
  h_q: number;
  /** From q's d_qk: 576 V32, 512 MODEL1. */
  format: SparseFormat;
  d_qk: number;
  softmax_scale: number;
  q: Tensor;
  main: SparseReferenceCache;
  /** The second cache, when given. */
  extra: SparseReferenceCache | undefined;
  attn_sink: Tensor | undefined;
}

/** The argument names of one cache, and its topk's name in messages. */
interface CacheNames {
  cache: "kCache" | "extraKCache";
  indices: "indices" | "extraIndices";
  topkLength: "topkLength" | "extraTopkLength";
  topk: "topk" | "extra_topk";
}

/**
 * Checks the arguments of {@link mlaSparseReferenceGpu} and throws an ArgumentError naming it, the
 * argument, what was expected and what was given. Wider than flashMlaWithKvcache's sparse checks, as
 * the CPU reference is, so that it can check any shape the kernels may grow to: either format, the
 * second cache, topkLength with either, any h_q ≥ 1, and no alignment demands on the caches (the
 * kernel reads them byte by byte). Tensor contents are not read. `requireCuda = false` checks
 * everything but residency, for tests without a GPU.
 */
export function validateSparseReferenceGpuArgs(a: MlaSparseReferenceGpuArgs, requireCuda = true): SparseReferenceCall {
  if (a === null || typeof a !== "object") throw new ArgumentError(FN, "args", "an options object", formatGot(a));
  for (const name of ["out", "lse"] as const) {
    if (a[name] !== undefined) throw new ArgumentError(FN, name, "undefined (the fp32 reference returns new f32 out and lse)", "a value");
  }
  if (a.isFp8Kvcache !== true) throw new ArgumentError(FN, "isFp8Kvcache", "true (it reads an FP8 cache through indices)", describe(a.isFp8Kvcache));
  if (a.causal !== undefined && a.causal !== false) throw new ArgumentError(FN, "causal", "false or undefined (the indices choose the keys)", describe(a.causal));
  if (a.blockTable !== undefined) {
    throw new ArgumentError(FN, "blockTable", "undefined (indices are physical token ids, block · page_block_size + offset)", describe(a.blockTable));
  }
  // As flashMlaWithKvcache's sparse path: passed through and ignored.
  if (a.cacheSeqlens !== undefined && !(a.cacheSeqlens instanceof Tensor)) {
    throw new ArgumentError(FN, "cacheSeqlens", "a Tensor or undefined (it is ignored)", describe(a.cacheSeqlens));
  }

  const device = requireCuda ? ("cuda" as const) : undefined;
  const q = checkTensor(FN, "q", a.q, { dtypes: ["bf16"], shape: [undefined, undefined, undefined, undefined], dims: ["b", "s_q", "h_q", "d_qk"], device });
  const [b, s_q, h_q, d_qk] = q.shape;
  if (d_qk !== D_QK && d_qk !== MODEL1_D_QK) {
    throw new ArgumentError(FN, "q", `last dim d_qk = ${D_QK} (the V32 cache) or ${MODEL1_D_QK} (the MODEL1 cache)`, `shape ${formatShape(q.shape)}`);
  }
  if (b < 1 || s_q < 1 || h_q < 1) throw new ArgumentError(FN, "q", "b, s_q and h_q >= 1", `shape ${formatShape(q.shape)}`);
  // The grid is (h_q, s_q, b).
  if (s_q > MAX_GRID_YZ || b > MAX_GRID_YZ) {
    throw new ArgumentError(FN, "q", `b and s_q <= ${MAX_GRID_YZ} (launch grid dimensions)`, `shape ${formatShape(q.shape)}`);
  }
  if (!q.isContiguous()) throw new ArgumentError(FN, "q", "a contiguous tensor (the fp32 reference reads it row-major)", `strides ${formatShape(q.strides)}`);
  const format: SparseFormat = d_qk === MODEL1_D_QK ? "MODEL1" : "V32";

  checkScalar(FN, "headDimV", a.headDimV, (v) => v === D_V, `${D_V}`);
  const softmax_scale = a.softmaxScale === undefined ? 1 / Math.sqrt(d_qk) : checkScalar(FN, "softmaxScale", a.softmaxScale, (v) => Number.isFinite(v) && v > 0, "a finite number > 0");

  const shape = { b, s_q, format, d_qk, device };
  const main = checkCache(a, { cache: "kCache", indices: "indices", topkLength: "topkLength", topk: "topk" }, shape);
  let extra: SparseReferenceCache | undefined;
  if (a.extraKCache !== undefined || a.extraIndices !== undefined) {
    if (a.extraIndices === undefined) throw new ArgumentError(FN, "extraIndices", "a Tensor when extraKCache is given", "undefined");
    if (a.extraKCache === undefined) throw new ArgumentError(FN, "extraKCache", "a Tensor when extraIndices is given", "undefined");
    extra = checkCache(a, { cache: "extraKCache", indices: "extraIndices", topkLength: "extraTopkLength", topk: "extra_topk" }, shape);
  } else if (a.extraTopkLength !== undefined) {
    throw new ArgumentError(FN, "extraTopkLength", "undefined without extraKCache", describe(a.extraTopkLength));
  }

  const attn_sink = a.attnSink === undefined ? undefined : checkTensor(FN, "attnSink", a.attnSink, { dtypes: ["f32"], shape: [h_q], dims: ["h_q"], contiguous: true, device });
  checkStream(FN, a.stream, { name: "q", tensor: q });
  checkSameDevice(FN, {
    q, kCache: main.kv, indices: main.indices, topkLength: main.topk_length,
    extraKCache: extra?.kv, extraIndices: extra?.indices, extraTopkLength: extra?.topk_length, attnSink: attn_sink,
  });
  return { b, s_q, h_q, format, d_qk, softmax_scale, q, main, extra, attn_sink };
}

/**
 * One cache in `format` with its indices and optional lengths. A V32 token is 656 consecutive bytes; a
 * MODEL1 page holds page_block_size · 584 bytes from its base (the tensor's 584-byte rows are not
 * tokens, but its token stride must still be 584, as the writer lays it out). Pages must not overlap.
 */
function checkCache(
  a: MlaSparseReferenceGpuArgs,
  names: CacheNames,
  call: { b: number; s_q: number; format: SparseFormat; d_qk: number; device: "cuda" | undefined },
): SparseReferenceCache {
  const { b, s_q, format, d_qk, device } = call;
  const tokenBytes = format === "V32" ? FP8_TOKEN_BYTES : MODEL1_TOKEN_BYTES;
  const kv = checkTensor(FN, names.cache, a[names.cache], {
    dtypes: ["u8", "fp8_e4m3"], shape: [undefined, undefined, 1, undefined], dims: ["num_blocks", "page_block_size", "h_kv", "token_bytes"], lastDimContiguous: true, device,
  });
  const [num_blocks, page_block_size, , lastDim] = kv.shape;
  if (lastDim !== tokenBytes) {
    throw new ArgumentError(FN, names.cache, `last dim ${tokenBytes} (the ${format} format, which q's d_qk = ${d_qk} selects)`, `shape ${formatShape(kv.shape)}`);
  }
  if (num_blocks < 1 || page_block_size < 1) throw new ArgumentError(FN, names.cache, "num_blocks and page_block_size >= 1", `shape ${formatShape(kv.shape)}`);
  if (page_block_size > 1 && kv.strides[1] !== tokenBytes) {
    throw new ArgumentError(FN, names.cache, `token stride ${tokenBytes} bytes (the tokens of a page back to back)`, `strides ${formatShape(kv.strides)}`);
  }
  const pageBytes = page_block_size * tokenBytes;
  const block_stride_bytes = num_blocks > 1 ? kv.strides[0] : pageBytes;
  if (block_stride_bytes < pageBytes) {
    throw new ArgumentError(FN, names.cache, `a block stride >= page_block_size · ${tokenBytes} = ${pageBytes} bytes (pages that do not overlap)`, `strides ${formatShape(kv.strides)}`);
  }
  const num_slots = num_blocks * page_block_size;
  if (num_slots >= MAX_SLOTS) {
    throw new ArgumentError(FN, names.cache, `num_blocks · page_block_size < 2^31 (token ids are int32)`, `shape ${formatShape(kv.shape)}`);
  }

  const indices = checkTensor(FN, names.indices, a[names.indices], { dtypes: ["i32"], shape: [b, s_q, undefined], dims: ["b", "s_q", names.topk], contiguous: true, device });
  const topk = indices.shape[2];
  if (topk < 1) throw new ArgumentError(FN, names.indices, `${names.topk} >= 1 (shape [b, s_q, ${names.topk}])`, `${names.topk} = ${topk}`);
  const lengths = a[names.topkLength];
  const topk_length = lengths === undefined ? undefined : checkTensor(FN, names.topkLength, lengths, { dtypes: ["i32"], shape: [b], dims: ["b"], contiguous: true, device });
  return { kv, indices, topk_length, topk, num_blocks, page_block_size, block_stride_bytes, num_slots };
}

/**
 * A deliberately simple fp32 GPU reference of sparse FP8 decode (one CTA per output row, plain loops,
 * per-element dequantization): for checking every element of sparse shapes too large for the float64
 * CPU reference, with the same semantics as mlaDecodeReference's sparse path. Either format (q's last
 * dim: 576 V32, 512 MODEL1), optional topkLength and attnSink, and an optional second cache
 * (extraKCache, extraIndices, extraTopkLength) whose tokens join the first cache's in one softmax.
 * An index entry that is −1, outside its cache or past its topk length is skipped; a repeated id is a
 * key each time it appears. q and all index tensors must be contiguous; schedMeta is not used.
 * Returns out [b, s_q, h_q, 512] and lse [b, h_q, s_q] (natural log, +inf for a row without a valid
 * key, whose out is 0), f32 on the GPU, with the sink applied to out.
 *
 * @example
 * // DeepSeek-V3.2: q [b, s_q, h_q, 576] bf16, kCache [num_blocks, pbs, 1, 656] u8
 * const { out, lse } = mlaSparseReferenceGpu({ q, kCache, indices, topkLength, attnSink, isFp8Kvcache: true, headDimV: 512 });
 * @example
 * // DeepSeek-V4: q [b, s_q, h_q, 512] bf16, both caches [num_blocks, pbs, 1, 584] u8 (block stride model1PageBytes(pbs))
 * mlaSparseReferenceGpu({ q, kCache, indices, extraKCache, extraIndices, extraTopkLength, attnSink, isFp8Kvcache: true, headDimV: 512, softmaxScale: 512 ** -0.55 });
 */
export function mlaSparseReferenceGpu(args: MlaSparseReferenceGpuArgs): { out: Tensor; lse: Tensor } {
  const call = validateSparseReferenceGpuArgs(args);
  const { main, extra } = call;
  const ordinal = call.q.deviceOrdinal;
  const kernel = loadKernel(ordinal, "sparse_reference_fp32");
  const { out, lse } = decodeOutputs(call, "f32", ordinal);
  const params = SparseRefParamsStruct.pack({
    q: call.q.ptr,
    kv: main.kv.ptr,
    indices: main.indices.ptr,
    topk_length: main.topk_length?.ptr ?? 0n,
    extra_kv: extra?.kv.ptr ?? 0n,
    extra_indices: extra?.indices.ptr ?? 0n,
    extra_topk_length: extra?.topk_length?.ptr ?? 0n,
    attn_sink: call.attn_sink?.ptr ?? 0n,
    out: out.ptr,
    lse: lse.ptr,
    kv_block_stride: BigInt(main.block_stride_bytes),
    extra_kv_block_stride: BigInt(extra?.block_stride_bytes ?? 0),
    b: call.b,
    s_q: call.s_q,
    h_q: call.h_q,
    topk: main.topk,
    page_block_size: main.page_block_size,
    num_slots: main.num_slots,
    extra_topk: extra?.topk ?? 0,
    extra_page_block_size: extra?.page_block_size ?? 0,
    extra_num_slots: extra?.num_slots ?? 0,
    model1: call.format === "MODEL1" ? 1 : 0,
    softmax_scale: call.softmax_scale,
    pad0: 0,
  });
  launchKernel(kernel, [call.h_q, call.s_q, call.b], params, { stream: args.stream });
  return { out, lse };
}
