import { D_V, SPARSE_HEADS_PER_CTA } from "../mla/contract/shape.js";
import { decodeWithOverrides, type DecodeOverrides } from "../mla/flashMlaWithKvcache.js";
import { getMlaMetadata, type MlaSchedMeta } from "../mla/sched/MlaSchedMeta.js";
import { checkPlanFitsHeads, sparseKernelName } from "../mla/sparse/chooseSparseKernel.js";
import { Rng } from "../numeric/random.js";
import { mlaCost, SPARSE_FORMATS, type MlaCost, type MlaShape } from "../roofline/mlaCost.js";
import { roofline, type Bound, type Roofs } from "../roofline/roofline.js";
import type { Device } from "../runtime/Device.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { checkDenseCase, type CompareSummary } from "../testing/checkDenseCase.js";
import { checkSparseCase } from "../testing/checkSparseCase.js";
import { makeGpuDenseCase, type GpuDenseCase } from "../testing/gpuDenseCase.js";
import { makeGpuModel1Case, type GpuModel1Case } from "../testing/gpuModel1Case.js";
import { makeGpuSparseCase, type GpuSparseCase } from "../testing/gpuSparseCase.js";
import { drawModel1Seqlens } from "../testing/model1Case.js";
import { sampleSparseRows } from "../testing/sampleSparseRows.js";
import { benchCaseKernel, type BenchKernel } from "./benchCaseKernel.js";
import { benchCaseSeqlens } from "./benchCaseSeqlens.js";
import { benchCycleBudget, type BenchCycleBudget } from "./benchCycleBudget.js";
import { benchFigures, type BenchFigures } from "./benchFigures.js";
import { benchSpinKernel } from "./benchSpin.js";
import { benchCaseShape, type Anchor, type BenchCase, type Target } from "./cases.js";
import { model1BenchSpec, sparseBenchSpec } from "./sparseBenchSpec.js";
import type { NvmlSummary } from "./summarizeNvmlSamples.js";
import { timeGpuCalls } from "./timeGpuCalls.js";
import { timingStats, type TimingStats } from "./timingStats.js";

/** One case of `flashmla bench`, as the table, the JSON record and the plot use it. */
export interface BenchCaseResult {
  case: string;
  group?: string;
  kind: "dense" | "sparse";
  /** The roof that binds the call under the run's roofs, by the cost model (see caseBound). */
  bound: Bound;
  /** The main kernel that served the case (its registry name), or "none" where a forced plan has no kernel for its format. */
  kernel: BenchKernel;
  /** ok: timed and checked; check-failed: timed, output wrong; not-available: a forced choice cannot run it; error: it threw. */
  status: "ok" | "check-failed" | "not-available" | "error";
  /** Why the case is not ok. */
  reason?: string;
  /** The call's shape; seqlens summarizes the lengths of the first input set (of the main cache for MODEL1). */
  shape: { b: number; h_q: number; h_kv: number; s_q: number; causal: boolean; d_qk?: number; topk?: number; seqlens: { min: number; mean: number; max: number } };
  /** The cost-model shape (FlashMLA's formulas) and its FLOPs and bytes. */
  model: MlaShape;
  cost: MlaCost;
  /** Whole call (main kernel + combine) between CUDA events, in µs. */
  timeUs?: TimingStats;
  /**
   * The same calls back to back between one pair of events, per call (µs): a decode step's consecutive
   * calls, where each may launch under the end of the one before (timeGpuCalls' backToBackUs).
   */
  backToBackUs?: number;
  /** Input sets rotated over, and their bytes each. */
  sets?: number;
  setBytes?: number;
  /** The host could not stay ahead of the GPU: times are upper bounds. */
  hostOutran?: boolean;
  /**
   * Median SM clock (MHz) NVML reported while the timed calls ran: the governor's setting, lowered
   * when the power cap acts over tens of milliseconds. The SMs can run slower than it (an H200 at
   * dense-compute: NVML 1980 MHz, clock64 over %globaltimer 1.70-1.74 GHz, bench/results/README.md).
   * Absent without NVML or when the calls ran too briefly for 3 samples.
   */
  smClockMhz?: number;
  /** Median board power (W) over the same samples (NVML's 1 s average on Ampere and newer). */
  powerW?: number;
  /** Every NVML clock-event reason seen in them ("sw-power-cap", "hw-slowdown", ...); [] for none. */
  clockReasons?: string[];
  /** NVML samples behind smClockMhz, powerW and clockReasons. */
  clockSamples?: number;
  figures?: BenchFigures;
  check?: { ok: boolean; rows: number; badElements: number; out: CompareSummary; lse: CompareSummary; message: string };
  /** Sparse V3.2: the seed's per-token cycle budget for the kernel that ran, and the share of it reached. */
  cycleBudget?: BenchCycleBudget;
  anchor?: Anchor;
  firstBar?: Target;
  goal?: Target;
}

/** Options of {@link runBenchCase}. */
export interface RunBenchCaseOptions {
  /** A forced kernel choice (A/B timing); flashMlaWithKvcache's own choice without it. */
  overrides?: DecodeOverrides;
  device: Device;
  stream: Stream;
  /** The roofs achieved figures are quoted against (the measured ceilings). */
  roofs: Roofs;
  /** Timed calls. @default 40 */
  iters?: number;
  /** Seeds the lengths, the block tables, the indices and the data. @default 1 */
  seed?: number;
  onIteration?: (i: number) => void;
  onStage?: (stage: "setup" | "timing" | "check") => void;
}

/** The smallest rotation that keeps a case's inputs out of the L2, and a cap that keeps setup time sane. */
const MIN_SETS = 4;
const MAX_SETS = 16;

/** One input set of a case on the GPU, as the timing loop and the check see it. */
interface InputSet {
  inputBytes: number;
  /** Queues one call writing into `out` and `lse`. */
  call(out: Tensor, lse: Tensor): () => void;
  dispose(): void;
}

/**
 * Runs one named case: builds ≥ 4 input sets on the GPU (more when one set is small, so the sets
 * together are well over twice the L2), times flashMlaWithKvcache's whole call over them with
 * {@link timeGpuCalls} (every set writing the same out and lse), checks set 0's output (one more call
 * into outputs poisoned with NaN) against the float64 CPU reference on sampled rows, and turns the
 * median into figures. Dense sets come from makeGpuDenseCase; sparse sets from makeGpuSparseCase
 * (FlashMLA's benchmark data: distinct random indices, attn_sink on, softmax scale 576^-0.55), figured with the N_unique of the sets actually drawn and the seed's
 * cycle budget. DeepSeek-V4 (MODEL1) sets come from makeGpuModel1Case (FlashMLA's MODEL1 test data:
 * both caches, each with its own lengths, pages and indices, the extra cache's random valid lengths
 * where the case has them), figured with the N attended and N_unique drawn over both caches; the V3.2
 * cycle budget does not apply to them. Never throws: failures become the result's status and reason.
 */
export function runBenchCase(c: BenchCase, opts: RunBenchCaseOptions): BenchCaseResult {
  const seed = opts.seed ?? 1;
  const iters = opts.iters ?? 40;
  const overrides = opts.overrides ?? {};
  const kernel = benchCaseKernel(c, overrides, seed);
  const base = {
    case: c.name,
    ...(c.group !== undefined ? { group: c.group } : {}),
    kind: c.kind,
    kernel,
    ...(c.anchor !== undefined ? { anchor: c.anchor } : {}),
    ...(c.firstBar !== undefined ? { firstBar: c.firstBar } : {}),
    ...(c.goal !== undefined ? { goal: c.goal } : {}),
  };
  const unsupported = overridesUnsupported(c, overrides);
  // A MODEL1 set draws its own lengths, the main cache's first, so set 0's come from its seed alone.
  const seqlens = c.model1 !== undefined ? model1Seqlens(c, setSeed(seed, 0)) : benchCaseSeqlens(c, seed);
  const mean = seqlens.reduce((a, n) => a + n, 0) / seqlens.length;
  const shape = {
    b: c.b, h_q: c.h_q, h_kv: c.h_kv, s_q: c.s_q, causal: c.causal,
    ...(c.d_qk !== undefined ? { d_qk: c.d_qk } : {}),
    ...(c.topk !== undefined ? { topk: c.topk } : {}),
    seqlens: { min: Math.min(...seqlens), mean, max: Math.max(...seqlens) },
  };
  // FlashMLA counts with the mean of the lengths actually drawn; sparse cases count the distinct
  // tokens of the indices actually drawn once the sets exist (until then, the expected count).
  let model: MlaShape = c.kind === "dense" ? { ...benchCaseShape(c), s_k: mean } : benchCaseShape(c);
  let cost = mlaCost(model);
  // The crossover rows describe h128x (either format) where a query token spans two 64-head CTAs.
  const format = c.model1 !== undefined ? "MODEL1" : "V32";
  const crossover = c.kind === "sparse" && (kernel === sparseKernelName("h128x", format, false) || kernel === sparseKernelName("h128x", format, true)) && c.h_q > SPARSE_HEADS_PER_CTA;
  const budget = (measuredTflops?: number, timeUs?: number) => {
    if (c.kind !== "sparse") return {};
    // The walk's entries per query token: its lists' topk (a list's valid length may be shorter, so with
    // extraTopkLength the cycles per entry are a lower bound).
    const extraTopk = c.model1?.extra?.topk ?? 0;
    const measured = timeUs === undefined ? undefined : { timeUs, smCount: opts.device.smCount, clockMhz: opts.device.clockRateKHz / 1000, b: c.b, s_q: c.s_q, h_q: c.h_q, topk: c.topk!, extraTopk };
    const dims = SPARSE_FORMATS[c.model1 !== undefined ? "model1" : "v32"];
    return { cycleBudget: benchCycleBudget(c.h_q, { crossover, peakTflops: opts.roofs.tflops, measuredTflops, dims, ...(measured !== undefined ? { measured } : {}) }) };
  };
  const bound = (k: MlaCost): Bound => roofline(k, opts.roofs).bound;
  if (unsupported !== undefined) return { ...base, bound: bound(cost), status: "not-available", reason: unsupported, shape, model, cost, ...budget() };

  const { device, stream } = opts;
  const sets: InputSet[] = [];
  const outputs: Tensor[] = [];
  const meta = getMlaMetadata();
  const denseSets: GpuDenseCase[] = [];
  const sparseSets: GpuSparseCase[] = [];
  const model1Sets: GpuModel1Case[] = [];
  try {
    opts.onStage?.("setup");
    const makeSet = (s: number): InputSet => {
      if (c.kind === "dense") {
        const gc = makeGpuDenseCase({ b: c.b, s_q: c.s_q, h_q: c.h_q, h_kv: c.h_kv, seqlens, causal: c.causal, dtype: "bf16", d_qk: c.d_qk }, { seed: setSeed(seed, s), stream });
        denseSets.push(gc);
        return {
          inputBytes: gc.inputBytes,
          dispose: () => gc.dispose(),
          call: (out, lse) => () =>
            void decodeWithOverrides({
              q: gc.q, kCache: gc.kCache, blockTable: gc.blockTable, cacheSeqlens: gc.cacheSeqlens, headDimV: D_V,
              schedMeta: meta, softmaxScale: gc.softmaxScale, causal: gc.causal, stream, out, lse,
            }, overrides),
        };
      }
      if (c.model1 !== undefined) {
        const gc = makeGpuModel1Case(model1BenchSpec(c), { seed: setSeed(seed, s), stream, softmaxScale: c.model1.softmaxScale });
        model1Sets.push(gc);
        // The schedule balances each request's valid lengths, and those differ between sets (v4-cfg3's
        // extraTopkLength): each set is a decode step of its own, with its own metadata.
        const setMeta: MlaSchedMeta = getMlaMetadata();
        return {
          inputBytes: gc.inputBytes,
          dispose: () => {
            try {
              setMeta.dispose();
            } finally {
              gc.dispose();
            }
          },
          call: (out, lse) => () =>
            void decodeWithOverrides({
              q: gc.q, kCache: gc.kCache, indices: gc.indices, topkLength: gc.topkLength, attnSink: gc.attnSink,
              extraKCache: gc.extra?.kCache, extraIndices: gc.extra?.indices, extraTopkLength: gc.extra?.topkLength,
              isFp8Kvcache: true, headDimV: D_V, schedMeta: setMeta, softmaxScale: gc.softmaxScale, stream, out, lse,
            }, overrides),
        };
      }
      const gc = makeGpuSparseCase(sparseBenchSpec(c, seqlens), { seed: setSeed(seed, s), stream });
      sparseSets.push(gc);
      return {
        inputBytes: gc.inputBytes,
        dispose: () => gc.dispose(),
        call: (out, lse) => () =>
          void decodeWithOverrides({
            q: gc.q, kCache: gc.kCache, indices: gc.indices, attnSink: gc.attnSink, isFp8Kvcache: true, headDimV: D_V,
            schedMeta: meta, softmaxScale: gc.softmaxScale, stream, out, lse,
          }, overrides),
      };
    };
    sets.push(makeSet(0));
    const setBytes = sets[0].inputBytes;
    let count = Math.min(MAX_SETS, Math.max(MIN_SETS, 1 + Math.ceil((2 * device.l2CacheBytes) / setBytes)));
    // Leave room for the workspace and the outputs; fewer sets than 4 only when memory forces it.
    count = Math.max(1, Math.min(count, Math.floor((0.6 * device.memInfo().free) / setBytes) + 1));
    for (let s = 1; s < count; s++) sets.push(makeSet(s));
    if (c.kind === "sparse") {
      const drawn: ReadonlyArray<{ nAttended: number; nUnique: number }> = c.model1 !== undefined ? model1Sets : sparseSets;
      const avg = (f: (g: { nAttended: number; nUnique: number }) => number) => drawn.reduce((a, g) => a + f(g), 0) / drawn.length;
      const counts = { nAttended: avg((g) => g.nAttended), nUnique: avg((g) => g.nUnique) };
      const extra = c.model1?.extra;
      model =
        c.model1 !== undefined
          ? { kind: "sparse", format: "model1", b: c.b, h_q: c.h_q, s_q: c.s_q, topk: c.topk, ...(extra !== undefined ? { extra: { topk: extra.topk } } : {}), ...counts }
          : { kind: "sparse", b: c.b, h_q: c.h_q, s_q: c.s_q, topk: c.topk, ...counts };
      cost = mlaCost(model);
    }

    // One out and lse for every set, as FlashMLA's harness gets from torch's caching allocator (each
    // call's output freed before the next): with an output per set both lose at dense-mem-h64 (8 MB of
    // out a call, written back to DRAM under the next call's reads), FlashMLA 299.8 -> 309.8 µs and ours
    // 295.6 -> 304.1 in one call on the H200, so a comparison needs the same choice on both sides.
    const out = Tensor.emptyDevice([c.b, c.s_q, c.h_q, D_V], "bf16", device.ordinal);
    outputs.push(out);
    const lse = Tensor.emptyDevice([c.b, c.h_q, c.s_q], "f32", device.ordinal);
    outputs.push(lse);
    // NaN poison: an element the kernel never writes shows in the check.
    const poison = () => {
      out.buffer?.memset32(0x7fc07fc0, 0, undefined, stream);
      lse.buffer?.memset32(0x7fc00000, 0, undefined, stream);
    };
    const calls = sets.map((set) => set.call(out, lse));

    opts.onStage?.("timing");
    const times = timeGpuCalls(calls, { stream, iters, warmup: sets.length + 2, spin: benchSpinKernel(device.ordinal), onIteration: opts.onIteration });
    const timeUs = timingStats(times.samplesUs);

    opts.onStage?.("check");
    // Set 0's call once more into freshly poisoned outputs (the timed calls left the last set's there).
    poison();
    calls[0]();
    const rng = new Rng(seed + 7);
    const longest = seqlens.indexOf(Math.max(...seqlens));
    const result0 = { out, lse };
    let check: NonNullable<BenchCaseResult["check"]>;
    if (c.kind === "dense") {
      const requests = [...new Set([0, c.b - 1, longest, rng.int(0, c.b)])].sort((x, y) => x - y);
      const heads = [...new Set([0, c.h_q - 1, rng.int(0, c.h_q), rng.int(0, c.h_q)])].sort((x, y) => x - y);
      check = checkDenseCase(denseSets[0], result0, { stream, requests, heads });
    } else {
      const first = c.model1 !== undefined ? model1Sets[0] : sparseSets[0];
      // A MODEL1 row reads both lists: the reference's work per row is their sum.
      const entries = c.model1 !== undefined ? model1Sets[0].topk + (model1Sets[0].extra?.topk ?? 0) : sparseSets[0].topk;
      const rows = sampleSparseRows({ b: c.b, s_q: c.s_q, h_q: c.h_q, topk: entries, seed: seed + 7, attnSink: first.attnSinkHost, requests: [longest] });
      check = checkSparseCase(first, result0, { stream, rows });
    }

    const figures = benchFigures(c, cost, timeUs.median, opts.roofs);
    const result: BenchCaseResult = {
      ...base,
      bound: figures.bound,
      status: check.ok ? "ok" : "check-failed",
      shape,
      model,
      cost,
      timeUs,
      backToBackUs: times.backToBackUs,
      sets: sets.length,
      setBytes,
      hostOutran: times.hostOutran,
      ...nvmlFields(times.nvml),
      figures,
      check: { ok: check.ok, rows: check.rows, badElements: check.badElements, out: check.out, lse: check.lse, message: check.message },
      ...budget(figures.tflops, timeUs.median),
    };
    if (!check.ok) result.reason = `check FAILED: ${check.message}`;
    else if (sets.length < MIN_SETS) result.reason = `only ${sets.length} input set(s) fit in memory: the L2 may hold part of the working set`;
    else if (times.hostOutran) result.reason = "the host could not queue calls ahead of the GPU: times are upper bounds";
    return result;
  } catch (e) {
    return { ...base, bound: bound(cost), status: "error", reason: e instanceof Error ? e.message : String(e), shape, model, cost, ...budget() };
  } finally {
    try {
      stream.synchronize();
    } catch {
      // A failed kernel leaves the context broken; freeing below reports nothing more useful.
    }
    for (const t of outputs) safely(() => t.dispose());
    for (const set of sets) safely(() => set.dispose());
    safely(() => meta.dispose());
  }
}

/** The seed of input set `s` of a run seeded with `seed`. */
function setSeed(seed: number, s: number): number {
  return seed * 1000 + 1 + s;
}

/** The main cache's lengths of a MODEL1 set seeded with `seed`: its first draws (drawModel1Seqlens). */
function model1Seqlens(c: BenchCase, seed: number): number[] {
  const spec = model1BenchSpec(c);
  return drawModel1Seqlens(new Rng(seed), { b: spec.b, s_q: spec.s_q, s_k: spec.s_k, varlen: spec.varlen ?? true });
}

/** Why a forced choice cannot run case `c` ("not available: ..."), or undefined when it can. */
function overridesUnsupported(c: BenchCase, o: DecodeOverrides): string | undefined {
  if (c.kind === "dense" && o.sparsePlan !== undefined) return `not available: sparse plan "${o.sparsePlan}" forced on a dense case`;
  if (c.kind === "sparse" && (o.denseForm !== undefined || o.mergeSplitPairs !== undefined)) return "not available: a dense override forced on a sparse case";
  if (c.kind === "sparse" && o.sparsePlan !== undefined) {
    try {
      checkPlanFitsHeads("runBenchCase", o.sparsePlan, c.h_q);
    } catch (e) {
      return `not available: ${e instanceof Error ? e.message : String(e)}`;
    }
  }
  return undefined;
}

function nvmlFields(n: NvmlSummary | undefined): Pick<BenchCaseResult, "smClockMhz" | "powerW" | "clockReasons" | "clockSamples"> {
  if (n === undefined) return {};
  return {
    smClockMhz: Math.round(n.smClockMhz),
    ...(n.powerW !== undefined ? { powerW: Math.round(n.powerW) } : {}),
    ...(n.clockReasons !== undefined ? { clockReasons: n.clockReasons } : {}),
    clockSamples: n.samples,
  };
}

function safely(f: () => void): void {
  try {
    f();
  } catch {
    // Cleanup after a failure must not hide the failure.
  }
}
