import { ArgumentError, formatGot, formatShape } from "../../errors/ArgumentError.js";
import { FP8_TOKEN_BYTES } from "../../numeric/kvCacheFp8.js";
import type { SparseFormat } from "../contract/shape.js";
import { MODEL1_D_QK, MODEL1_TOKEN_BYTES, model1PageBytes } from "../../numeric/kvCacheModel1.js";
import { Tensor } from "../../runtime/Tensor.js";
import type { DType } from "../../runtime/dtype.js";
import { DENSE_PAGE_BLOCK_SIZE, D_QK, D_V } from "../contract/shape.js";

const FN = "mlaDecodeReference";

/** One output row of the decode: request `batch`, query token `token` (0-based within s_q), query head `head`. */
export interface ReferenceRow {
  batch: number;
  token: number;
  head: number;
}

/**
 * Arguments of {@link mlaDecodeReference}: FlashMLA's `flash_mla_with_kvcache` arguments as host tensors.
 * Dense when `indices` is absent, sparse (FP8 KV cache) when it is present. On both paths the format
 * follows q's last dim d_qk: 576 is DeepSeek-V3.2's head (V = dims 0..511; sparse: the V32 cache of
 * 656-byte tokens), 512 DeepSeek-V4's (V = the whole row; sparse: the MODEL1 cache of 584-byte
 * tokens; dense: a bf16/fp16 cache of 512-wide rows). Tensors may be strided views. The
 * reference is wider than FlashMLA's sm90 sparse kernel so that small cases can check it: any h_q and
 * topk ≥ 1, and topkLength and the extra cache with either format.
 */
export interface MlaDecodeReferenceArgs {
  /** [b, s_q, h_q, d_qk]; d_qk 576 (V3.2: dense, sparse V32) or 512 (V4: dense, sparse MODEL1); bf16 or fp16 (dense), bf16 (sparse). */
  q: Tensor;
  /**
   * Dense: [num_blocks, page_block_size=64, h_kv, d_qk] in q's dtype, d_qk being q's last dim (576 or 512).
   * Sparse V32 (q's d_qk 576): [num_blocks, page_block_size, 1, 656] u8 or fp8_e4m3; the token stride
   * must be 656 bytes, the block stride may be larger.
   * Sparse MODEL1 (q's d_qk 512): [num_blocks, page_block_size, 1, 584] u8 or fp8_e4m3 with strides
   * (S, 584, 584, 1), S ≥ page_block_size · 584 (model1PageBytes(page_block_size) as written by
   * quantizeKvCacheModel1). Its rows are not tokens: a page holds its tokens' 576 data bytes first and
   * their 8-byte scale records after them, and tokens are read at the page base plus fixed offsets.
   */
  kCache: Tensor;
  /** [b, max_blocks] i32, physical block of each request's logical block (dense only). */
  blockTable?: Tensor;
  /** [b] i32, number of cached tokens of each request (dense only). */
  cacheSeqlens?: Tensor;
  /** Must be 512 (the V part is dims 0..511 of each cached token: with d_qk 576 its NoPE dims, with d_qk 512 the whole row). */
  headDimV: number;
  /**
   * Multiplies q·k before the softmax.
   * @default 1 / sqrt(d_qk): 1/24 for d_qk 576, 512^−0.5 for d_qk 512
   */
  softmaxScale?: number;
  /**
   * Dense only: with s_q > 1, query token j (0-based) sees keys [0, s_k − (s_q − 1 − j)). Ignored when s_q = 1.
   * @default false
   */
  causal?: boolean;
  /** Must be true exactly when `indices` is given (the sparse path reads an FP8 cache). @default false */
  isFp8Kvcache?: boolean;
  /**
   * [b, s_q, topk] i32 (sparse): physical token ids `block · page_block_size + offset`. −1 marks an
   * invalid entry; so does ANY id < 0 or ≥ num_blocks · page_block_size (FlashMLA's V32 kernel only
   * guards −1; the reference is lenient so that a bad id shows as a mismatch, not a crash).
   */
  indices?: Tensor;
  /** [b] i32 (sparse, optional): entries at positions ≥ topkLength[i] of request i are invalid. Values in [0, topk]. */
  topkLength?: Tensor;
  /**
   * Sparse, optional: a second cache in kCache's format with its own num_blocks and page_block_size
   * (DeepSeek-V4's sliding window beside its compressed cache). The tokens extraIndices selects join
   * those indices selects in one softmax. Needs extraIndices.
   */
  extraKCache?: Tensor;
  /** [b, s_q, extra_topk] i32 (with extraKCache): physical token ids into extraKCache, invalid ones as in `indices`. */
  extraIndices?: Tensor;
  /** [b] i32 (optional, with extraKCache): entries of extraIndices at positions ≥ extraTopkLength[i] are invalid. Values in [0, extra_topk]. */
  extraTopkLength?: Tensor;
  /** [h_q] f32 (sparse, optional): out *= 1 / (1 + exp(sink − lse)); lse itself is unchanged; ±inf allowed. */
  attnSink?: Tensor;
}

export type { SparseFormat };

/** One sparse cache and the index entries that select from it, in the kernel's names. */
export interface SparseScope {
  /** [num_blocks, page_block_size, 1, 656 or 584] bytes. */
  kv: Tensor;
  page_block_size: number;
  num_blocks: number;
  /** Bytes from one page to the next. */
  stride_kv_block: number;
  topk: number;
  /** [b, s_q, topk], row-major. */
  indices: Int32Array;
  /** [b], optional. */
  topk_length: Int32Array | undefined;
}

/** The checked arguments, in the kernel's names, with small index tensors read into plain arrays. */
export interface ReferenceArgs {
  sparse: boolean;
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  d_qk: number;
  d_v: number;
  page_block_size: number;
  num_blocks: number;
  /** Sparse: kCache's topk, scopes[0].topk (0 on the dense path). */
  topk: number;
  softmax_scale: number;
  /** Already false when s_q = 1 or on the sparse path. */
  causal: boolean;
  dtype: "bf16" | "fp16";
  q: Tensor;
  kCache: Tensor;
  /** [b, max_blocks], row-major (dense). */
  block_table: Int32Array | undefined;
  max_blocks: number;
  /** [b] (dense). */
  cache_seqlens: Int32Array | undefined;
  /** Sparse: the cache format q's d_qk selects. */
  format: SparseFormat | undefined;
  /** Sparse: kCache and its indices, then extraKCache and its indices when given; empty on the dense path. */
  scopes: readonly SparseScope[];
  /** [h_q] (sparse, optional). */
  attn_sink: Float32Array | undefined;
  /** The rows to compute; undefined means all. */
  rows: readonly ReferenceRow[] | undefined;
}

/**
 * Checks every argument of {@link mlaDecodeReference} (dtype, rank, shape consistency, value ranges)
 * before any work, throwing `ArgumentError("mlaDecodeReference", arg, expected, got)`, and returns
 * them resolved into {@link ReferenceArgs}.
 */
export function referenceArgs(args: MlaDecodeReferenceArgs, rows?: readonly ReferenceRow[]): ReferenceArgs {
  if (typeof args !== "object" || args === null) throw new ArgumentError(FN, "args", "an object", formatGot(args));
  const sparse = args.indices !== undefined;
  const path = sparse ? "the sparse path (indices given)" : "the dense path (no indices)";

  const q = hostTensor("q", args.q);
  if (q.rank !== 4) throw new ArgumentError(FN, "q", `rank 4 [b, s_q, h_q, ${D_QK} or ${MODEL1_D_QK}]`, `shape ${formatShape(q.shape)}`);
  const [b, s_q, h_q, d_qk] = q.shape;
  // d_qk picks the head: V3.2's 576 or V4's 512 (MODEL1_D_QK), on the sparse path also the cache format.
  if (d_qk !== D_QK && d_qk !== MODEL1_D_QK) {
    const choices = sparse ? `${D_QK} (the V32 cache) or ${MODEL1_D_QK} (the MODEL1 cache)` : `${D_QK} or ${MODEL1_D_QK}`;
    throw new ArgumentError(FN, "q", `last dim d_qk = ${choices} on ${path}`, `shape ${formatShape(q.shape)}`);
  }
  if (b < 1 || s_q < 1 || h_q < 1) throw new ArgumentError(FN, "q", "b, s_q and h_q ≥ 1", `shape ${formatShape(q.shape)}`);
  const qDtypes: DType[] = sparse ? ["bf16"] : ["bf16", "fp16"];
  if (!qDtypes.includes(q.dtype)) throw new ArgumentError(FN, "q", `dtype ${qDtypes.join(" or ")} on ${path}`, q.dtype);
  const dtype = q.dtype as "bf16" | "fp16";

  if (args.headDimV !== D_V) throw new ArgumentError(FN, "headDimV", `${D_V}`, formatGot(args.headDimV));

  const softmax_scale = args.softmaxScale === undefined ? 1 / Math.sqrt(d_qk) : args.softmaxScale;
  if (typeof softmax_scale !== "number" || !Number.isFinite(softmax_scale) || softmax_scale <= 0) {
    throw new ArgumentError(FN, "softmaxScale", "a finite number > 0", formatGot(args.softmaxScale));
  }
  if (args.causal !== undefined && typeof args.causal !== "boolean") {
    throw new ArgumentError(FN, "causal", "a boolean", formatGot(args.causal));
  }
  if (args.isFp8Kvcache !== undefined && typeof args.isFp8Kvcache !== "boolean") {
    throw new ArgumentError(FN, "isFp8Kvcache", "a boolean", formatGot(args.isFp8Kvcache));
  }

  const kCache = cacheTensor("kCache", args.kCache);
  const [num_blocks, page_block_size, h_kv, kLast] = kCache.shape;

  const common = { b, s_q, h_q, h_kv, d_qk, d_v: D_V, page_block_size, num_blocks, softmax_scale, dtype, q, kCache };
  const checkedRows = rows === undefined ? undefined : checkRows(rows, b, s_q, h_q);

  if (!sparse) {
    for (const name of ["topkLength", "attnSink", "extraKCache", "extraIndices", "extraTopkLength"] as const) {
      if (args[name] !== undefined) throw new ArgumentError(FN, name, `undefined on ${path}`, "a value");
    }
    if (args.isFp8Kvcache === true) throw new ArgumentError(FN, "isFp8Kvcache", `false on ${path}`, "true");
    if (kCache.dtype !== dtype) throw new ArgumentError(FN, "kCache", `dtype ${dtype} (q's dtype)`, kCache.dtype);
    if (kLast !== d_qk) throw new ArgumentError(FN, "kCache", `last dim ${d_qk} (q's d_qk)`, `shape ${formatShape(kCache.shape)}`);
    if (page_block_size !== DENSE_PAGE_BLOCK_SIZE || h_kv < 1 || h_q % h_kv !== 0) {
      throw new ArgumentError(FN, "kCache", `shape [num_blocks, ${DENSE_PAGE_BLOCK_SIZE}, h_kv, ${d_qk}] with h_q (${h_q}) % h_kv == 0`, `shape ${formatShape(kCache.shape)}`);
    }

    const cache_seqlens = intVector("cacheSeqlens", args.cacheSeqlens, [b], "[b]");
    cache_seqlens.forEach((len, i) => {
      if (len < 0) throw new ArgumentError(FN, "cacheSeqlens", "lengths ≥ 0", `cacheSeqlens[${i}] = ${len}`);
    });
    const btTensor = hostTensor("blockTable", args.blockTable);
    if (btTensor.dtype !== "i32" || btTensor.rank !== 2 || btTensor.shape[0] !== b) {
      throw new ArgumentError(FN, "blockTable", `i32 [b=${b}, max_blocks]`, `${btTensor.dtype} ${formatShape(btTensor.shape)}`);
    }
    const max_blocks = btTensor.shape[1];
    const block_table = btTensor.contiguousHost().host as Int32Array;
    for (let i = 0; i < b; i++) {
      const needed = Math.ceil(cache_seqlens[i] / DENSE_PAGE_BLOCK_SIZE);
      if (needed > max_blocks) {
        throw new ArgumentError(FN, "blockTable", `at least ${needed} columns for request ${i} (cacheSeqlens[${i}] = ${cache_seqlens[i]})`, `${max_blocks}`);
      }
      for (let k = 0; k < needed; k++) {
        const block = block_table[i * max_blocks + k];
        if (block < 0 || block >= num_blocks) {
          throw new ArgumentError(FN, "blockTable", `block ids in [0, ${num_blocks}) for the ${needed} used blocks of request ${i}`, `blockTable[${i}][${k}] = ${block}`);
        }
      }
    }
    return {
      ...common, sparse, topk: 0, causal: (args.causal ?? false) && s_q > 1,
      block_table, max_blocks, cache_seqlens,
      format: undefined, scopes: [], attn_sink: undefined, rows: checkedRows,
    };
  }

  for (const name of ["blockTable", "cacheSeqlens"] as const) {
    if (args[name] !== undefined) throw new ArgumentError(FN, name, `undefined on ${path}`, "a value");
  }
  if (args.causal === true) throw new ArgumentError(FN, "causal", `false on ${path}`, "true");
  if (args.isFp8Kvcache !== true) throw new ArgumentError(FN, "isFp8Kvcache", `true on ${path}`, formatGot(args.isFp8Kvcache));

  // q's d_qk picks the format; both caches must hold it.
  const format: SparseFormat = d_qk === MODEL1_D_QK ? "MODEL1" : "V32";
  const scopes = [sparseScope({ cache: "kCache", indices: "indices", topk: "topk", topkLength: "topkLength" }, args, kCache, format, b, s_q)];
  if (args.extraKCache !== undefined || args.extraIndices !== undefined) {
    if (args.extraIndices === undefined) throw new ArgumentError(FN, "extraIndices", "a Tensor when extraKCache is given", "undefined");
    if (args.extraKCache === undefined) throw new ArgumentError(FN, "extraKCache", "a Tensor when extraIndices is given", "undefined");
    const extraKCache = cacheTensor("extraKCache", args.extraKCache);
    scopes.push(sparseScope({ cache: "extraKCache", indices: "extraIndices", topk: "extra_topk", topkLength: "extraTopkLength" }, args, extraKCache, format, b, s_q));
  } else if (args.extraTopkLength !== undefined) {
    throw new ArgumentError(FN, "extraTopkLength", "undefined without extraKCache", "a value");
  }

  let attn_sink: Float32Array | undefined;
  if (args.attnSink !== undefined) {
    const sink = hostTensor("attnSink", args.attnSink);
    if (sink.dtype !== "f32" || sink.rank !== 1 || sink.shape[0] !== h_q) {
      throw new ArgumentError(FN, "attnSink", `f32 [h_q=${h_q}]`, `${sink.dtype} ${formatShape(sink.shape)}`);
    }
    attn_sink = sink.contiguousHost().host as Float32Array;
  }
  return {
    ...common, sparse, topk: scopes[0].topk, causal: false,
    block_table: undefined, max_blocks: 0, cache_seqlens: undefined,
    format, scopes, attn_sink, rows: checkedRows,
  };
}

/** The argument names of one sparse scope, and the name of its topk in messages. */
interface ScopeNames {
  cache: "kCache" | "extraKCache";
  indices: "indices" | "extraIndices";
  topk: "topk" | "extra_topk";
  topkLength: "topkLength" | "extraTopkLength";
}

/**
 * One sparse cache (already a rank-4 host tensor) checked against `format`, with its indices and
 * optional valid lengths: V32 tokens are 656 consecutive bytes (dequantizeKvTokenV32 reads them so);
 * MODEL1 pages hold page_block_size · 584 bytes from each page base, so the block stride is at least
 * that (a single page may have any).
 */
function sparseScope(names: ScopeNames, args: MlaDecodeReferenceArgs, kv: Tensor, format: SparseFormat, b: number, s_q: number): SparseScope {
  const path = "the sparse path (indices given)";
  if (kv.dtype !== "u8" && kv.dtype !== "fp8_e4m3") throw new ArgumentError(FN, names.cache, `dtype u8 or fp8_e4m3 on ${path}`, kv.dtype);
  const [num_blocks, page_block_size, h_kv, tokenBytes] = kv.shape;
  const want = format === "V32" ? FP8_TOKEN_BYTES : MODEL1_TOKEN_BYTES;
  if (tokenBytes !== want || h_kv !== 1 || page_block_size < 1) {
    const d_qk = format === "V32" ? D_QK : MODEL1_D_QK;
    throw new ArgumentError(FN, names.cache, `shape [num_blocks, page_block_size ≥ 1, 1, ${want}] (the ${format} format, which q's d_qk = ${d_qk} selects)`, `shape ${formatShape(kv.shape)}`);
  }
  if (kv.strides[1] !== want || kv.strides[3] !== 1) {
    throw new ArgumentError(FN, names.cache, `token stride ${want} and byte stride 1`, `strides ${formatShape(kv.strides)}`);
  }
  let stride_kv_block = kv.strides[0];
  if (format === "MODEL1") {
    const least = page_block_size * MODEL1_TOKEN_BYTES;
    if (num_blocks <= 1) stride_kv_block = model1PageBytes(page_block_size);
    else if (stride_kv_block < least) {
      throw new ArgumentError(FN, names.cache, `a block stride ≥ page_block_size · ${MODEL1_TOKEN_BYTES} = ${least} bytes (model1PageBytes(${page_block_size}) = ${model1PageBytes(page_block_size)})`, `strides ${formatShape(kv.strides)}`);
    }
  }

  const idxTensor = hostTensor(names.indices, args[names.indices]);
  if (idxTensor.dtype !== "i32" || idxTensor.rank !== 3 || idxTensor.shape[0] !== b || idxTensor.shape[1] !== s_q || idxTensor.shape[2] < 1) {
    throw new ArgumentError(FN, names.indices, `i32 [b=${b}, s_q=${s_q}, ${names.topk} ≥ 1]`, `${idxTensor.dtype} ${formatShape(idxTensor.shape)}`);
  }
  const topk = idxTensor.shape[2];
  const indices = idxTensor.contiguousHost().host as Int32Array;

  let topk_length: Int32Array | undefined;
  if (args[names.topkLength] !== undefined) {
    topk_length = intVector(names.topkLength, args[names.topkLength], [b], "[b]");
    topk_length.forEach((len, i) => {
      if (len < 0 || len > topk) throw new ArgumentError(FN, names.topkLength, `values in [0, ${names.topk}=${topk}]`, `${names.topkLength}[${i}] = ${len}`);
    });
  }
  return { kv, page_block_size, num_blocks, stride_kv_block, topk, indices, topk_length };
}

/** A host tensor of rank 4, as every KV cache is. */
function cacheTensor(name: "kCache" | "extraKCache", t: Tensor | undefined): Tensor {
  const kv = hostTensor(name, t);
  if (kv.rank !== 4) {
    throw new ArgumentError(FN, name, "rank 4 [num_blocks, page_block_size, h_kv, d]", `shape ${formatShape(kv.shape)}`);
  }
  return kv;
}

/** A host tensor whose view lies inside its storage. */
function hostTensor(name: string, t: Tensor | undefined): Tensor {
  if (!(t instanceof Tensor)) throw new ArgumentError(FN, name, "a Tensor", t === undefined ? "undefined" : typeof t);
  if (t.isCuda || t.host === undefined) {
    throw new ArgumentError(FN, name, "a host tensor (call toHost() first)", `a tensor on ${t.device}`);
  }
  if (t.numel > 0 && (t.offset < 0 || t.strides.some((s) => s < 0) || t.offset + t.maxElementIndex() >= t.host.length)) {
    throw new ArgumentError(FN, name, `a view inside its ${t.host.length}-element storage`, `offset ${t.offset}, strides ${formatShape(t.strides)}`);
  }
  return t;
}

function intVector(name: string, t: Tensor | undefined, shape: number[], shapeText: string): Int32Array {
  const v = hostTensor(name, t);
  if (v.dtype !== "i32" || v.rank !== shape.length || v.shape.some((n, i) => n !== shape[i])) {
    throw new ArgumentError(FN, name, `i32 ${shapeText} = ${formatShape(shape)}`, `${v.dtype} ${formatShape(v.shape)}`);
  }
  return v.contiguousHost().host as Int32Array;
}

function checkRows(rows: readonly ReferenceRow[], b: number, s_q: number, h_q: number): readonly ReferenceRow[] {
  if (!Array.isArray(rows)) throw new ArgumentError(FN, "opts.rows", "an array of { batch, token, head }", typeof rows);
  rows.forEach((r, n) => {
    const ok = (x: unknown, end: number) => Number.isInteger(x) && (x as number) >= 0 && (x as number) < end;
    if (typeof r !== "object" || r === null || !ok(r.batch, b) || !ok(r.token, s_q) || !ok(r.head, h_q)) {
      throw new ArgumentError(FN, "opts.rows", `integers batch < ${b}, token < ${s_q}, head < ${h_q}`, `rows[${n}] = ${JSON.stringify(r)}`);
    }
  });
  return rows;
}
