import { check } from "../../driver/check.js";
import { ArgumentError } from "../../errors/ArgumentError.js";
import { driverOn } from "../../runtime/Device.js";
import { DeviceBuffer } from "../../runtime/DeviceBuffer.js";
import { Event } from "../../runtime/Event.js";
import { graphCaptureInProgress } from "../../runtime/Graph.js";
import { PinnedHostBuffer } from "../../runtime/PinnedHostBuffer.js";
import { optionalStream, streamHandle, type Stream } from "../../runtime/Stream.js";
import { Tensor } from "../../runtime/Tensor.js";
import type { DType } from "../../runtime/dtype.js";
import { DEVICE_ERROR_WORDS, D_V, SCHED_META_INTS } from "../contract/shape.js";
import { deviceErrorToArgumentError } from "./deviceErrors.js";
import { scheduleMaxPieces } from "./schedule.js";

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
  /** Sparse: q's d_qk (576 V32, 512 MODEL1). */
  d_qk?: number;
  /** Sparse: the second index list's length (0 without extraKCache). */
  extra_topk?: number;
}

/** The split-KV workspace of every decode path: the scheduler's records and the split partials. */
export interface SplitWorkspace {
  readonly deviceOrdinal: number;
  readonly numSmParts: number;
  /** Split partials the workspace holds: every request once, plus one per part boundary. */
  readonly numSplitSlots: number;
  /** [numSmParts, 8] int32: each SM part's slice of the work (params.h SchedMeta). */
  readonly schedMeta: Tensor;
  /** [b + 1] int32 prefix sums: request i owns split slots [numSplits[i], numSplits[i + 1]). */
  readonly numSplits: Tensor;
  /** [numSplitSlots, ...rows, 512] f32 split partials. */
  readonly oAccum: Tensor;
  /** [numSplitSlots, ...rows] f32. */
  readonly lseAccum: Tensor;
}

/** The dense path's workspace. */
export interface DenseWorkspace extends SplitWorkspace {
  readonly kind: "dense";
  /** [b] int32: the lengths the scheduler checked and scheduled (the main kernels read these). */
  readonly seqlensUsed: Tensor;
  /** [DEVICE_ERROR_WORDS] int32: the first bad length or block id the GPU saw (see checkErrors). */
  readonly errors: Tensor;
  /**
   * [b, h_kv, m-blocks] int32, zero between calls: the main kernels count there the finished pieces of a
   * request split in two, and the second piece merges them (DenseParams.merge_pairs).
   */
  readonly mergeFlags: Tensor;
}

/** The sparse path's workspace. */
export interface SparseWorkspace extends SplitWorkspace {
  readonly kind: "sparse";
  /** [b] int32 filled with topk: what the scheduler balances for a call without topkLength. */
  readonly fullLengths: Tensor;
}

export type Workspace = DenseWorkspace | SparseWorkspace;

/** What a path allocates on the first call of a step. */
interface WorkspaceSizes {
  deviceOrdinal: number;
  numSmParts: number;
  numSplitSlots: number;
  b: number;
  /** The row dims of one split slot: [h_kv, rows_per_kv] (dense) or [s_q · h_q] (sparse). */
  rows: readonly number[];
}

export interface DenseWorkspaceSizes extends WorkspaceSizes {
  h_kv: number;
  numMBlocks: number;
}

export interface SparseWorkspaceSizes extends WorkspaceSizes {
  topk: number;
}

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
 * Tile-scheduler metadata and the split-KV workspace of one decode step, reused by every layer of the
 * step (FlashMLA's FlashMLASchedMeta). It is filled on the GPU by the first `flashMlaWithKvcache` call,
 * from that call's cacheSeqlens (or topkLength); later calls must use the same batch shape (an
 * ArgumentError names the field that changed) and the same lengths (not re-checked, as in FlashMLA).
 * Make a new one per step when lengths change. `dispose()` frees the device memory; safe to call twice.
 */
export class MlaSchedMeta {
  #config: MlaSchedConfig | undefined;
  #workspace: Workspace | undefined;
  #disposed = false;
  /** The schedule's split counts on their way to the host (see #probeSplits), and what they said. */
  #splitProbe: { host: PinnedHostBuffer; done: Event; words: number } | undefined;
  #maxPieces: number | undefined;

  /**
   * Metadata that holds `config` as if a call had filled it, without a workspace (a call allocates one):
   * for tests of the argument checks on machines without a GPU.
   * @internal
   */
  static withConfig(config: MlaSchedConfig): MlaSchedMeta {
    const meta = new MlaSchedMeta();
    meta.#config = { ...config };
    return meta;
  }

  /** Whether a call has filled it (the first call of a step). */
  get initialized(): boolean {
    return this.#config !== undefined;
  }

  get isDisposed(): boolean {
    return this.#disposed;
  }

  /** The batch configuration it was filled for, or undefined before the first call. */
  get config(): Readonly<MlaSchedConfig> | undefined {
    return this.#config;
  }

  /**
   * The device whose pointers the workspace holds (undefined before the first call).
   * @internal
   */
  get deviceOrdinal(): number | undefined {
    return this.#workspace?.deviceOrdinal;
  }

  /**
   * The step's workspace, for tests that read the schedule (undefined before the first call).
   * @internal
   */
  get workspace(): Workspace | undefined {
    return this.#workspace;
  }

  /**
   * Throws unless `config` equals the one this object was filled for (or it is unfilled), or when it is
   * disposed.
   * @internal
   */
  checkConfig(fn: string, config: MlaSchedConfig): void {
    if (this.#disposed) throw new ArgumentError(fn, "schedMeta", "live scheduler metadata", "a disposed MlaSchedMeta");
    const held = this.#config;
    if (held === undefined) return;
    for (const key of Object.keys(config) as Array<keyof MlaSchedConfig>) {
      if (held[key] !== config[key]) {
        throw new ArgumentError(
          fn,
          "schedMeta",
          `metadata for ${key} = ${String(held[key])} (it was filled for that batch; call getMlaMetadata() again for a new shape)`,
          `${key} = ${String(config[key])}`,
        );
      }
    }
  }

  /**
   * The dense workspace of this step: on the first call allocated from `sizes()` and filled by
   * `schedule` (the scheduler kernel, queued on `stream`), then reused.
   * @internal
   */
  denseWorkspace(fn: string, config: MlaSchedConfig, stream: Stream | undefined, sizes: () => DenseWorkspaceSizes, schedule: (ws: DenseWorkspace) => void): DenseWorkspace {
    const ws = this.#fill(fn, config, stream, () => allocateDense(sizes(), stream), schedule as (ws: Workspace) => void);
    if (ws.kind !== "dense") throw new ArgumentError(fn, "schedMeta", "metadata filled by a dense call", "metadata filled by a sparse call");
    return ws;
  }

  /**
   * The sparse workspace of this step, as {@link denseWorkspace}.
   * @internal
   */
  sparseWorkspace(fn: string, config: MlaSchedConfig, stream: Stream | undefined, sizes: () => SparseWorkspaceSizes, schedule: (ws: SparseWorkspace) => void): SparseWorkspace {
    const ws = this.#fill(fn, config, stream, () => allocateSparse(sizes(), stream), schedule as (ws: Workspace) => void);
    if (ws.kind !== "sparse") throw new ArgumentError(fn, "schedMeta", "metadata filled by a sparse call", "metadata filled by a dense call");
    return ws;
  }

  #fill(fn: string, config: MlaSchedConfig, stream: Stream | undefined, allocate: () => Workspace, schedule: (ws: Workspace) => void): Workspace {
    this.checkConfig(fn, config);
    if (this.#workspace !== undefined) return this.#workspace;
    const ws = allocate();
    try {
      schedule(ws);
    } catch (e) {
      disposeWorkspace(ws);
      throw e;
    }
    this.#workspace = ws;
    this.#config = { ...config };
    this.#probeSplits(ws, stream);
    return ws;
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
    optionalStream("MlaSchedMeta.checkErrors", "stream", stream);
    const ws = this.#workspace;
    if (this.#disposed || ws === undefined || ws.kind !== "dense") return;
    const words = ws.errors.toHost(stream).host as Int32Array;
    const err = deviceErrorToArgumentError(words);
    if (err === undefined) return;
    bufferOf(ws.errors).memset32(0, 0, DEVICE_ERROR_WORDS, stream);
    throw err;
  }

  /**
   * Queues a copy of the split counts into page-locked host memory behind the scheduler kernel on
   * `stream`, without waiting for it. Skipped inside a graph capture (the copy would only run on replay)
   * and where page-locked memory cannot be had: the combine is then always launched.
   */
  #probeSplits(ws: Workspace, stream: Stream | undefined): void {
    if (graphCaptureInProgress() || this.#splitProbe !== undefined) return;
    const ordinal = ws.deviceOrdinal;
    const bytes = 4 * ws.numSplits.shape[0];
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
      check(driverOn(ordinal).cuMemcpyDtoHAsync_v2(host.ptr, ws.numSplits.ptr, bytes, streamHandle(stream)), "cuMemcpyDtoHAsync_v2");
      done.record(stream);
    } catch (e) {
      done.dispose();
      host.dispose();  // a copy may have been queued into it: not pooled
      throw e;
    }
    this.#splitProbe = { host, done, words: bytes / 4 };
  }

  /**
   * The most pieces a request of this step's schedule has, once the host knows it: the combine has no
   * work where that is 1 (or 2 and the main kernel merged its pairs), so it need not be launched (the
   * launch alone cost 0.8-1.0 µs of a 46 µs call on the H200). Undefined while unknown (the copy has
   * not landed, a capture is running).
   * @internal
   */
  knownMaxPieces(): number | undefined {
    const probe = this.#splitProbe;
    if (this.#maxPieces === undefined && probe !== undefined && !graphCaptureInProgress() && probe.done.query()) {
      this.#maxPieces = scheduleMaxPieces(new Int32Array(probe.host.bytes.buffer, probe.host.bytes.byteOffset, probe.words)) ?? Infinity;
      this.#releaseSplitProbe();
    }
    return this.#maxPieces;
  }

  /**
   * Frees the probe. Its copy may still be in flight (dispose() before the step's work finished): then
   * the event is waited for first, so the page-locked memory is not freed, or pooled, under the copy.
   */
  #releaseSplitProbe(): void {
    const probe = this.#splitProbe;
    if (probe === undefined) return;
    this.#splitProbe = undefined;
    let landed = false;
    if (!graphCaptureInProgress()) {
      if (!probe.done.query()) probe.done.synchronize();
      landed = true;
    }
    probe.done.dispose();
    if (landed) givePinned(probe.host);
    else probe.host.dispose();
  }

  /** Frees the device memory and leaves the object unusable. Safe to call twice. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    const ws = this.#workspace;
    this.#workspace = undefined;
    if (ws !== undefined) disposeWorkspace(ws);
    this.#releaseSplitProbe();
    this.#maxPieces = undefined;
    this.#config = undefined;
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

/** Tensors allocated so far by one workspace allocation, freed together if a later one fails. */
class Allocation {
  readonly tensors: Tensor[] = [];

  constructor(readonly deviceOrdinal: number) {}

  tensor(shape: readonly number[], dtype: DType): Tensor {
    const t = Tensor.emptyDevice(shape, dtype, this.deviceOrdinal);
    this.tensors.push(t);
    return t;
  }

  /** An int32 tensor with every word set to `value` (queued on `stream`). */
  filled(shape: readonly number[], value: number, stream: Stream | undefined): Tensor {
    const words = Math.max(1, shape.reduce((a, n) => a * n, 1));
    const buffer = DeviceBuffer.alloc(4 * words, this.deviceOrdinal);
    const t = Tensor.fromDeviceBuffer(buffer, shape, "i32");
    this.tensors.push(t);
    buffer.memset32(value, 0, words, stream);
    return t;
  }

  /** Runs `build`; out of memory part-way frees everything allocated, so a retry starts clean and nothing leaks. */
  static run<W>(deviceOrdinal: number, build: (a: Allocation) => W): W {
    const a = new Allocation(deviceOrdinal);
    try {
      return build(a);
    } catch (e) {
      for (const t of a.tensors) t.dispose();
      throw e;
    }
  }
}

function splitPart(a: Allocation, s: WorkspaceSizes): SplitWorkspace {
  return {
    deviceOrdinal: s.deviceOrdinal,
    numSmParts: s.numSmParts,
    numSplitSlots: s.numSplitSlots,
    schedMeta: a.tensor([s.numSmParts, SCHED_META_INTS], "i32"),
    numSplits: a.tensor([s.b + 1], "i32"),
    oAccum: a.tensor([s.numSplitSlots, ...s.rows, D_V], "f32"),
    lseAccum: a.tensor([s.numSplitSlots, ...s.rows], "f32"),
  };
}

function allocateDense(s: DenseWorkspaceSizes, stream: Stream | undefined): DenseWorkspace {
  return Allocation.run(s.deviceOrdinal, (a) => ({
    kind: "dense",
    ...splitPart(a, s),
    seqlensUsed: a.tensor([s.b], "i32"),
    errors: a.filled([DEVICE_ERROR_WORDS], 0, stream),
    mergeFlags: a.filled([s.b, s.h_kv, s.numMBlocks], 0, stream),
  }));
}

function allocateSparse(s: SparseWorkspaceSizes, stream: Stream | undefined): SparseWorkspace {
  return Allocation.run(s.deviceOrdinal, (a) => ({
    kind: "sparse",
    ...splitPart(a, s),
    fullLengths: a.filled([s.b], s.topk, stream),
  }));
}

function disposeWorkspace(ws: Workspace): void {
  const tensors = [ws.schedMeta, ws.numSplits, ws.oAccum, ws.lseAccum, ...(ws.kind === "dense" ? [ws.seqlensUsed, ws.errors, ws.mergeFlags] : [ws.fullLengths])];
  for (const t of tensors) t.dispose();
}

/** The buffer under a device tensor this module allocated. */
function bufferOf(t: Tensor): DeviceBuffer {
  if (t.buffer === undefined) throw new Error("MlaSchedMeta: a workspace tensor without device storage");
  return t.buffer;
}
