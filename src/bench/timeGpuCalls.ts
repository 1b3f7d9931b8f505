import { performance } from "node:perf_hooks";
import { nvmlGpu, type NvmlGpu, type NvmlSample } from "../driver/nvml.js";
import { ArgumentError } from "../errors/ArgumentError.js";
import { Event } from "../runtime/Event.js";
import type { Kernel } from "../runtime/Kernel.js";
import type { Stream } from "../runtime/Stream.js";
import { summarizeNvmlSamples, type NvmlSummary } from "./summarizeNvmlSamples.js";

/** Options of {@link timeGpuCalls}. */
export interface TimeGpuCallsOptions {
  /** The stream every call queues its work on. */
  stream: Stream;
  /** Timed calls (at least 1). */
  iters: number;
  /** Untimed calls first, each followed by a stream sync. @default calls.length + 2 */
  warmup?: number;
  /** `bench_spin` (benchSpinKernel()): holds the stream while the host queues the timed calls. */
  spin: Kernel;
  /** Called after each timed call is queued. */
  onIteration?: (i: number) => void;
}

/** What {@link timeGpuCalls} measured. */
export interface GpuCallTimes {
  /** Device time of each timed call, between CUDA events recorded around it, in µs. */
  samplesUs: number[];
  /** Host time to queue one call, from the warm-up, in µs. */
  hostUsPerCall: number;
  /** How long the stream was held before the first timed call, in µs. */
  spinUs: number;
  /**
   * True when queueing all calls took the host longer than the spin held the stream: the GPU may then
   * have waited for the host inside a timed interval, and the samples are upper bounds.
   */
  hostOutran: boolean;
  /**
   * Device time per call when the same `iters` calls run back to back between one pair of events (µs,
   * their mean): what a decode step's consecutive calls cost, where each call's launch may overlap the
   * end of the one before it (programmatic dependent launch). The events around each call in
   * `samplesUs` stop such overlap.
   */
  backToBackUs: number;
  /**
   * The SM clock, power and clock-event reasons NVML reported while the timed calls ran. NVML's clock
   * is the governor's setting: it falls when the power cap acts (over tens of milliseconds), and the
   * SMs can run below it (BenchCaseResult.smClockMhz). Undefined without NVML or when the calls ended
   * before MIN_NVML_SAMPLES samples.
   */
  nvml?: NvmlSummary;
}

/** Host wait between NVML samples: the clock governor moves over milliseconds. */
const SAMPLE_INTERVAL_MS = 1;

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Longest head start the harness gives the host: beyond this, the host is far too slow anyway. */
const MAX_SPIN_US = 2_000_000;

/**
 * Times `calls` on the GPU as FlashMLA's benchmark does: warm-up first, then `iters` calls, call i being
 * `calls[i % calls.length]` (so inputs rotate over the sets the calls close over), each between two
 * CUDA events. Before the first timed call the stream is held by a spin kernel for longer than the
 * host needs to queue all of them, so every interval measures device work back to back, never the
 * host's launch latency. Each call must only queue work on `stream` (no host sync, no allocation).
 * While they run, the host samples the GPU's SM clock and power through NVML (GpuCallTimes.nvml).
 */
export function timeGpuCalls(calls: ReadonlyArray<() => void>, opts: TimeGpuCallsOptions): GpuCallTimes {
  const fn = "timeGpuCalls";
  if (!Array.isArray(calls) || calls.length === 0) throw new ArgumentError(fn, "calls", "a non-empty array of functions", String(calls));
  if (!Number.isInteger(opts.iters) || opts.iters < 1) throw new ArgumentError(fn, "opts.iters", "an integer >= 1", String(opts.iters));
  const warmup = opts.warmup ?? calls.length + 2;
  if (!Number.isInteger(warmup) || warmup < 0) throw new ArgumentError(fn, "opts.warmup", "an integer >= 0", String(warmup));
  const { stream, iters } = opts;

  let hostUs = 0;
  for (let w = 0; w < warmup; w++) {
    const t0 = performance.now();
    calls[w % calls.length]();
    hostUs = Math.max(hostUs, (performance.now() - t0) * 1000);
    stream.synchronize();
  }
  // Without a warm-up there is no estimate: assume a slow host.
  if (warmup === 0) hostUs = 1000;

  // Events cost a little host time too; 1.5× plus 2 ms covers jitter and the event records.
  let spinUs = Math.min(MAX_SPIN_US, 1.5 * iters * (hostUs + 20) + 2000);
  const nvml = nvmlGpu(stream.deviceOrdinal);
  const gpu = nvml.ok ? nvml.gpu : undefined;
  let result = runTimed(calls, opts, spinUs, gpu);
  if (result.hostOutran && spinUs < MAX_SPIN_US) {
    spinUs = Math.min(MAX_SPIN_US, 4 * spinUs);
    result = runTimed(calls, opts, spinUs, gpu);
  }
  const backToBackUs = runBackToBack(calls, opts, spinUs);
  const times: GpuCallTimes = { samplesUs: result.samplesUs, hostUsPerCall: hostUs, spinUs, hostOutran: result.hostOutran, backToBackUs };
  const summary = summarizeNvmlSamples(result.nvmlSamples);
  if (summary !== undefined) times.nvml = summary;
  return times;
}

function runTimed(
  calls: ReadonlyArray<() => void>,
  opts: TimeGpuCallsOptions,
  spinUs: number,
  gpu: NvmlGpu | undefined,
): { samplesUs: number[]; hostOutran: boolean; nvmlSamples: NvmlSample[] } {
  const { stream, iters } = opts;
  const events: Event[] = [];
  try {
    for (let i = 0; i < 2 * iters; i++) events.push(Event.create({ deviceOrdinal: stream.deviceOrdinal }));
    holdStream(opts, spinUs);
    const t0 = performance.now();
    for (let i = 0; i < iters; i++) {
      events[2 * i].record(stream);
      calls[i % calls.length]();
      events[2 * i + 1].record(stream);
      opts.onIteration?.(i);
    }
    const queuedUs = (performance.now() - t0) * 1000;
    // The clock is sampled while the calls run: a probe kernel queued after them read 1.97-1.98 GHz on
    // the H200 while an in-kernel trace saw 1.70-1.74 GHz during them; the clock recovers within
    // microseconds once the load stops.
    const last = events[2 * iters - 1];
    const nvmlSamples = gpu === undefined ? [] : sampleWhileTimed(gpu, events[0], last);
    last.synchronize();
    const samplesUs = Array.from({ length: iters }, (_, i) => Event.elapsedMs(events[2 * i], events[2 * i + 1]) * 1000);
    return { samplesUs, hostOutran: queuedUs > spinUs, nvmlSamples };
  } finally {
    for (const e of events) e.dispose();
  }
}

/** Queues the spin kernel that holds `opts.stream` for `spinUs` while the host queues the timed calls. */
function holdStream(opts: TimeGpuCallsOptions, spinUs: number): void {
  opts.spin.launch({ grid: 1, block: 1, stream: opts.stream }, [{ kind: "u64", value: BigInt(Math.round(spinUs * 1000)) }]);
}

/** The same calls after the same spin, with one event before the first and one after the last. */
function runBackToBack(calls: ReadonlyArray<() => void>, opts: TimeGpuCallsOptions, spinUs: number): number {
  const { stream, iters } = opts;
  const events: Event[] = [];
  try {
    for (let i = 0; i < 2; i++) events.push(Event.create({ deviceOrdinal: stream.deviceOrdinal }));
    const [first, last] = events;
    holdStream(opts, spinUs);
    first.record(stream);
    for (let i = 0; i < iters; i++) calls[i % calls.length]();
    last.record(stream);
    last.synchronize();
    return (Event.elapsedMs(first, last) * 1000) / iters;
  } finally {
    for (const e of events) e.dispose();
  }
}

/**
 * Samples `gpu` every SAMPLE_INTERVAL_MS until `last` completes, keeping only the samples taken
 * wholly inside the timed calls: after `first` (the first timed call's start, i.e. the spin kernel
 * is over) had completed and before `last` completed.
 */
function sampleWhileTimed(gpu: NvmlGpu, first: Event, last: Event): NvmlSample[] {
  const kept: NvmlSample[] = [];
  for (;;) {
    const sample = first.query() ? gpu.sample() : undefined;
    // Checked after the sample: one that straddles the end may already see the recovered clock.
    if (last.query()) return kept;
    if (sample !== undefined) kept.push(sample);
    Atomics.wait(sleepCell, 0, 0, SAMPLE_INTERVAL_MS);
  }
}
