import { test } from "node:test";
import assert from "node:assert/strict";
import * as root from "../../../src/index.js";
import { ArgumentError, Device, Event, Graph, Stream, Tensor } from "../../../src/index.js";
import { validateDenseArgs } from "../../../src/mla/dense/validateDense.js";
import { validateWriteKvCacheFp8Args } from "../../../src/mla/kvCache/writeKvCacheFp8.js";
import { validateWriteKvCacheModel1Args } from "../../../src/mla/kvCache/writeKvCacheModel1.js";
import { validateSparseArgs } from "../../../src/mla/sparse/validateSparse.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { dtypeSize, type DType } from "../../../src/runtime/dtype.js";
import { contiguousStrides } from "../../../src/runtime/Tensor.js";

// Every function and method the package root exposes, called with every kind of wrong value in each
// argument a user passes: the answer must be an ArgumentError that names the function and the argument,
// raised before the driver is touched, never a TypeError, RangeError or koffi error from inside. Values a
// position accepts are left out of its sweep, so no call here reaches a GPU, with or without one.

/** One of each kind of value a caller can pass by mistake. */
const JUNK: ReadonlyArray<[string, unknown]> = [
  ["undefined", undefined],
  ["null", null],
  ["0", 0],
  ["-1", -1],
  ["1.5", 1.5],
  ["NaN", NaN],
  ["Infinity", Infinity],
  ["a string", "x"],
  ["true", true],
  ["a bigint", 10n],
  ["a symbol", Symbol("s")],
  ["a function", () => 0],
  ["a plain object", {}],
  ["an array", []],
  ["an object without a prototype", Object.create(null)],
  ["a Float32Array", new Float32Array(4)],
  ["a Uint16Array", new Uint16Array(4)],
];

/** A position of a public call: `call(v)` passes `v` there, every other argument valid. */
interface Position {
  fn: string;
  /** The argument the error must name; undefined where an options object's junk may name the first field it reads. */
  argument: string | undefined;
  call: (v: unknown) => unknown;
  /** The junk this position accepts (left out of the sweep), by JUNK's labels. */
  accepts?: readonly string[];
}

const any = <T>(v: unknown) => v as T;

/** Fake GPU memory: enough for the checks that run before the driver; nothing reads through it. */
function fakeBuffer(sizeBytes: number): DeviceBuffer {
  return Object.defineProperties(Object.create(DeviceBuffer.prototype), {
    ptr: { value: 1n << 32n },
    sizeBytes: { value: sizeBytes },
    deviceOrdinal: { value: 0 },
  }) as DeviceBuffer;
}
const fakeStream = Object.defineProperties(Object.create(Stream.prototype), { deviceOrdinal: { value: 0 } }) as Stream;
const fakeEvent = Object.create(Event.prototype) as Event;
const fakeGraph = Object.create(Graph.prototype) as Graph;
const fakeDevice = Object.create(Device.prototype) as Device;

const host = <D extends DType>(shape: readonly number[], dtype: D) => Tensor.zerosHost(shape, dtype);
const cuda = (shape: readonly number[], dtype: DType) => Tensor.fromDeviceBuffer(fakeBuffer(Math.max(1, shape.reduce((a, b) => a * b, 1)) * dtypeSize(dtype)), shape, dtype, { strides: contiguousStrides(shape) });

function denseArgs(over: Record<string, unknown>): root.FlashMlaWithKvcacheArgs {
  return { q: host([2, 1, 8, 576], "bf16"), kCache: host([3, 64, 1, 576], "bf16"), blockTable: host([2, 2], "i32"), cacheSeqlens: host([2], "i32"), headDimV: 512, schedMeta: root.getMlaMetadata(), ...over } as root.FlashMlaWithKvcacheArgs;
}
function sparseArgs(over: Record<string, unknown>): root.FlashMlaWithKvcacheArgs {
  return { q: host([2, 1, 64, 576], "bf16"), kCache: host([3, 64, 1, 656], "u8"), indices: host([2, 1, 128], "i32"), isFp8Kvcache: true, headDimV: 512, schedMeta: root.getMlaMetadata(), ...over } as root.FlashMlaWithKvcacheArgs;
}
function referenceArgs(over: Record<string, unknown>): root.MlaDecodeReferenceArgs {
  return { q: host([1, 1, 2, 576], "bf16"), kCache: host([1, 64, 1, 576], "bf16"), blockTable: host([1, 1], "i32"), cacheSeqlens: host([1], "i32"), headDimV: 512, ...over } as root.MlaDecodeReferenceArgs;
}

/** Positions of the fields of an options object, swept through `call(field, v)`. */
function fields(fn: string, names: Record<string, readonly string[]>, call: (field: string, v: unknown) => unknown): Position[] {
  return Object.entries(names).map(([field, accepts]) => ({ fn, argument: field, call: (v) => call(field, v), accepts }));
}

const OPTIONAL = ["undefined"];
const OPTIONAL_OBJECT = ["undefined", "a plain object", "an object without a prototype"];

const POSITIONS: Position[] = [
  // flashMlaWithKvcache: the whole argument, then each field through the validators it runs first.
  { fn: "flashMlaWithKvcache", argument: undefined, call: (v) => root.flashMlaWithKvcache(any(v)) },
  ...fields("flashMlaWithKvcache", {
    q: [], kCache: [], blockTable: [], cacheSeqlens: [], headDimV: [], schedMeta: [], softmaxScale: [...OPTIONAL, "1.5"], causal: [...OPTIONAL, "true"],
    isFp8Kvcache: OPTIONAL, topkLength: OPTIONAL, attnSink: OPTIONAL, stream: OPTIONAL, out: OPTIONAL, lse: OPTIONAL,
  }, (field, v) => validateDenseArgs(denseArgs({ [field]: v }), false)),
  ...fields("flashMlaWithKvcache", {
    q: [], kCache: [], indices: [], headDimV: [], schedMeta: [], softmaxScale: [...OPTIONAL, "1.5"], isFp8Kvcache: ["true"], topkLength: OPTIONAL, attnSink: OPTIONAL,
    out: OPTIONAL, lse: OPTIONAL, blockTable: OPTIONAL, causal: OPTIONAL, stream: OPTIONAL,
  }, (field, v) => validateSparseArgs(sparseArgs({ [field]: v }), false)),
  { fn: "MlaSchedMeta.checkErrors", argument: "stream", call: (v) => root.getMlaMetadata().checkErrors(any(v)), accepts: OPTIONAL },

  // mlaDecodeReference
  { fn: "mlaDecodeReference", argument: undefined, call: (v) => root.mlaDecodeReference(any(v)) },
  { fn: "mlaDecodeReference", argument: "opts", call: (v) => root.mlaDecodeReference(referenceArgs({}), any(v)), accepts: OPTIONAL_OBJECT },
  { fn: "mlaDecodeReference", argument: "opts.rows", call: (v) => root.mlaDecodeReference(referenceArgs({}), { rows: any(v) }), accepts: [...OPTIONAL, "an array"] },
  ...fields("mlaDecodeReference", {
    q: [], kCache: [], blockTable: [], cacheSeqlens: [], headDimV: [], softmaxScale: [...OPTIONAL, "1.5"], causal: [...OPTIONAL, "true"], isFp8Kvcache: OPTIONAL, topkLength: OPTIONAL, attnSink: OPTIONAL,
  }, (field, v) => root.mlaDecodeReference(referenceArgs({ [field]: v }))),

  // The FP8 cache writers and the CPU helpers.
  { fn: "quantizeKvCacheFp8", argument: "kv", call: (v) => root.quantizeKvCacheFp8(any(v)) },
  { fn: "quantizeKvCacheFp8", argument: "stream", call: (v) => root.quantizeKvCacheFp8(host([1, 576], "bf16"), any(v)), accepts: OPTIONAL },
  { fn: "writeKvCacheFp8", argument: undefined, call: (v) => root.writeKvCacheFp8(any(v)) },
  ...fields("writeKvCacheFp8", { kv: [], slotMapping: [], kCache: [], stream: OPTIONAL }, (field, v) =>
    validateWriteKvCacheFp8Args(any({ kv: host([2, 576], "bf16"), slotMapping: host([2], "i32"), kCache: host([1, 4, 1, 656], "u8"), [field]: v }), false),
  ),
  { fn: "quantizeKvCacheV32", argument: "kv", call: (v) => root.quantizeKvCacheV32(any(v)) },
  { fn: "dequantizeKvCacheV32", argument: "bytes", call: (v) => root.dequantizeKvCacheV32(any(v)) },
  { fn: "writeKvCacheModel1", argument: undefined, call: (v) => root.writeKvCacheModel1(any(v)) },
  ...fields("writeKvCacheModel1", { kv: [], slotMapping: [], cache: [], pageBlockSize: OPTIONAL, stream: OPTIONAL }, (field, v) =>
    validateWriteKvCacheModel1Args(any({ kv: host([2, 512], "bf16"), slotMapping: host([2], "i32"), cache: host([1, 4, 1, 584], "u8"), [field]: v }), false),
  ),
  { fn: "quantizeKvCacheModel1", argument: "tokens", call: (v) => root.quantizeKvCacheModel1(any(v), { pageBlockSize: 4, numBlocks: 1 }) },
  { fn: "quantizeKvCacheModel1", argument: "opts", call: (v) => root.quantizeKvCacheModel1(new Uint16Array(512), any(v)), accepts: ["a plain object", "an object without a prototype"] },
  ...fields("quantizeKvCacheModel1", { pageBlockSize: [], numBlocks: ["0"], slotMapping: OPTIONAL, fill: [...OPTIONAL, "0"] }, (field, v) =>
    root.quantizeKvCacheModel1(new Uint16Array(512), any({ pageBlockSize: 4, numBlocks: 1, [field]: v })),
  ).map((p) => ({ ...p, argument: `opts.${p.argument}` })),
  { fn: "dequantizeKvCacheModel1", argument: "cache", call: (v) => root.dequantizeKvCacheModel1(any(v), { pageBlockSize: 4, numBlocks: 1 }) },
  { fn: "model1PageBytes", argument: "pageBlockSize", call: (v) => root.model1PageBytes(any(v)) },
  { fn: "bf16ArrayToF32", argument: "src", call: (v) => root.bf16ArrayToF32(any(v)), accepts: ["a Uint16Array"] },
  { fn: "fp16ArrayToF32", argument: "src", call: (v) => root.fp16ArrayToF32(any(v)), accepts: ["a Uint16Array"] },
  { fn: "f32ArrayToBf16", argument: "src", call: (v) => root.f32ArrayToBf16(any(v)), accepts: ["an array", "a Float32Array"] },
  { fn: "f32ArrayToFp16", argument: "src", call: (v) => root.f32ArrayToFp16(any(v)), accepts: ["an array", "a Float32Array"] },

  // gpuStatus, Device, Stream, Event, Graph: ordinals, streams, events and options.
  { fn: "gpuStatus", argument: "deviceOrdinal", call: (v) => root.gpuStatus(any(v)), accepts: [...OPTIONAL, "0"] },
  { fn: "gpuStatus", argument: "options", call: (v) => root.gpuStatus(0, any(v)), accepts: OPTIONAL_OBJECT },
  { fn: "gpuStatus", argument: "options.kernelDir", call: (v) => root.gpuStatus(0, { kernelDir: any(v) }), accepts: [...OPTIONAL, "a string"] },
  { fn: "Device.get", argument: "ordinal", call: (v) => Device.get(any(v)), accepts: [...OPTIONAL, "0"] },
  { fn: "Device.attribute", argument: "attribute", call: (v) => fakeDevice.attribute(any(v)), accepts: ["0"] },
  { fn: "Stream.create", argument: "deviceOrdinal", call: (v) => Stream.create(any(v)), accepts: [...OPTIONAL, "0"] },
  { fn: "Stream.waitEvent", argument: "event", call: (v) => fakeStream.waitEvent(any(v)) },
  { fn: "Event.create", argument: "options", call: (v) => Event.create(any(v)), accepts: OPTIONAL_OBJECT },
  { fn: "Event.create", argument: "options.deviceOrdinal", call: (v) => Event.create({ deviceOrdinal: any(v) }), accepts: [...OPTIONAL, "0"] },
  { fn: "Event.create", argument: "options.timing", call: (v) => Event.create({ timing: any(v) }), accepts: [...OPTIONAL, "true"] },
  { fn: "Event.create", argument: "options.blockingSync", call: (v) => Event.create({ blockingSync: any(v) }), accepts: [...OPTIONAL, "true"] },
  { fn: "Event.elapsedMs", argument: "start", call: (v) => Event.elapsedMs(any(v), fakeEvent) },
  { fn: "Event.elapsedMs", argument: "end", call: (v) => Event.elapsedMs(fakeEvent, any(v)) },
  { fn: "Event.record", argument: "stream", call: (v) => fakeEvent.record(any(v)), accepts: OPTIONAL },
  { fn: "Graph.capture", argument: "stream", call: (v) => Graph.capture(any(v), () => {}) },
  { fn: "Graph.capture", argument: "fn", call: (v) => Graph.capture(fakeStream, any(v)), accepts: ["a function"] },
  { fn: "Graph.launch", argument: "stream", call: (v) => fakeGraph.launch(any(v)) },

  // Tensor's statics and methods.
  { fn: "Tensor.fromHost", argument: "data", call: (v) => Tensor.fromHost(any<Float32Array>(v), [4], "f32"), accepts: ["a Float32Array"] },
  { fn: "Tensor.fromHost", argument: "shape", call: (v) => Tensor.fromHost(new Float32Array(4), any(v), "f32"), accepts: ["an array"] },
  { fn: "Tensor.fromHost", argument: "dtype", call: (v) => Tensor.fromHost(new Float32Array(4), [4], any<DType>(v)) },
  { fn: "Tensor.fromFloat32", argument: "values", call: (v) => Tensor.fromFloat32(any(v), [4], "bf16"), accepts: ["a Float32Array"] },
  { fn: "Tensor.fromFloat32", argument: "shape", call: (v) => Tensor.fromFloat32([1, 2, 3, 4], any(v), "bf16"), accepts: ["an array"] },
  { fn: "Tensor.fromFloat32", argument: "dtype", call: (v) => Tensor.fromFloat32([1, 2, 3, 4], [4], any<"bf16">(v)) },
  { fn: "Tensor.zerosHost", argument: "shape", call: (v) => Tensor.zerosHost(any(v), "f32"), accepts: ["an array"] },
  { fn: "Tensor.zerosHost", argument: "dtype", call: (v) => Tensor.zerosHost([4], any<DType>(v)) },
  { fn: "Tensor.emptyDevice", argument: "shape", call: (v) => Tensor.emptyDevice(any(v), "f32"), accepts: ["an array"] },
  { fn: "Tensor.emptyDevice", argument: "dtype", call: (v) => Tensor.emptyDevice([4], any<DType>(v)) },
  { fn: "Tensor.emptyDevice", argument: "deviceOrdinal", call: (v) => Tensor.emptyDevice([4], "f32", any(v)), accepts: [...OPTIONAL, "0"] },
  { fn: "Tensor.fromDeviceBuffer", argument: "buffer", call: (v) => Tensor.fromDeviceBuffer(any(v), [4], "f32") },
  { fn: "Tensor.fromDeviceBuffer", argument: "shape", call: (v) => Tensor.fromDeviceBuffer(fakeBuffer(64), any(v), "f32"), accepts: ["an array"] },
  { fn: "Tensor.fromDeviceBuffer", argument: "dtype", call: (v) => Tensor.fromDeviceBuffer(fakeBuffer(64), [4], any<DType>(v)) },
  { fn: "Tensor.fromDeviceBuffer", argument: "opts", call: (v) => Tensor.fromDeviceBuffer(fakeBuffer(64), [4], "f32", any(v)), accepts: OPTIONAL_OBJECT },
  { fn: "Tensor.fromDeviceBuffer", argument: "opts.strides", call: (v) => Tensor.fromDeviceBuffer(fakeBuffer(64), [4], "f32", { strides: any(v) }), accepts: OPTIONAL },
  { fn: "Tensor.fromDeviceBuffer", argument: "opts.byteOffset", call: (v) => Tensor.fromDeviceBuffer(fakeBuffer(64), [4], "f32", { byteOffset: any(v) }), accepts: [...OPTIONAL, "0"] },
  { fn: "Tensor.toDevice", argument: "src", call: (v) => Tensor.toDevice(any<Tensor>(v)) },
  { fn: "Tensor.toDevice", argument: "deviceOrdinal", call: (v) => Tensor.toDevice(host([4], "f32"), any(v)), accepts: [...OPTIONAL, "0"] },
  { fn: "Tensor.toDevice", argument: "stream", call: (v) => Tensor.toDevice(host([4], "f32"), 0, any(v)), accepts: OPTIONAL },
  { fn: "Tensor.reshape", argument: "shape", call: (v) => host([4], "f32").reshape(any(v)) },
  { fn: "Tensor.view", argument: "shape", call: (v) => host([4], "f32").view(any(v)), accepts: ["an array"] },
  { fn: "Tensor.view", argument: "strides", call: (v) => host([4], "f32").view([4], any(v)), accepts: OPTIONAL },
  { fn: "Tensor.view", argument: "dtype", call: (v) => host([4], "f32").view([4], [1], any(v)), accepts: OPTIONAL },
  { fn: "Tensor.toHost", argument: "stream", call: (v) => cuda([4], "f32").toHost(any(v)), accepts: OPTIONAL },
  { fn: "Tensor.toFloat32", argument: "stream", call: (v) => cuda([4], "f32").toFloat32(any(v)), accepts: OPTIONAL },
];

test("every public call names a wrong value in each argument with an ArgumentError, before the driver", () => {
  const failures: string[] = [];
  let checked = 0;
  for (const p of POSITIONS) {
    for (const [label, value] of JUNK) {
      if (p.accepts?.includes(label)) continue;
      const where = `${p.fn}(${p.argument ?? "args"} = ${label})`;
      try {
        p.call(value);
        failures.push(`${where}: returned`);
      } catch (e) {
        checked++;
        if (!(e instanceof ArgumentError)) failures.push(`${where}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
        else if (e.fn !== p.fn || (p.argument !== undefined && e.argument !== p.argument)) failures.push(`${where}: named ${e.fn}(${e.argument})`);
      }
    }
  }
  assert.deepEqual(failures, []);
  assert.ok(checked > 1500, `${checked} calls checked`);
});

test("the sweep covers every function the package root exports", () => {
  const swept = new Set(POSITIONS.map((p) => p.fn.split(".")[0]));
  const exported = Object.entries(root).filter(([, v]) => typeof v === "function").map(([name]) => name);
  // Error classes are what the sweep asserts on; getMlaMetadata accepts and ignores FlashMLA's old positional arguments.
  const exempt = new Set(["ArgumentError", "CudaError", "NoGpuError", "getMlaMetadata"]);
  assert.deepEqual(exported.filter((name) => !exempt.has(name) && !swept.has(name)), []);
});
