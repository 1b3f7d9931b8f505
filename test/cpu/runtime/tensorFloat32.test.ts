import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { mlaDecodeReference } from "../../../src/mla/reference/mlaDecodeReference.js";
import { bf16BitsToF32 } from "../../../src/numeric/bf16.js";
import { fp16BitsToF32 } from "../../../src/numeric/fp16.js";
import { fp8E4m3ToF32 } from "../../../src/numeric/fp8e4m3.js";
import { Rng } from "../../../src/numeric/random.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import type { DType } from "../../../src/runtime/dtype.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { makeDenseCase } from "../../../src/testing/denseCase.js";
import { BF16, FP16, nearestEven } from "../numeric/nearestEven.js";

// Tensor.fromFloat32 and tensor.toFloat32(): numbers in, numbers out, with the rounding the converters
// use (checked against the plain nearest-even oracle) and exact decoding; the device path reads through
// a DeviceBuffer-shaped object whose copy writes known bytes, so it runs without a GPU.

const any = <T>(v: unknown) => v as T;

/** Values that exercise rounding: random normals over many scales, ties, subnormals, overflow, specials. */
function awkwardValues(): number[] {
  const rng = new Rng(77);
  const values = Array.from({ length: 2000 }, () => rng.normal() * 2 ** rng.int(-30, 30));
  values.push(1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 2 ** -133, 2 ** -24, 65520, 70000, 3.4e38, -0, 0, Infinity, -Infinity, NaN);
  return values;
}

test("Tensor.fromFloat32() rounds to bf16 and fp16 nearest even, keeps f32, from Float32Array, Float64Array or number[]", () => {
  const values = awkwardValues();
  const f32 = Float32Array.from(values);
  for (const [dtype, format, decode] of [["bf16", BF16, bf16BitsToF32], ["fp16", FP16, fp16BitsToF32]] as const) {
    for (const source of [f32, Float64Array.from(f32), Array.from(f32)]) {
      const t = Tensor.fromFloat32(source, [values.length], dtype);
      assert.equal(t.dtype, dtype);
      const bits: Uint16Array = t.hostData();
      for (let i = 0; i < values.length; i++) {
        const want = nearestEven(f32[i], format);
        assert.ok(Object.is(decode(bits[i]), want) || (Number.isNaN(want) && Number.isNaN(decode(bits[i]))), `${dtype} ${f32[i]}: got ${decode(bits[i])}, want ${want}`);
      }
      // Decoding is exact, so reading back gives the rounded values.
      assert.deepEqual(Array.from(t.toFloat32()), Array.from(bits, decode));
    }
  }
  const exact = Tensor.fromFloat32([1.5, -2, 3.25, 1e-3], [2, 2], "f32");
  assert.deepEqual(Array.from(exact.hostData()), [1.5, -2, 3.25, Math.fround(1e-3)]);
  assert.deepEqual(exact.shape, [2, 2]);
  assert.equal(Tensor.fromFloat32([], [0, 576], "bf16").numel, 0);
});

test("Tensor.fromFloat32() names its bad arguments", () => {
  const fn = "Tensor.fromFloat32";
  const cases: Array<[string, () => unknown, string, string]> = [
    ["a Uint16Array of bits", () => Tensor.fromFloat32(any(new Uint16Array(2)), [2], "bf16"), "values", "Uint16Array"],
    ["null", () => Tensor.fromFloat32(any(null), [2], "bf16"), "values", "null"],
    ["a string in the array", () => Tensor.fromFloat32(any([1, "2"]), [2], "bf16"), "values", "string 2 at index 1"],
    ["too few values", () => Tensor.fromFloat32([1, 2, 3], [2, 2], "fp16"), "values", "3"],
    ["an integer dtype", () => Tensor.fromFloat32([1], [1], any<"f32">("i32")), "dtype", "string i32"],
    ["a negative dim", () => Tensor.fromFloat32([1], [-1], "f32"), "shape", "[-1]"],
    ["an overflowing shape", () => Tensor.fromFloat32([1], [2 ** 27, 2 ** 27], "f32"), "shape", "[134217728, 134217728] (18014398509481984 elements)"],
  ];
  for (const [what, call, argument, got] of cases) {
    assert.throws(call, (e: unknown) => e instanceof ArgumentError && e.fn === fn && e.argument === argument && e.got === got, what);
  }
});

test("tensor.toFloat32() decodes every dtype in row-major order, strided views and copies included", () => {
  const codes = Uint8Array.from({ length: 256 }, (_, i) => i);
  const fp8 = Tensor.fromHost(codes, [16, 16], "fp8_e4m3").toFloat32();
  for (let c = 0; c < 256; c++) assert.ok(Object.is(fp8[c], fp8E4m3ToF32(c)) || (Number.isNaN(fp8[c]) && c % 128 === 127), `e4m3 code ${c}`);
  // u8 reads as byte values; viewed as fp8_e4m3 the same bytes decode.
  assert.deepEqual(Array.from(Tensor.fromHost(Uint8Array.of(0, 56, 255), [3], "u8").toFloat32()), [0, 56, 255]);
  assert.deepEqual(Array.from(Tensor.fromHost(Uint8Array.of(0, 56, 0x7e), [3], "u8").view([3], [1], "fp8_e4m3").toFloat32()), [0, 1, 448]);
  assert.deepEqual(Array.from(Tensor.fromHost(Int32Array.of(-3, 7, 2 ** 24 + 1), [3], "i32").toFloat32()), [-3, 7, 2 ** 24]);
  assert.deepEqual(Array.from(Tensor.fromHost(Uint16Array.of(0x3c00, 0xc000), [2], "fp16").toFloat32()), [1, -2]);

  // A transposed view reads in its own row-major order, and the result never aliases the storage.
  const f32 = Tensor.fromHost(Float32Array.of(1, 2, 3, 4, 5, 6), [2, 3], "f32");
  assert.deepEqual(Array.from(f32.view([3, 2], [1, 3]).toFloat32()), [1, 4, 2, 5, 3, 6]);
  const copy = f32.toFloat32();
  copy[0] = 99;
  assert.equal(f32.hostData()[0], 1);
  const bf16 = Tensor.fromFloat32([0.5, 1.5, 2.5, 3.5], [2, 2], "bf16");
  assert.deepEqual(Array.from(bf16.view([2], [2]).toFloat32()), [0.5, 2.5]);
});

/** A CUDA tensor over a DeviceBuffer-shaped object whose copyToHost writes `bytes` (no driver involved). */
function fakeDeviceTensor(bytes: Uint8Array, shape: readonly number[], dtype: DType): Tensor {
  const buffer = Object.defineProperties(Object.create(DeviceBuffer.prototype), {
    ptr: { value: 1n << 32n },
    sizeBytes: { value: bytes.byteLength },
    deviceOrdinal: { value: 0 },
    copyToHost: {
      value: (dst: ArrayBufferView, srcOffsetBytes: number) => new Uint8Array(dst.buffer, dst.byteOffset, dst.byteLength).set(bytes.subarray(srcOffsetBytes, srcOffsetBytes + dst.byteLength)),
    },
  }) as DeviceBuffer;
  return Tensor.fromDeviceBuffer(buffer, shape, dtype);
}

test("tensor.toFloat32() on a CUDA tensor copies it to the host after the stream, then decodes", () => {
  const host = Tensor.fromFloat32([1, -2, 0.25, 3], [4], "bf16");
  const dev = fakeDeviceTensor(new Uint8Array(host.hostData().buffer), [2, 2], "bf16");
  assert.deepEqual(Array.from(dev.toFloat32()), [1, -2, 0.25, 3]);
  let synchronized = 0;
  const stream = Object.defineProperties(Object.create(Stream.prototype), { deviceOrdinal: { value: 0 }, synchronize: { value: () => void synchronized++ } }) as Stream;
  assert.deepEqual(Array.from(dev.toFloat32(stream)), [1, -2, 0.25, 3]);
  assert.equal(synchronized, 1, "the copy waits for the caller's stream");
  assert.throws(() => dev.toFloat32(any({})), (e: unknown) => e instanceof ArgumentError && e.fn === "Tensor.toFloat32" && e.argument === "stream");
  assert.throws(() => dev.hostData(), (e: unknown) => e instanceof ArgumentError && e.fn === "Tensor.hostData" && e.got === "cuda:0");
});

test("hostData() is typed by dtype where the dtype is known: no casts for the reference's results", () => {
  const c = makeDenseCase({ seed: 9, b: 1, s_q: 1, h_q: 2, h_kv: 1, seqlens: [5], causal: false, dtype: "bf16" });
  const r = mlaDecodeReference(c);
  // These assignments are the test: they compile only while hostData() is typed.
  const out: Uint16Array = r.out.hostData();
  const lse: Float32Array = r.lse.hostData();
  const table: Int32Array = Tensor.zerosHost([2, 3], "i32").hostData();
  const bytes: Uint8Array = Tensor.zerosHost([4], "u8").hostData();
  assert.equal(out.length, 2 * 512);
  assert.equal(lse.length, 2);
  assert.equal(table.length + bytes.length, 10);
  assert.deepEqual(Array.from(r.out.toFloat32()), Array.from(out, bf16BitsToF32));
});
