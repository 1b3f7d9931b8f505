import { ArgumentError, formatShape } from "../errors/ArgumentError.js";
import { DeviceBuffer } from "./DeviceBuffer.js";
import type { Stream } from "./Stream.js";
import { allocHostArray, DTYPES, dtypeSize, hostArrayMatches, type DType, type HostArray } from "./dtype.js";

/** Where a tensor's elements live. */
export type DeviceName = "cpu" | `cuda:${number}`;

/** Row-major (C order) element strides for `shape`. */
export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

export function numelOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * A strided view of elements of one dtype, on the host (over a TypedArray) or on a GPU (over a
 * DeviceBuffer). Strides and offsets are in elements. A tensor does not own its storage: dispose
 * the DeviceBuffer (or call `tensor.dispose()`, which disposes it) when done.
 */
export class Tensor {
  readonly shape: readonly number[];
  readonly strides: readonly number[];

  private constructor(
    readonly dtype: DType,
    shape: readonly number[],
    strides: readonly number[],
    /** Element offset of [0,0,...] into the storage. */
    readonly offset: number,
    /** Host storage (CPU tensors). */
    readonly host: HostArray | undefined,
    /** Device storage (GPU tensors). */
    readonly buffer: DeviceBuffer | undefined,
  ) {
    this.shape = Object.freeze([...shape]);
    this.strides = Object.freeze([...strides]);
  }

  /** Wraps a host array (no copy). bf16/fp16 need a Uint16Array, fp8/u8 a Uint8Array, f32 a Float32Array, i32 an Int32Array. */
  static fromHost(data: HostArray, shape: readonly number[], dtype: DType): Tensor {
    checkShape("Tensor.fromHost", shape);
    checkDtype("Tensor.fromHost", dtype);
    if (data === null || typeof data !== "object" || !hostArrayMatches(dtype, data)) {
      throw new ArgumentError("Tensor.fromHost", "data", `the host array type of ${dtype}`, data === null || typeof data !== "object" ? String(data) : data.constructor.name);
    }
    if (data.length !== numelOf(shape)) {
      throw new ArgumentError("Tensor.fromHost", "data", `${numelOf(shape)} elements for shape ${formatShape(shape)}`, `${data.length}`);
    }
    return new Tensor(dtype, shape, contiguousStrides(shape), 0, data, undefined);
  }

  /** A new zero-filled host tensor. */
  static zerosHost(shape: readonly number[], dtype: DType): Tensor {
    checkShape("Tensor.zerosHost", shape);
    checkDtype("Tensor.zerosHost", dtype);
    return new Tensor(dtype, shape, contiguousStrides(shape), 0, allocHostArray(dtype, numelOf(shape)), undefined);
  }

  /** A new uninitialised device tensor in a freshly allocated buffer (at least 1 byte). */
  static emptyDevice(shape: readonly number[], dtype: DType, deviceOrdinal = 0): Tensor {
    checkShape("Tensor.emptyDevice", shape);
    checkDtype("Tensor.emptyDevice", dtype);
    const buffer = DeviceBuffer.alloc(Math.max(1, numelOf(shape) * dtypeSize(dtype)), deviceOrdinal);
    return new Tensor(dtype, shape, contiguousStrides(shape), 0, undefined, buffer);
  }

  /** Views `buffer` (starting at byte `byteOffset`) as a tensor. Checks that the view fits. */
  static fromDeviceBuffer(
    buffer: DeviceBuffer,
    shape: readonly number[],
    dtype: DType,
    opts: { strides?: readonly number[]; byteOffset?: number } = {},
  ): Tensor {
    const fn = "Tensor.fromDeviceBuffer";
    if (!(buffer instanceof DeviceBuffer)) throw new ArgumentError(fn, "buffer", "a DeviceBuffer", buffer === null ? "null" : typeof buffer);
    checkShape(fn, shape);
    checkDtype(fn, dtype);
    const strides = opts.strides ?? contiguousStrides(shape);
    checkStrides(fn, "opts.strides", strides, shape);
    const byteOffset = opts.byteOffset ?? 0;
    const size = dtypeSize(dtype);
    // A negative offset would place element [0,...] before the allocation.
    if (!Number.isSafeInteger(byteOffset) || byteOffset < 0 || byteOffset % size !== 0) {
      throw new ArgumentError(fn, "byteOffset", `a non-negative multiple of ${size}`, `${byteOffset}`);
    }
    const t = new Tensor(dtype, shape, strides, byteOffset / size, undefined, buffer);
    const end = (t.offset + t.maxElementIndex() + 1) * size;
    if (numelOf(shape) > 0 && end > buffer.sizeBytes) {
      throw new ArgumentError("Tensor.fromDeviceBuffer", "shape", `a view within ${buffer.sizeBytes} bytes`, `${end} bytes`);
    }
    return t;
  }

  /** Copies a host tensor to a new device tensor (contiguous). */
  static toDevice(src: Tensor, deviceOrdinal = 0, stream?: Stream): Tensor {
    const host = src.contiguousHost();
    const t = Tensor.emptyDevice(host.shape, host.dtype, deviceOrdinal);
    if (host.numel > 0) t.buffer!.copyFromHost(host.host!, 0, stream);
    return t;
  }

  get device(): DeviceName {
    return this.buffer ? `cuda:${this.buffer.deviceOrdinal}` : "cpu";
  }

  /** The CUDA device's ordinal, or -1 for a host tensor (compare these, not `device`'s strings, on hot paths). */
  get deviceOrdinal(): number {
    return this.buffer ? this.buffer.deviceOrdinal : -1;
  }

  get isCuda(): boolean {
    return this.buffer !== undefined;
  }

  get numel(): number {
    return numelOf(this.shape);
  }

  get rank(): number {
    return this.shape.length;
  }

  get elementSize(): number {
    return dtypeSize(this.dtype);
  }

  /** Device address of element [0,0,...]. Throws for host tensors. */
  get ptr(): bigint {
    if (!this.buffer) throw new ArgumentError("Tensor.ptr", "tensor", "a CUDA tensor", "a cpu tensor");
    return this.buffer.ptr + BigInt(this.offset * this.elementSize);
  }

  isContiguous(): boolean {
    // contiguousStrides' values, walked from the last dimension without building the array (every
    // dense call checks several tensors this way).
    let want = 1;
    for (let i = this.shape.length - 1; i >= 0; i--) {
      if (this.shape[i] !== 1 && this.strides[i] !== want) return false;
      want *= this.shape[i];
    }
    return true;
  }

  /** Largest element index (relative to offset) that the view touches. */
  maxElementIndex(): number {
    let m = 0;
    for (let i = 0; i < this.shape.length; i++) m += (this.shape[i] - 1) * this.strides[i];
    return m;
  }

  /** A view with new shape (contiguous tensors only). */
  reshape(shape: readonly number[]): Tensor {
    // Without this, [-1, -4] would pass the element-count test below for a 4-element tensor.
    checkShape("Tensor.reshape", shape);
    if (numelOf(shape) !== this.numel) {
      throw new ArgumentError("Tensor.reshape", "shape", `${this.numel} elements`, `${formatShape(shape)} (${numelOf(shape)})`);
    }
    if (!this.isContiguous()) throw new ArgumentError("Tensor.reshape", "tensor", "a contiguous tensor", "strides " + formatShape(this.strides));
    return new Tensor(this.dtype, shape, contiguousStrides(shape), this.offset, this.host, this.buffer);
  }

  /**
   * A view of the same storage with other dtype (same element size), shape and strides. A view of a
   * device tensor must lie inside its DeviceBuffer (kernels trust a tensor's extent); host views are
   * checked where they are read (mlaDecodeReference).
   */
  view(shape: readonly number[], strides: readonly number[] = contiguousStrides(shape), dtype: DType = this.dtype): Tensor {
    const fn = "Tensor.view";
    checkShape(fn, shape);
    checkStrides(fn, "strides", strides, shape);
    checkDtype(fn, dtype);
    if (dtypeSize(dtype) !== this.elementSize) {
      throw new ArgumentError(fn, "dtype", `${this.elementSize}-byte type`, dtype);
    }
    const t = new Tensor(dtype, shape, strides, this.offset, this.host, this.buffer);
    if (this.buffer && t.numel > 0) {
      const end = (t.offset + t.maxElementIndex() + 1) * t.elementSize;
      if (end > this.buffer.sizeBytes) {
        throw new ArgumentError(fn, "shape", `a view within the ${this.buffer.sizeBytes}-byte buffer`, `${formatShape(shape)} with strides ${formatShape(strides)} ending at byte ${end}`);
      }
    }
    return t;
  }

  /** For host tensors: the elements in row-major order (a copy unless already contiguous from 0). */
  contiguousHost(): Tensor {
    if (!this.host) throw new ArgumentError("Tensor.contiguousHost", "tensor", "a cpu tensor", this.device);
    if (this.isContiguous() && this.offset === 0 && this.host.length === this.numel) return this;
    const out = Tensor.zerosHost(this.shape, this.dtype);
    const dst = out.host!;
    const src = this.host;
    const n = this.numel;
    const idx = new Array<number>(this.rank).fill(0);
    for (let i = 0; i < n; i++) {
      let off = this.offset;
      for (let d = 0; d < idx.length; d++) off += idx[d] * this.strides[d];
      dst[i] = src[off];
      for (let d = idx.length - 1; d >= 0; d--) {
        if (++idx[d] < this.shape[d]) break;
        idx[d] = 0;
      }
    }
    return out;
  }

  /**
   * Copies to a host tensor of the same shape. Device tensors must be contiguous; the copy is
   * synchronous (after the given stream, or the default stream, has finished).
   */
  toHost(stream?: Stream): Tensor {
    if (this.host) return this.contiguousHost();
    if (!this.isContiguous()) throw new ArgumentError("Tensor.toHost", "tensor", "a contiguous CUDA tensor", "strides " + formatShape(this.strides));
    const out = Tensor.zerosHost(this.shape, this.dtype);
    if (this.numel > 0) {
      if (stream) stream.synchronize();
      this.buffer!.copyToHost(out.host!, this.offset * this.elementSize);
    }
    return out;
  }

  /** Frees the device buffer under this tensor (no-op for host tensors; safe to call twice). */
  dispose(): void {
    this.buffer?.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `Tensor(${this.dtype}, ${formatShape(this.shape)}, ${this.device})`;
  }
}

function checkShape(fn: string, shape: readonly number[]): void {
  if (!Array.isArray(shape) || shape.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new ArgumentError(fn, "shape", "an array of non-negative integers", JSON.stringify(shape));
  }
}

function checkDtype(fn: string, dtype: DType): void {
  if (!DTYPES.includes(dtype)) throw new ArgumentError(fn, "dtype", `one of ${DTYPES.join(", ")}`, JSON.stringify(dtype));
}

/** Strides in elements: one non-negative integer per dimension (negative strides would reach before the storage). */
function checkStrides(fn: string, name: string, strides: readonly number[], shape: readonly number[]): void {
  if (!Array.isArray(strides) || strides.length !== shape.length || strides.some((s) => !Number.isSafeInteger(s) || s < 0)) {
    throw new ArgumentError(fn, name, `${shape.length} non-negative integers (one per dimension of ${formatShape(shape)})`, JSON.stringify(strides));
  }
}
