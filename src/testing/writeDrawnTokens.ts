import type { Rng } from "../numeric/random.js";
import type { DeviceBuffer } from "../runtime/DeviceBuffer.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { testFillKernels } from "./testFillKernels.js";

/** Tokens drawn and quantized per pass: a bf16 buffer of at most 302 MB (576 dims), whatever the size of the cache. */
export const FILL_CHUNK_TOKENS = 1 << 18;
const U64_MASK = (1n << 64n) - 1n;
/** Each chunk's seed steps by the 64-bit golden ratio, so no two chunks draw the same numbers. */
const CHUNK_SEED_STEP = 0x9e3779b97f4a7c15n;

/** Options of {@link writeDrawnTokens}. */
export interface WriteDrawnTokensOptions {
  /** Where the tokens go, one slot per token (the writer's slot mapping). */
  slots: Int32Array;
  /** bf16 values per token (576 for the V32 writer, 512 for MODEL1's). */
  dims: number;
  /** Seeds the draws (fill_normal_half: a hash of seed and element index). */
  seed: bigint;
  /** Tokens are N(0,1)·scale clamped to ±1. */
  scale: number;
  stream: Stream;
  /** Queues the cache writer for one chunk: `kv` [n, dims] bf16 and `slotMapping` [n] i32, both on the GPU. */
  write(kv: Tensor, slotMapping: Tensor): void;
}

/**
 * Draws one bf16 token per slot on the GPU and hands them to a cache writer, {@link FILL_CHUNK_TOKENS}
 * tokens at a time through one scratch buffer, so a cache of millions of referenced tokens costs a
 * bounded buffer and a few milliseconds. Returns once the stream has run every write; frees the scratch
 * buffers on every path (after the stream has drained, as the queued writes read them).
 */
export function writeDrawnTokens(opts: WriteDrawnTokensOptions): void {
  const { slots, dims, stream } = opts;
  if (slots.length === 0) return;
  const ordinal = stream.deviceOrdinal;
  const scratch: Tensor[] = [];
  const keep = (t: Tensor) => (scratch.push(t), t);
  try {
    const slotsDevice = keep(Tensor.emptyDevice([slots.length], "i32", ordinal));
    deviceBufferOf(slotsDevice).copyFromHost(slots, 0, stream);
    const chunkTokens = Math.min(FILL_CHUNK_TOKENS, slots.length);
    const chunk = keep(Tensor.emptyDevice([chunkTokens, dims], "bf16", ordinal));
    // One buffer serves every chunk: the stream orders each fill after the previous chunk's write.
    for (let start = 0, c = 0n; start < slots.length; start += chunkTokens, c++) {
      const n = Math.min(chunkTokens, slots.length - start);
      const kv = Tensor.fromDeviceBuffer(deviceBufferOf(chunk), [n, dims], "bf16");
      fillNormalBf16(kv, (opts.seed + c * CHUNK_SEED_STEP) & U64_MASK, opts.scale, stream);
      opts.write(kv, Tensor.fromDeviceBuffer(deviceBufferOf(slotsDevice), [n], "i32", { byteOffset: start * 4 }));
    }
    stream.synchronize();
  } catch (e) {
    try {
      stream.synchronize();
    } catch {
      // A broken context: freeing below is all that is left to do.
    }
    throw e;
  } finally {
    for (const t of scratch) t.dispose();
  }
}

/**
 * Fills a contiguous bf16 tensor on the GPU with N(0,1)·scale clamped to ±1 (bench_fill.cu
 * `fill_normal_half`, a hash of seed and element index: equal seeds give equal bytes). Grid-stride: 1024
 * blocks of 256 threads cover any size on any Hopper GPU.
 */
export function fillNormalBf16(dst: Tensor, seed: bigint, scale: number, stream: Stream): void {
  testFillKernels(dst.deviceOrdinal).fillNormalHalf.launch({ grid: 1024, block: 256, stream }, [
    { kind: "ptr", value: dst.ptr },
    { kind: "u64", value: BigInt(dst.numel) },
    { kind: "u64", value: seed },
    { kind: "f32", value: scale },
    { kind: "f32", value: 1 },
    { kind: "i32", value: 0 },
  ]);
}

/** 64 random bits from `rng`: a seed for the GPU's draws. */
export function randomU64(rng: Rng): bigint {
  return (BigInt(rng.nextU32()) << 32n) | BigInt(rng.nextU32());
}

/** The device storage of a GPU tensor. */
export function deviceBufferOf(t: Tensor): DeviceBuffer {
  if (t.buffer === undefined) throw new Error("a device tensor without device storage");
  return t.buffer;
}
