import { test } from "node:test";
import type { SparsePlan } from "../../../src/mla/sparse/chooseSparseKernel.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { SPARSE_LSE_TOL, SPARSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { MODEL1_D_QK } from "../../../src/numeric/kvCacheModel1.js";
import { Rng } from "../../../src/numeric/random.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { NAN_HALF_BITS } from "../../../src/testing/denseCase.js";
import { makeModel1Case, type Model1Case } from "../../../src/testing/model1Case.js";
import { assertDecodeClose } from "../../helpers/compareDecode.js";
import { describeGpu } from "../../helpers/gpu.js";
import { decodeModel1, uploadModel1Case, type UploadedModel1Case } from "../../helpers/model1Check.js";
import { assertFuzzPassed, fuzzSeeds, runFuzzCases, Tally } from "../../helpers/seededFuzz.js";
import { countAttended, drawCustomSink, drawFuzzTopkLength, drawTokensPerRequest, scatterOutOfRangeIds, type FuzzSink, type FuzzTopkLength } from "../../helpers/sparseFuzzDraws.js";
import { padded } from "../../helpers/strided.js";

// Seeded random DeepSeek-V4 (MODEL1) sparse decode configurations through flashMlaWithKvcache against
// the float64 CPU reference, every element of out and lse: every native head count (at 128 and at 16
// or fewer both the API's plan, h128x or h16x, and a forced m64 on the same upload), topk 1 to 600 (tiny, around multiples of 64,
// not multiples of 64) for each of the two caches, page sizes 1 to 300 (1, 2, 64 and 256 among them)
// for each cache, a second cache in about half the cases, varlen requests shorter than topk (rows
// padded with -1), invalid (-1), repeated and out-of-range ids, topkLength and extraTopkLength with 0,
// negative and > topk values, attention sinks with ±inf entries and a strided q. Every token no valid
// entry points at is 0xff bytes (NaN) and the outputs are NaN before each decode, so a read of an
// unreferenced token or an element left unwritten shows.
// Every failure names its seed: FLASHMLA_MODEL1_FUZZ_SEED=<seed> reruns just that case.
// FLASHMLA_MODEL1_FUZZ_CASES sets the number of cases (else FLASHMLA_FUZZ_CASES, else 120: about 20 s of float64 reference on one core).

const SEED_ENV = "FLASHMLA_MODEL1_FUZZ_SEED";
const SEEDS = fuzzSeeds({ casesEnv: ["FLASHMLA_MODEL1_FUZZ_CASES", "FLASHMLA_FUZZ_CASES"], defaultCases: 120, seedEnv: SEED_ENV, firstSeed: 720_000 });
/**
 * Work units the float64 reference may spend per case (about 0.5 s on one core) before the case takes
 * fewer requests or query tokens: every case is checked in full. One request of one query token at 128
 * heads with both topk at 600 costs 160e6, so every drawn topk fits.
 */
const REFERENCE_BUDGET = 200e6;
/** Reference work per (query token, index entry): dequantizing the token once per (request, query token). */
const DEQUANT_COST = 2_000;
/** Reference work per (row, index entry): 512 multiply-adds for the score, 512 for the output. */
const ROW_COST = 1_024;
// 128 twice: it is the head count of V4 without tensor parallelism.
const HEAD_COUNTS = [8, 16, 32, 64, 128, 128] as const;
const PAGE_BLOCK_SIZES = [1, 2, 3, 61, 64, 65, 128, 256, 257, 300] as const;
const SPECIAL_TOPKS = [1, 2, 3, 7, 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256, 257, 383, 511, 512, 513, 599, 600] as const;

/** One cache of a case and its index list. */
interface Model1FuzzList {
  topk: number;
  /** Mean tokens per request (makeModel1Case's s_k: with varlen, max(trunc(N(s_k, s_k/2)), s_q)). */
  s_k: number;
  pageBlockSize: number;
  topkLength: FuzzTopkLength;
  /** Probability that an index entry becomes an out-of-range id (>= num slots, or < -1). */
  outOfRange: number;
}

/** One MODEL1 fuzz configuration, fully determined by its seed. */
interface Model1FuzzCase {
  seed: number;
  b: number;
  s_q: number;
  h_q: number;
  varlen: boolean;
  main: Model1FuzzList;
  /** The second cache (extraKCache, extraIndices, extraTopkLength), or none. */
  extra: Model1FuzzList | undefined;
  sink: FuzzSink;
  /** Probability that an entry of either list becomes -1. */
  invalidFraction: number;
  /** Probability that an entry of either list repeats an earlier one of its row. */
  repeat: number;
  /** Elements of padding after each q head (a strided q), 0 for contiguous. */
  qPad: number;
}

/** "default": flashMlaWithKvcache's plan; otherwise that plan forced. */
type Model1FuzzPlan = "default" | SparsePlan;

function drawTopk(rng: Rng): number {
  return rng.uniform() < 0.35 ? rng.pick(SPECIAL_TOPKS) : rng.int(1, 601);
}

function drawList(rng: Rng): Model1FuzzList {
  const topk = drawTopk(rng);
  const tl = rng.uniform();
  return {
    topk,
    s_k: drawTokensPerRequest(rng, topk),
    pageBlockSize: rng.uniform() < 0.6 ? rng.pick(PAGE_BLOCK_SIZES) : rng.int(1, 301),
    topkLength: tl < 0.5 ? "none" : tl < 0.75 ? "generator" : "extreme",
    outOfRange: rng.uniform() < 0.7 ? 0 : rng.pick([0.01, 0.1, 0.5]),
  };
}

function drawCase(seed: number): Model1FuzzCase {
  const rng = new Rng(seed);
  const h_q = rng.pick(HEAD_COUNTS);
  let b = rng.int(1, 9);
  let s_q = rng.int(1, 4);
  const main = drawList(rng);
  const extra = rng.uniform() < 0.5 ? drawList(rng) : undefined;
  const sk = rng.uniform();
  const inv = rng.uniform();
  const f: Model1FuzzCase = {
    seed, b, s_q, h_q, main, extra,
    varlen: rng.uniform() < 0.7,
    sink: sk < 0.45 ? "none" : sk < 0.7 ? "generator" : "custom",
    invalidFraction: inv < 0.5 ? 0 : inv < 0.8 ? rng.pick([0.01, 0.05, 0.2]) : inv < 0.95 ? rng.pick([0.5, 0.9]) : 1,
    repeat: rng.uniform() < 0.6 ? 0 : rng.pick([0.05, 0.3, 0.9]),
    qPad: rng.uniform() < 0.2 ? rng.pick([8, 64]) : 0,
  };
  // Over budget: half the time fewer requests first, half the time fewer query tokens first.
  const fewerRequestsFirst = rng.uniform() < 0.5;
  const perCall = () => referenceCost({ ...f, b, s_q });
  for (const shrink of fewerRequestsFirst ? ["b", "s_q"] : ["s_q", "b"]) {
    const cost = perCall();
    if (cost <= REFERENCE_BUDGET) break;
    if (shrink === "b") b = Math.max(1, Math.floor((b * REFERENCE_BUDGET) / cost));
    else s_q = Math.max(1, Math.floor((s_q * REFERENCE_BUDGET) / cost));
  }
  return { ...f, b, s_q };
}

/** What the float64 reference costs for all rows: dequantize each entry's token once per (request, query token), then score and sum it per head. */
function referenceCost(f: Model1FuzzCase): number {
  return f.b * f.s_q * (f.main.topk + (f.extra?.topk ?? 0)) * (DEQUANT_COST + f.h_q * ROW_COST);
}

/** At 128 heads the API runs h128x, at 16 or fewer h16x; m64 runs every head count, so both are checked there. */
function plansOf(f: Model1FuzzCase): Model1FuzzPlan[] {
  return f.h_q === 128 || f.h_q <= 16 ? ["default", "m64"] : ["default"];
}

function describeList(l: Model1FuzzList): string {
  return `topk=${l.topk} s_k=${l.s_k} pageBlockSize=${l.pageBlockSize} topkLength=${l.topkLength} outOfRange=${l.outOfRange}`;
}

function describeCase(f: Model1FuzzCase): string {
  return `plans=${plansOf(f).join("+")} b=${f.b} s_q=${f.s_q} h_q=${f.h_q}${f.varlen ? " varlen" : ""} main{${describeList(f.main)}} ` +
    `extra${f.extra ? `{${describeList(f.extra)}}` : "=none"} sink=${f.sink} invalid=${f.invalidFraction} repeat=${f.repeat} qPad=${f.qPad}`;
}

/** The reference's arguments, the same case on the GPU (lengths as the GPU gets them), and what the case holds. */
interface Built {
  host: Model1Case;
  gpu: UploadedModel1Case;
  /** Valid index entries within their lengths, over both lists of the whole call. */
  attended: number;
}

function build(f: Model1FuzzCase): Built {
  const [b, s_q, h_q] = [f.b, f.s_q, f.h_q];
  const c = makeModel1Case({
    seed: f.seed, b, s_q, h_q, topk: f.main.topk, s_k: f.main.s_k, pageBlockSize: f.main.pageBlockSize,
    extra: f.extra && { topk: f.extra.topk, s_k: f.extra.s_k, pageBlockSize: f.extra.pageBlockSize, topkLengthRandom: f.extra.topkLength === "generator" },
    topkLength: f.main.topkLength === "generator", sink: f.sink === "generator",
    invalidFraction: f.invalidFraction, repeat: f.repeat, varlen: f.varlen,
  });
  const rng = new Rng(f.seed + 1);
  let attended = 0;
  const listLengths = (l: Model1FuzzList, cache: Tensor, indices: Tensor, caseLengths: Tensor | undefined) => {
    const idx = indices.host as Int32Array;
    const numSlots = cache.shape[0] * cache.shape[1];
    scatterOutOfRangeIds(rng, idx, numSlots, l.pageBlockSize, l.outOfRange);
    const tl = drawFuzzTopkLength(rng, l.topkLength, caseLengths?.host as Int32Array | undefined, b, l.topk);
    attended += countAttended(idx, tl?.ref, { b, s_q, topk: l.topk }, numSlots);
    return tl;
  };
  const mainTl = listLengths(f.main, c.kCache, c.indices, c.topkLength);
  const extraTl = f.extra && listLengths(f.extra, c.extraKCache!, c.extraIndices!, c.extraTopkLength);
  const sink = f.sink === "custom" ? drawCustomSink(rng, h_q) : (c.attnSink?.host as Float32Array | undefined);

  const row = MODEL1_D_QK + f.qPad;
  const q = f.qPad === 0 ? c.q : (padded(c.q, MODEL1_D_QK, f.qPad, [s_q * h_q * row, h_q * row, row, 1], NAN_HALF_BITS) as Tensor<"bf16">);
  const lengths = (v: Int32Array | undefined) => v && Tensor.fromHost(v, [b], "i32");
  const host: Model1Case = {
    ...c, q,
    topkLength: lengths(mainTl?.ref), extraTopkLength: lengths(extraTl?.ref),
    attnSink: sink && Tensor.fromHost(sink, [h_q], "f32"),
  };
  const gpu = uploadModel1Case({ ...host, topkLength: lengths(mainTl?.gpu), extraTopkLength: lengths(extraTl?.gpu) });
  return { host, gpu, attended };
}

/**
 * Runs one case through each of its plans and compares every element with the reference (computed
 * once); throws naming each plan that mismatched.
 */
function runCase(f: Model1FuzzCase): { attended: number } {
  const built = build(f);
  try {
    const got = plansOf(f).map((plan) => ({ plan, ...decodeModel1(built.gpu, plan === "default" ? undefined : plan) }));
    const ref = mlaDecodeReference(built.host);
    const errors: string[] = [];
    for (const g of got) {
      try {
        assertDecodeClose(g, { out: ref.outF32, lse: ref.lse.host as Float32Array }, f, undefined, { out: SPARSE_OUT_TOL, lse: SPARSE_LSE_TOL }, "bf16");
      } catch (e) {
        errors.push(`plan ${g.plan}: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    if (errors.length > 0) throw new Error(errors.join("; "));
    return { attended: built.attended };
  } finally {
    built.gpu.dispose();
  }
}

describeGpu("MODEL1 fuzz: seeded random DeepSeek-V4 sparse decode configurations against the CPU reference", () => {
  test(`${SEEDS.length} random MODEL1 configurations match the float64 reference in every element; each failure names its seed`, (t) => {
    const heads = new Tally<number>();
    const plans = new Tally<string>();
    let withExtra = 0;
    let attended = 0;
    let empty = 0;
    const { failures, seconds } = runFuzzCases(SEEDS, SEED_ENV, {
      draw: drawCase,
      describe: describeCase,
      run: (f) => {
        heads.add(f.h_q);
        for (const p of plansOf(f)) plans.add(p);
        if (f.extra) withExtra++;
        const r = runCase(f);
        if (r.attended === 0) empty++;
        attended += r.attended;
      },
    });
    t.diagnostic(`${SEEDS.length} MODEL1 cases (${withExtra} with an extra cache, ${empty} with no valid entry), ${heads.format("h_q ")}, plans ${plans.format()}, ${attended} valid entries attended, ${seconds.toFixed(1)} s, ${failures.length} failed`);
    assertFuzzPassed(failures, SEEDS.length, "MODEL1 fuzz");
  });
});
