import { check } from "../driver/check.js";
import { CUflags, CUresult } from "../driver/cudaEnums.js";
import { loadDriver } from "../driver/loadDriver.js";
import { ArgumentError, describeValue, optionsObject } from "../errors/ArgumentError.js";
import { checkDeviceOrdinal, driverOn } from "./Device.js";
import { DisposeOnce } from "./DisposeOnce.js";
import { optionalStream, streamHandle, type Stream } from "./Stream.js";

/** Options for `Event.create`. */
export interface EventOptions {
  /** Record timestamps so `Event.elapsedMs` works (costs a little per record). @default true */
  timing?: boolean;
  /** Let `synchronize()` sleep instead of spinning the CPU. @default false */
  blockingSync?: boolean;
  /** @default 0 */
  deviceOrdinal?: number;
}

/** A CUDA event: a marker in a stream for timing and cross-stream ordering. */
export class Event {
  readonly #handle: bigint;
  readonly #state: DisposeOnce;

  private constructor(handle: bigint, readonly deviceOrdinal: number) {
    this.#handle = handle;
    this.#state = new DisposeOnce(
      () => `Event on cuda:${deviceOrdinal}`,
      () => check(driverOn(deviceOrdinal).cuEventDestroy_v2(handle), "cuEventDestroy_v2"),
    );
  }

  /** Creates an event (timing enabled unless `timing: false`). */
  static create(options?: EventOptions): Event {
    const fn = "Event.create";
    const { timing, blockingSync, deviceOrdinal } = optionsObject(fn, "options", options);
    const ordinal = checkDeviceOrdinal(fn, "options.deviceOrdinal", deviceOrdinal === undefined ? 0 : deviceOrdinal);
    for (const [name, value] of [["timing", timing], ["blockingSync", blockingSync]] as const) {
      if (value !== undefined && typeof value !== "boolean") throw new ArgumentError(fn, `options.${name}`, "a boolean or undefined", describeValue(value));
    }
    let flags: number = CUflags.EVENT_DEFAULT;
    if (timing === false) flags |= CUflags.EVENT_DISABLE_TIMING;
    if (blockingSync === true) flags |= CUflags.EVENT_BLOCKING_SYNC;
    const out = new BigUint64Array(1);
    check(driverOn(ordinal).cuEventCreate(out, flags), "cuEventCreate");
    return new Event(out[0], ordinal);
  }

  /**
   * Milliseconds between two recorded, completed events (resolution about 0.5 µs).
   * Both must have timing enabled; call `end.synchronize()` first.
   */
  static elapsedMs(start: Event, end: Event): number {
    requireEvent("Event.elapsedMs", "start", start);
    requireEvent("Event.elapsedMs", "end", end);
    const api = driverOn(start.deviceOrdinal);
    const out = new Float32Array(1);
    if (api.cuEventElapsedTime_v2) {
      check(api.cuEventElapsedTime_v2(out, start.handle, end.handle), "cuEventElapsedTime_v2");
    } else if (api.cuEventElapsedTime) {
      check(api.cuEventElapsedTime(out, start.handle, end.handle), "cuEventElapsedTime");
    } else {
      throw new Error("Event.elapsedMs(): the driver exports neither cuEventElapsedTime_v2 nor cuEventElapsedTime");
    }
    return out[0];
  }

  /** The CUevent handle. Throws once the event is disposed. */
  get handle(): bigint {
    this.#state.assertLive("Event.handle");
    return this.#handle;
  }

  get disposed(): boolean {
    return this.#state.disposed;
  }

  /** Records the event at the current end of `stream` (the legacy default stream when absent). */
  record(stream?: Stream): void {
    optionalStream("Event.record", "stream", stream);
    check(driverOn(this.deviceOrdinal).cuEventRecord(this.handle, streamHandle(stream)), "cuEventRecord");
  }

  /** Blocks until the work before the last `record()` has finished. */
  synchronize(): void {
    check(loadDriver().cuEventSynchronize(this.handle), "cuEventSynchronize");
  }

  /** True once the work before the last `record()` has finished (cuEventQuery; never blocks). */
  query(): boolean {
    const rc = driverOn(this.deviceOrdinal).cuEventQuery(this.handle);
    if (rc === CUresult.ERROR_NOT_READY) return false;
    check(rc, "cuEventQuery");
    return true;
  }

  dispose(): void {
    this.#state.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Checks an `event` argument: an Event (Event.create()). */
export function requireEvent(fn: string, argument: string, event: unknown): Event {
  if (!(event instanceof Event)) throw new ArgumentError(fn, argument, "an Event (Event.create())", describeValue(event));
  return event;
}
