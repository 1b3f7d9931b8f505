import { ArgumentError, describeValue, formatGot, formatShape, optionsObject } from "../errors/ArgumentError.js";
import { bf16ArrayToF32, f32ArrayToBf16 } from "../numeric/bf16.js";
import { f32ArrayToFp16, fp16ArrayToF32 } from "../numeric/fp16.js";
import { fp8E4m3ArrayToF32 } from "../numeric/fp8e4m3.js";
import { checkFloatValues, type FloatValues } from "../numeric/checkArrayArgument.js";
import { checkDeviceOrdinal } from "./Device.js";
import { DeviceBuffer } from "./DeviceBuffer.js";
import { optionalStream, type Stream } from "./Stream.js";
import { allocHostArray, DTYPES, dtypeSize, hostArrayMatches, type DType, type HostArray, type HostArrayOf } from "./dtype.js";

/** Where a tensor's elements live. */
export type DeviceName = "cpu" | `cuda:${number}`;

/** The dtypes `Tensor.fromFloat32` builds: each value is rounded to it, nearest even. */
export type FloatDType = "bf16" | "fp16" | "f32";

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
 *
 * `D` is the dtype when it is known where the tensor is made (`Tensor.zerosHost([4], "bf16")` is a
 * `Tensor<"bf16">`), so `hostData()` is typed (a Uint16Array there); a plain `Tensor` holds any dtype.
 *
 * @example
 * const q = Tensor.toDevice(Tensor.fromFloat32(values, [b, 1, 64, 576], "bf16"));
 * const { out } = flashMlaWithKvcache({ q, ... });
 * const outF32 = out.toFloat32();   // copied to the host, decoded from bf16
 */
export class Tensor<D extends DType = DType> {
  readonly shape: readonly number[];
  readonly strides: readonly number[];

  private constructor(
    readonly dtype: D,
    shape: readonly number[],
    strides: readonly number[],
    /** Element offset of [0,0,...] into the storage. */
    readonly offset: number,
    /** Host storage (CPU tensors). */
    readonly host: HostArrayOf<D> | undefined,
    /** Device storage (GPU tensors). */
    readonly buffer: DeviceBuffer | undefined,
  ) {
    this.shape = Object.freeze([...shape]);
    this.strides = Object.freeze([...strides]);
  }

  /** Wraps a host array (no copy). bf16/fp16 need a Uint16Array, fp8_e4m3/u8 a Uint8Array, f32 a Float32Array, i32 an Int32Array. */
  static fromHost<D extends DType>(data: HostArrayOf<D>, shape: readonly number[], dtype: D): Tensor<D> {
    const fn = "Tensor.fromHost";
    const numel = checkShape(fn, shape);
    checkDtype(fn, dtype);
    if (data === null || typeof data !== "object" || !hostArrayMatches(dtype, data)) {
      throw new ArgumentError(fn, "data", `the host array type of ${dtype}`, describeValue(data));
    }
    if (data.length !== numel) {
      throw new ArgumentError(fn, "data", `${numel} elements for shape ${formatShape(shape)}`, `${data.length}`);
    }
    return new Tensor(dtype, shape, contiguousStrides(shape), 0, data, undefined);
  }

  /**
   * A new host tensor from numbers: each value is rounded to f32 and then to `dtype`, nearest even
   * (`f32ArrayToBf16`, `f32ArrayToFp16`; NaN stays NaN, overflow gives ±inf). `values` is read in
   * row-major order and not kept.
   *
   * @example
   * const kv = Tensor.fromFloat32(Float32Array.from({ length: 2 * 576 }, () => Math.random()), [2, 576], "bf16");
   */
  static fromFloat32<D extends FloatDType>(values: FloatValues, shape: readonly number[], dtype: D): Tensor<D> {
    const fn = "Tensor.fromFloat32";
    const numel = checkShape(fn, shape);
    if (dtype !== "bf16" && dtype !== "fp16" && dtype !== "f32") {
      throw new ArgumentError(fn, "dtype", "bf16, fp16 or f32 (the floating-point dtypes a number rounds to)", describeValue(dtype));
    }
    checkFloatValues(fn, "values", values);
    if (values.length !== numel) throw new ArgumentError(fn, "values", `${numel} values for shape ${formatShape(shape)}`, `${values.length}`);
    const data = dtype === "bf16" ? f32ArrayToBf16(values) : dtype === "fp16" ? f32ArrayToFp16(values) : Float32Array.from(values);
    return new Tensor(dtype, shape, contiguousStrides(shape), 0, data as HostArrayOf<D>, undefined);
  }

  /** A new zero-filled host tensor. */
  static zerosHost<D extends DType>(shape: readonly number[], dtype: D): Tensor<D> {
    const fn = "Tensor.zerosHost";
    const numel = checkShape(fn, shape);
    checkDtype(fn, dtype);
    return new Tensor(dtype, shape, contiguousStrides(shape), 0, allocHost(fn, dtype, numel, shape), undefined);
  }

  /** A new uninitialised device tensor in a freshly allocated buffer (at least 1 byte). @default deviceOrdinal 0 */
  static emptyDevice<D extends DType>(shape: readonly number[], dtype: D, deviceOrdinal = 0): Tensor<D> {
    const fn = "Tensor.emptyDevice";
    const numel = checkShape(fn, shape);
    checkDtype(fn, dtype);
    checkDeviceOrdinal(fn, "deviceOrdinal", deviceOrdinal);
    const bytes = numel * dtypeSize(dtype);
    if (!Number.isSafeInteger(bytes)) throw new ArgumentError(fn, "shape", "a tensor of at most 2^53 - 1 bytes", `${formatShape(shape)} of ${dtype}`);
    const buffer = DeviceBuffer.alloc(Math.max(1, bytes), deviceOrdinal);
    return new Tensor(dtype, shape, contiguousStrides(shape), 0, undefined, buffer);
  }

  /** Views `buffer` (starting at byte `byteOffset`) as a tensor. Checks that the view fits. */
  static fromDeviceBuffer<D extends DType>(
    buffer: DeviceBuffer,
    shape: readonly number[],
    dtype: D,
    opts?: { strides?: readonly number[]; byteOffset?: number },
  ): Tensor<D> {
    const fn = "Tensor.fromDeviceBuffer";
    if (!(buffer instanceof DeviceBuffer)) throw new ArgumentError(fn, "buffer", "a DeviceBuffer", buffer === null ? "null" : typeof buffer);
    checkShape(fn, shape);
    checkDtype(fn, dtype);
    const options = optionsObject(fn, "opts", opts);
    const strides = options.strides === undefined ? contiguousStrides(shape) : options.strides;
    checkStrides(fn, "opts.strides", strides, shape);
    const byteOffset = options.byteOffset === undefined ? 0 : options.byteOffset;
    const size = dtypeSize(dtype);
    // A negative offset would place element [0,...] before the allocation.
    if (!Number.isSafeInteger(byteOffset) || byteOffset < 0 || byteOffset % size !== 0) {
      throw new ArgumentError(fn, "opts.byteOffset", `a non-negative multiple of ${size}`, formatGot(byteOffset));
    }
    const t = new Tensor<D>(dtype, shape, strides, byteOffset / size, undefined, buffer);
    const end = (t.offset + t.maxElementIndex() + 1) * size;
    if (numelOf(shape) > 0 && end > buffer.sizeBytes) {
      throw new ArgumentError("Tensor.fromDeviceBuffer", "shape", `a view within ${buffer.sizeBytes} bytes`, `${end} bytes`);
    }
    return t;
  }

  /**
   * Copies a host tensor to a new device tensor (contiguous); queued on `stream` when given, and then
   * `src`'s storage must stay unchanged until the stream has run the copy.
   * @default deviceOrdinal 0
   */
  static toDevice<D extends DType>(src: Tensor<D>, deviceOrdinal = 0, stream?: Stream): Tensor<D> {
    const fn = "Tensor.toDevice";
    if (!(src instanceof Tensor)) throw new ArgumentError(fn, "src", "a Tensor", describeValue(src));
    if (src.isCuda) throw new ArgumentError(fn, "src", "a cpu tensor", `a tensor on ${src.device}`);
    checkDeviceOrdinal(fn, "deviceOrdinal", deviceOrdinal);
    optionalStream(fn, "stream", stream);
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
  reshape(shape: readonly number[]): Tensor<D> {
    // Without this, [-1, -4] would pass the element-count test below for a 4-element tensor.
    const numel = checkShape("Tensor.reshape", shape);
    if (numel !== this.numel) {
      throw new ArgumentError("Tensor.reshape", "shape", `${this.numel} elements`, `${formatShape(shape)} (${numel})`);
    }
    if (!this.isContiguous()) throw new ArgumentError("Tensor.reshape", "tensor", "a contiguous tensor", "strides " + formatShape(this.strides));
    return new Tensor(this.dtype, shape, contiguousStrides(shape), this.offset, this.host, this.buffer);
  }

  /**
   * A view of the same storage with other dtype (same element size), shape and strides. A view of a
   * device tensor must lie inside its DeviceBuffer (kernels trust a tensor's extent); host views are
   * checked where they are read (mlaDecodeReference).
   * @default strides row-major for `shape`; dtype this tensor's
   */
  view<E extends DType = D>(shape: readonly number[], strides?: readonly number[], dtype?: E): Tensor<E> {
    const fn = "Tensor.view";
    checkShape(fn, shape);
    const viewStrides = strides === undefined ? contiguousStrides(shape) : strides;
    checkStrides(fn, "strides", viewStrides, shape);
    const viewDtype = dtype === undefined ? (this.dtype as DType as E) : dtype;
    checkDtype(fn, viewDtype);
    if (dtypeSize(viewDtype) !== this.elementSize) {
      throw new ArgumentError(fn, "dtype", `${this.elementSize}-byte type`, viewDtype);
    }
    // Same element size, so the host storage holds E's array type too (u8 and fp8_e4m3, bf16 and fp16).
    const t = new Tensor<E>(viewDtype, shape, viewStrides, this.offset, this.host as HostArray | undefined as HostArrayOf<E> | undefined, this.buffer);
    if (this.buffer && t.numel > 0) {
      const end = (t.offset + t.maxElementIndex() + 1) * t.elementSize;
      if (end > this.buffer.sizeBytes) {
        throw new ArgumentError(fn, "shape", `a view within the ${this.buffer.sizeBytes}-byte buffer`, `${formatShape(shape)} with strides ${formatShape(viewStrides)} ending at byte ${end}`);
      }
    }
    return t;
  }

  /** For host tensors: the elements in row-major order (a copy unless already contiguous from 0). */
  contiguousHost(): Tensor<D> {
    if (!this.host) throw new ArgumentError("Tensor.contiguousHost", "tensor", "a cpu tensor", this.device);
    if (this.isContiguous() && this.offset === 0 && this.host.length === this.numel) return this;
    const out = Tensor.zerosHost(this.shape, this.dtype);
    const dst = out.host as HostArray;
    const src = this.host as HostArray;
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
   * A host tensor's elements in row-major order, typed by dtype (Uint16Array for bf16 and fp16,
   * Uint8Array for fp8_e4m3 and u8, Float32Array for f32, Int32Array for i32): the storage itself when
   * the tensor covers it from 0 in order, else a copy. For a CUDA tensor call `toHost()` first.
   */
  hostData(): HostArrayOf<D> {
    if (!this.host) throw new ArgumentError("Tensor.hostData", "tensor", "a cpu tensor (call toHost() first)", this.device);
    return this.contiguousHost().host!;
  }

  /**
   * Copies to a host tensor of the same shape. Device tensors must be contiguous; the copy is
   * synchronous (after the given stream, or the default stream, has finished).
   */
  toHost(stream?: Stream): Tensor<D> {
    optionalStream("Tensor.toHost", "stream", stream);
    if (this.host) return this.contiguousHost();
    if (!this.isContiguous()) throw new ArgumentError("Tensor.toHost", "tensor", "a contiguous CUDA tensor", "strides " + formatShape(this.strides));
    const out = Tensor.zerosHost(this.shape, this.dtype);
    if (this.numel > 0) {
      if (stream) stream.synchronize();
      this.buffer!.copyToHost(out.host!, this.offset * this.elementSize);
    }
    return out;
  }

  /**
   * The elements as numbers in row-major order, a new Float32Array: bf16, fp16 and fp8_e4m3 decoded
   * exactly, f32 copied, i32 and u8 converted (i32 beyond ±2^24 rounds). A CUDA tensor is copied to the
   * host first (`toHost(stream)`: it waits for `stream`). A u8 tensor holding e4m3 codes reads as codes
   * 0..255; view it as fp8_e4m3 (`t.view(t.shape, t.strides, "fp8_e4m3")`) to decode them.
   */
  toFloat32(stream?: Stream): Float32Array {
    optionalStream("Tensor.toFloat32", "stream", stream);
    const data = (this.isCuda ? this.toHost(stream) : this).hostData() as HostArray;
    switch (this.dtype) {
      case "bf16":
        return bf16ArrayToF32(data as Uint16Array);
      case "fp16":
        return fp16ArrayToF32(data as Uint16Array);
      case "fp8_e4m3":
        return fp8E4m3ArrayToF32(data as Uint8Array);
      case "f32":
      case "i32":
      case "u8":
        return Float32Array.from(data);
      default:
        return this.dtype satisfies never;
    }
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

/**
 * Checks a shape (an array of non-negative integers whose product is a safe integer) and returns its
 * element count. Without the product check, [2^30, 2^30, 2^30] would pass and fail later as a RangeError.
 */
function checkShape(fn: string, shape: readonly number[]): number {
  if (!Array.isArray(shape) || shape.some((n) => !Number.isSafeInteger(n) || n < 0)) {
    throw new ArgumentError(fn, "shape", "an array of non-negative integers", formatGot(shape));
  }
  const numel = numelOf(shape);
  if (!Number.isSafeInteger(numel)) {
    throw new ArgumentError(fn, "shape", "at most 2^53 - 1 elements (Number.MAX_SAFE_INTEGER)", `${formatShape(shape)} (${numel} elements)`);
  }
  return numel;
}

function checkDtype(fn: string, dtype: DType): void {
  if (!DTYPES.includes(dtype)) throw new ArgumentError(fn, "dtype", `one of ${DTYPES.join(", ")}`, typeof dtype === "string" ? JSON.stringify(dtype) : formatGot(dtype));
}

/** Allocates host storage, turning the engine's RangeError for a length it cannot allocate into the caller's ArgumentError. */
function allocHost<D extends DType>(fn: string, dtype: D, numel: number, shape: readonly number[]): HostArrayOf<D> {
  try {
    return allocHostArray(dtype, numel) as HostArrayOf<D>;
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    throw new ArgumentError(fn, "shape", `a host tensor this process can allocate (${e.message})`, `${formatShape(shape)} of ${dtype}`);
  }
}

/** Strides in elements: one non-negative integer per dimension (negative strides would reach before the storage). */
function checkStrides(fn: string, name: string, strides: readonly number[], shape: readonly number[]): void {
  if (!Array.isArray(strides) || strides.length !== shape.length || strides.some((s) => !Number.isSafeInteger(s) || s < 0)) {
    throw new ArgumentError(fn, name, `${shape.length} non-negative integers (one per dimension of ${formatShape(shape)})`, formatGot(strides));
  }
}
