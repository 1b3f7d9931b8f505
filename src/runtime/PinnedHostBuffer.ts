import { check } from "../driver/check.js";
import { loadKoffi } from "../driver/loadKoffi.js";
import { ArgumentError } from "../errors/ArgumentError.js";
import { driverOn } from "./Device.js";
import { DisposeOnce } from "./DisposeOnce.js";

/**
 * Page-locked host memory (cuMemAllocHost): a device-to-host copy queued on a stream into it returns at
 * once and lands when the stream reaches it, so the host can learn a small device result without
 * waiting (record an event after the copy and read `bytes` once `event.query()` is true).
 * `dispose()` frees it; safe to call twice.
 */
export class PinnedHostBuffer {
  readonly #ptr: bigint;
  readonly #state: DisposeOnce;
  /** The memory, viewed from JavaScript (valid until dispose()). */
  readonly bytes: Uint8Array;

  private constructor(ptr: bigint, readonly sizeBytes: number, readonly deviceOrdinal: number) {
    this.#ptr = ptr;
    this.#state = new DisposeOnce(
      () => `PinnedHostBuffer (${sizeBytes} bytes for cuda:${deviceOrdinal})`,
      () => check(driverOn(deviceOrdinal).cuMemFreeHost(ptr), "cuMemFreeHost"),
    );
    this.bytes = new Uint8Array(loadKoffi().view(ptr, sizeBytes));
  }

  /** Allocates `sizeBytes` (> 0) of page-locked memory in device `deviceOrdinal`'s context. */
  static alloc(sizeBytes: number, deviceOrdinal = 0): PinnedHostBuffer {
    if (!Number.isSafeInteger(sizeBytes) || sizeBytes <= 0) throw new ArgumentError("PinnedHostBuffer.alloc", "sizeBytes", "a positive integer", String(sizeBytes));
    const out = new BigUint64Array(1);
    check(driverOn(deviceOrdinal).cuMemAllocHost_v2(out, sizeBytes), "cuMemAllocHost_v2");
    return new PinnedHostBuffer(out[0], sizeBytes, deviceOrdinal);
  }

  /** The host address. Throws once disposed. */
  get ptr(): bigint {
    this.#state.assertLive("PinnedHostBuffer.ptr");
    return this.#ptr;
  }

  get disposed(): boolean {
    return this.#state.disposed;
  }

  dispose(): void {
    this.#state.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
