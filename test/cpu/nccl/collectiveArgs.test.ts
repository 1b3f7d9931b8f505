import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import {
  checkAllGatherArgs,
  checkAllReduceArgs,
  checkPeerArgs,
  checkReduceScatterArgs,
  type CommFacts,
} from "../../../src/nccl/collectiveArgs.js";
import { decodeNcclVersion, ncclVersionCode } from "../../../src/nccl/decodeNcclVersion.js";
import { ncclDataTypeOf } from "../../../src/nccl/ncclDataType.js";
import { NcclDataType } from "../../../src/nccl/ncclEnums.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { DTYPES, dtypeSize, type DType } from "../../../src/runtime/dtype.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";

// The checks every NcclComm call makes before it touches NCCL, on fake GPU tensors: each wrong
// argument is an ArgumentError naming the call, the argument, what was expected and what was given.

const BASE = 1n << 32n;

/** Fake GPU memory at BASE: a DeviceBuffer-shaped object nothing reads through. */
function fakeBuffer(sizeBytes: number, deviceOrdinal: number): DeviceBuffer {
  return Object.defineProperties(Object.create(DeviceBuffer.prototype), {
    ptr: { value: BASE },
    sizeBytes: { value: sizeBytes },
    deviceOrdinal: { value: deviceOrdinal },
  }) as DeviceBuffer;
}

/** A dense "CUDA" tensor over fake memory, starting `byteOffset` bytes in. */
function cuda(shape: readonly number[], dtype: DType, device = 0, byteOffset = 0): Tensor {
  const bytes = shape.reduce((a, b) => a * b, 1) * dtypeSize(dtype);
  return Tensor.fromDeviceBuffer(fakeBuffer(byteOffset + Math.max(1, bytes), device), shape, dtype, { byteOffset });
}

/** A fake Stream on `deviceOrdinal` whose CUstream is `handle`. */
function fakeStream(deviceOrdinal: number, handle = 0xabcn): Stream {
  return Object.defineProperties(Object.create(Stream.prototype), { deviceOrdinal: { value: deviceOrdinal }, handle: { value: handle } }) as Stream;
}

const comm4: CommFacts = { size: 4, device: 1, version: decodeNcclVersion(22809) };
const any = <T>(v: unknown) => v as T;

/** Runs `fn` and checks it throws an ArgumentError whose message is exactly `message`. */
function rejects(fn: () => unknown, message: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ArgumentError, `expected an ArgumentError, got ${String(e)}`);
    assert.equal(e.message, message);
    return true;
  });
}

test("ncclDataTypeOf() maps each dtype to nccl.h's ncclDataType_t", () => {
  const reduce = Object.fromEntries(DTYPES.map((d) => [d, ncclDataTypeOf(d, "reduce")]));
  assert.deepEqual(reduce, { bf16: 9, fp16: 6, fp8_e4m3: 10, f32: 7, i32: 2, u8: 1 });
  const copy = Object.fromEntries(DTYPES.map((d) => [d, ncclDataTypeOf(d, "copy")]));
  // fp8 is only moved as bytes where it is not reduced: every NCCL version knows ncclUint8.
  assert.deepEqual(copy, { bf16: 9, fp16: 6, fp8_e4m3: 1, f32: 7, i32: 2, u8: 1 });
  assert.deepEqual(
    [NcclDataType.Int8, NcclDataType.Uint8, NcclDataType.Int32, NcclDataType.Float16, NcclDataType.Float32, NcclDataType.Float64, NcclDataType.Bfloat16],
    [0, 1, 2, 6, 7, 8, 9],
  );
});

test("decodeNcclVersion() reads both of nccl.h's encodings, and ncclVersionCode() writes them", () => {
  assert.deepEqual(decodeNcclVersion(22809), { code: 22809, major: 2, minor: 28, patch: 9 });
  assert.deepEqual(decodeNcclVersion(2804), { code: 2804, major: 2, minor: 8, patch: 4 });
  assert.equal(ncclVersionCode(2, 28, 9), 22809);
  assert.equal(ncclVersionCode(2, 8, 4), 2804);
  assert.equal(ncclVersionCode(2, 9, 6), 20906);
});

test("checkAllReduceArgs() gives NCCL the pointers, count, dtype, op and stream", () => {
  const x = cuda([2, 8], "bf16", 1);
  const out = cuda([16], "bf16", 1, 64);
  assert.deepEqual(checkAllReduceArgs("NcclComm.allReduce", comm4, x, out, { op: "max", stream: fakeStream(1) }), {
    send: BASE,
    recv: BASE + 64n,
    count: 16,
    dtype: 9,
    op: 2,
    stream: 0xabcn,
  });
  const inPlace = checkAllReduceArgs("NcclComm.allReduce", comm4, x, x, undefined);
  assert.equal(inPlace.recv, inPlace.send);
  assert.equal(inPlace.op, 0, "sum by default");
  assert.equal(inPlace.stream, 0n, "the legacy default stream by default");
  assert.equal(checkAllReduceArgs("NcclComm.allReduce", comm4, x, x, { stream: null }).stream, 0n, "null is the legacy default stream too");
  const ops = (["sum", "prod", "max", "min", "avg"] as const).map((op) => checkAllReduceArgs("f", comm4, x, x, { op }).op);
  assert.deepEqual(ops, [0, 1, 2, 3, 4]);
});

test("checkAllGatherArgs() wants size × send's elements in recv, and passes send's count", () => {
  const c = checkAllGatherArgs("NcclComm.allGather", comm4, cuda([3], "f32", 1), cuda([4, 3], "f32", 1), {});
  assert.equal(c.count, 3);
  assert.equal(c.dtype, 7);
  rejects(
    () => checkAllGatherArgs("NcclComm.allGather", comm4, cuda([3], "f32", 1), cuda([3, 3], "f32", 1), {}),
    "NcclComm.allGather(): argument 'recv': expected 12 elements (size 4 × send's 3), got 9 (shape [3, 3])",
  );
  assert.equal(checkAllGatherArgs("f", comm4, cuda([3], "fp8_e4m3", 1), cuda([12], "fp8_e4m3", 1), {}).dtype, 1, "fp8 gathered as bytes");
});

test("checkReduceScatterArgs() wants send in size equal parts and one part in recv, and passes recv's count", () => {
  const c = checkReduceScatterArgs("NcclComm.reduceScatter", comm4, cuda([8, 2], "fp16", 1), cuda([4], "fp16", 1), { op: "avg" });
  assert.deepEqual([c.count, c.dtype, c.op], [4, 6, 4]);
  rejects(
    () => checkReduceScatterArgs("NcclComm.reduceScatter", comm4, cuda([10], "fp16", 1), cuda([2], "fp16", 1), {}),
    "NcclComm.reduceScatter(): argument 'send': expected a multiple of 4 elements (one equal part per rank), got 10 (shape [10])",
  );
  rejects(
    () => checkReduceScatterArgs("NcclComm.reduceScatter", comm4, cuda([16], "fp16", 1), cuda([16], "fp16", 1), {}),
    "NcclComm.reduceScatter(): argument 'recv': expected 4 elements (send's 16 / size 4), got 16 (shape [16])",
  );
});

test("checkPeerArgs() passes the whole tensor to a rank of the communicator", () => {
  assert.deepEqual(checkPeerArgs("NcclComm.send", comm4, cuda([5], "i32", 1), 3, { stream: fakeStream(1, 7n) }), {
    buffer: BASE,
    count: 5,
    dtype: 2,
    peer: 3,
    stream: 7n,
  });
  for (const peer of [4, -1, 1.5, Number.NaN]) {
    rejects(() => checkPeerArgs("NcclComm.recv", comm4, cuda([5], "i32", 1), peer, {}), `NcclComm.recv(): argument 'peer': expected a rank in [0, 3], got ${peer}`);
  }
  rejects(() => checkPeerArgs("NcclComm.send", comm4, cuda([5], "i32", 1), any("1"), {}), "NcclComm.send(): argument 'peer': expected a rank in [0, 3], got string 1");
});

test("the collectives refuse tensors that are not dense CUDA tensors of the communicator's device", () => {
  const fn = "NcclComm.allReduce";
  const ok = cuda([4], "f32", 1);
  rejects(() => checkAllReduceArgs(fn, comm4, any(new Float32Array(4)), ok, {}), `${fn}(): argument 'send': expected a Tensor, got Float32Array`);
  rejects(() => checkAllReduceArgs(fn, comm4, ok, any(undefined), {}), `${fn}(): argument 'recv': expected a Tensor, got undefined`);
  rejects(
    () => checkAllReduceArgs(fn, comm4, Tensor.zerosHost([4], "f32"), ok, {}),
    `${fn}(): argument 'send': expected a tensor on cuda:1 (the communicator's device), got a tensor on cpu`,
  );
  rejects(
    () => checkAllReduceArgs(fn, comm4, ok, cuda([4], "f32", 0), {}),
    `${fn}(): argument 'recv': expected a tensor on cuda:1 (the communicator's device), got a tensor on cuda:0`,
  );
  const wide = cuda([4, 4], "f32", 1);
  const strided = wide.view([4, 2], [4, 1]);
  rejects(() => checkAllReduceArgs(fn, comm4, strided, strided, {}), `${fn}(): argument 'send': expected a contiguous tensor, got strides [4, 1] for shape [4, 2]`);
  rejects(() => checkAllReduceArgs(fn, comm4, ok, cuda([4], "bf16", 1), {}), `${fn}(): argument 'recv': expected dtype f32 (send's), got bf16`);
  rejects(() => checkAllReduceArgs(fn, comm4, ok, cuda([5], "f32", 1), {}), `${fn}(): argument 'recv': expected 4 elements (as many as send), got 5 (shape [5])`);
});

test("the collectives check their options: op, stream and the options object itself", () => {
  const fn = "NcclComm.reduceScatter";
  const [s, r] = [cuda([4], "f32", 1), cuda([1], "f32", 1)];
  rejects(() => checkReduceScatterArgs(fn, comm4, s, r, any({ op: "mean" })), `${fn}(): argument 'options.op': expected one of "sum", "prod", "max", "min", "avg", got "mean"`);
  rejects(() => checkReduceScatterArgs(fn, comm4, s, r, any({ op: 0 })), `${fn}(): argument 'options.op': expected one of "sum", "prod", "max", "min", "avg", got 0`);
  rejects(() => checkReduceScatterArgs(fn, comm4, s, r, any({ op: "toString" })), `${fn}(): argument 'options.op': expected one of "sum", "prod", "max", "min", "avg", got "toString"`);
  rejects(
    () => checkReduceScatterArgs(fn, comm4, s, r, { stream: fakeStream(0) }),
    `${fn}(): argument 'options.stream': expected a Stream on cuda:1 (the communicator's device), got a Stream on cuda:0`,
  );
  rejects(() => checkReduceScatterArgs(fn, comm4, s, r, any({ stream: 5n })), `${fn}(): argument 'options.stream': expected a Stream, null or undefined (the legacy default stream), got bigint 5`);
  rejects(() => checkReduceScatterArgs(fn, comm4, s, r, any(fakeStream(1))), `${fn}(): argument 'options': expected an options object or undefined, got Stream`);
});

test("the reductions refuse what the loaded NCCL cannot do: avg before 2.10, fp8 before 2.24", () => {
  const old: CommFacts = { size: 1, device: 0, version: decodeNcclVersion(20906) };
  const x = cuda([4], "f32");
  rejects(() => checkAllReduceArgs("NcclComm.allReduce", old, x, x, { op: "avg" }), `NcclComm.allReduce(): argument 'options.op': expected an op NCCL 2.9.6 has ("avg" needs NCCL 2.10 or newer), got "avg"`);
  const f8 = cuda([4], "fp8_e4m3");
  const v223: CommFacts = { size: 1, device: 0, version: decodeNcclVersion(22305) };
  rejects(() => checkAllReduceArgs("NcclComm.allReduce", v223, f8, f8, {}), "NcclComm.allReduce(): argument 'send': expected a dtype NCCL 2.23.5 reduces (fp8_e4m3 needs NCCL 2.24 or newer), got fp8_e4m3");
  assert.equal(checkAllReduceArgs("f", { ...v223, version: decodeNcclVersion(22400) }, f8, f8, {}).dtype, 10);
  assert.equal(checkAllGatherArgs("f", v223, f8, f8, {}).dtype, 1, "gathering fp8 bytes needs no new NCCL");
});
