import { ArgumentError } from "../errors/ArgumentError.js";
import { DENSE_PAGE_BLOCK_SIZE as PAGE, D_QK, D_V } from "../mla/contract/shape.js";
import { MODEL1_D_QK } from "../numeric/kvCacheModel1.js";
import { Rng, randomBf16, randomFp16 } from "../numeric/random.js";
import { Tensor } from "../runtime/Tensor.js";

/** Block id FlashMLA's tests write into block-table slots a request does not use. */
export const UNUSED_BLOCK_ID = 2147480000;
/** A quiet NaN in both bf16 and fp16: poison for KV slots no kernel may read. */
export const NAN_HALF_BITS = 0x7fc0;

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
  seqlens: readonly number[] | { mean: number; varlen: boolean; zeroFraction?: number };
  causal: boolean;
  dtype: "bf16" | "fp16";
  /** Physical blocks no request uses (filled with NaN). @default 0 */
  extraBlocks?: number;
  /** Dims of q and of each cached row: 576 (DeepSeek-V3's head) or 512 (DeepSeek-V4's, V the whole row). @default 576 */
  d_qk?: number;
}

/** A dense decode case: the arguments of mlaDecodeReference / flashMlaWithKvcache, on the host. */
export interface DenseCase {
  /** [b, s_q, h_q, d_qk] */
  q: Tensor;
  /** [num_blocks, 64, h_kv, d_qk]; every slot past a request's length, and every unused block, is NaN. */
  kCache: Tensor;
  /** [b, max_blocks] i32; a random permutation of the physical blocks, unused entries 2147480000. */
  blockTable: Tensor;
  /** [b] i32 */
  cacheSeqlens: Tensor;
  causal: boolean;
  /** 1/sqrt(d_qk) */
  softmaxScale: number;
  headDimV: typeof D_V;
  /** The lengths also held by cacheSeqlens. */
  seqlens: number[];
}

/**
 * A seeded dense decode case following FlashMLA's test data (FLASHMLA.md §4): q and k drawn from
 * N(0,1)/10 clamped to [-1,1], varlen lengths max(N(s_k, s_k/2), s_q), optional zero lengths, a
 * randomly permuted block table, and NaN in every cache slot no kernel may read; d_qk 576, or 512
 * (DeepSeek-V4's head) with `d_qk`. Equal options give equal cases. Drawn in JavaScript: for shapes of
 * up to millions of values (makeDenseCaseGpu draws larger ones on the GPU).
 */
export function makeDenseCase(opts: DenseCaseOptions): DenseCase {
  const { seed, b, s_q, h_q, h_kv, causal, dtype } = opts;
  const d_qk = denseCaseDqk("makeDenseCase", opts.d_qk);
  const rng = new Rng(seed);
  const { seqlens, block_table, max_blocks, num_blocks } = drawDenseLayout(rng, opts);

  const draw = dtype === "bf16" ? randomBf16 : randomFp16;
  const q = draw(rng, b * s_q * h_q * d_qk, { std: 0.1, clamp: 1 }); // [b, s_q, h_q, d_qk]
  const rowElems = h_kv * d_qk; // one token row holds all kv heads
  const k_cache = new Uint16Array(num_blocks * PAGE * rowElems).fill(NAN_HALF_BITS); // [num_blocks, 64, h_kv, d_qk]
  for (let i = 0; i < b; i++) {
    for (let t = 0; t < seqlens[i]; t++) {
      const block = block_table[i * max_blocks + Math.floor(t / PAGE)];
      k_cache.set(draw(rng, rowElems, { std: 0.1, clamp: 1 }), (block * PAGE + (t % PAGE)) * rowElems);
    }
  }

  return {
    q: Tensor.fromHost(q, [b, s_q, h_q, d_qk], dtype),
    kCache: Tensor.fromHost(k_cache, [num_blocks, PAGE, h_kv, d_qk], dtype),
    blockTable: Tensor.fromHost(block_table, [b, max_blocks], "i32"),
    cacheSeqlens: Tensor.fromHost(Int32Array.from(seqlens), [b], "i32"),
    causal,
    softmaxScale: 1 / Math.sqrt(d_qk),
    headDimV: D_V,
    seqlens,
  };
}

/** A case builder's `d_qk` option, checked: 576 by default, or DeepSeek-V4's 512. */
export function denseCaseDqk(fn: string, d_qk: number | undefined): number {
  if (d_qk === undefined) return D_QK;
  if (d_qk !== D_QK && d_qk !== MODEL1_D_QK) throw new ArgumentError(fn, "opts.d_qk", `${D_QK} or ${MODEL1_D_QK}`, String(d_qk));
  return d_qk;
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
  if (isLengthList(spec)) {
    if (spec.length !== b || spec.some((n) => !Number.isInteger(n) || n < 0)) {
      throw new ArgumentError("makeDenseCase", "opts.seqlens", `${b} integers >= 0`, JSON.stringify(spec));
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

function isLengthList(spec: DenseCaseOptions["seqlens"]): spec is readonly number[] {
  return Array.isArray(spec);
}
