import { ArgumentError } from "../errors/ArgumentError.js";
import type { Device } from "../runtime/Device.js";
import { DeviceBuffer } from "../runtime/DeviceBuffer.js";
import { Module } from "../runtime/Module.js";
import { Stream } from "../runtime/Stream.js";
import { benchSpinKernel } from "./benchSpin.js";
import type { CeilingsRecord } from "./CeilingsCache.js";
import type { GpuEnvironment } from "./gpuEnvironment.js";
import { timeGpuCalls } from "./timeGpuCalls.js";
import { timingStats } from "./timingStats.js";

/** Options of {@link measureCeilings}. */
export interface MeasureCeilingsOptions {
  /** Size of the streamed buffer (the copy moves it once each way). @default 1 GiB, at most a quarter of free memory */
  streamBytes?: number;
  /** Timed launches per kernel, after 3 untimed ones. @default 30 */
  iters?: number;
  /** Iterations of the wgmma loop per launch (16 wgmmas each per warpgroup). @default 2048 */
  wgmmaIters?: number;
  /** Called after each timed launch; `total` counts all four runs (copy, read, wgmma, driver copy). */
  onProgress?: (done: number, total: number) => void;
}

/** FLOP of one wgmma m64n256k16: 2·64·256·16. */
export const WGMMA_M64N256K16_FLOP = 2 * 64 * 256 * 16;
const GIB = 1 << 30;
const THREADS_PER_SM = 2048;
const STREAM_BLOCK = 256;

/**
 * Measures the copy bandwidth, the read bandwidth and the bf16 tensor-core rate of `device` with the
 * kernels of kernels/bench/ceilings.cu: each launch between CUDA events, after warm-up, median of
 * `iters`. The streamed buffer (1 GiB by default) is far larger than the L2 and filled with
 * non-zero data; the wgmma operands are non-zero too.
 */
export function measureCeilings(device: Device, env: GpuEnvironment, opts: MeasureCeilingsOptions = {}): CeilingsRecord {
  const fn = "measureCeilings";
  const iters = opts.iters ?? 30;
  const wgmmaIters = opts.wgmmaIters ?? 2048;
  if (!Number.isInteger(iters) || iters < 1) throw new ArgumentError(fn, "opts.iters", "an integer >= 1", String(iters));
  if (!Number.isInteger(wgmmaIters) || wgmmaIters < 1) throw new ArgumentError(fn, "opts.wgmmaIters", "an integer >= 1", String(wgmmaIters));
  const ordinal = device.ordinal;
  const requested = opts.streamBytes ?? Math.min(GIB, Math.floor(device.memInfo().free / 4));
  const streamBytes = Math.floor(requested / 4096) * 4096;
  if (!(streamBytes >= 4096)) throw new ArgumentError(fn, "opts.streamBytes", "at least 4096 bytes", String(requested));

  const mod = Module.load("ceilings", ordinal);
  const fill = mod.getFunction("ceil_fill_u32");
  const copy = mod.getFunction("ceil_copy_v4");
  const read = mod.getFunction("ceil_read_v4");
  const wgmma = mod.getFunction("ceil_wgmma_bf16");
  const [threads, warpgroups, wgmmasPerIter] = int32s(mod.readGlobal("ceil_wgmma_layout"));
  const smemBytes = int32s(mod.readGlobal("ceil_wgmma_smem_bytes"))[0];
  if (smemBytes > 48 * 1024) wgmma.maxDynamicSharedMemory = smemBytes;
  const spin = benchSpinKernel(ordinal);

  const stream = Stream.create(ordinal);
  const buffers: DeviceBuffer[] = [];
  const alloc = (bytes: number) => {
    const b = DeviceBuffer.alloc(bytes, ordinal);
    buffers.push(b);
    return b;
  };
  try {
    const src = alloc(streamBytes);
    const dst = alloc(streamBytes);
    const readSink = alloc(4);
    const wgmmaSink = alloc(device.smCount * threads * 4);
    const streamGrid = device.smCount * (THREADS_PER_SM / STREAM_BLOCK);
    fill.launch({ grid: streamGrid, block: STREAM_BLOCK, stream }, [
      { kind: "ptr", value: src.ptr },
      { kind: "u64", value: BigInt(streamBytes / 4) },
      { kind: "u32", value: 0x2545f491 },
    ]);
    const vectors = BigInt(streamBytes / 16);
    const total = 4 * iters;
    let done = 0;
    const onIteration = () => opts.onProgress?.(++done, total);

    const copyTimes = timeGpuCalls(
      [() => copy.launch({ grid: streamGrid, block: STREAM_BLOCK, stream }, [{ kind: "ptr", value: src.ptr }, { kind: "ptr", value: dst.ptr }, { kind: "u64", value: vectors }])],
      { stream, iters, warmup: 3, spin, onIteration },
    );
    // The fold of a thread's words is even (each word is odd, each thread reads a multiple of four),
    // so the sentinel 1 is never met and the sink is never written.
    const readTimes = timeGpuCalls(
      [() => read.launch({ grid: streamGrid, block: STREAM_BLOCK, stream }, [{ kind: "ptr", value: src.ptr }, { kind: "u64", value: vectors }, { kind: "u32", value: 1 }, { kind: "ptr", value: readSink.ptr }])],
      { stream, iters, warmup: 3, spin, onIteration },
    );
    const wgmmaTimes = timeGpuCalls(
      [() => wgmma.launch({ grid: device.smCount, block: threads, sharedMemBytes: smemBytes, stream }, [{ kind: "ptr", value: wgmmaSink.ptr }, { kind: "i32", value: wgmmaIters }, { kind: "u32", value: 0x9e3779b9 }])],
      { stream, iters, warmup: 3, spin, onIteration },
    );

    // The driver's copy is no ceiling of ours, but shows how close our copy kernel comes to it.
    const driverCopyTimes = timeGpuCalls([() => dst.copyFromDevice(src, { stream })], { stream, iters, warmup: 3, spin, onIteration });

    const copyUs = timingStats(copyTimes.samplesUs);
    const readUs = timingStats(readTimes.samplesUs);
    const wgmmaUs = timingStats(wgmmaTimes.samplesUs);
    const copyBytes = 2 * streamBytes;
    const wgmmaFlop = device.smCount * warpgroups * wgmmaIters * wgmmasPerIter * WGMMA_M64N256K16_FLOP;
    const record: CeilingsRecord = {
      gpuName: env.name,
      driverVersion: env.driverVersion,
      measuredAt: new Date().toISOString(),
      copyGbPerS: copyBytes / (copyUs.median * 1e3),
      readGbPerS: streamBytes / (readUs.median * 1e3),
      gemmTflops: wgmmaFlop / (wgmmaUs.median * 1e6),
      detail: { copyBytes, readBytes: streamBytes, wgmmaFlop, copyUs, readUs, wgmmaUs, driverCopyGbPerS: copyBytes / (timingStats(driverCopyTimes.samplesUs).median * 1e3) },
    };
    if (env.smClockMhzNow !== undefined) record.detail.smClockMhz = env.smClockMhzNow;
    return record;
  } finally {
    stream.synchronize();
    for (const b of buffers) b.dispose();
    stream.dispose();
    mod.dispose();
  }
}

function int32s(bytes: Uint8Array): Int32Array {
  return new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}
