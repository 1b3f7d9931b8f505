import { MODEL1_D_QK } from "../numeric/kvCacheModel1.js";
import { expectedUniqueTokens, mlaCost, type MlaShape } from "../roofline/mlaCost.js";
import { roofline, type Bound, type Roofs } from "../roofline/roofline.js";
import type { Model1ExtraOptions } from "../testing/model1Case.js";

/**
 * Cache lengths of a case's requests: one length for all, FlashMLA's varlen draw around a mean
 * (max(N(mean, mean/2), s_q) per request), or an explicit list, one length per request.
 */
export type SeqlensSpec =
  | { kind: "fixed"; s_k: number }
  | { kind: "varlen"; mean: number }
  | { kind: "list"; values: readonly number[] };

export interface Figure {
  value: number;
  unit: "TFLOPS" | "GB/s" | "µs";
}

/** FlashMLA measured on the same H200 model with our timing method (whole call, CUDA events, median of 40). */
export interface Anchor {
  /** Whole call (main kernel + combine), median of 40. */
  timeUs: number;
  /** The headline figure quoted for the time. */
  figure: Figure;
  /** Further figures for the same time (dense-mem-h64 is also 516 TFLOPS). */
  extra?: readonly Figure[];
  /** The main kernel alone, where it was timed. */
  mainKernel?: Figure;
  /** A published or third-party figure for the same workload, with where it comes from. */
  elsewhere?: { figure: Figure; source: string };
}

/**
 * What counts as good enough: `metric op value`. `cacheReadGbPerS` is the FP8 cache bytes alone
 * (N_unique·656, or N_unique·584 for MODEL1) over the time.
 */
export interface Target {
  metric: "tflops" | "gbPerS" | "timeUs" | "cacheReadGbPerS";
  op: ">=" | "<=";
  value: number;
  text: string;
}

/**
 * A DeepSeek-V4 sparse decode case over the MODEL1 cache (584-byte tokens, d_qk = d_v = 512), drawn as
 * FlashMLA's MODEL1 test draws it (makeModel1Case's draws; makeGpuModel1Case builds each input set on the GPU):
 * per cache, lengths max(trunc(N(s_k, s_k/2)), s_q) and distinct random positions per query row, −1 padded.
 */
export interface Model1BenchSpec {
  /** Tokens per page of the main cache. */
  pageBlockSize: number;
  /** The second cache in the same softmax (extra_k_cache): its length, entries per row, page size, valid lengths. */
  extra?: Model1ExtraOptions;
  /** 512^-0.55, as FlashMLA's MODEL1 cases. */
  softmaxScale: number;
  /** attn_sink on: a third of the heads +inf, a third −inf. */
  attnSink: boolean;
}

/** One named workload of the benchmark. */
export interface BenchCase {
  name: string;
  /** A family of cases named as one (dense-grid, FlashMLA's performance grid; long, the long contexts). */
  group?: string;
  kind: "dense" | "sparse";
  b: number;
  h_q: number;
  h_kv: number;
  s_q: number;
  seqlens: SeqlensSpec;
  causal: boolean;
  /** Dense only: q's and each cached row's dims, 576 or DeepSeek-V4's 512 (V the whole row). @default 576 */
  d_qk?: number;
  /** Sparse only: indices per query token (into the main cache). */
  topk?: number;
  /** Sparse only: a DeepSeek-V4 case over the MODEL1 cache (else V3.2's 656-byte cache). */
  model1?: Model1BenchSpec;
  note?: string;
  anchor?: Anchor;
  firstBar?: Target;
  goal?: Target;
}

const tflops = (value: number): Figure => ({ value, unit: "TFLOPS" });
const gbPerS = (value: number): Figure => ({ value, unit: "GB/s" });
const us = (value: number): Figure => ({ value, unit: "µs" });
const atLeast = (metric: Target["metric"], value: number, text: string): Target => ({ metric, op: ">=", value, text });
const atMost = (metric: Target["metric"], value: number, text: string): Target => ({ metric, op: "<=", value, text });

const MTP_FIRST_BAR = atLeast("tflops", 711, "≥ 711 TFLOPS (FlashMLA dense-compute-mtp)");
const MTP_GOAL = atLeast("tflops", 750, "≥ 750 TFLOPS");
const MEM_FIRST_BAR = atLeast("gbPerS", 4300, "≥ 4300 GB/s");
const MEM_GOAL = atLeast("gbPerS", 4450, "≥ 4450 GB/s (93 % of 4.8 TB/s)");

// FlashMLA's performance grid: s_q × mean cache length × causal, all at b = 128, h_q = 128.
// At s_q = 1 causal masks nothing (FlashMLA turns it off), but the grid keeps both to mirror FlashMLA.
const DENSE_GRID: BenchCase[] = [];
for (const s_q of [1, 2]) {
  for (const mean of [4096, 8192, 16384, 32768]) {
    for (const causal of [false, true]) {
      DENSE_GRID.push({
        name: `dense-grid-sq${s_q}-${mean / 1024}k${causal ? "-causal" : ""}`,
        group: "dense-grid",
        kind: "dense",
        b: 128,
        h_q: 128,
        h_kv: 1,
        s_q,
        seqlens: { kind: "varlen", mean },
        causal,
        ...(s_q === 2 ? { firstBar: MTP_FIRST_BAR, goal: MTP_GOAL } : {}),
      });
    }
  }
}

// Long contexts, few requests (issue 37), fixed lengths, h_kv 1. The anchors are FlashMLA 9241ae3 timed in
// the same device call as ours with this harness (H200, whole call, median of 40); the first bar is its time.
// --all runs them: long-b16-128k's input set is 16 · 131072 · 576 · 2 B = 2.4 GB, so runBenchCase rotates its
// minimum of 4 sets (9.7 GB of a 141 GB H200, far past the L2), and its check copies ≤ 3 requests of 151 MB.
const longCase = (
  name: string,
  shape: Pick<BenchCase, "b" | "h_q" | "s_q" | "causal"> & { s_k: number },
  anchor: Anchor,
  note: string,
): BenchCase => ({
  name,
  group: "long",
  kind: "dense",
  b: shape.b,
  h_q: shape.h_q,
  h_kv: 1,
  s_q: shape.s_q,
  seqlens: { kind: "fixed", s_k: shape.s_k },
  causal: shape.causal,
  note,
  anchor,
  firstBar: atMost("timeUs", anchor.timeUs, `≤ ${anchor.timeUs} µs (FlashMLA)`),
});
const NEAR_RIDGE = "128 heads, s_q 1: ≈ 240 FLOP/B, just past the ridge (≈ 185): the KV read is ≈ 0.77 of the MMA time";
const LONG_CASES: BenchCase[] = [
  longCase("long-b16-16k", { b: 16, h_q: 128, s_q: 1, causal: false, s_k: 16384 }, { timeUs: 125.0, figure: tflops(584) }, NEAR_RIDGE),
  longCase("long-b16-64k", { b: 16, h_q: 128, s_q: 1, causal: false, s_k: 65536 }, { timeUs: 440.9, figure: tflops(662) }, NEAR_RIDGE),
  longCase("long-b16-128k", { b: 16, h_q: 128, s_q: 1, causal: false, s_k: 131072 }, { timeUs: 867.4, figure: tflops(673) }, NEAR_RIDGE),
  longCase(
    "long-b1-128k",
    { b: 1, h_q: 128, s_q: 1, causal: false, s_k: 131072 },
    { timeUs: 84.1, figure: tflops(434), extra: [gbPerS(1799)] },
    "latency: one 128K request split over every SM; floors ≈ 48 µs of MMA, ≈ 36 µs of KV read, then the split-KV combine",
  ),
  longCase(
    "long-b4-128k-mtp",
    { b: 4, h_q: 128, s_q: 2, causal: true, s_k: 131072 },
    { timeUs: 409.4, figure: tflops(713) },
    "MTP on long requests: s_q 2 doubles the MMA per KV byte (≈ 480 FLOP/B), so compute binds",
  ),
  longCase(
    "long-b32-64k-h16",
    { b: 32, h_q: 16, s_q: 1, causal: false, s_k: 65536 },
    { timeUs: 562.7, figure: gbPerS(4295) },
    "TP-8 shard, long: ≈ 30 FLOP/B, memory-bound on 2.4 GB of KV read per call",
  ),
];

// DeepSeek-V4 over the MODEL1 cache (issue 34): FlashMLA's six MODEL1 performance cases as
// ../shared/design/DEEPSEEK-V4.md defines them (its test file's "MODEL1 CONFIG1-4" and "peak"), s_q 2, sinks on,
// with FlashMLA 9241ae3's H200 times (whole call, CUDA events, median of 40); then V4-Pro's 128 heads under
// tensor parallel 8 and 4, which FlashMLA cannot run (64 or 128 heads only; engines pad to 64). The TFLOPS are
// the cost model's for those times: FlashMLA's own print for cfg3 and cfg4 (180, 287) counts the
// extra_topk_length it drew, ours its mean; a timed run counts the sets it drew. runBenchCase builds each input
// set with makeGpuModel1Case; `flashmla roofline --case NAME` gives each one's counts and bound.
const V4_MAIN = { s_k: 16384, topk: 128, pageBlockSize: 256 } as const;
const V4_SOFTMAX_SCALE = MODEL1_D_QK ** -0.55;
const v4Case = (
  name: string,
  shape: Pick<BenchCase, "b" | "h_q"> & { s_k: number; topk: number; pageBlockSize: number; extra?: Model1ExtraOptions },
  note: string,
  flashMla?: { timeUs: number; tflops: number },
): BenchCase => ({
  name,
  group: "v4",
  kind: "sparse",
  b: shape.b,
  h_q: shape.h_q,
  h_kv: 1,
  s_q: 2,
  seqlens: { kind: "varlen", mean: shape.s_k },
  causal: false,
  topk: shape.topk,
  model1: {
    pageBlockSize: shape.pageBlockSize,
    ...(shape.extra !== undefined ? { extra: shape.extra } : {}),
    softmaxScale: V4_SOFTMAX_SCALE,
    attnSink: true,
  },
  note,
  ...(flashMla === undefined
    ? {}
    : {
        anchor: { timeUs: flashMla.timeUs, figure: tflops(flashMla.tflops) },
        firstBar: atMost("timeUs", flashMla.timeUs, `≤ ${flashMla.timeUs} µs (FlashMLA)`),
        goal: atMost("timeUs", flashMla.timeUs / 1.15, `≤ ${(flashMla.timeUs / 1.15).toFixed(1)} µs (1.15× FlashMLA)`),
      }),
});
// The caches of DEEPSEEK-V4.md's table: tokens per request (mean), entries per query row, page size.
const V4_PEAK = { s_k: 32768, topk: 16384, pageBlockSize: 64 } as const;
const V4_EXTRA_512 = { s_k: 16384, topk: 512, pageBlockSize: 64 } as const;
const V4_EXTRA_1024 = { s_k: 16384, topk: 1024, pageBlockSize: 64 } as const;
const V4_EXTRA_VALID = { s_k: 16384, topk: 1024, pageBlockSize: 2, topkLengthRandom: true } as const;
const V4_PRO_TP = "otherwise v4-cfg2's shape; FlashMLA has no time here (it takes 64 or 128 heads, engines pad to 64)";
// What bounds each case, from the cost model on the H200's measured roofs (767 TFLOPS, 4138 GB/s, ridge ≈ 185).
const V4_NOTES = {
  cfg1: "V4-Flash, 128 + 512 entries per row in two caches: ≈ 168 FLOP/B, just below the ridge (≈ 185): memory-bound, floors ≈ 31 µs of reads, ≈ 28 µs of MMA",
  cfg2: "V4-Pro, 128 + 1,024 entries per row in two caches: ≈ 330 FLOP/B, compute-bound, floors ≈ 101 µs of MMA, ≈ 57 µs of reads",
  cfg3:
    "V4-Flash, 128 + U[0, 1024] valid of 1,024 entries per row (pages of 2 in the extra cache): at the mean, v4-cfg1's counts, ≈ 168 FLOP/B, memory-bound, floors ≈ 31 µs of reads, ≈ 28 µs of MMA",
  cfg4: "V4-Pro, 128 + U[0, 1024] valid of 1,024 entries per row (pages of 2 in the extra cache): ≈ 266 FLOP/B, compute-bound, floors ≈ 56 µs of MMA, ≈ 39 µs of reads",
  peakH64: "one cache, 16,384 of 32K tokens per row: ≈ 294 FLOP/B, compute-bound, floors ≈ 829 µs of MMA, ≈ 523 µs of reads",
  peakH128: "one cache, 16,384 of 32K tokens per row: ≈ 577 FLOP/B, compute-bound, floors ≈ 1658 µs of MMA, ≈ 532 µs of reads",
  h16: `V4-Pro under tensor parallel 8 (16 of 128 heads), ${V4_PRO_TP}: ≈ 55 FLOP/B, memory-bound, floors ≈ 42 µs of reads (167 MB of FP8 cache), ≈ 13 µs of MMA`,
  h32: `V4-Pro under tensor parallel 4 (32 of 128 heads), ${V4_PRO_TP}: ≈ 105 FLOP/B, memory-bound, floors ≈ 45 µs of reads, ≈ 25 µs of MMA`,
} as const;
const V4_CASES: BenchCase[] = [
  v4Case("v4-cfg1", { b: 128, h_q: 64, ...V4_MAIN, extra: V4_EXTRA_512 }, V4_NOTES.cfg1, { timeUs: 90.9, tflops: 236 }),
  v4Case("v4-cfg2", { b: 128, h_q: 128, ...V4_MAIN, extra: V4_EXTRA_1024 }, V4_NOTES.cfg2, { timeUs: 205.8, tflops: 376 }),
  v4Case("v4-cfg3", { b: 128, h_q: 64, ...V4_MAIN, extra: V4_EXTRA_VALID }, V4_NOTES.cfg3, { timeUs: 121.7, tflops: 176 }),
  v4Case("v4-cfg4", { b: 128, h_q: 128, ...V4_MAIN, extra: V4_EXTRA_VALID }, V4_NOTES.cfg4, { timeUs: 152.3, tflops: 282 }),
  v4Case("v4-peak-h64", { b: 148, h_q: 64, ...V4_PEAK }, V4_NOTES.peakH64, { timeUs: 2056.6, tflops: 309 }),
  v4Case("v4-peak-h128", { b: 148, h_q: 128, ...V4_PEAK }, V4_NOTES.peakH128, { timeUs: 2687.2, tflops: 473 }),
  { ...v4Case("v4-h16", { b: 128, h_q: 16, ...V4_MAIN, extra: V4_EXTRA_1024 }, V4_NOTES.h16), goal: atLeast("cacheReadGbPerS", 3500, "≥ 3500 GB/s of FP8 cache read") },
  v4Case("v4-h32", { b: 128, h_q: 32, ...V4_MAIN, extra: V4_EXTRA_1024 }, V4_NOTES.h32),
];

/** dense-compute's shape (FlashMLA's compute-bound benchmark case), also timed at DeepSeek-V4's head. */
const DENSE_COMPUTE_SHAPE = {
  kind: "dense",
  b: 128,
  h_q: 128,
  h_kv: 1,
  s_q: 1,
  seqlens: { kind: "fixed", s_k: 8192 },
  causal: false,
} as const;

/**
 * Every named benchmark case (`flashmla bench --list`), with FlashMLA's anchor and our targets;
 * the dense-grid, long and v4 groups are expanded. Which roof binds is not written here: the cost model
 * decides it ({@link caseBound}), so every command gives the same answer.
 */
export const BENCH_CASES: readonly BenchCase[] = [
  {
    name: "dense-compute",
    ...DENSE_COMPUTE_SHAPE,
    anchor: { timeUs: 452, figure: tflops(646), mainKernel: tflops(663), elsewhere: { figure: tflops(660), source: "FlashMLA README, H800" } },
    firstBar: atLeast("tflops", 646, "≥ 646 TFLOPS (FlashMLA)"),
    goal: atLeast("tflops", 700, "≥ 700 TFLOPS"),
  },
  {
    name: "dense-compute-mtp",
    kind: "dense",
    b: 128,
    h_q: 128,
    h_kv: 1,
    s_q: 2,
    seqlens: { kind: "fixed", s_k: 8192 },
    causal: true,
    anchor: { timeUs: 821, figure: tflops(711) },
    firstBar: MTP_FIRST_BAR,
    goal: MTP_GOAL,
  },
  {
    // No bar: FlashMLA's sm90 dense launcher asserts d_qk 576, so there is no FlashMLA time on Hopper. The
    // case times the _d512 kernels on the shape whose 576 twin has one.
    name: "dense-compute-d512",
    ...DENSE_COMPUTE_SHAPE,
    d_qk: 512,
    note: "DeepSeek-V4's head on dense-compute's shape: Q·Kᵀ over 8 tiles instead of 9, V the whole row; 6 % fewer FLOPs, 11 % fewer cache bytes",
  },
  ...DENSE_GRID,
  {
    name: "dense-mem-h16",
    kind: "dense",
    b: 128,
    h_q: 16,
    h_kv: 1,
    s_q: 1,
    seqlens: { kind: "fixed", s_k: 8192 },
    causal: false,
    note: "tensor-parallel 8 shard",
    anchor: { timeUs: 280, figure: gbPerS(4337), elsewhere: { figure: gbPerS(3000), source: "FlashMLA README, H800" } },
    firstBar: MEM_FIRST_BAR,
    goal: MEM_GOAL,
  },
  {
    name: "dense-mem-h64",
    kind: "dense",
    b: 128,
    h_q: 64,
    h_kv: 1,
    s_q: 1,
    seqlens: { kind: "fixed", s_k: 8192 },
    causal: false,
    anchor: { timeUs: 283, figure: gbPerS(4332), extra: [tflops(516)] },
    firstBar: MEM_FIRST_BAR,
    goal: MEM_GOAL,
  },
  {
    name: "dense-b1",
    kind: "dense",
    b: 1,
    h_q: 128,
    h_kv: 1,
    s_q: 1,
    seqlens: { kind: "fixed", s_k: 32768 },
    causal: false,
    // By intensity (≈ 240 FLOP/B) one request of 128 heads sits just past the ridge, so the model calls
    // it compute-bound; in practice the work is too small to fill the GPU and latency binds.
    note: "latency: one long request over every SM; the roofs' floors are ≈ 12 µs of MMA, ≈ 9 µs of KV read",
    anchor: { timeUs: 43.5, figure: gbPerS(875), mainKernel: us(26.8) },
    firstBar: atMost("timeUs", 43.5, "≤ 43.5 µs (FlashMLA)"),
    goal: atMost("timeUs", 20, "≤ 20 µs (one request must use every SM; the combine must cost less than the work)"),
  },
  {
    name: "dense-uneven",
    kind: "dense",
    b: 4,
    h_q: 16,
    h_kv: 1,
    s_q: 4,
    seqlens: { kind: "list", values: [4641, 45118, 1730, 1696] },
    causal: true,
    note: "imbalanced batch",
    anchor: { timeUs: 52.0, figure: gbPerS(1189), elsewhere: { figure: us(41), source: "ThunderMLA, H100" } },
    firstBar: atMost("timeUs", 52, "≤ 52 µs (FlashMLA)"),
    goal: atMost("timeUs", 30, "≤ 30 µs"),
  },
  {
    name: "dense-short-h16",
    kind: "dense",
    b: 128,
    h_q: 16,
    h_kv: 1,
    s_q: 1,
    seqlens: { kind: "fixed", s_k: 1024 },
    causal: false,
    note: "short contexts, many requests; FlashAttention-3's MLA path beats FlashMLA here (71 µs vs 84 µs in vLLM)",
    anchor: { timeUs: 45.3, figure: gbPerS(3433) },
    firstBar: atMost("timeUs", 45, "≤ 45 µs (FlashMLA)"),
    goal: atMost("timeUs", 35, "≤ 35 µs"),
  },
  {
    name: "sparse-v32",
    kind: "sparse",
    b: 128,
    h_q: 128,
    h_kv: 1,
    s_q: 2,
    seqlens: { kind: "fixed", s_k: 32768 },
    causal: false,
    topk: 2048,
    note: "FP8 V32 cache, 656 B per token",
    anchor: { timeUs: 364, figure: tflops(401), elsewhere: { figure: tflops(410), source: "FlashMLA deep dive, H800" } },
    firstBar: atLeast("tflops", 401, "≥ 401 TFLOPS (FlashMLA)"),
    goal: atLeast("tflops", 450, "≥ 450 TFLOPS"),
  },
  {
    name: "sparse-v32-h64",
    kind: "sparse",
    b: 128,
    h_q: 64,
    h_kv: 1,
    s_q: 2,
    seqlens: { kind: "fixed", s_k: 32768 },
    causal: false,
    topk: 2048,
    anchor: { timeUs: 225, figure: tflops(325) },
    firstBar: atLeast("tflops", 325, "≥ 325 TFLOPS (FlashMLA)"),
    goal: atLeast("tflops", 380, "≥ 380 TFLOPS"),
  },
  {
    name: "sparse-long-topk",
    kind: "sparse",
    b: 128,
    h_q: 128,
    h_kv: 1,
    s_q: 2,
    seqlens: { kind: "fixed", s_k: 32768 },
    causal: false,
    topk: 32768,
    anchor: { timeUs: 5411, figure: tflops(432), elsewhere: { figure: tflops(460), source: "FlashMLA deep dive, H800" } },
    firstBar: atLeast("tflops", 432, "≥ 432 TFLOPS (FlashMLA)"),
    goal: atLeast("tflops", 500, "≥ 500 TFLOPS"),
  },
  {
    name: "sparse-h16",
    kind: "sparse",
    b: 128,
    h_q: 16,
    h_kv: 1,
    s_q: 2,
    seqlens: { kind: "fixed", s_k: 32768 },
    causal: false,
    topk: 2048,
    note: "native 16 heads (FlashMLA must pad to 64)",
    // Half of FlashMLA's sparse-v32-h64 time: padding 16 heads to 64 does 4× the MMA work.
    firstBar: atMost("timeUs", 112.5, "≤ ½ of FlashMLA's time at 64 heads (225 µs)"),
    goal: atLeast("cacheReadGbPerS", 3500, "≥ 3500 GB/s of FP8 cache read"),
  },
  ...LONG_CASES,
  ...V4_CASES,
];

/** The case named `name`, or undefined. */
export function benchCaseByName(name: string): BenchCase | undefined {
  return BENCH_CASES.find((c) => c.name === name);
}

/** The mean cache length s̄ the FLOP and byte formulas use. */
export function meanCacheLength(seqlens: SeqlensSpec): number {
  switch (seqlens.kind) {
    case "fixed":
      return seqlens.s_k;
    case "varlen":
      return seqlens.mean;
    case "list":
      return seqlens.values.reduce((a, v) => a + v, 0) / seqlens.values.length;
    default:
      return seqlens satisfies never;
  }
}

/**
 * The cost-model shape of a case. Sparse cases read the expected number of distinct tokens that
 * random indices touch (what the benchmark feeds), per request over its fixed cache length; a MODEL1
 * case sums that over its two caches at their mean lengths, with a random extra_topk_length at its
 * mean, topk / 2 (docs/deepseek-v4.md §3).
 */
export function benchCaseShape(c: BenchCase): MlaShape {
  const s_k = meanCacheLength(c.seqlens);
  if (c.kind === "dense") return { kind: "dense", b: c.b, h_q: c.h_q, h_kv: c.h_kv, s_q: c.s_q, s_k, ...(c.d_qk !== undefined ? { d_qk: c.d_qk } : {}) };
  const topk = c.topk ?? 0;
  const m = c.model1;
  if (m !== undefined) {
    const extra = m.extra;
    return {
      kind: "sparse",
      format: "model1",
      b: c.b,
      h_q: c.h_q,
      s_q: c.s_q,
      topk,
      s_k,
      ...(extra !== undefined
        ? { extra: { s_k: extra.s_k, topk: extra.topk, ...(extra.topkLengthRandom === true ? { meanTopkLength: extra.topk / 2 } : {}) } }
        : {}),
    };
  }
  return {
    kind: "sparse",
    b: c.b,
    h_q: c.h_q,
    s_q: c.s_q,
    topk,
    nUnique: expectedUniqueTokens(c.b, Math.round(s_k), c.s_q, topk),
  };
}

/**
 * The roof that binds case `c` under `roofs` by the cost model (FlashMLA's formulas, intensity
 * against the ridge): the one answer the bench table, `flashmla roofline` and `flashmla start` give.
 */
export function caseBound(c: BenchCase, roofs: Roofs): Bound {
  return roofline(mlaCost(benchCaseShape(c)), roofs).bound;
}
