import { ArgumentError } from "../errors/ArgumentError.js";
import { D_QK, D_V } from "../mla/contract/shape.js";
import { FP8_TOKEN_BYTES, quantizeKvTokenV32 } from "../numeric/kvCacheFp8.js";
import { Rng, randomBf16 } from "../numeric/random.js";
import { Tensor } from "../runtime/Tensor.js";
import { drawAttnSink, drawSparseIndices, drawSparseLayout } from "./sparseCaseLayout.js";

/** Options of {@link makeSparseCase}. */
export interface SparseCaseOptions {
  seed: number;
  b: number;
  s_q: number;
  h_q: number;
  /** Tokens cached per request (each request's length; see `varlen`). */
  s_k: number;
  topk: number;
  pageBlockSize: number;
  /** Give a topkLength [b] drawn from U[0, topk]. @default false */
  topkLength?: boolean;
  /** Give an attnSink [h_q]: about 31% +inf, 31% −inf, the rest N(0,1). @default false */
  sink?: boolean;
  /** Probability that a filled index entry is replaced by −1. @default 0 */
  invalidFraction?: number;
  /** Probability that a filled index entry (after the first) repeats an earlier one of its row. @default 0 */
  repeat?: number;
  /** Request lengths round(max(N(s_k, s_k/2), 1)) instead of all s_k. @default false */
  varlen?: boolean;
  /** Extra (poisoned) token rows after each block, so the block stride exceeds pageBlockSize·656. @default 0 */
  blockPadTokens?: number;
  /**
   * KV drawn kvScale times larger (N(0, (kvScale/10)²) clamped to ±kvScale, so the FP8 scales are kvScale
   * times larger too) and softmaxScale divided by it, so the scores and probabilities are those of the
   * unscaled case and the outputs kvScale times its: a power of two reaches the ends of a kernel's range.
   * @default 1
   */
  kvScale?: number;
}

/** A sparse (FP8 KV cache) decode case on the host: the arguments of mlaDecodeReference. */
export interface SparseCase {
  /** [b, s_q, h_q, 576] bf16 */
  q: Tensor;
  /** [num_blocks, pageBlockSize, 1, 656] u8 (block stride (pageBlockSize + blockPadTokens)·656); unreferenced tokens are all 0xff (NaN). */
  kCache: Tensor<"u8">;
  /** [b, s_q, topk] i32 physical token ids (block·pageBlockSize + offset), −1 = invalid */
  indices: Tensor;
  /** [b] i32, when asked for */
  topkLength?: Tensor;
  /** [h_q] f32, when asked for */
  attnSink?: Tensor;
  /** 576^-0.55, as FlashMLA's sparse tests use */
  softmaxScale: number;
  isFp8Kvcache: true;
  headDimV: typeof D_V;
  /** Tokens cached per request. */
  seqlens: number[];
}

/**
 * A seeded sparse decode case following FlashMLA's sparse test data (FLASHMLA.md §4), drawn in
 * JavaScript: q from N(0,1) and KV from N(0,1)/10, both clamped to [-1,1], KV quantized to the V32
 * FP8 layout; each request's tokens sit in randomly permuted physical blocks; each index row holds
 * distinct random positions below the request's length (as physical ids), padded with −1. Every
 * token that no in-range index entry points at is filled with 0xff bytes (NaN scale, NaN RoPE), so
 * reading it shows. Every token is drawn, so this costs seconds beyond ~10⁵ tokens: large cases are
 * built on the GPU (makeGpuSparseCase, same layout and indices).
 */
export function makeSparseCase(opts: SparseCaseOptions): SparseCase {
  const { seed, b, s_q, h_q, s_k, topk, pageBlockSize } = opts;
  const { invalidFraction = 0, repeat = 0, varlen = false, blockPadTokens = 0, kvScale = 1 } = opts;
  if (!(kvScale > 0 && Number.isFinite(kvScale))) throw new ArgumentError("makeSparseCase", "opts.kvScale", "a positive finite number", String(kvScale));
  const rng = new Rng(seed);
  const layout = drawSparseLayout(rng, { b, seqlens: { s_k, varlen }, pageBlockSize });
  const numSlots = layout.numBlocks * pageBlockSize;

  const q = randomBf16(rng, b * s_q * h_q * D_QK, { std: 1, clamp: 1 }); // [b, s_q, h_q, 576]
  const kv = randomBf16(rng, numSlots * D_QK, { std: 0.1 * kvScale, clamp: kvScale }); // [num_tokens, 576]
  const draw = drawSparseIndices(rng, layout, { s_q, topk, topkLength: opts.topkLength === true, invalidFraction, repeat });

  const rowsPerBlock = pageBlockSize + blockPadTokens;
  const k_cache = new Uint8Array(layout.numBlocks * rowsPerBlock * FP8_TOKEN_BYTES).fill(0xff);
  for (let id = 0; id < numSlots; id++) {
    if (!draw.referenced[id]) continue;
    const dst = (Math.floor(id / pageBlockSize) * rowsPerBlock + (id % pageBlockSize)) * FP8_TOKEN_BYTES;
    quantizeKvTokenV32(kv, id * D_QK, k_cache, dst);
  }
  const kCache = Tensor.fromHost(k_cache, [layout.numBlocks, rowsPerBlock, 1, FP8_TOKEN_BYTES], "u8").view(
    [layout.numBlocks, pageBlockSize, 1, FP8_TOKEN_BYTES],
    [rowsPerBlock * FP8_TOKEN_BYTES, FP8_TOKEN_BYTES, FP8_TOKEN_BYTES, 1],
  );
  const sink = opts.sink === true ? drawAttnSink(rng, h_q) : undefined;

  return {
    q: Tensor.fromHost(q, [b, s_q, h_q, D_QK], "bf16"),
    kCache,
    indices: Tensor.fromHost(draw.indices, [b, s_q, topk], "i32"),
    ...(draw.topkLength ? { topkLength: Tensor.fromHost(draw.topkLength, [b], "i32") } : {}),
    ...(sink ? { attnSink: Tensor.fromHost(sink, [h_q], "f32") } : {}),
    softmaxScale: D_QK ** -0.55 / kvScale,
    isFp8Kvcache: true,
    headDimV: D_V,
    seqlens: layout.seqlens,
  };
}
