import { check } from "../driver/check.js";
import { ArgumentError } from "../errors/ArgumentError.js";
import { driverOn } from "../runtime/Device.js";
import { Event } from "../runtime/Event.js";
import { graphCaptureInProgress } from "../runtime/Graph.js";
import { PinnedHostBuffer } from "../runtime/PinnedHostBuffer.js";
import { streamHandle, type Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { SCHED_META_INTS } from "./schedule.js";

/**
 * Page-locked buffers of finished probes, per device, for the next step's probe: cuMemAllocHost pins
 * pages (tens of microseconds of host time), and each decode step makes new metadata.
 */
const pinnedPool = new Map<number, PinnedHostBuffer[]>();
const PINNED_POOL_MAX = 4;
const PINNED_MIN_BYTES = 4096;

function takePinned(ordinal: number, bytes: number): PinnedHostBuffer {
  const pool = pinnedPool.get(ordinal) ?? [];
  const i = pool.findIndex((b) => b.sizeBytes >= bytes);
  if (i >= 0) return pool.splice(i, 1)[0];
  return PinnedHostBuffer.alloc(Math.max(bytes, PINNED_MIN_BYTES), ordinal);
}

function givePinned(buffer: PinnedHostBuffer): void {
  const pool = pinnedPool.get(buffer.deviceOrdinal) ?? [];
  if (pool.length >= PINNED_POOL_MAX) return buffer.dispose();
  pool.push(buffer);
  pinnedPool.set(buffer.deviceOrdinal, pool);
}

/**
 * The most pieces any request of a schedule has, from its split prefix sums (num_splits, [b + 1]): 1 when
 * nothing is split, or undefined when the words are not such sums (not yet written). Pure, for the CPU
 * tests.
 */
export function scheduleMaxPieces(numSplits: ArrayLike<number>): number | undefined {
  if (numSplits.length < 2 || numSplits[0] !== 0) return undefined;
  let most = 0;
  for (let i = 1; i < numSplits.length; i++) {
    const n = numSplits[i] - numSplits[i - 1];
    if (!Number.isInteger(n) || n < 0) return undefined;
    most = Math.max(most, n);
  }
  return most;
}

/** Words of the device-side error record (kernels/mla_decode/params.h ERROR_WORDS). */
export const DEVICE_ERROR_WORDS = 8;
/** Its codes (params.h ERR_*). */
export const DeviceErrorCode = Object.freeze({ none: 0, negativeLength: 1, lengthPastTable: 2, blockId: 4 });

/**
 * The ArgumentError a device-side error record describes (words: code, request, position, value, limit),
 * or undefined when it holds none. Pure, so the messages are tested without a GPU.
 */
export function deviceErrorToArgumentError(words: ArrayLike<number>): ArgumentError | undefined {
  const [code, req, pos, value, limit] = [words[0], words[1], words[2], words[3], words[4]];
  const fn = "flashMlaWithKvcache";
  switch (code) {
    case DeviceErrorCode.none:
      return undefined;
    case DeviceErrorCode.negativeLength:
      return new ArgumentError(fn, "cacheSeqlens", "lengths >= 0 (that request was decoded as empty: out 0, lse +inf)", `cacheSeqlens[${req}] = ${value}`);
    case DeviceErrorCode.lengthPastTable:
      return new ArgumentError(
        fn,
        "cacheSeqlens",
        `lengths <= 64 · max_blocks_per_seq = ${limit} (the block table has no entries past that; that request was decoded as empty: out 0, lse +inf)`,
        `cacheSeqlens[${req}] = ${value}`,
      );
    case DeviceErrorCode.blockId:
      return new ArgumentError(
        fn,
        "blockTable",
        `block ids in [0, num_blocks = ${limit}) for every block a request uses (that block was read as zeros)`,
        `blockTable[${req}][${pos}] = ${value}`,
      );
    default:
      return new ArgumentError(fn, "schedMeta", "a device error record with a known code", `code ${code} (words ${Array.from({ length: DEVICE_ERROR_WORDS }, (_, i) => words[i]).join(", ")})`);
  }
}

/** The batch configuration a scheduler-metadata object was filled for (FlashMLA's `config`). */
export interface MlaSchedConfig {
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  page_block_size: number;
  causal: boolean;
  is_fp8_kvcache: boolean;
  topk: number | null;
}

/**
 * Tile-scheduler metadata and the split-KV workspace of one decode step, reused by every layer of the
 * step (FlashMLA's FlashMLASchedMeta). It is filled on the GPU by the first `flashMlaWithKvcache` call,
 * from that call's cacheSeqlens; later calls must use the same batch shape (an ArgumentError names the
 * field that changed) and the same lengths (not re-checked, as in FlashMLA). Make a new one per step
 * when lengths change. `dispose()` frees the device memory; safe to call twice.
 */
export class MlaSchedMeta {
  config: MlaSchedConfig | undefined;
  /** [numSmParts, 8] int32 on the GPU. */
  schedMeta: Tensor | undefined;
  /** [b + 1] int32 on the GPU. */
  numSplits: Tensor | undefined;
  /** [numSplitSlots, h_kv, rows_per_kv, 512] f32 split partials. */
  oAccum: Tensor | undefined;
  /** [numSplitSlots, h_kv, rows_per_kv] f32. */
  lseAccum: Tensor | undefined;
  /** Sparse calls without topkLength: [b] int32 filled with topk (the lengths the scheduler balances). */
  lengths: Tensor | undefined;
  /** Dense: [b] int32, the lengths the scheduler checked and scheduled (the main kernels read these). */
  seqlensUsed: Tensor | undefined;
  /** Dense: the device-side error record ([DEVICE_ERROR_WORDS] int32), see checkErrors(). */
  errors: Tensor | undefined;
  /**
   * Dense: [b, h_kv, m-blocks] int32, zero between calls: the seesaw kernels count there the finished
   * pieces of a request split in two, and the second piece merges them (DenseParams.merge_pairs).
   */
  mergeFlags: Tensor | undefined;
  numSmParts = 0;
  numSplitSlots = 0;
  private disposed = false;
  /** The schedule's split counts on their way to the host (see probeSplits), and what they said. */
  private splitProbe: { host: PinnedHostBuffer; done: Event; words: number } | undefined;
  private maxPieces: number | undefined;

  get initialized(): boolean {
    return this.config !== undefined;
  }

  /**
   * Allocates the step's workspace on `ordinal`: the scheduler's records, the split prefix sums and the
   * split partials o_accum [slots, ...rows, 512] / lse_accum [slots, ...rows]; `extra` allocates what one
   * path adds (dense: scheduled lengths and the error record; sparse: default lengths). Out of memory
   * part-way frees everything allocated, so a retry starts clean and nothing leaks.
   */
  allocateWorkspace(ordinal: number, sizes: { parts: number; slots: number; b: number; rows: readonly number[] }, extra?: () => void): void {
    try {
      this.schedMeta = Tensor.emptyDevice([sizes.parts, SCHED_META_INTS], "i32", ordinal);
      this.numSplits = Tensor.emptyDevice([sizes.b + 1], "i32", ordinal);
      this.oAccum = Tensor.emptyDevice([sizes.slots, ...sizes.rows, 512], "f32", ordinal);
      this.lseAccum = Tensor.emptyDevice([sizes.slots, ...sizes.rows], "f32", ordinal);
      extra?.();
    } catch (e) {
      this.releaseWorkspace();
      throw e;
    }
    this.numSmParts = sizes.parts;
    this.numSplitSlots = sizes.slots;
  }

  /** Throws unless `config` equals the one this object was filled for. */
  checkConfig(fn: string, config: MlaSchedConfig): void {
    if (this.disposed) throw new ArgumentError(fn, "schedMeta", "live scheduler metadata", "a disposed MlaSchedMeta");
    if (!this.config) return;
    for (const key of Object.keys(config) as Array<keyof MlaSchedConfig>) {
      if (this.config[key] !== config[key]) {
        throw new ArgumentError(
          fn,
          "schedMeta",
          `metadata for ${key} = ${String(this.config[key])} (it was filled for that batch; call getMlaMetadata() again for a new shape)`,
          `${key} = ${String(config[key])}`,
        );
      }
    }
  }

  /**
   * Throws the first problem the GPU found in this step's data since the last check, then clears it:
   * a length outside [0, 64 · max_blocks_per_seq] (that request was decoded as empty) or a block id
   * outside the cache (that block read as zeros). The kernels record these without stopping; reading the
   * record synchronises `stream`, so call it when a sync is acceptable (after a step, after a graph
   * replay, in a debug build), not inside the layer loop. No-op before the first call of a step and for
   * sparse calls (whose invalid indices are skipped by definition).
   */
  checkErrors(stream?: Stream): void {
    if (this.disposed || this.errors === undefined) return;
    const words = this.errors.toHost(stream).host as Int32Array;
    const err = deviceErrorToArgumentError(words);
    if (err === undefined) return;
    this.errors.buffer!.memset32(0, 0, DEVICE_ERROR_WORDS, stream);
    throw err;
  }

  /**
   * Queues a copy of the split counts into page-locked host memory behind the scheduler kernel on
   * `stream`, without waiting for it; called by the first call of a step. Skipped inside a graph
   * capture (the copy would only run on replay) and where page-locked memory cannot be had: the
   * combine is then always launched.
   */
  probeSplits(stream?: Stream): void {
    if (graphCaptureInProgress() || this.numSplits === undefined || this.splitProbe !== undefined) return;
    const ordinal = this.numSplits.buffer!.deviceOrdinal;
    const bytes = 4 * this.numSplits.shape[0];
    const done = Event.create({ deviceOrdinal: ordinal, timing: false });
    let host: PinnedHostBuffer;
    try {
      host = takePinned(ordinal, bytes);
    } catch {
      done.dispose();
      return;
    }
    try {
      new Int32Array(host.bytes.buffer, host.bytes.byteOffset, bytes / 4).fill(-1);  // not prefix sums until written
      check(driverOn(ordinal).cuMemcpyDtoHAsync_v2(host.ptr, this.numSplits.ptr, bytes, streamHandle(stream)), "cuMemcpyDtoHAsync_v2");
      done.record(stream);
    } catch (e) {
      done.dispose();
      host.dispose();  // a copy may have been queued into it: not pooled
      throw e;
    }
    this.splitProbe = { host, done, words: bytes / 4 };
  }

  /**
   * The most pieces a request of this step's schedule has, once the host knows it: the combine has no
   * work where that is 1 (or 2 and the main kernel merged its pairs), so it need not be launched (the
   * launch alone cost 0.8-1.0 µs of a 46 µs call on the H200). Undefined while unknown (the copy has
   * not landed, a capture is running).
   */
  knownMaxPieces(): number | undefined {
    if (this.maxPieces === undefined && this.splitProbe !== undefined && !graphCaptureInProgress() && this.splitProbe.done.query()) {
      const { host, words } = this.splitProbe;
      this.maxPieces = scheduleMaxPieces(new Int32Array(host.bytes.buffer, host.bytes.byteOffset, words)) ?? Infinity;
      this.releaseSplitProbe();
    }
    return this.maxPieces;
  }

  /**
   * Frees the probe. Its copy may still be in flight (dispose() before the step's work finished): then
   * the event is waited for first, so the page-locked memory is not freed, or pooled, under the copy.
   */
  private releaseSplitProbe(): void {
    const probe = this.splitProbe;
    if (probe === undefined) return;
    this.splitProbe = undefined;
    let landed = false;
    if (!graphCaptureInProgress()) {
      if (!probe.done.query()) probe.done.synchronize();
      landed = true;
    }
    probe.done.dispose();
    if (landed) givePinned(probe.host);
    else probe.host.dispose();
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.releaseWorkspace();
  }

  /**
   * Frees the device tensors (also after an allocation failed part-way, so a retry starts clean) and
   * leaves the object unfilled.
   */
  releaseWorkspace(): void {
    for (const t of [this.schedMeta, this.numSplits, this.oAccum, this.lseAccum, this.lengths, this.seqlensUsed, this.errors, this.mergeFlags]) t?.dispose();
    this.schedMeta = this.numSplits = this.oAccum = this.lseAccum = this.lengths = this.seqlensUsed = this.errors = this.mergeFlags = undefined;
    this.releaseSplitProbe();
    this.maxPieces = undefined;
    this.config = undefined;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Returns empty scheduler metadata for one decode step, filled by the first flashMlaWithKvcache call
 * (FlashMLA's `get_mla_metadata()`; its old positional arguments are accepted and ignored).
 */
export function getMlaMetadata(..._legacyArgs: unknown[]): MlaSchedMeta {
  return new MlaSchedMeta();
}
