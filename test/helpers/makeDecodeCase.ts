import { D_QK, FP8_TOKEN_BYTES, quantizeKvCacheV32 } from "../../src/numeric/kvCacheFp8.js";
import { Rng, randomBf16, randomFp16 } from "../../src/numeric/random.js";
import { Tensor } from "../../src/runtime/Tensor.js";

/** Block id FlashMLA's tests write into block-table slots a request does not use. */
export const UNUSED_BLOCK_ID = 2147480000;
/** A quiet NaN in both bf16 and fp16: poison for KV slots no kernel may read. */
export const NAN_HALF_BITS = 0x7fc0;
/** Dense page size (FlashMLA's dense kernel only supports 64). */
const PAGE = 64;

/** Options of {@link makeDenseCase}. */
export interface DenseCaseOptions {
  seed: number;
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  /**
   * Either the exact length of each request, or FlashMLA's generator: every request gets `mean`
   * tokens, or with `varlen` round(max(N(mean, mean/2), s_q)); then each becomes 0 with
   * probability `zeroFraction` (default 0).
   */
  seqlens: number[] | { mean: number; varlen: boolean; zeroFraction?: number };
  causal: boolean;
  dtype: "bf16" | "fp16";
  /** Physical blocks no request uses (filled with NaN). @default 0 */
  extraBlocks?: number;
}

/** A dense decode case: the arguments of mlaDecodeReference / flashMlaWithKvcache, on the host. */
export interface DenseCase {
  /** [b, s_q, h_q, 576] */
  q: Tensor;
  /** [num_blocks, 64, h_kv, 576]; every slot past a request's length, and every unused block, is NaN. */
  kCache: Tensor;
  /** [b, max_blocks] i32; a random permutation of the physical blocks, unused entries 2147480000. */
  blockTable: Tensor;
  /** [b] i32 */
  cacheSeqlens: Tensor;
  causal: boolean;
  /** 1/sqrt(576) */
  softmaxScale: number;
  headDimV: 512;
  /** The lengths also held by cacheSeqlens. */
  seqlens: number[];
}

/**
 * A seeded dense decode case following FlashMLA's test data (FLASHMLA.md §4): q and k drawn from
 * N(0,1)/10 clamped to [-1,1], varlen lengths max(N(s_k, s_k/2), s_q), optional zero lengths, a
 * randomly permuted block table, and NaN in every cache slot no kernel may read. Equal options give
 * equal cases.
 */
export function makeDenseCase(opts: DenseCaseOptions): DenseCase {
  const { seed, b, s_q, h_q, h_kv, causal, dtype } = opts;
  const rng = new Rng(seed);
  const { seqlens, block_table, max_blocks, num_blocks } = drawDenseLayout(rng, opts);

  const draw = dtype === "bf16" ? randomBf16 : randomFp16;
  const q = draw(rng, b * s_q * h_q * D_QK, { std: 0.1, clamp: 1 }); // [b, s_q, h_q, 576]
  const rowElems = h_kv * D_QK; // one token row holds all kv heads
  const k_cache = new Uint16Array(num_blocks * PAGE * rowElems).fill(NAN_HALF_BITS); // [num_blocks, 64, h_kv, 576]
  for (let i = 0; i < b; i++) {
    for (let t = 0; t < seqlens[i]; t++) {
      const block = block_table[i * max_blocks + Math.floor(t / PAGE)];
      k_cache.set(draw(rng, rowElems, { std: 0.1, clamp: 1 }), (block * PAGE + (t % PAGE)) * rowElems);
    }
  }

  return {
    q: Tensor.fromHost(q, [b, s_q, h_q, D_QK], dtype),
    kCache: Tensor.fromHost(k_cache, [num_blocks, PAGE, h_kv, D_QK], dtype),
    blockTable: Tensor.fromHost(block_table, [b, max_blocks], "i32"),
    cacheSeqlens: Tensor.fromHost(Int32Array.from(seqlens), [b], "i32"),
    causal,
    softmaxScale: 1 / Math.sqrt(D_QK),
    headDimV: 512,
    seqlens,
  };
}

/** The paging layout of a dense case: lengths and a permuted block table (unused entries 2147480000). */
export interface DenseLayout {
  seqlens: number[];
  /** [b, max_blocks] */
  block_table: Int32Array;
  max_blocks: number;
  num_blocks: number;
}

/** Draws the lengths and block table of a dense case from `rng` (the first draws of makeDenseCase). */
export function drawDenseLayout(rng: Rng, opts: Pick<DenseCaseOptions, "b" | "s_q" | "seqlens" | "extraBlocks">): DenseLayout {
  const { b, s_q, extraBlocks = 0 } = opts;
  const seqlens = drawSeqlens(rng, b, s_q, opts.seqlens);
  const blocksOf = seqlens.map((len) => Math.ceil(len / PAGE));
  const max_blocks = Math.max(1, ...blocksOf);
  const num_blocks = Math.max(1, blocksOf.reduce((a, n) => a + n, 0) + extraBlocks);
  const physical = rng.permutation(num_blocks);
  const block_table = new Int32Array(b * max_blocks).fill(UNUSED_BLOCK_ID); // [b, max_blocks]
  let next = 0;
  for (let i = 0; i < b; i++) {
    for (let k = 0; k < blocksOf[i]; k++) block_table[i * max_blocks + k] = physical[next++];
  }
  return { seqlens, block_table, max_blocks, num_blocks };
}

function drawSeqlens(rng: Rng, b: number, s_q: number, spec: DenseCaseOptions["seqlens"]): number[] {
  if (Array.isArray(spec)) {
    if (spec.length !== b || spec.some((n) => !Number.isInteger(n) || n < 0)) {
      throw new RangeError(`makeDenseCase: seqlens must be ${b} non-negative integers, got ${JSON.stringify(spec)}`);
    }
    return [...spec];
  }
  const { mean, varlen, zeroFraction = 0 } = spec;
  return Array.from({ length: b }, () => {
    const len = varlen ? Math.round(Math.max(mean + (mean / 2) * rng.normal(), s_q)) : mean;
    // Always draw, so zeroFraction does not shift the rest of the stream.
    const zero = rng.uniform() < zeroFraction;
    return zero ? 0 : len;
  });
}

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
}

/** A sparse (FP8 KV cache) decode case on the host. */
export interface SparseCase {
  /** [b, s_q, h_q, 576] bf16 */
  q: Tensor;
  /** [num_blocks, pageBlockSize, 1, 656] u8 (block stride (pageBlockSize + blockPadTokens)·656); unreferenced tokens are all 0xff (NaN). */
  kCache: Tensor;
  /** [b, s_q, topk] i32 physical token ids (block·pageBlockSize + offset), −1 = invalid */
  indices: Tensor;
  /** [b] i32, when asked for */
  topkLength?: Tensor;
  /** [h_q] f32, when asked for */
  attnSink?: Tensor;
  /** 576^-0.55, as FlashMLA's sparse tests use */
  softmaxScale: number;
  isFp8Kvcache: true;
  headDimV: 512;
  /** Tokens cached per request. */
  seqlens: number[];
}

/**
 * A seeded sparse decode case following FlashMLA's sparse test data (FLASHMLA.md §4): q from N(0,1)
 * and KV from N(0,1)/10, both clamped to [-1,1], KV quantized to the V32 FP8 layout; each request's
 * tokens sit in randomly permuted physical blocks; each index row holds distinct random positions
 * below the request's length (as physical ids), padded with −1. Every token that no in-range index
 * entry points at is filled with 0xff bytes (NaN scale, NaN RoPE), so reading it shows.
 */
export function makeSparseCase(opts: SparseCaseOptions): SparseCase {
  const { seed, b, s_q, h_q, s_k, topk, pageBlockSize: page_block_size } = opts;
  const { invalidFraction = 0, repeat = 0, varlen = false, blockPadTokens = 0 } = opts;
  const rng = new Rng(seed);
  const seqlens = Array.from({ length: b }, () => (varlen ? Math.round(Math.max(s_k + (s_k / 2) * rng.normal(), 1)) : s_k));

  // One spare block that nothing references, so an all-poison block always exists.
  const blocksOf = seqlens.map((len) => Math.ceil(len / page_block_size));
  const num_blocks = blocksOf.reduce((a, n) => a + n, 0) + 1;
  const physical = rng.permutation(num_blocks);
  const firstBlock: number[] = [];
  let next = 0;
  for (let i = 0; i < b; i++) {
    firstBlock.push(next);
    next += blocksOf[i];
  }
  const physicalId = (i: number, pos: number) => physical[firstBlock[i] + Math.floor(pos / page_block_size)] * page_block_size + (pos % page_block_size);

  const q = randomBf16(rng, b * s_q * h_q * D_QK, { std: 1, clamp: 1 }); // [b, s_q, h_q, 576]
  const kv = randomBf16(rng, num_blocks * page_block_size * D_QK, { std: 0.1, clamp: 1 }); // [num_tokens, 576]

  const topk_length = opts.topkLength ? Int32Array.from({ length: b }, () => rng.int(0, topk + 1)) : undefined;
  const indices = new Int32Array(b * s_q * topk).fill(-1); // [b, s_q, topk]
  const referenced = new Uint8Array(num_blocks * page_block_size);
  for (let i = 0; i < b; i++) {
    const limit = topk_length?.[i] ?? topk;
    for (let j = 0; j < s_q; j++) {
      const row = (i * s_q + j) * topk;
      const positions = rng.permutation(seqlens[i]);
      const filled = Math.min(topk, seqlens[i]);
      for (let k = 0; k < filled; k++) indices[row + k] = physicalId(i, positions[k]);
      for (let k = 0; k < filled; k++) {
        if (k > 0 && rng.uniform() < repeat) indices[row + k] = indices[row + rng.int(0, k)];
        if (rng.uniform() < invalidFraction) indices[row + k] = -1;
      }
      for (let k = 0; k < limit; k++) if (indices[row + k] >= 0) referenced[indices[row + k]] = 1;
    }
  }

  const quantized = quantizeKvCacheV32(kv); // [num_tokens, 656]
  const rowsPerBlock = page_block_size + blockPadTokens;
  const k_cache = new Uint8Array(num_blocks * rowsPerBlock * FP8_TOKEN_BYTES).fill(0xff);
  for (let id = 0; id < num_blocks * page_block_size; id++) {
    if (!referenced[id]) continue;
    const dst = (Math.floor(id / page_block_size) * rowsPerBlock + (id % page_block_size)) * FP8_TOKEN_BYTES;
    k_cache.set(quantized.subarray(id * FP8_TOKEN_BYTES, (id + 1) * FP8_TOKEN_BYTES), dst);
  }
  const kCache = Tensor.fromHost(k_cache, [num_blocks, rowsPerBlock, 1, FP8_TOKEN_BYTES], "u8").view(
    [num_blocks, page_block_size, 1, FP8_TOKEN_BYTES],
    [rowsPerBlock * FP8_TOKEN_BYTES, FP8_TOKEN_BYTES, FP8_TOKEN_BYTES, 1],
  );

  let attnSink: Tensor | undefined;
  if (opts.sink) {
    const sink = Float32Array.from({ length: h_q }, () => {
      const u = rng.uniform();
      return u < 0.31 ? Infinity : u < 0.62 ? -Infinity : rng.normal();
    });
    attnSink = Tensor.fromHost(sink, [h_q], "f32");
  }

  return {
    q: Tensor.fromHost(q, [b, s_q, h_q, D_QK], "bf16"),
    kCache,
    indices: Tensor.fromHost(indices, [b, s_q, topk], "i32"),
    ...(topk_length ? { topkLength: Tensor.fromHost(topk_length, [b], "i32") } : {}),
    ...(attnSink ? { attnSink } : {}),
    softmaxScale: D_QK ** -0.55,
    isFp8Kvcache: true,
    headDimV: 512,
    seqlens,
  };
}
