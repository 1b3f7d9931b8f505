import { test } from "node:test";
import assert from "node:assert/strict";
import { drawSparseLayout } from "../../../src/testing/sparseCaseLayout.js";
import { flashMlaWithKvcache } from "../../../src/mla/flashMlaWithKvcache.js";
import { D_QK, D_V } from "../../../src/mla/contract/shape.js";
import { decodeWithOverrides } from "../../../src/mla/flashMlaWithKvcache.js";
import type { SparsePlan } from "../../../src/mla/sparse/chooseSparseKernel.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { mlaDecodeReference, type MlaDecodeReferenceArgs, type ReferenceRow } from "../../../src/mla/reference/mlaDecodeReference.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { FP8_TOKEN_BYTES } from "../../../src/numeric/kvCacheFp8.js";
import { Rng } from "../../../src/numeric/random.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { assertDecodeClose } from "../../helpers/compareDecode.js";
import { describeGpu } from "../../helpers/gpu.js";
import { assertFuzzPassed, fuzzSeeds, runFuzzCases, Tally } from "../../helpers/seededFuzz.js";
import { countAttended, drawCustomSink, drawFuzzTopkLength, drawTokensPerRequest, scatterOutOfRangeIds, type FuzzSink, type FuzzTopkLength } from "../../helpers/sparseFuzzDraws.js";
import { padded, uploadStorage } from "../../helpers/strided.js";
import { NAN_HALF_BITS } from "../../../src/testing/denseCase.js";
import { makeSparseCase, type SparseCase } from "../../../src/testing/sparseCase.js";

// Seeded random sparse FP8 decode configurations, each through flashMlaWithKvcache's plan or a forced
// one (m64 at any head count, h128x at 128, h16x at 8 and 16), against
// the float64 CPU reference: every native head count, topk from 1 to 2500 (tiny, around multiples of
// 64, not multiples of 64), page blocks of 1, 2, 61, 64 and 69 tokens with padded block strides,
// requests shorter than topk (rows padded with -1), invalid (-1), repeated and out-of-range ids
// (>= num_blocks · page_block_size, or < -1), topkLength with 0, negative and > topk values,
// attention sinks with ±inf entries, strided q and indices whose padding points at poisoned tokens,
// preallocated (NaN-filled) outputs and streams. Every token no valid entry points at is 0xff bytes
// (NaN), so a read of it shows.
// Every failure names its seed: FLASHMLA_FUZZ_SEED=<seed> reruns just that case.
// FLASHMLA_SPARSE_FUZZ_CASES sets the number of cases (else FLASHMLA_FUZZ_CASES, else 200).

const SEED_ENV = "FLASHMLA_FUZZ_SEED";
const SEEDS = fuzzSeeds({ casesEnv: ["FLASHMLA_SPARSE_FUZZ_CASES", "FLASHMLA_FUZZ_CASES"], defaultCases: 200, seedEnv: SEED_ENV, firstSeed: 710_000 });
/** Cached tokens per case (b · s_k): bounds the host-side generation (every token is drawn and quantized). */
const MAX_TOKENS = 6_000;
/** Work units the float64 reference may spend per case before it samples rows (see referenceCost). */
const REFERENCE_BUDGET = 80e6;
/** Reference work per (query token, index entry): dequantizing the token once per (request, query token). */
const DEQUANT_COST = 2_000;
/** Reference work per (row, index entry): 576 multiply-adds for the score, 512 for the output. */
const ROW_COST = 1_152;
const HEAD_COUNTS = [8, 16, 32, 64, 128, 128] as const;
const PAGE_BLOCK_SIZES = [1, 2, 61, 64, 69] as const;
const SPECIAL_TOPKS = [1, 2, 3, 7, 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 257, 511, 512, 513, 1023, 1025, 2047, 2048, 2049, 2500] as const;

/** One sparse fuzz configuration, fully determined by its seed. */
interface SparseFuzzCase {
  seed: number;
  b: number;
  s_q: number;
  h_q: number;
  topk: number;
  /** Tokens per request (the generator's s_k; with varlen, round(max(N(s_k, s_k/2), 1))). */
  s_k: number;
  varlen: boolean;
  pageBlockSize: number;
  blockPadTokens: number;
  topkLength: FuzzTopkLength;
  sink: FuzzSink;
  invalidFraction: number;
  repeat: number;
  /** Probability that an index entry becomes an out-of-range id (>= num slots, or < -1). */
  outOfRange: number;
  softmaxScale: number | "case" | undefined;
  /** Elements of padding after each q head (a strided q), 0 for contiguous. */
  qPad: number;
  /** Entries of padding after each index row (a strided indices), 0 for contiguous. */
  indicesPad: number;
  useStream: boolean;
  preallocate: boolean;
  /** "default": flashMlaWithKvcache's plan; otherwise that plan forced. */
  kernel: SparseFuzzKernel;
}

type SparseFuzzKernel = "default" | SparsePlan;

function drawTopk(rng: Rng): number {
  const u = rng.uniform();
  if (u < 0.3) return rng.pick(SPECIAL_TOPKS);
  if (u < 0.7) return rng.int(1, 400);
  return rng.int(400, 2501);
}

function drawCase(seed: number): SparseFuzzCase {
  const rng = new Rng(seed);
  const h_q = rng.pick(HEAD_COUNTS);
  let b = rng.int(1, 9);
  const s_q = rng.int(1, 5);
  const topk = drawTopk(rng);
  let s_k = drawTokensPerRequest(rng, topk);
  if (b * s_k > MAX_TOKENS) {
    // Half the time fewer requests, half the time shorter ones (then often shorter than topk).
    if (rng.uniform() < 0.5) b = Math.max(1, Math.floor(MAX_TOKENS / s_k));
    s_k = Math.min(s_k, Math.floor(MAX_TOKENS / b));
  }
  const tl = rng.uniform();
  const sk = rng.uniform();
  const inv = rng.uniform();
  return {
    seed, b, s_q, h_q, topk, s_k,
    varlen: rng.uniform() < 0.5,
    pageBlockSize: rng.pick(PAGE_BLOCK_SIZES),
    blockPadTokens: rng.uniform() < 0.25 ? rng.pick([1, 2, 3]) : 0,
    topkLength: tl < 0.5 ? "none" : tl < 0.75 ? "generator" : "extreme",
    sink: sk < 0.45 ? "none" : sk < 0.7 ? "generator" : "custom",
    invalidFraction: inv < 0.5 ? 0 : inv < 0.8 ? rng.pick([0.01, 0.05, 0.2]) : inv < 0.95 ? rng.pick([0.5, 0.9]) : 1,
    repeat: rng.uniform() < 0.6 ? 0 : rng.pick([0.05, 0.3, 0.9]),
    outOfRange: rng.uniform() < 0.7 ? 0 : rng.pick([0.01, 0.1, 0.5]),
    softmaxScale: rng.uniform() < 0.7 ? "case" : rng.pick([undefined, 0.01, 0.3]),
    qPad: rng.uniform() < 0.2 ? rng.pick([8, 64]) : 0,
    indicesPad: rng.uniform() < 0.2 ? rng.pick([1, 5, 64]) : 0,
    useStream: rng.uniform() < 0.3,
    preallocate: rng.uniform() < 0.3,
    // Drawn last, so the other fields of a seed stay what they were before kernels were drawn.
    kernel: rng.pick<SparseFuzzKernel>(h_q === 128 ? ["default", "m64", "h128x"] : h_q <= 16 ? ["default", "m64", "h16x"] : ["default", "m64"]),
  };
}

function describeCase(f: SparseFuzzCase): string {
  return `kernel=${f.kernel} b=${f.b} s_q=${f.s_q} h_q=${f.h_q} topk=${f.topk} s_k=${f.s_k}${f.varlen ? " varlen" : ""} ` +
    `pageBlockSize=${f.pageBlockSize} blockPad=${f.blockPadTokens} topkLength=${f.topkLength} sink=${f.sink} invalid=${f.invalidFraction} ` +
    `repeat=${f.repeat} outOfRange=${f.outOfRange} scale=${f.softmaxScale ?? "default"} qPad=${f.qPad} indicesPad=${f.indicesPad}` +
    `${f.useStream ? " stream" : ""}${f.preallocate ? " preallocated" : ""}`;
}

/**
 * A token that no index entry may read: one of the spare block's (drawSparseLayout gives every case one
 * block no request owns; its tokens are 0xff). Checked to be poisoned, so the padding of a strided
 * `indices` holds an in-range id whose read would show as NaN.
 */
function poisonedSlot(f: SparseFuzzCase, c: SparseCase, rng: Rng): number {
  const layout = drawSparseLayout(new Rng(f.seed), { b: f.b, seqlens: { s_k: f.s_k, varlen: f.varlen }, pageBlockSize: f.pageBlockSize });
  const spare = layout.physical[layout.numBlocks - 1];
  const slot = spare * f.pageBlockSize + rng.int(0, f.pageBlockSize);
  const bytes = c.kCache.host as Uint8Array;
  const at = c.kCache.offset + spare * c.kCache.strides[0] + (slot % f.pageBlockSize) * FP8_TOKEN_BYTES;
  for (let k = 0; k < FP8_TOKEN_BYTES; k++) {
    if (bytes[at + k] !== 0xff) throw new Error(`test bug: slot ${slot} of the spare block is not poisoned (the layout of makeSparseCase changed?)`);
  }
  return slot;
}

/** The reference's arguments, the GPU copies (strided the same way), and what the case holds. */
interface Built {
  host: MlaDecodeReferenceArgs;
  gpu: { q: Tensor; kCache: Tensor; indices: Tensor; topkLength?: Tensor; attnSink?: Tensor };
  /** Valid index entries within topkLength, over the whole call. */
  attended: number;
  dispose(): void;
}

function build(f: SparseFuzzCase): Built {
  const c = makeSparseCase({
    seed: f.seed, b: f.b, s_q: f.s_q, h_q: f.h_q, s_k: f.s_k, topk: f.topk, pageBlockSize: f.pageBlockSize,
    varlen: f.varlen, blockPadTokens: f.blockPadTokens, topkLength: f.topkLength === "generator", sink: f.sink === "generator",
    invalidFraction: f.invalidFraction, repeat: f.repeat,
  });
  const rng = new Rng(f.seed + 1);
  const numSlots = c.kCache.shape[0] * c.kCache.shape[1];

  const idx = c.indices.host as Int32Array;
  scatterOutOfRangeIds(rng, idx, numSlots, f.pageBlockSize, f.outOfRange);
  const tl = drawFuzzTopkLength(rng, f.topkLength, c.topkLength?.host as Int32Array | undefined, f.b, f.topk);
  const tlGpu = tl?.gpu, tlRef = tl?.ref;
  const sink = f.sink === "custom" ? drawCustomSink(rng, f.h_q) : (c.attnSink?.host as Float32Array | undefined);

  const [b, s_q, h_q] = [f.b, f.s_q, f.h_q];
  const q = f.qPad === 0 ? c.q : padded(c.q, D_QK, f.qPad, [s_q * h_q * (D_QK + f.qPad), h_q * (D_QK + f.qPad), D_QK + f.qPad, 1], NAN_HALF_BITS);
  const rowStride = f.topk + f.indicesPad;
  const indices = f.indicesPad === 0 ? c.indices : padded(c.indices, f.topk, f.indicesPad, [s_q * rowStride, rowStride, 1], poisonedSlot(f, c, rng));

  const attended = countAttended(idx, tlRef, f, numSlots);
  const host: MlaDecodeReferenceArgs = {
    q, kCache: c.kCache, indices,
    topkLength: tlRef && Tensor.fromHost(tlRef, [b], "i32"),
    attnSink: sink && Tensor.fromHost(sink, [h_q], "f32"),
    softmaxScale: f.softmaxScale === "case" ? c.softmaxScale : f.softmaxScale,
    isFp8Kvcache: true, headDimV: D_V,
  };
  const gpu: Built["gpu"] = {
    q: uploadStorage(q),
    kCache: uploadStorage(c.kCache),
    indices: uploadStorage(indices),
    ...(tlGpu ? { topkLength: Tensor.toDevice(Tensor.fromHost(tlGpu, [b], "i32")) } : {}),
    ...(sink ? { attnSink: Tensor.toDevice(host.attnSink!) } : {}),
  };
  return { host, gpu, attended, dispose: () => Object.values(gpu).forEach((t) => t?.dispose()) };
}

/** What the float64 reference costs for all rows: dequantize each attended token once per (request, query token), then score and sum it per head. */
function referenceCost(f: SparseFuzzCase): number {
  return f.b * f.s_q * f.topk * (DEQUANT_COST + f.h_q * ROW_COST);
}

/** All rows when the reference can afford them, else a seeded sample that always holds the corner rows. */
function rowsToCheck(f: SparseFuzzCase): ReferenceRow[] | undefined {
  if (referenceCost(f) <= REFERENCE_BUDGET) return undefined;
  const rng = new Rng(f.seed + 2);
  const count = Math.min(64, Math.max(8, Math.floor(REFERENCE_BUDGET / (f.topk * (DEQUANT_COST + ROW_COST)))));
  const rows: ReferenceRow[] = [{ batch: 0, token: 0, head: 0 }, { batch: f.b - 1, token: f.s_q - 1, head: f.h_q - 1 }];
  // Both 64-head halves of a crossover cluster, and the last head row of a partial tile.
  if (f.h_q === 128) rows.push({ batch: 0, token: 0, head: 64 }, { batch: f.b - 1, token: 0, head: 63 });
  while (rows.length < count) rows.push({ batch: rng.int(0, f.b), token: rng.int(0, f.s_q), head: rng.int(0, f.h_q) });
  return rows;
}

/** Runs one case through flashMlaWithKvcache and compares it with the reference; throws on a mismatch. */
function runCase(f: SparseFuzzCase, stream: Stream): { sampled: boolean; attended: number } {
  const built = build(f);
  const meta = getMlaMetadata();
  const outs: Tensor[] = [];
  try {
    const s = f.useStream ? stream : undefined;
    const pre: { out?: Tensor; lse?: Tensor } = {};
    if (f.preallocate) {
      // NaN-filled, so an element the kernels never write shows.
      outs.push((pre.out = Tensor.emptyDevice([f.b, f.s_q, f.h_q, D_V], "bf16")));
      outs.push((pre.lse = Tensor.emptyDevice([f.b, f.h_q, f.s_q], "f32")));
      pre.out.buffer!.memset32(((NAN_HALF_BITS << 16) | NAN_HALF_BITS) >>> 0, 0, (f.b * f.s_q * f.h_q * D_V) / 2, s);
      pre.lse.buffer!.memset32(0x7fc00000, 0, f.b * f.h_q * f.s_q, s);
    }
    const args = { ...built.gpu, isFp8Kvcache: true, headDimV: D_V, softmaxScale: built.host.softmaxScale, schedMeta: meta, stream: s, ...pre };
    const { out, lse } = f.kernel === "default" ? flashMlaWithKvcache(args) : decodeWithOverrides(args, { sparsePlan: f.kernel });
    if (!pre.out) outs.push(out, lse);
    assert.equal(out.shape.join(","), [f.b, f.s_q, f.h_q, D_V].join(","), "out shape");
    const gotOut = bf16ArrayToF32(out.toHost(s).host as Uint16Array);
    const gotLse = lse.toHost(s).host as Float32Array;

    const rows = rowsToCheck(f);
    const ref = mlaDecodeReference(built.host, { rows });
    const sampled = assertDecodeClose({ out: gotOut, lse: gotLse }, { out: ref.outF32, lse: ref.lse.host as Float32Array }, f, rows, { out: SPARSE_OUT_TOL, lse: SPARSE_LSE_TOL }, "bf16");
    if (!sampled) return { sampled, attended: built.attended };
    // Rows outside the sample are not compared, but none may be NaN (a poisoned token read, or an unwritten row).
    const nan = gotOut.findIndex((v) => Number.isNaN(v));
    assert.equal(nan, -1, `out holds NaN at flat index ${nan} (outside the sampled rows)`);
    const nanLse = gotLse.findIndex((v) => Number.isNaN(v));
    assert.equal(nanLse, -1, `lse holds NaN at flat index ${nanLse} (outside the sampled rows)`);
    return { sampled: true, attended: built.attended };
  } finally {
    if (f.useStream) stream.synchronize();
    for (const t of outs) t.dispose();
    meta.dispose();
    built.dispose();
  }
}

describeGpu("sparse fuzz: seeded random sparse FP8 decode configurations against the CPU reference", () => {
  test(`${SEEDS.length} random sparse configurations match the float64 reference; each failure names its seed`, (t) => {
    const stream = Stream.create();
    const heads = new Tally<number>();
    const kernels = new Tally<string>();
    let sampled = 0;
    let attended = 0;
    let empty = 0;
    let run: { failures: string[]; seconds: number };
    try {
      run = runFuzzCases(SEEDS, SEED_ENV, {
        draw: drawCase,
        describe: describeCase,
        run: (f) => {
          heads.add(f.h_q);
          kernels.add(f.kernel);
          const r = runCase(f, stream);
          if (r.sampled) sampled++;
          if (r.attended === 0) empty++;
          attended += r.attended;
        },
      });
    } finally {
      stream.dispose();
    }
    const { failures, seconds } = run;
    t.diagnostic(`${SEEDS.length} sparse cases (${sampled} on sampled rows, ${empty} with no valid entry), ${heads.format("h_q ")}, kernels ${kernels.format()}, ${attended} valid entries attended, ${seconds.toFixed(1)} s, ${failures.length} failed`);
    assertFuzzPassed(failures, SEEDS.length, "sparse fuzz");
  });
});
