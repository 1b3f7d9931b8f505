// CONTRACT STUB: the runtime helper replaces the bodies; the public surface below is fixed.
import type { Stream } from "./Stream.js";

/** Device memory from cuMemAlloc. `dispose()` frees it; safe to call twice. */
export class DeviceBuffer {
  private constructor(
    readonly ptr: bigint,
    readonly sizeBytes: number,
    readonly deviceOrdinal: number,
  ) {}
  static alloc(sizeBytes: number, deviceOrdinal = 0): DeviceBuffer {
    void sizeBytes; void deviceOrdinal;
    throw new Error("not implemented");
  }
  get disposed(): boolean { return false; }
  /** Copies host bytes into this buffer at `dstOffsetBytes`; async on `stream` when given (src must stay alive). */
  copyFromHost(src: ArrayBufferView, dstOffsetBytes = 0, stream?: Stream): void { void src; void dstOffsetBytes; void stream; throw new Error("not implemented"); }
  /** Copies bytes from this buffer (at `srcOffsetBytes`) into host memory, synchronously. */
  copyToHost(dst: ArrayBufferView, srcOffsetBytes = 0): void { void dst; void srcOffsetBytes; throw new Error("not implemented"); }
  /** Fills `count` bytes (default all) from `offsetBytes` with `value`. */
  memset8(value: number, offsetBytes = 0, count?: number, stream?: Stream): void { void value; void offsetBytes; void count; void stream; throw new Error("not implemented"); }
  /** Fills 32-bit words (e.g. NaN poison 0x7fc00000). */
  memset32(value: number, offsetBytes = 0, countWords?: number, stream?: Stream): void { void value; void offsetBytes; void countWords; void stream; throw new Error("not implemented"); }
  dispose(): void {}
  [Symbol.dispose](): void { this.dispose(); }
}
