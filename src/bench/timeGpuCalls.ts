import { performance } from "node:perf_hooks";
import { ArgumentError } from "../errors/ArgumentError.js";
import { Event } from "../runtime/Event.js";
import type { Kernel } from "../runtime/Kernel.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";

/** Options of {@link timeGpuCalls}. */
export interface TimeGpuCallsOptions {
  /** The stream every call queues its work on. */
  stream: Stream;
  /** Timed calls (at least 1). */
  iters: number;
  /** Untimed calls first, each followed by a stream sync. @default calls.length + 2 */
  warmup?: number;
  /** `bench_spin` from benchModules(): holds the stream while the host queues the timed calls. */
  spin: Kernel;
  /**
   * `bench_clock_probe` from benchModules(): when given, queued right behind the last timed call to
   * read the SM clock the GPU ran at under this load (GpuCallTimes.smClockMhz).
   */
  clockProbe?: Kernel;
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
   * SM clock in MHz over the PROBE_NS right after the last timed call (options.clockProbe): SM cycles
   * over %globaltimer nanoseconds. Below the GPU's highest clock when it is power-limited.
   */
  smClockMhz?: number;
}

/** How long the clock probe counts cycles: long against %globaltimer's ~1 µs steps, short against the clock governor's milliseconds. */
const PROBE_NS = 50_000;

/** Longest head start the harness gives the host: beyond this, the host is far too slow anyway. */
const MAX_SPIN_US = 2_000_000;

/**
 * Times `calls` on the GPU the way BENCH.md asks: warm-up first, then `iters` calls, call i being
 * `calls[i % calls.length]` (so inputs rotate over the sets the calls close over), each between two
 * CUDA events. Before the first timed call the stream is held by a spin kernel for longer than the
 * host needs to queue all of them, so every interval measures device work back to back, never the
 * host's launch latency. Each call must only queue work on `stream` (no host sync, no allocation).
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
  let result = runTimed(calls, opts, spinUs);
  if (result.hostOutran && spinUs < MAX_SPIN_US) {
    spinUs = Math.min(MAX_SPIN_US, 4 * spinUs);
    result = runTimed(calls, opts, spinUs);
  }
  const times: GpuCallTimes = { samplesUs: result.samplesUs, hostUsPerCall: hostUs, spinUs, hostOutran: result.hostOutran };
  if (result.smClockMhz !== undefined) times.smClockMhz = result.smClockMhz;
  return times;
}

function runTimed(calls: ReadonlyArray<() => void>, opts: TimeGpuCallsOptions, spinUs: number): { samplesUs: number[]; hostOutran: boolean; smClockMhz?: number } {
  const { stream, iters } = opts;
  const events: Event[] = [];
  const probe = opts.clockProbe;
  const probeOut = probe === undefined ? undefined : Tensor.emptyDevice([2], "i32", stream.deviceOrdinal);
  try {
    for (let i = 0; i < 2 * iters; i++) events.push(Event.create({ deviceOrdinal: stream.deviceOrdinal }));
    opts.spin.launch({ grid: 1, block: 1, stream }, [{ kind: "u64", value: BigInt(Math.round(spinUs * 1000)) }]);
    const t0 = performance.now();
    for (let i = 0; i < iters; i++) {
      events[2 * i].record(stream);
      calls[i % calls.length]();
      events[2 * i + 1].record(stream);
      opts.onIteration?.(i);
    }
    const queuedUs = (performance.now() - t0) * 1000;
    if (probe !== undefined && probeOut !== undefined) probe.launch({ grid: 1, block: 1, stream }, [{ kind: "ptr", value: probeOut.ptr }, { kind: "u64", value: BigInt(PROBE_NS) }]);
    events[2 * iters - 1].synchronize();
    const samplesUs = Array.from({ length: iters }, (_, i) => Event.elapsedMs(events[2 * i], events[2 * i + 1]) * 1000);
    const out: { samplesUs: number[]; hostOutran: boolean; smClockMhz?: number } = { samplesUs, hostOutran: queuedUs > spinUs };
    if (probeOut !== undefined) {
      stream.synchronize();
      const h = probeOut.toHost().host as Int32Array;
      const cycles = h[0] >>> 0, ns = h[1] >>> 0;  // the kernel writes u32
      if (ns > 0) out.smClockMhz = (cycles / ns) * 1000;
    }
    return out;
  } finally {
    for (const e of events) e.dispose();
    probeOut?.dispose();
  }
}
