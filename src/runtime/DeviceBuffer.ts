import { ArgumentError } from "../errors/ArgumentError.js";
import { check } from "../driver/check.js";
import { cudaErrorFor } from "../driver/cudaErrorFor.js";
import { Device, driverOn } from "./Device.js";
import { DisposeOnce } from "./DisposeOnce.js";
import type { Stream } from "./Stream.js";

/** Options for `DeviceBuffer.copyFromDevice`. */
export interface DeviceCopyOptions {
  /** Where to write in this buffer. @default 0 */
  dstOffsetBytes?: number;
  /** Where to read in the source. @default 0 */
  srcOffsetBytes?: number;
  /** Bytes to copy. @default the rest of the source after `srcOffsetBytes` */
  byteCount?: number;
  /** Queue the copy on this stream instead of copying synchronously. */
  stream?: Stream;
}

const CUDA_ERROR_OUT_OF_MEMORY = 2;

/** Bytes as a short binary-unit figure: "1.0 TiB", "84.0 MiB", "512 B". */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  let v = n;
  while (v >= 1024 && u < units.length - 1) v /= 1024, u++;
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

/**
 * The remedy part of an out-of-memory error: what was asked for, what is free (when the driver could
 * say), and what a caller can do. E.g. "requested 84.0 MiB on cuda:0, 23.0 MiB free of 140.0 GiB:
 * dispose() tensors and metadata no longer needed, or decode a smaller batch".
 */
export function outOfMemoryDetail(requestedBytes: number, deviceOrdinal: number, info?: { free: number; total: number }): string {
  const free = info ? `, ${formatBytes(info.free)} free of ${formatBytes(info.total)}` : "";
  return `requested ${formatBytes(requestedBytes)} on cuda:${deviceOrdinal}${free}: dispose() tensors and metadata no longer needed, or decode a smaller batch`;
}

/**
 * Device memory from cuMemAlloc. `dispose()` frees it; safe to call twice. Using a disposed buffer
 * (its `ptr` or any method) throws an Error that says so.
 *
 * Synchronous copies run on the legacy default stream, which does not wait for non-blocking
 * streams: synchronize the stream that wrote the data before `copyToHost()` without a stream.
 */
export class DeviceBuffer {
  readonly #ptr: bigint;
  readonly #state: DisposeOnce;

  private constructor(
    ptr: bigint,
    readonly sizeBytes: number,
    readonly deviceOrdinal: number,
  ) {
    this.#ptr = ptr;
    this.#state = new DisposeOnce(
      () => `DeviceBuffer (${sizeBytes} bytes on cuda:${deviceOrdinal})`,
      () => check(driverOn(deviceOrdinal).cuMemFree_v2(ptr), "cuMemFree_v2"),
    );
  }

  /**
   * Allocates `sizeBytes` (> 0) of device memory, uninitialised.
   * @default deviceOrdinal 0
   * @throws ArgumentError for 0 or a non-integer size; CudaError CUDA_ERROR_OUT_OF_MEMORY when it does not fit,
   * its message ending with the size asked for, the free and total memory, and what to do (outOfMemoryDetail).
   */
  static alloc(sizeBytes: number, deviceOrdinal = 0): DeviceBuffer {
    if (!Number.isSafeInteger(sizeBytes) || sizeBytes <= 0) {
      throw new ArgumentError("DeviceBuffer.alloc", "sizeBytes", "a positive integer number of bytes", String(sizeBytes));
    }
    const out = new BigUint64Array(1);
    const api = driverOn(deviceOrdinal);
    const result = api.cuMemAlloc_v2(out, sizeBytes);
    if (result === CUDA_ERROR_OUT_OF_MEMORY) {
      let info: { free: number; total: number } | undefined;
      try {
        info = Device.get(deviceOrdinal).memInfo();
      } catch {
        info = undefined;  // the error to report is the allocation's
      }
      throw cudaErrorFor(api, result, "cuMemAlloc_v2", outOfMemoryDetail(sizeBytes, deviceOrdinal, info));
    }
    check(result, "cuMemAlloc_v2");
    return new DeviceBuffer(out[0], sizeBytes, deviceOrdinal);
  }

  /** Device address of byte 0. Throws once the buffer is disposed. */
  get ptr(): bigint {
    this.#state.assertLive("DeviceBuffer.ptr");
    return this.#ptr;
  }

  get disposed(): boolean {
    return this.#state.disposed;
  }

  /** Copies host bytes into this buffer at `dstOffsetBytes`; async on `stream` when given (src must stay alive). */
  copyFromHost(src: ArrayBufferView, dstOffsetBytes = 0, stream?: Stream): void {
    const fn = "DeviceBuffer.copyFromHost";
    const bytes = hostBytes(fn, "src", src);
    this.checkRange(fn, "src", dstOffsetBytes, bytes.byteLength);
    if (bytes.byteLength === 0) return;
    const api = driverOn(this.deviceOrdinal);
    const dst = this.ptr + BigInt(dstOffsetBytes);
    if (stream) check(api.cuMemcpyHtoDAsync_v2(dst, bytes, bytes.byteLength, stream.handle), "cuMemcpyHtoDAsync_v2");
    else check(api.cuMemcpyHtoD_v2(dst, bytes, bytes.byteLength), "cuMemcpyHtoD_v2");
  }

  /**
   * Copies bytes from this buffer (at `srcOffsetBytes`) into host memory. Without `stream` it runs on
   * the legacy default stream; with one, after the work queued on it. Either way it returns once
   * the bytes are in `dst` (the driver completes copies into pageable memory before returning).
   */
  copyToHost(dst: ArrayBufferView, srcOffsetBytes = 0, stream?: Stream): void {
    const fn = "DeviceBuffer.copyToHost";
    const bytes = hostBytes(fn, "dst", dst);
    this.checkRange(fn, "dst", srcOffsetBytes, bytes.byteLength);
    if (bytes.byteLength === 0) return;
    const api = driverOn(this.deviceOrdinal);
    const src = this.ptr + BigInt(srcOffsetBytes);
    if (stream) {
      check(api.cuMemcpyDtoHAsync_v2(bytes, src, bytes.byteLength, stream.handle), "cuMemcpyDtoHAsync_v2");
      // Pageable destinations are written before the call returns on current drivers, but the API
      // only promises that for the synchronous form; synchronizing makes the contract explicit.
      stream.synchronize();
    } else {
      check(api.cuMemcpyDtoH_v2(bytes, src, bytes.byteLength), "cuMemcpyDtoH_v2");
    }
  }

  /** Copies from another device buffer (same or another device of this process). */
  copyFromDevice(src: DeviceBuffer, options: DeviceCopyOptions = {}): void {
    const fn = "DeviceBuffer.copyFromDevice";
    if (!(src instanceof DeviceBuffer)) throw new ArgumentError(fn, "src", "a DeviceBuffer", typeof src);
    const srcOffset = options.srcOffsetBytes ?? 0;
    if (!Number.isSafeInteger(srcOffset) || srcOffset < 0 || srcOffset > src.sizeBytes) {
      throw new ArgumentError(fn, "srcOffsetBytes", `an integer in [0, ${src.sizeBytes}]`, String(srcOffset));
    }
    const count = options.byteCount ?? src.sizeBytes - srcOffset;
    if (!Number.isSafeInteger(count) || count < 0 || srcOffset + count > src.sizeBytes) {
      throw new ArgumentError(fn, "byteCount", `at most ${src.sizeBytes - srcOffset} bytes (source size ${src.sizeBytes}, offset ${srcOffset})`, String(count));
    }
    const dstOffset = options.dstOffsetBytes ?? 0;
    this.checkRange(fn, "byteCount", dstOffset, count);
    const srcPtr = src.ptr + BigInt(srcOffset);
    if (count === 0) return;
    const api = driverOn(this.deviceOrdinal);
    const dst = this.ptr + BigInt(dstOffset);
    if (options.stream) check(api.cuMemcpyDtoDAsync_v2(dst, srcPtr, count, options.stream.handle), "cuMemcpyDtoDAsync_v2");
    else check(api.cuMemcpyDtoD_v2(dst, srcPtr, count), "cuMemcpyDtoD_v2");
  }

  /** Fills `count` bytes (default all) from `offsetBytes` with `value`. */
  memset8(value: number, offsetBytes = 0, count?: number, stream?: Stream): void {
    const fn = "DeviceBuffer.memset8";
    if (!Number.isInteger(value) || value < 0 || value > 0xff) {
      throw new ArgumentError(fn, "value", "an integer in [0, 255]", String(value));
    }
    const n = count ?? this.sizeBytes - offsetBytes;
    this.checkRange(fn, "count", offsetBytes, n);
    if (n === 0) return;
    const api = driverOn(this.deviceOrdinal);
    const dst = this.ptr + BigInt(offsetBytes);
    if (stream) check(api.cuMemsetD8Async(dst, value, n, stream.handle), "cuMemsetD8Async");
    else check(api.cuMemsetD8_v2(dst, value, n), "cuMemsetD8_v2");
  }

  /**
   * Fills 32-bit words (e.g. NaN poison 0x7fc00000) from `offsetBytes` (a multiple of 4).
   * `value` may be given signed (-1) or unsigned (0xffffffff). `countWords` defaults to every
   * whole word after the offset.
   */
  memset32(value: number, offsetBytes = 0, countWords?: number, stream?: Stream): void {
    const fn = "DeviceBuffer.memset32";
    if (!Number.isInteger(value) || value < -0x80000000 || value > 0xffffffff) {
      throw new ArgumentError(fn, "value", "a 32-bit integer", String(value));
    }
    if (!Number.isSafeInteger(offsetBytes) || offsetBytes % 4 !== 0) {
      throw new ArgumentError(fn, "offsetBytes", "a multiple of 4", String(offsetBytes));
    }
    const words = countWords ?? Math.floor((this.sizeBytes - offsetBytes) / 4);
    if (!Number.isSafeInteger(words) || words < 0) {
      throw new ArgumentError(fn, "countWords", "a non-negative integer", String(words));
    }
    this.checkRange(fn, "countWords", offsetBytes, words * 4);
    if (words === 0) return;
    const api = driverOn(this.deviceOrdinal);
    const dst = this.ptr + BigInt(offsetBytes);
    if (stream) check(api.cuMemsetD32Async(dst, value >>> 0, words, stream.handle), "cuMemsetD32Async");
    else check(api.cuMemsetD32_v2(dst, value >>> 0, words), "cuMemsetD32_v2");
  }

  /** Frees the memory; later calls do nothing. Free after the work that uses it has finished. */
  dispose(): void {
    this.#state.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `DeviceBuffer(${this.sizeBytes} bytes, cuda:${this.deviceOrdinal}${this.disposed ? ", disposed" : ""})`;
  }

  /** Checks that [offset, offset + length) lies inside the buffer and that the buffer is live. */
  private checkRange(fn: string, argument: string, offset: number, length: number): void {
    this.#state.assertLive(fn);
    if (!Number.isSafeInteger(offset) || offset < 0 || offset > this.sizeBytes) {
      throw new ArgumentError(fn, "offset", `an integer in [0, ${this.sizeBytes}]`, String(offset));
    }
    if (!Number.isSafeInteger(length) || length < 0 || offset + length > this.sizeBytes) {
      throw new ArgumentError(
        fn,
        argument,
        `at most ${this.sizeBytes - offset} bytes (buffer of ${this.sizeBytes} bytes, offset ${offset})`,
        `${length} bytes`,
      );
    }
  }
}

/** A byte view of any host ArrayBufferView (koffi passes its address, honouring byteOffset). */
function hostBytes(fn: string, argument: string, view: ArrayBufferView): Uint8Array {
  if (!ArrayBuffer.isView(view)) throw new ArgumentError(fn, argument, "a TypedArray or DataView", typeof view);
  return view instanceof Uint8Array ? view : new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}
