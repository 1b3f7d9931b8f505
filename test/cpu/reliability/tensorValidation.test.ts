import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import type { DType } from "../../../src/runtime/dtype.js";
import { Tensor } from "../../../src/runtime/Tensor.js";

/**
 * A DeviceBuffer-shaped object: enough for Tensor's bookkeeping, which never touches the driver. It
 * must never be disposed or copied (its private state does not exist).
 */
function fakeBuffer(sizeBytes: number, deviceOrdinal = 0): DeviceBuffer {
  return Object.defineProperties(Object.create(DeviceBuffer.prototype), {
    ptr: { value: 1n << 32n },
    sizeBytes: { value: sizeBytes },
    deviceOrdinal: { value: deviceOrdinal },
  }) as DeviceBuffer;
}

/** Asserts `fn` throws an ArgumentError with exactly `message`. */
function rejects(fn: () => unknown, message: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ArgumentError, `expected an ArgumentError, got ${String(e)}`);
    assert.equal(e.message, message);
    return true;
  });
}

const any = <T>(v: unknown) => v as T;

test("Tensor.fromHost() names data, shape and dtype errors with the expected and given value", () => {
  // [what, call, message]: the first column documents the case.
  const cases: Array<[string, () => unknown, string]> = [
    ["null data", () => Tensor.fromHost(any<Uint16Array>(null), [1], "bf16"), "Tensor.fromHost(): argument 'data': expected the host array type of bf16, got null"],
    ["a plain array", () => Tensor.fromHost(any<Float32Array>([1, 2]), [2], "f32"), "Tensor.fromHost(): argument 'data': expected the host array type of f32, got Array"],
    ["wrong array type", () => Tensor.fromHost(any<Uint16Array>(new Float32Array(2)), [2], "bf16"), "Tensor.fromHost(): argument 'data': expected the host array type of bf16, got Float32Array"],
    ["fp8 in a Uint16Array", () => Tensor.fromHost(any<Uint8Array>(new Uint16Array(2)), [2], "fp8_e4m3"), "Tensor.fromHost(): argument 'data': expected the host array type of fp8_e4m3, got Uint16Array"],
    ["too few elements", () => Tensor.fromHost(new Int32Array(5), [2, 3], "i32"), "Tensor.fromHost(): argument 'data': expected 6 elements for shape [2, 3], got 5"],
    ["negative dim", () => Tensor.fromHost(new Int32Array(0), [2, -1], "i32"), "Tensor.fromHost(): argument 'shape': expected an array of non-negative integers, got [2,-1]"],
    ["fractional dim", () => Tensor.fromHost(new Int32Array(3), [1.5, 2], "i32"), "Tensor.fromHost(): argument 'shape': expected an array of non-negative integers, got [1.5,2]"],
    ["shape not an array", () => Tensor.fromHost(new Int32Array(3), any<number[]>(3), "i32"), "Tensor.fromHost(): argument 'shape': expected an array of non-negative integers, got 3"],
    ["unknown dtype", () => Tensor.fromHost(new Float32Array(2), [2], any<DType>("f64")), "Tensor.fromHost(): argument 'dtype': expected one of bf16, fp16, fp8_e4m3, f32, i32, u8, got \"f64\""],
  ];
  for (const [, fn, message] of cases) rejects(fn, message);
});

test("Tensor.zerosHost() and Tensor.emptyDevice() reject bad shapes and dtypes before allocating", () => {
  rejects(() => Tensor.zerosHost([3, -2], "bf16"), "Tensor.zerosHost(): argument 'shape': expected an array of non-negative integers, got [3,-2]");
  rejects(() => Tensor.zerosHost([3], any<DType>("int8")), "Tensor.zerosHost(): argument 'dtype': expected one of bf16, fp16, fp8_e4m3, f32, i32, u8, got \"int8\"");
  // Both checks come before cuMemAlloc, so they hold without a driver.
  rejects(() => Tensor.emptyDevice([NaN], "f32"), "Tensor.emptyDevice(): argument 'shape': expected an array of non-negative integers, got [NaN]");
  rejects(() => Tensor.emptyDevice([4], any<DType>("bool")), "Tensor.emptyDevice(): argument 'dtype': expected one of bf16, fp16, fp8_e4m3, f32, i32, u8, got \"bool\"");
});

test("Tensor.fromDeviceBuffer() keeps every view inside its buffer", () => {
  const buf = fakeBuffer(1024);
  const fn = "Tensor.fromDeviceBuffer(): argument";
  rejects(() => Tensor.fromDeviceBuffer(any<DeviceBuffer>({ ptr: 0n }), [4], "f32"), `${fn} 'buffer': expected a DeviceBuffer, got object`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [257], "f32"), `${fn} 'shape': expected a view within 1024 bytes, got 1028 bytes`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [16, 16], "f32", { strides: [16] }), `${fn} 'opts.strides': expected 2 non-negative integers (one per dimension of [16, 16]), got [16]`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [4, 4], "f32", { strides: [-4, 1], byteOffset: 512 }), `${fn} 'opts.strides': expected 2 non-negative integers (one per dimension of [4, 4]), got [-4,1]`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [4], "f32", { strides: [0.5] }), `${fn} 'opts.strides': expected 1 non-negative integers (one per dimension of [4]), got [0.5]`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [4], "f32", { byteOffset: -16 }), `${fn} 'opts.byteOffset': expected a non-negative multiple of 4, got -16`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [4], "f32", { byteOffset: 6 }), `${fn} 'opts.byteOffset': expected a non-negative multiple of 4, got 6`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [4], "bf16", { byteOffset: 1018 }), `${fn} 'shape': expected a view within 1024 bytes, got 1026 bytes`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [2, 2], "f32", { strides: [255, 1] }), `${fn} 'shape': expected a view within 1024 bytes, got 1028 bytes`);
  rejects(() => Tensor.fromDeviceBuffer(buf, [4], any<DType>("f16")), `${fn} 'dtype': expected one of bf16, fp16, fp8_e4m3, f32, i32, u8, got "f16"`);
  // The largest views that fit are accepted, an empty view anywhere.
  assert.equal(Tensor.fromDeviceBuffer(buf, [256], "f32").numel, 256);
  assert.equal(Tensor.fromDeviceBuffer(buf, [2, 2], "f32", { strides: [254, 1] }).maxElementIndex(), 255);
  assert.equal(Tensor.fromDeviceBuffer(buf, [0, 9], "f32", { byteOffset: 1024 }).numel, 0);
});

test("Tensor.reshape() rejects other element counts, negative dims and non-contiguous tensors", () => {
  const t = Tensor.zerosHost([2, 2], "f32");
  rejects(() => t.reshape([5]), "Tensor.reshape(): argument 'shape': expected 4 elements, got [5] (5)");
  // (-1)·(-4) = 4 elements: only the shape check catches it.
  rejects(() => t.reshape([-1, -4]), "Tensor.reshape(): argument 'shape': expected an array of non-negative integers, got [-1,-4]");
  rejects(() => t.view([2, 2], [1, 2]).reshape([4]), "Tensor.reshape(): argument 'tensor': expected a contiguous tensor, got strides [1, 2]");
  assert.deepEqual(t.reshape([4, 1]).shape, [4, 1]);
});

test("Tensor.view() checks element size, strides and, on the GPU, the buffer's extent", () => {
  const host = Tensor.zerosHost([8], "bf16");
  rejects(() => host.view([2], [1], "f32"), "Tensor.view(): argument 'dtype': expected 2-byte type, got f32");
  rejects(() => host.view([2, 2], [2]), "Tensor.view(): argument 'strides': expected 2 non-negative integers (one per dimension of [2, 2]), got [2]");
  rejects(() => host.view([2], [-1]), "Tensor.view(): argument 'strides': expected 1 non-negative integers (one per dimension of [2]), got [-1]");
  rejects(() => host.view([-2], [1]), "Tensor.view(): argument 'shape': expected an array of non-negative integers, got [-2]");
  rejects(() => host.view([2], [1], any<DType>("x")), "Tensor.view(): argument 'dtype': expected one of bf16, fp16, fp8_e4m3, f32, i32, u8, got \"x\"");
  assert.equal(host.view([2], [1], "fp16").dtype, "fp16");

  // A device view past its buffer would let a kernel read or write outside the allocation.
  const dev = Tensor.fromDeviceBuffer(fakeBuffer(64), [32], "bf16");
  rejects(() => dev.view([33]), "Tensor.view(): argument 'shape': expected a view within the 64-byte buffer, got [33] with strides [1] ending at byte 66");
  rejects(() => dev.view([2, 16], [17, 1]), "Tensor.view(): argument 'shape': expected a view within the 64-byte buffer, got [2, 16] with strides [17, 1] ending at byte 66");
  const offset = Tensor.fromDeviceBuffer(fakeBuffer(64), [16], "bf16", { byteOffset: 32 });
  rejects(() => offset.view([17]), "Tensor.view(): argument 'shape': expected a view within the 64-byte buffer, got [17] with strides [1] ending at byte 66");
  assert.deepEqual(dev.view([4, 8]).shape, [4, 8]);
  assert.deepEqual(offset.view([16], [1], "fp16").strides, [1]);
});

test("Tensor.ptr and Tensor.toHost() refuse what they cannot do without touching the driver", () => {
  rejects(() => Tensor.zerosHost([1], "f32").ptr, "Tensor.ptr(): argument 'tensor': expected a CUDA tensor, got a cpu tensor");
  const strided = Tensor.fromDeviceBuffer(fakeBuffer(64), [4], "f32", { strides: [2] });
  rejects(() => strided.toHost(), "Tensor.toHost(): argument 'tensor': expected a contiguous CUDA tensor, got strides [2]");
  rejects(() => strided.contiguousHost(), "Tensor.contiguousHost(): argument 'tensor': expected a cpu tensor, got cuda:0");
});
