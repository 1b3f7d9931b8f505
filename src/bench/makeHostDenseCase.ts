import { ArgumentError } from "../errors/ArgumentError.js";
import { Rng, randomBf16 } from "../numeric/random.js";
import { Tensor } from "../runtime/Tensor.js";

const D_QK = 576;
const PAGE = 64;

/** A small dense bf16 case on the host: the arguments of mlaDecodeReference. */
export interface HostDenseCase {
  /** [b, s_q, h_q, 576] */
  q: Tensor;
  /** [num_blocks, 64, h_kv, 576]; slots past each length hold NaN. */
  kCache: Tensor;
  /** [b, max_blocks] i32, a random permutation of the blocks. */
  blockTable: Tensor;
  /** [b] i32 */
  cacheSeqlens: Tensor;
  causal: boolean;
  headDimV: 512;
}

/**
 * A seeded dense bf16 case drawn in JavaScript with FlashMLA's recipe (q and K ~ N(0,1)/10 clamped
 * to [-1, 1], permuted blocks, NaN past each length): for the CPU reference where there is no GPU.
 * Sized for milliseconds to seconds, not for the benchmark's gigabytes.
 */
export function makeHostDenseCase(opts: { seed: number; s_q: number; h_q: number; h_kv: number; seqlens: readonly number[]; causal: boolean }): HostDenseCase {
  const { seed, s_q, h_q, h_kv, seqlens, causal } = opts;
  const b = seqlens.length;
  if (b < 1 || seqlens.some((n) => !Number.isInteger(n) || n < 0)) throw new ArgumentError("makeHostDenseCase", "opts.seqlens", "integers >= 0, at least one", JSON.stringify(seqlens));
  const rng = new Rng(seed);
  const blocksOf = seqlens.map((n) => Math.ceil(n / PAGE));
  const maxBlocks = Math.max(1, ...blocksOf);
  const numBlocks = Math.max(1, blocksOf.reduce((a, n) => a + n, 0));
  const physical = rng.permutation(numBlocks);
  const blockTable = new Int32Array(b * maxBlocks).fill(-1);
  let next = 0;
  for (let i = 0; i < b; i++) for (let j = 0; j < blocksOf[i]; j++) blockTable[i * maxBlocks + j] = physical[next++];

  const q = randomBf16(rng, b * s_q * h_q * D_QK, { std: 0.1, clamp: 1 });
  const row = h_kv * D_QK;
  const kv = new Uint16Array(numBlocks * PAGE * row).fill(0x7fc0);
  for (let i = 0; i < b; i++) {
    for (let t = 0; t < seqlens[i]; t++) {
      const block = blockTable[i * maxBlocks + Math.floor(t / PAGE)];
      kv.set(randomBf16(rng, row, { std: 0.1, clamp: 1 }), (block * PAGE + (t % PAGE)) * row);
    }
  }
  return {
    q: Tensor.fromHost(q, [b, s_q, h_q, D_QK], "bf16"),
    kCache: Tensor.fromHost(kv, [numBlocks, PAGE, h_kv, D_QK], "bf16"),
    blockTable: Tensor.fromHost(blockTable, [b, maxBlocks], "i32"),
    cacheSeqlens: Tensor.fromHost(Int32Array.from(seqlens), [b], "i32"),
    causal,
    headDimV: 512,
  };
}
