import { readFileSync } from "node:fs";
import path from "node:path";
import { config } from "../config.js";
import type { Ceiling } from "../roofline/gpus.js";
import type { CeilingsRecord } from "./CeilingsCache.js";
import type { CommitInfo } from "./gitCommit.js";
import type { GpuEnvironment } from "./gpuEnvironment.js";
import type { CrossoverGain } from "./crossoverGain.js";
import type { BenchCaseResult } from "./runBenchCase.js";

/**
 * Format tag of {@link BenchRecord}; bumped when a field changes meaning. @2: smClockMhz is NVML's
 * median during the timed calls (in @1, bench_clock_probe's reading right after them). @3: a case's
 * bound is the cost model's under the run's roofs (in @2, written per case: dense-b1 was "memory"
 * and its percentOfCeiling a share of the bandwidth).
 */
export const BENCH_RECORD_SCHEMA = "flashmla-ts/bench@3";

/** One case in the JSON record: the figures flat, the detail beside them. */
export interface BenchRecordResult {
  case: string;
  /** The family the case belongs to (dense-grid). */
  group?: string;
  kind: "dense" | "sparse";
  kernel: string;
  status: BenchCaseResult["status"];
  reason?: string;
  shape: BenchCaseResult["shape"];
  flop: number;
  bytes: number;
  intensity: number;
  bound: BenchCaseResult["bound"];
  usMedian?: number;
  usMin?: number;
  usP90?: number;
  usMean?: number;
  samples?: number;
  /** The same calls back to back between one pair of events, µs per call (BenchCaseResult.backToBackUs). */
  usBackToBack?: number;
  /** Sparse: Σ valid indices and the distinct tokens they read, as the figures count them. */
  nAttended?: number;
  nUnique?: number;
  tflops?: number;
  gbPerS?: number;
  /** Sparse: the FP8 cache bytes alone (N_unique · 656, or · 584 for MODEL1) over the median time. */
  cacheReadGbPerS?: number;
  percentOfCeiling?: number;
  sets?: number;
  setBytes?: number;
  hostOutran?: boolean;
  /** Median SM clock (MHz) NVML reported while the case's timed calls ran. */
  smClockMhz?: number;
  /** Median board power (W) over the same samples (NVML's 1 s average on Ampere and newer). */
  powerW?: number;
  /** NVML clock-event reasons seen in any of them ("sw-power-cap", ...); [] for none. */
  clockReasons?: string[];
  /** NVML samples behind the three figures above. */
  clockSamples?: number;
  firstBar?: BenchCaseResult["firstBar"] | NonNullable<BenchCaseResult["figures"]>["firstBar"];
  goal?: BenchCaseResult["goal"] | NonNullable<BenchCaseResult["figures"]>["goal"];
  anchor?: BenchCaseResult["anchor"];
  check?: BenchCaseResult["check"];
  cycleBudget?: BenchCaseResult["cycleBudget"];
}

/** What `flashmla bench --json` writes: enough to compare two runs on two machines. */
export interface BenchRecord {
  schema: typeof BENCH_RECORD_SCHEMA;
  createdAt: string;
  tool: { name: string; version: string };
  commit: string;
  commitDirty?: boolean;
  /** Every kernel the run used ("dense_pipe_bf16 + sparse_h128x_bf16"); each result names its own. */
  kernel: string;
  gpu: GpuEnvironment;
  ceilings: {
    /** Our kernels' figures for this GPU, and whether they were measured in this run or read from the cache. */
    measured: { gemmTflops: number; copyGbPerS: number; readGbPerS: number; measuredAt: string; source: "this run" | "cache" };
    /** The roof "% of ceiling" uses. */
    reference: Ceiling;
    datasheet?: { tflops: number; gbPerS: number };
  };
  settings: { iters: number; seed: number };
  results: BenchRecordResult[];
  /** Sparse cases h128x served, timed again with m64: the measured gain of crossover. */
  crossoverGains?: CrossoverGain[];
}

/** Inputs of {@link benchRecord}. */
export interface BenchRecordInput {
  gpu: GpuEnvironment;
  commit: CommitInfo;
  kernel: string;
  ceilings: CeilingsRecord;
  ceilingsSource: "this run" | "cache";
  reference: Ceiling;
  datasheet?: { tflops: number; gbPerS: number };
  iters: number;
  seed: number;
  results: readonly BenchCaseResult[];
  crossoverGains?: readonly CrossoverGain[];
  /** @default now */
  createdAt?: Date;
}

/** Assembles the JSON record of one `flashmla bench` run. */
export function benchRecord(input: BenchRecordInput): BenchRecord {
  const record: BenchRecord = {
    schema: BENCH_RECORD_SCHEMA,
    createdAt: (input.createdAt ?? new Date()).toISOString(),
    tool: { name: "flashmla-ts", version: packageVersion() },
    commit: input.commit.commit,
    kernel: input.kernel,
    gpu: input.gpu,
    ceilings: {
      measured: {
        gemmTflops: input.ceilings.gemmTflops,
        copyGbPerS: input.ceilings.copyGbPerS,
        readGbPerS: input.ceilings.readGbPerS,
        measuredAt: input.ceilings.measuredAt,
        source: input.ceilingsSource,
      },
      reference: input.reference,
    },
    settings: { iters: input.iters, seed: input.seed },
    results: input.results.map(recordResult),
  };
  if (input.commit.dirty !== undefined) record.commitDirty = input.commit.dirty;
  if (input.datasheet !== undefined) record.ceilings.datasheet = input.datasheet;
  if (input.crossoverGains !== undefined && input.crossoverGains.length > 0) record.crossoverGains = [...input.crossoverGains];
  return record;
}

function recordResult(r: BenchCaseResult): BenchRecordResult {
  const out: BenchRecordResult = {
    case: r.case,
    kind: r.kind,
    kernel: r.kernel,
    status: r.status,
    shape: r.shape,
    flop: r.cost.flop,
    bytes: r.cost.bytes,
    intensity: r.cost.intensity,
    bound: r.bound,
  };
  if (r.group !== undefined) out.group = r.group;
  if (r.reason !== undefined) out.reason = r.reason;
  if (r.cost.nAttended !== undefined) Object.assign(out, { nAttended: r.cost.nAttended, nUnique: r.cost.nUnique });
  if (r.timeUs !== undefined) {
    Object.assign(out, { usMedian: r.timeUs.median, usMin: r.timeUs.min, usP90: r.timeUs.p90, usMean: r.timeUs.mean, samples: r.timeUs.n });
  }
  if (r.backToBackUs !== undefined) out.usBackToBack = r.backToBackUs;
  if (r.figures !== undefined) Object.assign(out, { tflops: r.figures.tflops, gbPerS: r.figures.gbPerS, percentOfCeiling: r.figures.percentOfCeiling });
  if (r.figures?.cacheReadGbPerS !== undefined) out.cacheReadGbPerS = r.figures.cacheReadGbPerS;
  if (r.sets !== undefined) Object.assign(out, { sets: r.sets, setBytes: r.setBytes, hostOutran: r.hostOutran });
  if (r.smClockMhz !== undefined) out.smClockMhz = r.smClockMhz;
  if (r.powerW !== undefined) out.powerW = r.powerW;
  if (r.clockReasons !== undefined) out.clockReasons = r.clockReasons;
  if (r.clockSamples !== undefined) out.clockSamples = r.clockSamples;
  const firstBar = r.figures?.firstBar ?? r.firstBar;
  const goal = r.figures?.goal ?? r.goal;
  if (firstBar !== undefined) out.firstBar = firstBar;
  if (goal !== undefined) out.goal = goal;
  if (r.anchor !== undefined) out.anchor = r.anchor;
  if (r.check !== undefined) out.check = r.check;
  if (r.cycleBudget !== undefined) out.cycleBudget = r.cycleBudget;
  return out;
}

let version: string | undefined;

function packageVersion(): string {
  if (version === undefined) {
    try {
      version = String((JSON.parse(readFileSync(path.join(config.packageRoot, "package.json"), "utf8")) as { version?: unknown }).version ?? "unknown");
    } catch {
      version = "unknown";
    }
  }
  return version;
}

/**
 * The roofs of one bench run, from its record: the datasheet's (when the GPU is in the table) and
 * the reference the run quoted every case against. The ceilings line above the table and the plot
 * both come from here, so they cannot show two different sets of roofs for one run.
 */
export function recordRoofs(record: BenchRecord): { datasheet?: { tflops: number; gbPerS: number }; reference: Ceiling } {
  return { ...(record.ceilings.datasheet !== undefined ? { datasheet: record.ceilings.datasheet } : {}), reference: record.ceilings.reference };
}

/** The line above the bench table: the run's roofs, where they came from, and the datasheet's. */
export function ceilingsLine(record: BenchRecord): string {
  const { datasheet, reference } = recordRoofs(record);
  const m = record.ceilings.measured;
  const when = m.source === "cache" ? `cached, measured ${m.measuredAt}` : "measured in this run";
  const ds = datasheet === undefined ? "" : `; datasheet ${num(datasheet.tflops)} TFLOPS, ${num(datasheet.gbPerS)} GB/s`;
  return (
    `ceilings (${when}): ${num(reference.tflops)} TFLOPS bf16, ${num(reference.gbPerS)} GB/s read, ${num(m.copyGbPerS)} GB/s copy; ` +
    `ridge ${reference.ridge.toFixed(1)} FLOP/B${ds}`
  );
}

function num(x: number): string {
  return x.toFixed(0);
}
