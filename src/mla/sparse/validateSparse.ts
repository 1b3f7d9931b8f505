import { ArgumentError, formatGot, formatShape } from "../../errors/ArgumentError.js";
import { FP8_TOKEN_BYTES } from "../../numeric/kvCacheFp8.js";
import { MODEL1_D_QK, MODEL1_TOKEN_BYTES, model1PageBytes } from "../../numeric/kvCacheModel1.js";
import { Tensor } from "../../runtime/Tensor.js";
import type { FlashMlaWithKvcacheArgs } from "../args.js";
import { checkSameDevice, checkScalar, checkStream, checkTensor, describe } from "../checkTensor.js";
import { D_QK, D_V, SPARSE_HEADS_PER_CTA, SPARSE_HEAD_COUNTS, type SparseFormat } from "../contract/shape.js";
import { MlaSchedMeta, type MlaSchedConfig } from "../sched/MlaSchedMeta.js";

const FN = "flashMlaWithKvcache";
/**
 * Alignment of every KV block, for the producers' 128-bit `ld.global.nc` loads: 656 = 41 · 16 (V32
 * tokens) and 576 = 36 · 16 (MODEL1 token data), so a 16-byte aligned block start aligns every token.
 */
const KV_ALIGN_BYTES = 16;

/** One checked FP8 cache of a sparse call with its index list, in the kernel's words. */
export interface SparseCacheShape {
  /** Index entries per query token (any count ≥ 1; the kernel masks the tail of the last 64). */
  topk: number;
  num_blocks: number;
  /** Tokens per KV block; any size ≥ 1, since indices are physical token ids. */
  page_block_size: number;
  /**
   * Bytes from one KV block to the next, a multiple of 16: V32 ≥ page_block_size · 656, MODEL1
   * ≥ page_block_size · 584 (the page's data and scale records; FlashMLA pads to a multiple of 576).
   */
  block_stride_bytes: number;
}

/** A checked sparse call, in the kernel's words. */
export interface SparseShape extends SparseCacheShape {
  b: number;
  s_q: number;
  h_q: number;
  /** The cache format q's last dim selects (576: V32, 512: MODEL1); both caches hold it. */
  format: SparseFormat;
  d_qk: number;
  softmax_scale: number;
  has_topk_length: boolean;
  has_attn_sink: boolean;
  /** The second cache (DeepSeek-V4's extraKCache), or undefined. */
  extra: SparseCacheShape | undefined;
  has_extra_topk_length: boolean;
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
  extraKCache: Tensor | undefined;
  extraIndices: Tensor | undefined;
}

/** The most index entries a list may hold: the kernels number a request's walk (both lists) in an int32. */
export const MAX_TOPK = 1 << 29;

/**
 * DeepSeek-V4's sparse-only arguments on the dense path, where no kernel reads them: the second cache
 * belongs to sparse decode. Refused by name, never ignored: a dropped second cache would be a silently
 * wrong softmax. (V4's head itself, a 512-wide q, is dense decode's too: validateDenseArgs takes it.)
 */
export function refuseV4Args(a: FlashMlaWithKvcacheArgs, fn: string): void {
  const why = "the second cache is read by sparse decode (with indices) only";
  for (const name of ["extraKCache", "extraIndices", "extraTopkLength"] as const) {
    const given = (a as unknown as Record<string, unknown>)[name];
    if (given !== undefined) throw new ArgumentError(fn, name, `undefined on the dense path (${why})`, describe(given));
  }
}

/**
 * Checks every argument of a sparse FP8 `flashMlaWithKvcache` call (FlashMLA's sparse checks, plus
 * ours) before anything touches the GPU, and throws `ArgumentError` naming the argument, what was
 * expected and what was given. Tensor contents are not read (that would sync with the GPU): index
 * values −1, < 0 or ≥ num_blocks · page_block_size are masked by the kernel, and topkLength /
 * extraTopkLength values are clamped to [0, topk] / [0, extra_topk].
 *
 * Beyond FlashMLA's sm90 kernels: h_q may be 8, 16 or 32 (not only 64 or 128), topk need not be a
 * multiple of 64, topkLength and the second cache work with either format.
 *
 * @param requireCuda - false lets tests pass host tensors (every check but residency and addresses runs).
 * @default requireCuda true
 */
export function validateSparseArgs(a: FlashMlaWithKvcacheArgs, requireCuda = true): SparseCall {
  if (a === null || typeof a !== "object") throw new ArgumentError(FN, "args", "an options object", formatGot(a));
  const path = "on the sparse path";
  if (a.isFp8Kvcache !== true) {
    throw new ArgumentError(FN, "isFp8Kvcache", `true ${path} (indices given: it reads an FP8 cache)`, describe(a.isFp8Kvcache));
  }
  if (a.causal !== undefined && a.causal !== false) {
    throw new ArgumentError(FN, "causal", `false or undefined ${path} (the indices choose the keys)`, describe(a.causal));
  }
  if (a.blockTable !== undefined) {
    throw new ArgumentError(FN, "blockTable", `undefined ${path} (indices are physical token ids, block · page_block_size + offset)`, describe(a.blockTable));
  }
  // FlashMLA's Python API passes cache_seqlens through on the sparse path and ignores it; so do we.
  if (a.cacheSeqlens !== undefined && !(a.cacheSeqlens instanceof Tensor)) {
    throw new ArgumentError(FN, "cacheSeqlens", `a Tensor or undefined ${path} (it is ignored there)`, describe(a.cacheSeqlens));
  }

  const device = requireCuda ? ("cuda" as const) : undefined;
  const q = checkTensor(FN, "q", a.q, { dtypes: ["bf16"], shape: [undefined, undefined, undefined, undefined], dims: ["b", "s_q", "h_q", "d_qk"], lastDimContiguous: true, alignBytes: 16, device });
  const [b, s_q, h_q, d_qk] = q.shape;
  if (d_qk !== D_QK && d_qk !== MODEL1_D_QK) {
    throw new ArgumentError(FN, "q", `d_qk = ${D_QK} (DeepSeek-V3.2: the V32 cache) or ${MODEL1_D_QK} (DeepSeek-V4: the MODEL1 cache) ${path}`, `${d_qk} (shape ${formatShape(q.shape)})`);
  }
  const format: SparseFormat = d_qk === MODEL1_D_QK ? "MODEL1" : "V32";
  if (b < 1) throw new ArgumentError(FN, "q", `b >= 1 (shape [b, s_q, h_q, ${d_qk}])`, `b = ${b}`);
  if (s_q < 1) throw new ArgumentError(FN, "q", "s_q >= 1", `s_q = ${s_q}`);
  if (!SPARSE_HEAD_COUNTS.includes(h_q)) {
    throw new ArgumentError(FN, "q", `h_q in {${SPARSE_HEAD_COUNTS.join(", ")}} ${path} (pad the heads up to the next one)`, `h_q = ${h_q}`);
  }

  const main = checkCache({ cache: "kCache", indices: "indices", topk: "topk" }, a.kCache, a.indices, format, b, s_q, device);
  if (a.topkLength !== undefined) {
    checkTensor(FN, "topkLength", a.topkLength, { dtypes: ["i32"], shape: [b], dims: ["b"], contiguous: true, device });
  }
  let extra: CheckedCache | undefined;
  if (a.extraKCache !== undefined || a.extraIndices !== undefined) {
    if (a.extraKCache === undefined) throw new ArgumentError(FN, "extraKCache", "a Tensor when extraIndices is given", "undefined");
    if (a.extraIndices === undefined) throw new ArgumentError(FN, "extraIndices", "a Tensor when extraKCache is given", "undefined");
    extra = checkCache({ cache: "extraKCache", indices: "extraIndices", topk: "extra_topk" }, a.extraKCache, a.extraIndices, format, b, s_q, device);
    const slots = main.shape.num_blocks * main.shape.page_block_size + extra.shape.num_blocks * extra.shape.page_block_size;
    if (slots > 2 ** 31 - 1) {
      throw new ArgumentError(FN, "extraKCache", `at most 2^31 - 1 tokens in kCache and extraKCache together (the kernels number both caches' tokens in an int32)`, `${slots}`);
    }
    if (a.extraTopkLength !== undefined) {
      checkTensor(FN, "extraTopkLength", a.extraTopkLength, { dtypes: ["i32"], shape: [b], dims: ["b"], contiguous: true, device });
    }
  } else if (a.extraTopkLength !== undefined) {
    throw new ArgumentError(FN, "extraTopkLength", "undefined without extraKCache", describe(a.extraTopkLength));
  }
  if (a.attnSink !== undefined) {
    checkTensor(FN, "attnSink", a.attnSink, { dtypes: ["f32"], shape: [h_q], dims: ["h_q"], contiguous: true, device });
  }

  checkScalar(FN, "headDimV", a.headDimV, (v) => v === D_V, `${D_V}`);
  const softmax_scale = a.softmaxScale === undefined ? 1 / Math.sqrt(d_qk) : checkScalar(FN, "softmaxScale", a.softmaxScale, (v) => Number.isFinite(v) && v > 0, "a finite number > 0");
  if (!(a.schedMeta instanceof MlaSchedMeta)) {
    throw new ArgumentError(FN, "schedMeta", "the object getMlaMetadata() returns", a.schedMeta === undefined ? "undefined" : describe(a.schedMeta));
  }
  const config: MlaSchedConfig = {
    b, s_q, h_q, h_kv: 1, page_block_size: main.shape.page_block_size, causal: false, is_fp8_kvcache: true, topk: main.shape.topk,
    d_qk, extra_topk: extra?.shape.topk ?? 0,
  };
  a.schedMeta.checkConfig(FN, config);
  // Metadata filled on one GPU holds that GPU's pointers; another GPU's kernels must not read them.
  const metaOrdinal = a.schedMeta.deviceOrdinal;
  if (metaOrdinal !== undefined && q.isCuda && metaOrdinal !== q.deviceOrdinal) {
    throw new ArgumentError(FN, "schedMeta", `metadata filled on q's device (${q.device})`, `metadata filled on cuda:${metaOrdinal}`);
  }
  checkStream(FN, a.stream, { name: "q", tensor: q });

  if (a.out !== undefined) checkTensor(FN, "out", a.out, { dtypes: ["bf16"], shape: [b, s_q, h_q, D_V], dims: ["b", "s_q", "h_q", "d_v"], contiguous: true, alignBytes: 16, device });
  if (a.lse !== undefined) checkTensor(FN, "lse", a.lse, { dtypes: ["f32"], shape: [b, h_q, s_q], dims: ["b", "h_q", "s_q"], contiguous: true, device });
  checkSameDevice(FN, {
    q, kCache: main.kCache, indices: main.indices, topkLength: a.topkLength, extraKCache: extra?.kCache, extraIndices: extra?.indices,
    extraTopkLength: a.extraTopkLength, attnSink: a.attnSink, out: a.out, lse: a.lse,
  });

  return {
    b, s_q, h_q, format, d_qk, softmax_scale,
    ...main.shape,
    has_topk_length: a.topkLength !== undefined,
    has_attn_sink: a.attnSink !== undefined,
    extra: extra?.shape,
    has_extra_topk_length: a.extraTopkLength !== undefined,
    num_head_tiles: Math.ceil(h_q / SPARSE_HEADS_PER_CTA),
    config,
    q,
    kCache: main.kCache,
    indices: main.indices,
    extraKCache: extra?.kCache,
    extraIndices: extra?.indices,
  };
}

interface CheckedCache {
  shape: SparseCacheShape;
  kCache: Tensor;
  indices: Tensor;
}

/**
 * One FP8 cache and its index list: the format's token bytes and strides (V32: 656 consecutive bytes
 * per token; MODEL1: token stride 584 in FlashMLA's view, pages of at least page_block_size · 584
 * bytes), 16-byte aligned blocks for the kernels' 16-byte loads, [b, s_q, topk] int32 indices.
 */
function checkCache(
  names: { cache: "kCache" | "extraKCache"; indices: "indices" | "extraIndices"; topk: "topk" | "extra_topk" },
  kArg: Tensor | undefined,
  iArg: Tensor | undefined,
  format: SparseFormat,
  b: number,
  s_q: number,
  device: "cuda" | undefined,
): CheckedCache {
  const path = "on the sparse path";
  const tokenBytes = format === "V32" ? FP8_TOKEN_BYTES : MODEL1_TOKEN_BYTES;
  const selects = `the ${format} format, which q's d_qk = ${format === "V32" ? D_QK : MODEL1_D_QK} selects`;
  if (kArg === undefined) throw new ArgumentError(FN, names.cache, `a [num_blocks, page_block_size, 1, ${tokenBytes}] u8 tensor (${selects})`, "undefined");
  const k = checkTensor(FN, names.cache, kArg, { dtypes: ["u8", "fp8_e4m3"], shape: [undefined, undefined, 1, undefined], dims: ["num_blocks", "page_block_size", "h_kv", "token_bytes"], lastDimContiguous: true, device });
  if (k.shape[3] !== tokenBytes) {
    throw new ArgumentError(FN, names.cache, `last dim ${tokenBytes} (${selects})`, `${k.shape[3]} (shape ${formatShape(k.shape)})`);
  }
  const [num_blocks, page_block_size] = k.shape;
  if (num_blocks < 1) throw new ArgumentError(FN, names.cache, "num_blocks >= 1", `${num_blocks}`);
  if (page_block_size < 1) throw new ArgumentError(FN, names.cache, "page_block_size >= 1", `${page_block_size}`);
  // The kernels address within a page in int32 (a MODEL1 record sits page_block_size · 576 bytes in).
  if (page_block_size * tokenBytes > 2 ** 31 - 1) {
    throw new ArgumentError(FN, names.cache, `page_block_size · ${tokenBytes} < 2^31 bytes (offsets within a page are int32)`, `page_block_size = ${page_block_size}`);
  }
  // The kernels read a V32 token as 656 consecutive bytes and a MODEL1 page from its base at fixed
  // offsets; the block stride is free beyond that (FlashMLA's tests pad blocks).
  if (page_block_size > 1 && k.strides[1] !== tokenBytes) {
    throw new ArgumentError(FN, names.cache, `token stride ${tokenBytes} bytes (the tokens of a block back to back)`, `${k.strides[1]} (strides ${formatShape(k.strides)})`);
  }
  const least = page_block_size * tokenBytes;
  const pageBytes = format === "V32" ? least : model1PageBytes(page_block_size);
  const block_stride_bytes = num_blocks > 1 ? k.strides[0] : pageBytes;
  if (num_blocks > 1 && (block_stride_bytes < least || block_stride_bytes % KV_ALIGN_BYTES !== 0)) {
    throw new ArgumentError(FN, names.cache, `a block stride >= page_block_size · ${tokenBytes} = ${least} bytes and a multiple of ${KV_ALIGN_BYTES} (tokens are read with 16-byte loads)`, `${block_stride_bytes} (strides ${formatShape(k.strides)})`);
  }
  if (k.isCuda && k.ptr % BigInt(KV_ALIGN_BYTES) !== 0n) {
    throw new ArgumentError(FN, names.cache, `data aligned to ${KV_ALIGN_BYTES} bytes`, `address 0x${k.ptr.toString(16)}`);
  }
  if (num_blocks * page_block_size > 2 ** 31 - 1) {
    throw new ArgumentError(FN, names.cache, "at most 2^31 - 1 tokens (int32 token ids)", `${num_blocks} · ${page_block_size}`);
  }

  if (iArg === undefined) throw new ArgumentError(FN, names.indices, `an int32 tensor [b, s_q, ${names.topk}] ${path}`, "undefined");
  const idx = checkTensor(FN, names.indices, iArg, { dtypes: ["i32"], shape: [b, s_q, undefined], dims: ["b", "s_q", names.topk], lastDimContiguous: true, device });
  const topk = idx.shape[2];
  if (topk < 1 || topk > MAX_TOPK) throw new ArgumentError(FN, names.indices, `${names.topk} in [1, 2^29] (shape [b, s_q, ${names.topk}])`, `${names.topk} = ${topk}`);
  return { shape: { topk, num_blocks, page_block_size, block_stride_bytes }, kCache: k, indices: idx };
}

/** True when the call asks for sparse decode: FlashMLA selects the sparse path by the presence of `indices`. */
export function isSparseCall(a: FlashMlaWithKvcacheArgs): boolean {
  return a !== null && typeof a === "object" && a.indices !== undefined;
}
