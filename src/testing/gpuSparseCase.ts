import { ArgumentError } from "../errors/ArgumentError.js";
import { D_QK, D_V } from "../mla/contract/shape.js";
import { writeKvCacheFp8 } from "../mla/kvCache/writeKvCacheFp8.js";
import { FP8_TOKEN_BYTES } from "../numeric/kvCacheFp8.js";
import { Rng } from "../numeric/random.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { makeSparseCase, type SparseCase, type SparseCaseOptions } from "./sparseCase.js";
import { drawAttnSink, drawSparseIndices, drawSparseLayout } from "./sparseCaseLayout.js";
import { buildOwningTensors } from "./buildOwningTensors.js";
import { deviceBufferOf as bufferOf, FILL_CHUNK_TOKENS, fillNormalBf16, randomU64, writeDrawnTokens } from "./writeDrawnTokens.js";

/** Tokens drawn and quantized per pass: a 302 MB bf16 buffer, whatever the size of the cache. */
export const SPARSE_FILL_CHUNK_TOKENS = FILL_CHUNK_TOKENS;
/** The sparse kernel and the FP8 writer index slots with 32-bit ints. */
const MAX_SLOTS = 2 ** 31 - 1;

/** The shape, lengths and data recipe of one sparse FP8 decode case. */
export interface SparseCaseSpec {
  b: number;
  s_q: number;
  h_q: number;
  /** Index entries per query token. */
  topk: number;
  /** Tokens cached per request (b entries, each ≥ 0). */
  seqlens: readonly number[];
  /** Tokens per KV block (any size ≥ 1: indices are physical token ids). */
  pageBlockSize: number;
  /** Give an attnSink [h_q]: about 31% +inf, 31% −inf, the rest N(0,1) (FlashMLA's sparse tests and bench). */
  withSink: boolean;
  /** Give a topkLength [b] drawn from U[0, topk]. */
  withTopkLength: boolean;
  /** Probability that a filled index entry becomes −1 (1: every row is empty). @default 0 */
  invalidFraction?: number;
  /** Probability that a filled index entry repeats an earlier one of its row. @default 0 */
  repeat?: number;
  /** Poisoned token rows after each block, so the block stride exceeds pageBlockSize·656 (FlashMLA's tests pad 1). @default 0 */
  blockPadTokens?: number;
}

/** A sparse case whose tensors live on the GPU, ready for the sparse kernels, with the host copies the check needs. */
export interface GpuSparseCase extends SparseCaseSpec {
  seed: number;
  /** [b, s_q, h_q, 576] bf16: N(0,1) clamped to [-1, 1]. */
  q: Tensor;
  /**
   * [num_blocks, pageBlockSize, 1, 656] u8, block stride (pageBlockSize + blockPadTokens)·656: the V32
   * FP8 form of N(0,1)/10 tokens clamped to [-1, 1] where an index entry points, 0xff bytes (NaN
   * scales, NaN RoPE) everywhere else.
   */
  kCache: Tensor;
  /** [b, s_q, topk] i32 physical token ids, −1 = invalid. */
  indices: Tensor;
  topkLength?: Tensor;
  attnSink?: Tensor;
  indicesHost: Int32Array;
  topkLengthHost?: Int32Array;
  attnSinkHost?: Float32Array;
  numBlocks: number;
  /** 576^-0.55, as FlashMLA's sparse tests and bench use. */
  softmaxScale: number;
  /** Valid entries within each row's topkLength, over the whole call (N attended). */
  nAttended: number;
  /** Distinct tokens those entries read (N_unique). */
  nUnique: number;
  /** Device bytes of q, the cache and the indices. */
  inputBytes: number;
  /** Frees every tensor; safe to call twice. */
  dispose(): void;
}

/**
 * Builds a sparse FP8 decode case on the GPU, so caches of gigabytes (the benchmark's 128 requests of
 * 32768 tokens are 2.7 GB) cost well under a second of device time. The layout and the indices are
 * drawn on the host exactly as makeSparseCase draws them (sparseCaseLayout.ts: permuted blocks,
 * distinct random positions below each length, FlashMLA's sinks); q and the KV tokens are drawn on
 * the GPU (bench_fill.cu `fill_normal_half`, a hash of seed and element index): the tokens that an
 * index entry points at go through a temporary bf16 buffer of {@link SPARSE_FILL_CHUNK_TOKENS} tokens
 * into the FP8 writer (writeKvCacheFp8 with a slot mapping), chunk by chunk (writeDrawnTokens); every
 * other token keeps the 0xff poison. Returns once the case is ready (the stream is synchronized).
 */
export function makeGpuSparseCase(spec: SparseCaseSpec, opts: { seed: number; stream: Stream }): GpuSparseCase {
  const fn = "makeGpuSparseCase";
  const { b, s_q, h_q, topk, pageBlockSize } = spec;
  for (const [name, v] of [["b", b], ["s_q", s_q], ["h_q", h_q], ["topk", topk], ["pageBlockSize", pageBlockSize]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new ArgumentError(fn, `spec.${name}`, "an integer >= 1", String(v));
  }
  if (!Array.isArray(spec.seqlens) || spec.seqlens.length !== b || spec.seqlens.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new ArgumentError(fn, "spec.seqlens", `${b} integers >= 0`, JSON.stringify(spec.seqlens));
  }
  const blockPadTokens = spec.blockPadTokens ?? 0;
  if (!Number.isInteger(blockPadTokens) || blockPadTokens < 0) throw new ArgumentError(fn, "spec.blockPadTokens", "an integer >= 0", String(blockPadTokens));
  for (const name of ["invalidFraction", "repeat"] as const) {
    const v = spec[name] ?? 0;
    if (!(v >= 0 && v <= 1)) throw new ArgumentError(fn, `spec.${name}`, "a probability in [0, 1]", String(v));
  }
  // Before any draw: the block permutation alone would take gigabytes.
  const slotsNeeded = (spec.seqlens.reduce((a, n) => a + Math.ceil(n / pageBlockSize), 0) + 1) * pageBlockSize;
  if (slotsNeeded > MAX_SLOTS) throw new ArgumentError(fn, "spec.seqlens", `at most ${MAX_SLOTS} slots in all (32-bit token ids)`, `${slotsNeeded} slots`);
  const { seed, stream } = opts;
  const rng = new Rng(seed);
  const layout = drawSparseLayout(rng, { b, seqlens: spec.seqlens, pageBlockSize });
  const numSlots = layout.numBlocks * pageBlockSize;
  const qSeed = randomU64(rng);
  const kvSeed = randomU64(rng);
  const draw = drawSparseIndices(rng, layout, { s_q, topk, topkLength: spec.withTopkLength, invalidFraction: spec.invalidFraction ?? 0, repeat: spec.repeat ?? 0 });
  const sinkHost = spec.withSink ? drawAttnSink(rng, h_q) : undefined;
  const slots = referencedSlots(draw.referenced);
  const nAttended = countAttended(draw.indices, draw.topkLength, { b, s_q, topk, numSlots });

  const ordinal = stream.deviceOrdinal;
  return buildOwningTensors(stream, ({ keep, upload }) => {
    const rowsPerBlock = pageBlockSize + blockPadTokens;
    const q = keep(Tensor.emptyDevice([b, s_q, h_q, D_QK], "bf16", ordinal));
    const cacheBuffer = keep(Tensor.emptyDevice([layout.numBlocks, rowsPerBlock, 1, FP8_TOKEN_BYTES], "u8", ordinal));
    const kCache = cacheBuffer.view([layout.numBlocks, pageBlockSize, 1, FP8_TOKEN_BYTES], [rowsPerBlock * FP8_TOKEN_BYTES, FP8_TOKEN_BYTES, FP8_TOKEN_BYTES, 1]);
    const indices = upload(draw.indices, [b, s_q, topk], "i32");
    const topkLength = draw.topkLength === undefined ? undefined : upload(draw.topkLength, [b], "i32");
    const attnSink = sinkHost === undefined ? undefined : upload(sinkHost, [h_q], "f32");

    fillNormalBf16(q, qSeed, 1, stream);
    bufferOf(cacheBuffer).memset8(0xff, 0, undefined, stream);
    writeDrawnTokens({ slots, dims: D_QK, seed: kvSeed, scale: 0.1, stream, write: (kv, slotMapping) => writeKvCacheFp8({ kv, slotMapping, kCache, stream }) });
    // The host arrays must outlive the async copies.
    stream.synchronize();
    return {
      ...spec,
      seqlens: layout.seqlens,
      blockPadTokens,
      seed,
      q,
      kCache,
      indices,
      ...(topkLength !== undefined ? { topkLength, topkLengthHost: draw.topkLength } : {}),
      ...(attnSink !== undefined ? { attnSink, attnSinkHost: sinkHost } : {}),
      indicesHost: draw.indices,
      numBlocks: layout.numBlocks,
      softmaxScale: D_QK ** -0.55,
      nAttended,
      nUnique: slots.length,
      inputBytes: q.numel * 2 + cacheBuffer.numel + indices.numel * 4,
    };
  });
}

/** The slots whose flag is set, ascending: the FP8 writer's slot mapping. */
export function referencedSlots(referenced: Uint8Array): Int32Array {
  let n = 0;
  for (let id = 0; id < referenced.length; id++) n += referenced[id];
  const slots = new Int32Array(n);
  for (let id = 0, at = 0; id < referenced.length; id++) if (referenced[id]) slots[at++] = id;
  return slots;
}

/** Entries within each row's topkLength that hold a slot in [0, numSlots): FlashMLA's N attended. */
export function countAttended(indices: Int32Array, topkLength: Int32Array | undefined, dims: { b: number; s_q: number; topk: number; numSlots: number }): number {
  const { b, s_q, topk, numSlots } = dims;
  let n = 0;
  for (let i = 0; i < b; i++) {
    const limit = Math.max(0, Math.min(topk, topkLength?.[i] ?? topk));
    for (let j = 0; j < s_q; j++) {
      const row = (i * s_q + j) * topk;
      for (let x = 0; x < limit; x++) {
        const id = indices[row + x];
        if (id >= 0 && id < numSlots) n++;
      }
    }
  }
  return n;
}

/** A host-made sparse case (makeSparseCase) and its tensors copied to the GPU (device 0). */
export interface UploadedSparseCase {
  c: SparseCase;
  dev: { q: Tensor; kCache: Tensor; indices: Tensor; topkLength?: Tensor; attnSink?: Tensor };
  /** The arguments of a sparse flashMlaWithKvcache call on the device copies, without schedMeta. */
  args: { q: Tensor; kCache: Tensor; indices: Tensor; topkLength?: Tensor; attnSink?: Tensor; isFp8Kvcache: true; headDimV: typeof D_V; softmaxScale: number };
  /** Frees the device copies; safe to call twice. */
  dispose(): void;
}

/** makeSparseCase(opts) with its tensors copied to the GPU (Tensor.toDevice: contiguous copies). */
export function uploadSparseCase(opts: SparseCaseOptions): UploadedSparseCase {
  const c = makeSparseCase(opts);
  const owned: Tensor[] = [];
  const up = (t: Tensor) => {
    const d = Tensor.toDevice(t);
    owned.push(d);
    return d;
  };
  try {
    const dev = {
      q: up(c.q),
      kCache: up(c.kCache),
      indices: up(c.indices),
      ...(c.topkLength !== undefined ? { topkLength: up(c.topkLength) } : {}),
      ...(c.attnSink !== undefined ? { attnSink: up(c.attnSink) } : {}),
    };
    let disposed = false;
    return {
      c,
      dev,
      args: { ...dev, isFp8Kvcache: true, headDimV: D_V, softmaxScale: c.softmaxScale },
      dispose() {
        if (disposed) return;
        disposed = true;
        for (const t of owned) t.dispose();
      },
    };
  } catch (e) {
    for (const t of owned) t.dispose();
    throw e;
  }
}
