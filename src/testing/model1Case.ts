import { ArgumentError, formatGot, optionsObject } from "../errors/ArgumentError.js";
import { D_V } from "../mla/contract/shape.js";
import { MODEL1_D_QK, MODEL1_TOKEN_BYTES, model1PageBytes, quantizeKvCacheModel1 } from "../numeric/kvCacheModel1.js";
import { Rng, randomBf16 } from "../numeric/random.js";
import { Tensor } from "../runtime/Tensor.js";
import { drawAttnSink, drawSparseIndices, drawSparseLayout, type SparseIndexDraw, type SparseLayout } from "./sparseCaseLayout.js";

const FN = "makeModel1Case";

/** The second cache of a {@link makeModel1Case} case (DeepSeek-V4's extra_k_cache). */
export interface Model1ExtraOptions {
  /** Index entries per query token into the extra cache (extra_topk). */
  topk: number;
  /** Mean tokens cached per request in the extra cache (lengths drawn as for the main cache). */
  s_k: number;
  /** Tokens per page of the extra cache. */
  pageBlockSize: number;
  /** Give an extraTopkLength [b] drawn from U[0, topk] (FlashMLA's v4-cfg3 and v4-cfg4). @default false */
  topkLengthRandom?: boolean;
}

/** Options of {@link makeModel1Case}. */
export interface Model1CaseOptions {
  seed: number;
  b: number;
  s_q: number;
  h_q: number;
  /** Index entries per query token into the main cache. */
  topk: number;
  /** Mean tokens cached per request (see `varlen`). */
  s_k: number;
  /** Tokens per page of the main cache (64 or 256 in the engines, 2 in FlashMLA's tests). */
  pageBlockSize: number;
  /** A second cache with its own indices, page size and lengths, attended in the same softmax. @default none */
  extra?: Model1ExtraOptions;
  /** Give an attnSink [h_q]: about 31% +inf, 31% −inf, the rest N(0,1). @default false */
  sink?: boolean;
  /** Give a topkLength [b] drawn from U[0, topk]. @default false */
  topkLength?: boolean;
  /** Probability that a filled index entry (of either cache) becomes −1. @default 0 */
  invalidFraction?: number;
  /** Probability that a filled index entry (after the first of its row) repeats an earlier one of its row. @default 0 */
  repeat?: number;
  /** Request lengths max(trunc(N(s_k, s_k/2)), s_q), drawn per cache, as FlashMLA's MODEL1 tests; else all s_k. @default true */
  varlen?: boolean;
}

/** A DeepSeek-V4 (MODEL1) sparse decode case on the host: the arguments of mlaDecodeReference and its lengths. */
export interface Model1Case {
  /** [b, s_q, h_q, 512] bf16, N(0,1) clamped to ±1. */
  q: Tensor<"bf16">;
  /**
   * [num_blocks, pageBlockSize, 1, 584] u8 with strides (model1PageBytes(pageBlockSize), 584, 584, 1): N(0,1)/10
   * tokens clamped to ±1, quantized by quantizeKvCacheModel1. Every token that no index entry (within its
   * row's topkLength) points at is 0xff bytes, data and scale record alike (NaN), as is each page's padding.
   */
  kCache: Tensor<"u8">;
  /** [b, s_q, topk] i32 physical token ids (block · pageBlockSize + offset) into kCache, −1 = invalid. */
  indices: Tensor<"i32">;
  /** [b] i32, when asked for. */
  topkLength?: Tensor<"i32">;
  /** The extra cache, built like kCache with its own page size, when asked for. */
  extraKCache?: Tensor<"u8">;
  /** [b, s_q, extra_topk] i32 into extraKCache, with extraKCache. */
  extraIndices?: Tensor<"i32">;
  /** [b] i32, when asked for. */
  extraTopkLength?: Tensor<"i32">;
  /** [h_q] f32, when asked for. */
  attnSink?: Tensor<"f32">;
  /** 512^-0.55, as FlashMLA's sparse tests use. */
  softmaxScale: number;
  isFp8Kvcache: true;
  headDimV: typeof D_V;
  /** Tokens cached per request in kCache. */
  seqlens: number[];
  /** Tokens cached per request in extraKCache, with it. */
  extraSeqlens?: number[];
}

/** What is drawn for one cache before any token: its lengths and pages, and its index entries. */
export interface Model1CacheDraw {
  layout: SparseLayout;
  draw: SparseIndexDraw;
}

/** What a MODEL1 case draws before any token, in draw order, and the generator that draws the rest. */
export interface Model1CaseDraws {
  /** Seeded with opts.seed, past the draws below: the tokens come from it. */
  rng: Rng;
  main: Model1CacheDraw;
  /** With opts.extra. */
  extra?: Model1CacheDraw;
  /** [h_q], with opts.sink. */
  sink?: Float32Array;
}

/** A MODEL1 case's recipe without its seed: what the GPU builder takes beside a seed. */
export type Model1CaseSpec = Omit<Model1CaseOptions, "seed">;

/** Token ids are int32 (the kernels, the writer): a cache's pages must hold fewer slots. */
const MAX_SLOTS = 2 ** 31 - 1;

/**
 * A seeded DeepSeek-V4 sparse decode case following FlashMLA's MODEL1 test data (DEEPSEEK-V4.md): per
 * cache, request lengths max(trunc(N(s_k, s_k/2)), s_q), each request's tokens in randomly permuted pages,
 * and index rows of distinct random positions below the request's length (as physical ids) padded with −1;
 * q ~ N(0,1) and KV ~ N(0,1)/10, both clamped to ±1, KV quantized to the MODEL1 format; sinks a third
 * +inf, a third −inf; softmax scale 512^-0.55. Unreferenced tokens are 0xff (NaN) so that reading one
 * shows. The small draws (lengths, pages, indices, sinks: {@link drawModel1Case}) come first and the
 * tokens last; only the tokens some entry references are drawn, so a case costs O(b · s_q · (topk + extra
 * topk)) token draws. makeGpuModel1Case builds the same case for a seed on the GPU, tokens aside.
 * @example
 * const c = makeModel1Case({ seed: 1, b: 2, s_q: 2, h_q: 64, topk: 128, s_k: 512, pageBlockSize: 256, extra: { topk: 64, s_k: 300, pageBlockSize: 64 }, sink: true });
 * const { out, lse } = mlaDecodeReference(c);
 */
export function makeModel1Case(opts: Model1CaseOptions): Model1Case {
  const { rng, main, extra: second, sink } = drawModel1Case(FN, opts);
  const { b, s_q, h_q, topk } = opts;

  const q = randomBf16(rng, b * s_q * h_q * MODEL1_D_QK, { std: 1, clamp: 1 }); // [b, s_q, h_q, 512]
  const kCache = quantizeReferenced(rng, main);
  const extraKCache = second === undefined ? undefined : quantizeReferenced(rng, second);

  const lengths = (d: SparseIndexDraw) => (d.topkLength === undefined ? undefined : Tensor.fromHost(d.topkLength, [b], "i32"));
  const topkLength = lengths(main.draw);
  const extraTopkLength = second === undefined ? undefined : lengths(second.draw);
  return {
    q: Tensor.fromHost(q, [b, s_q, h_q, MODEL1_D_QK], "bf16"),
    kCache,
    indices: Tensor.fromHost(main.draw.indices, [b, s_q, topk], "i32"),
    ...(topkLength !== undefined ? { topkLength } : {}),
    ...(second !== undefined
      ? {
          extraKCache,
          extraIndices: Tensor.fromHost(second.draw.indices, [b, s_q, opts.extra!.topk], "i32"),
          ...(extraTopkLength !== undefined ? { extraTopkLength } : {}),
          extraSeqlens: second.layout.seqlens,
        }
      : {}),
    ...(sink !== undefined ? { attnSink: Tensor.fromHost(sink, [h_q], "f32") } : {}),
    softmaxScale: MODEL1_D_QK ** -0.55,
    isFp8Kvcache: true,
    headDimV: D_V,
    seqlens: main.layout.seqlens,
  };
}

/**
 * Checks the options of a MODEL1 case (errors name `fn`) and draws, from a generator seeded with
 * opts.seed, everything the case draws before its tokens, in this order: the main cache's lengths,
 * pages and index rows, the extra cache's, the sinks. The first draws of every MODEL1 case generator,
 * host or GPU, so a seed gives both the same lengths, pages, indices, valid lengths and sinks. Refuses a
 * cache of 2^31 slots or more once its lengths are drawn, before its page permutation is.
 */
export function drawModel1Case(fn: string, opts: Model1CaseOptions): Model1CaseDraws {
  const o = optionsObject(fn, "opts", opts);
  const { b, s_q, h_q, topk, s_k, pageBlockSize } = o as Model1CaseOptions;
  for (const [name, v, least] of [["b", b, 1], ["s_q", s_q, 1], ["h_q", h_q, 1], ["topk", topk, 1], ["s_k", s_k, 0], ["pageBlockSize", pageBlockSize, 1]] as const) {
    checkInteger(fn, `opts.${name}`, v, least);
  }
  const invalidFraction = checkProbability(fn, "opts.invalidFraction", o.invalidFraction);
  const repeat = checkProbability(fn, "opts.repeat", o.repeat);
  const varlen = o.varlen ?? true;
  const extra = o.extra === undefined ? undefined : optionsObject(fn, "opts.extra", o.extra) as Model1ExtraOptions;
  if (extra !== undefined) {
    for (const [name, v, least] of [["topk", extra.topk, 1], ["s_k", extra.s_k, 0], ["pageBlockSize", extra.pageBlockSize, 1]] as const) {
      checkInteger(fn, `opts.extra.${name}`, v, least);
    }
  }
  const rng = new Rng(o.seed as number);

  const drawCache = (c: { s_k: number; topk: number; pageBlockSize: number; topkLength: boolean }, argument: string): Model1CacheDraw => {
    const seqlens = drawModel1Seqlens(rng, { b, s_q, s_k: c.s_k, varlen });
    const slots = (seqlens.reduce((a, n) => a + Math.ceil(n / c.pageBlockSize), 0) + 1) * c.pageBlockSize;
    if (slots > MAX_SLOTS) throw new ArgumentError(fn, argument, `a cache of at most ${MAX_SLOTS} slots (32-bit token ids)`, `lengths that need ${slots} slots`);
    const layout = drawSparseLayout(rng, { b, seqlens, pageBlockSize: c.pageBlockSize });
    return { layout, draw: drawSparseIndices(rng, layout, { s_q, topk: c.topk, topkLength: c.topkLength, invalidFraction, repeat }) };
  };
  const main = drawCache({ s_k, topk, pageBlockSize, topkLength: o.topkLength === true }, "opts.s_k");
  const second = extra === undefined ? undefined : drawCache({ ...extra, topkLength: extra.topkLengthRandom === true }, "opts.extra.s_k");
  const sink = o.sink === true ? drawAttnSink(rng, h_q) : undefined;
  return { rng, main, ...(second !== undefined ? { extra: second } : {}), ...(sink !== undefined ? { sink } : {}) };
}

/**
 * One cache's request lengths as FlashMLA's MODEL1 test draws them: max(trunc(N(s_k, s_k/2)), s_q) each
 * (all s_k without varlen). The first draws of a MODEL1 case are its main cache's lengths, so this on a
 * fresh generator of the case's seed gives them without drawing the rest.
 */
export function drawModel1Seqlens(rng: Rng, opts: { b: number; s_q: number; s_k: number; varlen: boolean }): number[] {
  const { b, s_q, s_k, varlen } = opts;
  return Array.from({ length: b }, () => (varlen ? Math.max(Math.trunc(s_k + (s_k / 2) * rng.normal()), s_q) : s_k));
}

/**
 * The MODEL1 cache of one draw: N(0,1)/10 tokens (clamped to ±1) for the referenced slots in ascending
 * order, quantized into pages of 0xff bytes, viewed as FlashMLA takes it.
 */
function quantizeReferenced(rng: Rng, { layout, draw }: Model1CacheDraw): Tensor<"u8"> {
  const { numBlocks, pageBlockSize } = layout;
  const slotMapping = Int32Array.from({ length: draw.referenced.length }, (_, id) => id).filter((id) => draw.referenced[id] === 1);
  const tokens = randomBf16(rng, slotMapping.length * MODEL1_D_QK, { std: 0.1, clamp: 1 }); // [n_referenced, 512]
  const bytes = quantizeKvCacheModel1(tokens, { pageBlockSize, numBlocks, slotMapping, fill: 0xff });
  const stride = model1PageBytes(pageBlockSize);
  return Tensor.fromHost(bytes, [bytes.length], "u8").view(
    [numBlocks, pageBlockSize, 1, MODEL1_TOKEN_BYTES],
    [stride, MODEL1_TOKEN_BYTES, MODEL1_TOKEN_BYTES, 1],
  );
}

function checkInteger(fn: string, argument: string, v: unknown, least: number): void {
  if (!Number.isSafeInteger(v) || (v as number) < least) throw new ArgumentError(fn, argument, `an integer >= ${least}`, formatGot(v));
}

function checkProbability(fn: string, argument: string, v: unknown): number {
  if (v === undefined) return 0;
  if (typeof v !== "number" || !(v >= 0 && v <= 1)) throw new ArgumentError(fn, argument, "a probability in [0, 1]", formatGot(v));
  return v;
}
