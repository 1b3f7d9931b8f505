import { ArgumentError, formatGot, formatShape } from "../../errors/ArgumentError.js";
import { FP8_TOKEN_BYTES } from "../../numeric/kvCacheFp8.js";
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
 * Dense when `indices` is absent, sparse (FP8 KV cache) when it is present. Tensors may be strided
 * views. The reference is wider than FlashMLA's sm90 sparse kernel so that small cases can check it:
 * any h_q and topk ≥ 1, and topkLength with the V32 format.
 */
export interface MlaDecodeReferenceArgs {
  /** [b, s_q, h_q, d_qk=576]; bf16 or fp16 (dense), bf16 (sparse). */
  q: Tensor;
  /**
   * Dense: [num_blocks, page_block_size=64, h_kv, 576] in q's dtype.
   * Sparse: [num_blocks, page_block_size, 1, 656] u8 or fp8_e4m3 (V32 FP8 tokens); the token stride
   * must be 656 bytes, the block stride may be larger.
   */
  kCache: Tensor;
  /** [b, max_blocks] i32, physical block of each request's logical block (dense only). */
  blockTable?: Tensor;
  /** [b] i32, number of cached tokens of each request (dense only). */
  cacheSeqlens?: Tensor;
  /** Must be 512 (the V part is dims 0..511 of each cached token). */
  headDimV: number;
  /**
   * Multiplies q·k before the softmax.
   * @default 1 / sqrt(576) = 1/24
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
  /** [h_q] f32 (sparse, optional): out *= 1 / (1 + exp(sink − lse)); lse itself is unchanged. */
  attnSink?: Tensor;
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
  /** Sparse only (0 on the dense path). */
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
  /** [b, s_q, topk], row-major (sparse). */
  indices: Int32Array | undefined;
  /** [b] (sparse, optional). */
  topk_length: Int32Array | undefined;
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
  if (q.rank !== 4) throw new ArgumentError(FN, "q", `rank 4 [b, s_q, h_q, ${D_QK}]`, `shape ${formatShape(q.shape)}`);
  const [b, s_q, h_q, d_qk] = q.shape;
  if (d_qk !== D_QK) throw new ArgumentError(FN, "q", `last dim d_qk = ${D_QK}`, `shape ${formatShape(q.shape)}`);
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

  const kCache = hostTensor("kCache", args.kCache);
  if (kCache.rank !== 4) {
    throw new ArgumentError(FN, "kCache", "rank 4 [num_blocks, page_block_size, h_kv, d]", `shape ${formatShape(kCache.shape)}`);
  }
  const [num_blocks, page_block_size, h_kv, kLast] = kCache.shape;

  const common = { b, s_q, h_q, h_kv, d_qk, d_v: D_V, page_block_size, num_blocks, softmax_scale, dtype, q, kCache };
  const checkedRows = rows === undefined ? undefined : checkRows(rows, b, s_q, h_q);

  if (!sparse) {
    for (const name of ["topkLength", "attnSink"] as const) {
      if (args[name] !== undefined) throw new ArgumentError(FN, name, `undefined on ${path}`, "a value");
    }
    if (args.isFp8Kvcache === true) throw new ArgumentError(FN, "isFp8Kvcache", `false on ${path}`, "true");
    if (kCache.dtype !== dtype) throw new ArgumentError(FN, "kCache", `dtype ${dtype} (q's dtype)`, kCache.dtype);
    if (kLast !== D_QK || page_block_size !== DENSE_PAGE_BLOCK_SIZE || h_kv < 1 || h_q % h_kv !== 0) {
      throw new ArgumentError(FN, "kCache", `shape [num_blocks, ${DENSE_PAGE_BLOCK_SIZE}, h_kv, ${D_QK}] with h_q (${h_q}) % h_kv == 0`, `shape ${formatShape(kCache.shape)}`);
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
      indices: undefined, topk_length: undefined, attn_sink: undefined, rows: checkedRows,
    };
  }

  for (const name of ["blockTable", "cacheSeqlens"] as const) {
    if (args[name] !== undefined) throw new ArgumentError(FN, name, `undefined on ${path}`, "a value");
  }
  if (args.causal === true) throw new ArgumentError(FN, "causal", `false on ${path}`, "true");
  if (args.isFp8Kvcache !== true) throw new ArgumentError(FN, "isFp8Kvcache", `true on ${path}`, formatGot(args.isFp8Kvcache));
  if (kCache.dtype !== "u8" && kCache.dtype !== "fp8_e4m3") {
    throw new ArgumentError(FN, "kCache", `dtype u8 or fp8_e4m3 on ${path}`, kCache.dtype);
  }
  if (kLast !== FP8_TOKEN_BYTES || h_kv !== 1 || page_block_size < 1) {
    throw new ArgumentError(FN, "kCache", `shape [num_blocks, page_block_size ≥ 1, 1, ${FP8_TOKEN_BYTES}]`, `shape ${formatShape(kCache.shape)}`);
  }
  // dequantizeKvTokenV32 reads one token as 656 consecutive bytes.
  if (kCache.strides[1] !== FP8_TOKEN_BYTES || kCache.strides[3] !== 1) {
    throw new ArgumentError(FN, "kCache", `token stride ${FP8_TOKEN_BYTES} and byte stride 1`, `strides ${formatShape(kCache.strides)}`);
  }

  const idxTensor = hostTensor("indices", args.indices);
  if (idxTensor.dtype !== "i32" || idxTensor.rank !== 3 || idxTensor.shape[0] !== b || idxTensor.shape[1] !== s_q || idxTensor.shape[2] < 1) {
    throw new ArgumentError(FN, "indices", `i32 [b=${b}, s_q=${s_q}, topk ≥ 1]`, `${idxTensor.dtype} ${formatShape(idxTensor.shape)}`);
  }
  const topk = idxTensor.shape[2];
  const indices = idxTensor.contiguousHost().host as Int32Array;

  let topk_length: Int32Array | undefined;
  if (args.topkLength !== undefined) {
    topk_length = intVector("topkLength", args.topkLength, [b], "[b]");
    topk_length.forEach((len, i) => {
      if (len < 0 || len > topk) throw new ArgumentError(FN, "topkLength", `values in [0, topk=${topk}]`, `topkLength[${i}] = ${len}`);
    });
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
    ...common, sparse, topk, causal: false,
    block_table: undefined, max_blocks: 0, cache_seqlens: undefined,
    indices, topk_length, attn_sink, rows: checkedRows,
  };
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
