import { ArgumentError, formatGot, formatShape } from "../../errors/ArgumentError.js";
import { FP8_TOKEN_BYTES } from "../../numeric/kvCacheFp8.js";
import { Tensor } from "../../runtime/Tensor.js";
import type { FlashMlaWithKvcacheArgs } from "../args.js";
import { checkSameDevice, checkScalar, checkStream, checkTensor, describe } from "../checkTensor.js";
import { D_QK, D_V, SPARSE_HEADS_PER_CTA, SPARSE_HEAD_COUNTS } from "../contract/shape.js";
import { MlaSchedMeta, type MlaSchedConfig } from "../sched/MlaSchedMeta.js";

const FN = "flashMlaWithKvcache";
/**
 * Alignment of every KV token, for the producer's 128-bit `ld.global.nc` loads. 656 = 41 · 16, so a
 * 16-byte aligned block start makes every token of the block 16-byte aligned.
 */
const KV_ALIGN_BYTES = 16;

/** A checked sparse call, in the kernel's words. */
export interface SparseShape {
  b: number;
  s_q: number;
  h_q: number;
  /** Index entries per query token (any count ≥ 1; the kernel masks the tail of the last 64). */
  topk: number;
  num_blocks: number;
  /** Tokens per KV block; any size ≥ 1, since indices are physical token ids. */
  page_block_size: number;
  /** Bytes from one KV block to the next (a multiple of 16; may exceed page_block_size · 656). */
  block_stride_bytes: number;
  softmax_scale: number;
  has_topk_length: boolean;
  has_attn_sink: boolean;
  /** 64-row head tiles per query token: ceil(h_q / 64). h_q < 64 runs one tile with rows ≥ h_q masked. */
  num_head_tiles: number;
  /** What the scheduler metadata is filled for (FlashMLA's `config`). */
  config: MlaSchedConfig;
}

/** A checked sparse call: its shape and its tensors. */
export interface SparseCall extends SparseShape {
  q: Tensor;
  kCache: Tensor;
  indices: Tensor;
}

/**
 * DeepSeek-V4's arguments (the second cache, the MODEL1 head): mlaDecodeReference and writeKvCacheModel1
 * have them, the GPU decode kernels not yet. Refused by name on either path, never ignored: a dropped
 * second cache would be a silently wrong softmax.
 */
export function refuseV4Args(a: FlashMlaWithKvcacheArgs, fn: string): void {
  const v4 = "DeepSeek-V4's second cache and MODEL1 format are in mlaDecodeReference and writeKvCacheModel1, not yet in the GPU decode";
  for (const name of ["extraKCache", "extraIndices", "extraTopkLength"] as const) {
    const given = (a as unknown as Record<string, unknown>)[name];
    if (given !== undefined) throw new ArgumentError(fn, name, `undefined (${v4})`, describe(given));
  }
  if (a.q instanceof Tensor && a.q.rank === 4 && a.q.shape[3] === 512) {
    throw new ArgumentError(fn, "q", `d_qk = ${D_QK}, DeepSeek-V3's head (${v4})`, `512 (shape ${formatShape(a.q.shape)})`);
  }
}

/**
 * Checks every argument of a sparse FP8 `flashMlaWithKvcache` call (FlashMLA's sparse checks, plus
 * ours) before anything touches the GPU, and throws `ArgumentError` naming the argument, what was
 * expected and what was given. Tensor contents are not read (that would sync with the GPU): index
 * values −1, < 0 or ≥ num_blocks · page_block_size are masked by the kernel, and topkLength values
 * are clamped to [0, topk].
 *
 * Beyond FlashMLA's sm90 kernel: h_q may be 8, 16 or 32 (not only 64 or 128), topk need not be a
 * multiple of 64, and topkLength works with the V32 format.
 *
 * @param requireCuda - false lets tests pass host tensors (every check but residency and addresses runs).
 * @default requireCuda true
 */
export function validateSparseArgs(a: FlashMlaWithKvcacheArgs, requireCuda = true): SparseCall {
  if (a === null || typeof a !== "object") throw new ArgumentError(FN, "args", "an options object", formatGot(a));
  const path = "on the sparse path";
  if (a.isFp8Kvcache !== true) {
    throw new ArgumentError(FN, "isFp8Kvcache", `true ${path} (indices given: it reads the V32 FP8 cache)`, describe(a.isFp8Kvcache));
  }
  if (a.causal !== undefined && a.causal !== false) {
    throw new ArgumentError(FN, "causal", `false or undefined ${path} (the indices choose the keys)`, describe(a.causal));
  }
  refuseV4Args(a, FN);
  if (a.blockTable !== undefined) {
    throw new ArgumentError(FN, "blockTable", `undefined ${path} (indices are physical token ids, block · page_block_size + offset)`, describe(a.blockTable));
  }
  // FlashMLA's Python API passes cache_seqlens through on the sparse path and ignores it; so do we.
  if (a.cacheSeqlens !== undefined && !(a.cacheSeqlens instanceof Tensor)) {
    throw new ArgumentError(FN, "cacheSeqlens", `a Tensor or undefined ${path} (it is ignored there)`, describe(a.cacheSeqlens));
  }

  const device = requireCuda ? ("cuda" as const) : undefined;
  const q = checkTensor(FN, "q", a.q, { dtypes: ["bf16"], shape: [undefined, undefined, undefined, D_QK], dims: ["b", "s_q", "h_q", "d_qk"], lastDimContiguous: true, alignBytes: 16, device });
  const [b, s_q, h_q] = q.shape;
  if (b < 1) throw new ArgumentError(FN, "q", `b >= 1 (shape [b, s_q, h_q, ${D_QK}])`, `b = ${b}`);
  if (s_q < 1) throw new ArgumentError(FN, "q", "s_q >= 1", `s_q = ${s_q}`);
  if (!SPARSE_HEAD_COUNTS.includes(h_q)) {
    throw new ArgumentError(FN, "q", `h_q in {${SPARSE_HEAD_COUNTS.join(", ")}} ${path} (pad the heads up to the next one)`, `h_q = ${h_q}`);
  }

  const k = checkTensor(FN, "kCache", a.kCache, { dtypes: ["u8", "fp8_e4m3"], shape: [undefined, undefined, 1, FP8_TOKEN_BYTES], dims: ["num_blocks", "page_block_size", "h_kv", "token_bytes"], lastDimContiguous: true, device });
  const [num_blocks, page_block_size] = k.shape;
  if (num_blocks < 1) throw new ArgumentError(FN, "kCache", "num_blocks >= 1", `${num_blocks}`);
  if (page_block_size < 1) throw new ArgumentError(FN, "kCache", "page_block_size >= 1", `${page_block_size}`);
  // The kernel reads each token as 656 consecutive bytes; the block stride is free (FlashMLA's tests pad blocks).
  if (page_block_size > 1 && k.strides[1] !== FP8_TOKEN_BYTES) {
    throw new ArgumentError(FN, "kCache", `token stride ${FP8_TOKEN_BYTES} bytes (the tokens of a block back to back)`, `${k.strides[1]} (strides ${formatShape(k.strides)})`);
  }
  const block_stride_bytes = num_blocks > 1 ? k.strides[0] : page_block_size * FP8_TOKEN_BYTES;
  if (num_blocks > 1 && (block_stride_bytes <= 0 || block_stride_bytes % KV_ALIGN_BYTES !== 0)) {
    throw new ArgumentError(FN, "kCache", `a block stride that is a positive multiple of ${KV_ALIGN_BYTES} bytes (tokens are read with 16-byte loads)`, `${block_stride_bytes} (strides ${formatShape(k.strides)})`);
  }
  if (k.isCuda && k.ptr % BigInt(KV_ALIGN_BYTES) !== 0n) {
    throw new ArgumentError(FN, "kCache", `data aligned to ${KV_ALIGN_BYTES} bytes`, `address 0x${k.ptr.toString(16)}`);
  }

  if (a.indices === undefined) throw new ArgumentError(FN, "indices", `an int32 tensor [b, s_q, topk] ${path}`, "undefined");
  const idx = checkTensor(FN, "indices", a.indices, { dtypes: ["i32"], shape: [b, s_q, undefined], dims: ["b", "s_q", "topk"], lastDimContiguous: true, device });
  const topk = idx.shape[2];
  if (topk < 1) throw new ArgumentError(FN, "indices", "topk >= 1 (shape [b, s_q, topk])", `topk = ${topk}`);
  if (a.topkLength !== undefined) {
    checkTensor(FN, "topkLength", a.topkLength, { dtypes: ["i32"], shape: [b], dims: ["b"], contiguous: true, device });
  }
  if (a.attnSink !== undefined) {
    checkTensor(FN, "attnSink", a.attnSink, { dtypes: ["f32"], shape: [h_q], dims: ["h_q"], contiguous: true, device });
  }

  checkScalar(FN, "headDimV", a.headDimV, (v) => v === D_V, `${D_V}`);
  const softmax_scale = a.softmaxScale === undefined ? 1 / Math.sqrt(D_QK) : checkScalar(FN, "softmaxScale", a.softmaxScale, (v) => Number.isFinite(v) && v > 0, "a finite number > 0");
  if (!(a.schedMeta instanceof MlaSchedMeta)) {
    throw new ArgumentError(FN, "schedMeta", "the object getMlaMetadata() returns", a.schedMeta === undefined ? "undefined" : describe(a.schedMeta));
  }
  const config: MlaSchedConfig = { b, s_q, h_q, h_kv: 1, page_block_size, causal: false, is_fp8_kvcache: true, topk };
  a.schedMeta.checkConfig(FN, config);
  // Metadata filled on one GPU holds that GPU's pointers; another GPU's kernels must not read them.
  const metaOrdinal = a.schedMeta.deviceOrdinal;
  if (metaOrdinal !== undefined && q.isCuda && metaOrdinal !== q.deviceOrdinal) {
    throw new ArgumentError(FN, "schedMeta", `metadata filled on q's device (${q.device})`, `metadata filled on cuda:${metaOrdinal}`);
  }
  checkStream(FN, a.stream, { name: "q", tensor: q });

  if (a.out !== undefined) checkTensor(FN, "out", a.out, { dtypes: ["bf16"], shape: [b, s_q, h_q, D_V], dims: ["b", "s_q", "h_q", "d_v"], contiguous: true, alignBytes: 16, device });
  if (a.lse !== undefined) checkTensor(FN, "lse", a.lse, { dtypes: ["f32"], shape: [b, h_q, s_q], dims: ["b", "h_q", "s_q"], contiguous: true, device });
  checkSameDevice(FN, { q, kCache: k, indices: idx, topkLength: a.topkLength, attnSink: a.attnSink, out: a.out, lse: a.lse });

  return {
    b, s_q, h_q, topk, num_blocks, page_block_size, block_stride_bytes, softmax_scale,
    has_topk_length: a.topkLength !== undefined,
    has_attn_sink: a.attnSink !== undefined,
    num_head_tiles: Math.ceil(h_q / SPARSE_HEADS_PER_CTA),
    config,
    q,
    kCache: k,
    indices: idx,
  };
}

/** True when the call asks for sparse decode: FlashMLA selects the sparse path by the presence of `indices`. */
export function isSparseCall(a: FlashMlaWithKvcacheArgs): boolean {
  return a !== null && typeof a === "object" && a.indices !== undefined;
}
