import { check } from "../driver/check.js";
import { CUflags, CUresult } from "../driver/cudaEnums.js";
import { ArgumentError, describeValue } from "../errors/ArgumentError.js";
import { checkDeviceOrdinal, driverOn } from "./Device.js";
import { DisposeOnce } from "./DisposeOnce.js";
import { requireEvent, type Event } from "./Event.js";

/**
 * A CUDA stream (cuStreamCreate, non-blocking: it does not wait for the legacy default stream, so
 * work on it orders only with itself, events and graph launches). `dispose()` destroys it; safe to
 * call twice.
 */
export class Stream {
  readonly #handle: bigint;
  readonly #state: DisposeOnce;

  private constructor(handle: bigint, readonly deviceOrdinal: number) {
    this.#handle = handle;
    this.#state = new DisposeOnce(
      () => `Stream on cuda:${deviceOrdinal}`,
      () => check(driverOn(deviceOrdinal).cuStreamDestroy_v2(handle), "cuStreamDestroy_v2"),
    );
  }

  /** Creates a non-blocking stream on device `deviceOrdinal`. @default deviceOrdinal 0 */
  static create(deviceOrdinal = 0): Stream {
    checkDeviceOrdinal("Stream.create", "deviceOrdinal", deviceOrdinal);
    const out = new BigUint64Array(1);
    check(driverOn(deviceOrdinal).cuStreamCreate(out, CUflags.STREAM_NON_BLOCKING), "cuStreamCreate");
    return new Stream(out[0], deviceOrdinal);
  }

  /** The CUstream handle. Throws once the stream is disposed. */
  get handle(): bigint {
    this.#state.assertLive("Stream.handle");
    return this.#handle;
  }

  get disposed(): boolean {
    return this.#state.disposed;
  }

  /** Blocks until all work queued on the stream has finished. */
  synchronize(): void {
    check(driverOn(this.deviceOrdinal).cuStreamSynchronize(this.handle), "cuStreamSynchronize");
  }

  /** True when all work queued so far has finished (cuStreamQuery; never blocks). */
  query(): boolean {
    const rc = driverOn(this.deviceOrdinal).cuStreamQuery(this.handle);
    if (rc === CUresult.ERROR_NOT_READY) return false;
    check(rc, "cuStreamQuery");
    return true;
  }

  /** Makes later work on this stream wait until `event` (as last recorded) has completed. */
  waitEvent(event: Event): void {
    requireEvent("Stream.waitEvent", "event", event);
    check(driverOn(this.deviceOrdinal).cuStreamWaitEvent(this.handle, event.handle, 0), "cuStreamWaitEvent");
  }

  dispose(): void {
    this.#state.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Checks a `stream` argument that may be left out: a Stream or undefined (the legacy default stream).
 * Anything else, a Device or a raw CUstream handle included, is an ArgumentError naming `fn`.
 */
export function optionalStream(fn: string, argument: string, stream: unknown): Stream | undefined {
  if (stream === undefined) return undefined;
  return requireStream(fn, argument, stream, "a Stream (Stream.create()) or undefined");
}

/** Checks a `stream` argument that must be given. */
export function requireStream(fn: string, argument: string, stream: unknown, expected = "a Stream (Stream.create())"): Stream {
  if (!(stream instanceof Stream)) throw new ArgumentError(fn, argument, expected, describeValue(stream));
  return stream;
}

/** The CUstream to pass for an optional stream: the legacy default stream (0) when absent. */
export function streamHandle(stream: Stream | undefined): bigint {
  return stream ? stream.handle : 0n;
}
