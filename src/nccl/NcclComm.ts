import { ArgumentError, describeValue, formatGot, optionsObject } from "../errors/ArgumentError.js";
import type { NcclError } from "../errors/NcclError.js";
import { checkDeviceOrdinal, Device } from "../runtime/Device.js";
import { DisposeOnce } from "../runtime/DisposeOnce.js";
import type { Tensor } from "../runtime/Tensor.js";
import { checkNccl, ncclErrorFor } from "./checkNccl.js";
import {
  checkAllGatherArgs,
  checkAllReduceArgs,
  checkPeerArgs,
  checkReduceScatterArgs,
  type CommFacts,
  type NcclReduceOptions,
  type NcclStreamOptions,
} from "./collectiveArgs.js";
import { keepCurrentContext } from "./keepCurrentContext.js";
import type { NcclApi } from "./ncclBindings.js";
import { NCCL_UNIQUE_ID_BYTES, NcclResult } from "./ncclEnums.js";
import { ncclGroup, ncclGroupDepth } from "./ncclGroup.js";
import { loadNccl } from "./loadNccl.js";

/** Options of {@link NcclComm.initRank}. */
export interface NcclInitRankOptions {
  /** Ranks in the communicator: one per process or worker thread, each driving one GPU. */
  nranks: number;
  /** This caller's rank, in [0, nranks). */
  rank: number;
  /** The 128 bytes of one `ncclUniqueId()`, made on one rank and given to every rank. */
  uniqueId: Uint8Array;
  /** The CUDA device ordinal this rank drives. @default 0 */
  device?: number;
}

type ReleaseCall = "ncclCommDestroy" | "ncclCommAbort";

/**
 * One rank of an NCCL communicator (ncclComm_t) on one GPU: collectives and point-to-point calls on
 * device tensors, queued on the caller's stream of that GPU. Calls only queue work, never
 * synchronize, so they can be captured into a CUDA graph (`Graph.capture`) on the stream they use;
 * run each one once before capturing it, so NCCL sets up its connections outside the capture.
 *
 * Communicators are blocking (NCCL's default): a call returns once its work is queued, which the
 * first time can wait for the other ranks to connect. `dispose()` destroys the communicator
 * (ncclCommDestroy) once all ranks are done with it; `abort()` tears it down at once (ncclCommAbort),
 * e.g. after `asyncError()` reports an error.
 *
 * @example
 * // One process, every GPU: one communicator per device; one thread drives them, so each call is grouped.
 * const comms = NcclComm.initAll([0, 1]);
 * ncclGroup(() => comms.forEach((c, i) => c.allGather(lse[i], lseAll[i], { stream: streams[i] })));
 * NcclComm.disposeAll(comms);
 */
export class NcclComm {
  /** This communicator's rank, in [0, size). */
  readonly rank: number;
  /** Ranks in the communicator (ncclCommCount). */
  readonly size: number;
  /** The CUDA device ordinal of this rank (ncclCommCuDevice); its tensors and streams must be there. */
  readonly device: number;

  readonly #handle: bigint;
  readonly #state: DisposeOnce;
  readonly #facts: CommFacts;
  /** Communicators made with this one for this thread (NcclComm.initAll); more than 1: calls must be grouped. */
  readonly #made: number;
  #release: ReleaseCall = "ncclCommDestroy";

  private constructor(handle: bigint, facts: CommFacts & { rank: number }, made: number) {
    this.#handle = handle;
    this.#facts = Object.freeze({ size: facts.size, device: facts.device, version: facts.version });
    this.#made = made;
    this.rank = facts.rank;
    this.size = facts.size;
    this.device = facts.device;
    this.#state = new DisposeOnce(
      () => `NcclComm (rank ${facts.rank} of ${facts.size} on cuda:${facts.device})`,
      () => {
        const { api } = loadNccl();
        const call = this.#release;
        keepCurrentContext(() => checkNccl(api, api[call](handle), call));
      },
    );
  }

  /**
   * One communicator per device of `deviceOrdinals` (ncclCommInitAll), rank i on deviceOrdinals[i],
   * for one process that drives all of them. Each device's primary context is retained and made
   * current first, as NCCL's runtime calls expect. With more than one device, every collective and
   * point-to-point call must run inside `ncclGroup()`, one call per communicator (a call outside
   * throws: it would wait forever), and `NcclComm.disposeAll()` frees them together.
   * @throws ArgumentError for an empty list, a bad or repeated ordinal (NCCL refuses two ranks on one
   *   GPU); NcclUnavailableError without NCCL; NcclError when NCCL fails.
   */
  static initAll(deviceOrdinals: readonly number[]): NcclComm[] {
    const fn = "NcclComm.initAll";
    if (!Array.isArray(deviceOrdinals) || deviceOrdinals.length === 0) {
      throw new ArgumentError(fn, "deviceOrdinals", "a non-empty array of CUDA device ordinals", formatGot(deviceOrdinals));
    }
    deviceOrdinals.forEach((d, i) => checkDeviceOrdinal(fn, `deviceOrdinals[${i}]`, d));
    if (new Set(deviceOrdinals).size !== deviceOrdinals.length) {
      throw new ArgumentError(fn, "deviceOrdinals", "distinct ordinals (NCCL refuses two ranks on one GPU)", formatGot(deviceOrdinals));
    }
    const { api, version } = loadNccl();
    for (const d of deviceOrdinals) Device.get(d);
    const n = deviceOrdinals.length;
    const handles = new BigUint64Array(n);
    keepCurrentContext(() => checkNccl(api, api.ncclCommInitAll(handles, n, Int32Array.from(deviceOrdinals)), "ncclCommInitAll"));
    const facts = withAbortOnThrow(api, [...handles], () => [...handles].map((h) => readFacts(api, h, version)));
    return facts.map((f, i) => new NcclComm(handles[i], f, n));
  }

  /**
   * This process's (or worker thread's) rank of a communicator of `nranks` ranks, one GPU each
   * (ncclCommInitRank). Blocks until all ranks have called it with the same `uniqueId`, so two ranks
   * cannot be made in one thread; NCCL also refuses two ranks on one GPU.
   * @example
   * const comm = NcclComm.initRank({ nranks: 2, rank, uniqueId, device: rank });
   * @throws ArgumentError for a bad option; NcclUnavailableError without NCCL; NcclError when NCCL fails.
   */
  static initRank(options: NcclInitRankOptions): NcclComm {
    const fn = "NcclComm.initRank";
    const o = optionsObject(fn, "options", options);
    const { nranks, rank, uniqueId } = o;
    if (typeof nranks !== "number" || !Number.isSafeInteger(nranks) || nranks < 1 || nranks > 0x7fffffff) {
      throw new ArgumentError(fn, "options.nranks", "a positive integer", formatGot(nranks));
    }
    if (typeof rank !== "number" || !Number.isSafeInteger(rank) || rank < 0 || rank >= nranks) {
      throw new ArgumentError(fn, "options.rank", `an integer in [0, ${nranks - 1}]`, formatGot(rank));
    }
    if (!(uniqueId instanceof Uint8Array) || uniqueId.length !== NCCL_UNIQUE_ID_BYTES) {
      const got = uniqueId instanceof Uint8Array ? `${uniqueId.length} bytes` : describeValue(uniqueId);
      throw new ArgumentError(fn, "options.uniqueId", `the ${NCCL_UNIQUE_ID_BYTES} bytes of ncclUniqueId() (a Uint8Array)`, got);
    }
    const device = checkDeviceOrdinal(fn, "options.device", o.device ?? 0);
    const { api, version } = loadNccl();
    // NCCL takes the device from the runtime's current one (cudaGetDevice): its primary context.
    Device.get(device);
    const handle = new BigUint64Array(1);
    // A copy, so that a Buffer or a view into a larger buffer passes exactly its 128 bytes.
    const id = { internal: Uint8Array.from(uniqueId) };
    keepCurrentContext(() => checkNccl(api, api.ncclCommInitRank(handle, nranks, id, rank), "ncclCommInitRank"));
    const facts = withAbortOnThrow(api, [handle[0]], () => readFacts(api, handle[0], version));
    return new NcclComm(handle[0], facts, 1);
  }

  /**
   * Disposes `comms` together, inside one ncclGroup: the way to free the communicators of one
   * `initAll`, since recent NCCLs treat destroy as a collective of the node's ranks, which one thread
   * must issue together. Disposed ones are skipped; every one is disposed even when one fails, and
   * the first error is thrown.
   */
  static disposeAll(comms: readonly NcclComm[]): void {
    const fn = "NcclComm.disposeAll";
    if (!Array.isArray(comms)) throw new ArgumentError(fn, "comms", "an array of NcclComm", describeValue(comms));
    comms.forEach((c, i) => {
      if (!(c instanceof NcclComm)) throw new ArgumentError(fn, `comms[${i}]`, "an NcclComm", describeValue(c));
    });
    const live = comms.filter((c) => !c.disposed);
    if (live.length === 0) return;
    let failure: { error: unknown } | undefined;
    ncclGroup(() => {
      for (const c of live) {
        try {
          c.dispose();
        } catch (error) {
          failure ??= { error };
        }
      }
    });
    if (failure) throw failure.error;
  }

  /** The ncclComm_t, for code that calls NCCL itself. Throws once the communicator is disposed. */
  get handle(): bigint {
    this.#state.assertLive("NcclComm.handle");
    return this.#handle;
  }

  get disposed(): boolean {
    return this.#state.disposed;
  }

  /**
   * Element-wise reduction of `send` over all ranks, into every rank's `recv` (ncclAllReduce).
   * `recv` has as many elements as `send`, of the same dtype; the same tensor for in place.
   */
  allReduce(send: Tensor, recv: Tensor, options?: NcclReduceOptions): void {
    const fn = "NcclComm.allReduce";
    const c = checkAllReduceArgs(fn, this.#live(fn), send, recv, options);
    this.#enqueue(fn, "ncclAllReduce", (api, comm) => api.ncclAllReduce(c.send, c.recv, c.count, c.dtype, c.op, comm, c.stream));
  }

  /**
   * Every rank's `send`, concatenated in rank order, into every rank's `recv` (ncclAllGather): `recv`
   * holds size × send.numel elements, rank i's at [i × send.numel, (i + 1) × send.numel).
   */
  allGather(send: Tensor, recv: Tensor, options?: NcclStreamOptions): void {
    const fn = "NcclComm.allGather";
    const c = checkAllGatherArgs(fn, this.#live(fn), send, recv, options);
    this.#enqueue(fn, "ncclAllGather", (api, comm) => api.ncclAllGather(c.send, c.recv, c.count, c.dtype, comm, c.stream));
  }

  /**
   * Element-wise reduction of `send` over all ranks, scattered (ncclReduceScatter): `send` holds size
   * equal parts; rank i's `recv` (send.numel / size elements) gets the reduction of part i.
   */
  reduceScatter(send: Tensor, recv: Tensor, options?: NcclReduceOptions): void {
    const fn = "NcclComm.reduceScatter";
    const c = checkReduceScatterArgs(fn, this.#live(fn), send, recv, options);
    this.#enqueue(fn, "ncclReduceScatter", (api, comm) => api.ncclReduceScatter(c.send, c.recv, c.count, c.dtype, c.op, comm, c.stream));
  }

  /**
   * Sends all of `tensor` to rank `peer` (ncclSend), which must `recv` as many bytes. Pair it with the
   * matching recv inside `ncclGroup()` wherever both sides run on this thread (a send to itself).
   */
  send(tensor: Tensor, peer: number, options?: NcclStreamOptions): void {
    const fn = "NcclComm.send";
    const c = checkPeerArgs(fn, this.#live(fn), tensor, peer, options);
    this.#enqueue(fn, "ncclSend", (api, comm) => api.ncclSend(c.buffer, c.count, c.dtype, c.peer, comm, c.stream));
  }

  /** Receives all of `tensor` from rank `peer` (ncclRecv); see {@link NcclComm.send}. */
  recv(tensor: Tensor, peer: number, options?: NcclStreamOptions): void {
    const fn = "NcclComm.recv";
    const c = checkPeerArgs(fn, this.#live(fn), tensor, peer, options);
    this.#enqueue(fn, "ncclRecv", (api, comm) => api.ncclRecv(c.buffer, c.count, c.dtype, c.peer, comm, c.stream));
  }

  /**
   * The error NCCL recorded for this communicator while its work ran (ncclCommGetAsyncError: a peer
   * gone, a network failure, a timeout), or undefined while all is well. After an error the
   * communicator is unusable: `abort()` it. Never blocks.
   */
  asyncError(): NcclError | undefined {
    const fn = "NcclComm.asyncError";
    this.#state.assertLive(fn);
    const { api } = loadNccl();
    const out = new Int32Array(1);
    checkNccl(api, api.ncclCommGetAsyncError(this.#handle, out), "ncclCommGetAsyncError", this.#handle);
    const code = out[0];
    // ncclInProgress: a non-blocking communicator's operation is still running (not one of ours).
    if (code === NcclResult.Success || code === NcclResult.InProgress) return undefined;
    return ncclErrorFor(api, code, "ncclCommGetAsyncError", this.#handle);
  }

  /**
   * Tears the communicator down now, stopping work that is still running on the GPU (ncclCommAbort):
   * for after an error, when the other ranks may never come. A no-op once disposed.
   */
  abort(): void {
    if (this.#state.disposed) return;
    this.#release = "ncclCommAbort";
    this.#state.dispose();
  }

  /**
   * Destroys the communicator (ncclCommDestroy) once the work queued on it has finished; safe to call
   * twice. Communicators of one `initAll` go together: `NcclComm.disposeAll(comms)`.
   */
  dispose(): void {
    this.#state.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `NcclComm(rank ${this.rank} of ${this.size}, cuda:${this.device}${this.disposed ? ", disposed" : ""})`;
  }

  /** What the argument checks need, once `fn` has checked that the communicator is not disposed. */
  #live(fn: string): CommFacts {
    this.#state.assertLive(fn);
    return this.#facts;
  }

  /** Makes the device current and queues one NCCL call, checked; refuses an ungrouped call on one of several communicators of this thread. */
  #enqueue(fn: string, callName: string, call: (api: NcclApi, comm: bigint) => number): void {
    if (this.#made > 1 && ncclGroupDepth() === 0) {
      throw new Error(
        `${fn}(): ${this} is one of the ${this.#made} communicators NcclComm.initAll made for this thread; ` +
          "make this call on each of them inside ncclGroup(() => ...), else the first waits forever for the others",
      );
    }
    const { api } = loadNccl();
    Device.get(this.device);
    keepCurrentContext(() => checkNccl(api, call(api, this.#handle), callName, this.#handle));
  }
}

/** A new communicator's rank, size and device, as NCCL reports them. */
function readFacts(api: NcclApi, handle: bigint, version: CommFacts["version"]): CommFacts & { rank: number } {
  const read = (call: "ncclCommUserRank" | "ncclCommCount" | "ncclCommCuDevice"): number => {
    const out = new Int32Array(1);
    checkNccl(api, api[call](handle, out), call, handle);
    return out[0];
  };
  return { rank: read("ncclCommUserRank"), size: read("ncclCommCount"), device: read("ncclCommCuDevice"), version };
}

/** Runs `fn`; if it throws, aborts the communicators just made (nothing else owns them yet) and rethrows. */
function withAbortOnThrow<T>(api: NcclApi, handles: readonly bigint[], fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    for (const h of handles) api.ncclCommAbort(h);
    throw e;
  }
}
