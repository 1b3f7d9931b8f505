import { ArgumentError, formatGot } from "../errors/ArgumentError.js";
import { writeKvCacheModel1 } from "../mla/kvCache/writeKvCacheModel1.js";
import { MODEL1_D_QK, MODEL1_TOKEN_BYTES, model1PageBytes } from "../numeric/kvCacheModel1.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { buildOwningTensors } from "./buildOwningTensors.js";
import { countAttended, referencedSlots } from "./gpuSparseCase.js";
import { drawModel1Case, type Model1CacheDraw, type Model1CaseDraws, type Model1CaseSpec } from "./model1Case.js";
import { deviceBufferOf, fillNormalBf16, randomU64, writeDrawnTokens } from "./writeDrawnTokens.js";

const FN = "makeGpuModel1Case";

/** One MODEL1 cache of a GPU case and its index list, with the host copies the check needs. */
export interface GpuModel1Cache {
  /**
   * [numBlocks, pageBlockSize, 1, 584] u8, strides (model1PageBytes(pageBlockSize), 584, 584, 1): the MODEL1
   * form of N(0,1)/10 tokens clamped to ±1 where an index entry (within its valid length) points, 0xff
   * bytes (NaN) in every other token's data and scale record and in each page's padding.
   */
  kCache: Tensor;
  /** [b, s_q, topk] i32 physical token ids, −1 = invalid. */
  indices: Tensor;
  /** [b] i32, when the recipe asks for valid lengths. */
  topkLength?: Tensor;
  indicesHost: Int32Array;
  topkLengthHost?: Int32Array;
  topk: number;
  pageBlockSize: number;
  numBlocks: number;
  /** Tokens cached per request. */
  seqlens: number[];
}

/**
 * A DeepSeek-V4 (MODEL1) sparse decode case whose tensors live on the GPU, the main cache's fields at
 * the top (as checkSparseCase reads them) and the second cache under `extra`.
 */
export interface GpuModel1Case extends GpuModel1Cache {
  spec: Model1CaseSpec;
  seed: number;
  b: number;
  s_q: number;
  h_q: number;
  /** [b, s_q, h_q, 512] bf16: N(0,1) clamped to ±1. */
  q: Tensor;
  /** The second cache (extra_k_cache), with the recipe's extra. */
  extra?: GpuModel1Cache;
  /** [h_q] f32, with the recipe's sink: a third +inf, a third −inf, the rest N(0,1). */
  attnSink?: Tensor;
  attnSinkHost?: Float32Array;
  /** 512^-0.55 unless given. */
  softmaxScale: number;
  /** Valid entries within each row's valid length, over both caches and the whole call (N attended). */
  nAttended: number;
  /** Distinct tokens those entries read, summed over the two caches (N_unique). */
  nUnique: number;
  /** Device bytes of q, the caches (every page) and the index lists. */
  inputBytes: number;
  /** Frees every tensor; safe to call twice. */
  dispose(): void;
}

/** Everything a GPU MODEL1 case decides on the host, before it touches the GPU. */
export interface Model1CasePlan extends Omit<Model1CaseDraws, "rng"> {
  /** Seeds of the GPU draws: q, the main cache's tokens, the extra cache's. */
  qSeed: bigint;
  kvSeed: bigint;
  extraKvSeed: bigint;
  /** The slots some valid entry reads, ascending: each cache's writer slot mapping. */
  slots: Int32Array;
  extraSlots?: Int32Array;
  nAttended: number;
  nUnique: number;
  inputBytes: number;
}

/**
 * The host side of {@link makeGpuModel1Case}: the lengths, pages, index lists, valid lengths and sinks
 * exactly as makeModel1Case draws them for `seed` (drawModel1Case), then three seeds for the GPU's
 * draws, each cache's referenced slots, N attended, N_unique and the bytes the case will occupy. Pure:
 * equal arguments give equal plans, and no GPU is needed (errors name makeGpuModel1Case).
 */
export function planGpuModel1Case(spec: Model1CaseSpec, seed: number): Model1CasePlan {
  if (spec === null || typeof spec !== "object") throw new ArgumentError(FN, "spec", "a MODEL1 case recipe (an options object)", formatGot(spec));
  const { rng, ...draws } = drawModel1Case(FN, { ...spec, seed });
  const qSeed = randomU64(rng);
  const kvSeed = randomU64(rng);
  const extraKvSeed = randomU64(rng);
  const { b, s_q, h_q } = spec;
  const slots = referencedSlots(draws.main.draw.referenced);
  const extraSlots = draws.extra === undefined ? undefined : referencedSlots(draws.extra.draw.referenced);
  const attended = (d: Model1CacheDraw, topk: number) =>
    countAttended(d.draw.indices, d.draw.topkLength, { b, s_q, topk, numSlots: d.layout.numBlocks * d.layout.pageBlockSize });
  const cacheBytes = (d: Model1CacheDraw, topk: number) => d.layout.numBlocks * model1PageBytes(d.layout.pageBlockSize) + b * s_q * topk * 4;
  const extraTopk = spec.extra?.topk ?? 0;
  return {
    ...draws,
    qSeed,
    kvSeed,
    extraKvSeed,
    slots,
    ...(extraSlots !== undefined ? { extraSlots } : {}),
    nAttended: attended(draws.main, spec.topk) + (draws.extra === undefined ? 0 : attended(draws.extra, extraTopk)),
    nUnique: slots.length + (extraSlots?.length ?? 0),
    inputBytes: b * s_q * h_q * MODEL1_D_QK * 2 + cacheBytes(draws.main, spec.topk) + (draws.extra === undefined ? 0 : cacheBytes(draws.extra, extraTopk)),
  };
}

/**
 * Builds a DeepSeek-V4 (MODEL1) sparse decode case on the GPU, so the benchmark's caches (v4-peak's
 * 2.8 GB, two caches of 1.2 GB each for v4-cfg1) cost milliseconds of device time (the host's draws of
 * a v4 set take 0.3-0.6 s: a permutation of each request's positions per query row). Everything small is
 * drawn on the host exactly as makeModel1Case draws it for the seed (planGpuModel1Case: per cache its
 * own lengths max(trunc(N(s_k, s_k/2)), s_q), permuted pages of its own size, distinct random positions
 * per query row padded with −1, valid lengths U[0, topk] on request; then the sinks); q and the tokens
 * are drawn on the GPU (bench_fill.cu `fill_normal_half`) instead of on the host, so the bytes differ
 * from makeModel1Case's. Each cache's pages start as 0xff bytes; the tokens some valid entry reads go
 * through a scratch buffer into writeKvCacheModel1, chunk by chunk (writeDrawnTokens); every other
 * token, scale record and page padding keeps the NaN poison. Returns once the case is ready (the
 * stream is synchronized); frees what it allocated when it throws.
 */
export function makeGpuModel1Case(spec: Model1CaseSpec, opts: { seed: number; stream: Stream; softmaxScale?: number }): GpuModel1Case {
  const softmaxScale = opts.softmaxScale ?? MODEL1_D_QK ** -0.55;
  if (!(Number.isFinite(softmaxScale) && softmaxScale > 0)) throw new ArgumentError(FN, "opts.softmaxScale", "a finite number > 0", formatGot(opts.softmaxScale));
  const plan = planGpuModel1Case(spec, opts.seed);
  const { stream, seed } = opts;
  const { b, s_q, h_q } = spec;
  const ordinal = stream.deviceOrdinal;
  return buildOwningTensors(stream, ({ keep, upload }) => {
    const buildCache = (d: Model1CacheDraw, topk: number, slots: Int32Array, kvSeed: bigint): GpuModel1Cache => {
      const { numBlocks, pageBlockSize } = d.layout;
      const pageBytes = model1PageBytes(pageBlockSize);
      const pages = keep(Tensor.emptyDevice([numBlocks * pageBytes], "u8", ordinal));
      const kCache = pages.view([numBlocks, pageBlockSize, 1, MODEL1_TOKEN_BYTES], [pageBytes, MODEL1_TOKEN_BYTES, MODEL1_TOKEN_BYTES, 1]);
      deviceBufferOf(pages).memset8(0xff, 0, undefined, stream);
      const indices = upload(d.draw.indices, [b, s_q, topk], "i32");
      const topkLength = d.draw.topkLength === undefined ? undefined : upload(d.draw.topkLength, [b], "i32");
      writeDrawnTokens({ slots, dims: MODEL1_D_QK, seed: kvSeed, scale: 0.1, stream, write: (kv, slotMapping) => writeKvCacheModel1({ kv, slotMapping, cache: kCache, stream }) });
      return {
        kCache,
        indices,
        ...(topkLength !== undefined ? { topkLength, topkLengthHost: d.draw.topkLength } : {}),
        indicesHost: d.draw.indices,
        topk,
        pageBlockSize,
        numBlocks,
        seqlens: d.layout.seqlens,
      };
    };

    const q = keep(Tensor.emptyDevice([b, s_q, h_q, MODEL1_D_QK], "bf16", ordinal));
    fillNormalBf16(q, plan.qSeed, 1, stream);
    const main = buildCache(plan.main, spec.topk, plan.slots, plan.kvSeed);
    const extra = plan.extra === undefined ? undefined : buildCache(plan.extra, spec.extra!.topk, plan.extraSlots!, plan.extraKvSeed);
    const attnSink = plan.sink === undefined ? undefined : upload(plan.sink, [h_q], "f32");
    // The host arrays must outlive the async copies.
    stream.synchronize();
    return {
      ...main,
      spec,
      seed,
      b,
      s_q,
      h_q,
      q,
      ...(extra !== undefined ? { extra } : {}),
      ...(attnSink !== undefined ? { attnSink, attnSinkHost: plan.sink } : {}),
      softmaxScale,
      nAttended: plan.nAttended,
      nUnique: plan.nUnique,
      inputBytes: plan.inputBytes,
    };
  });
}
