import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { BYTES_ARG_ALIGNMENT, kernelArgSize, packKernelArgs, type KernelArg } from "../../../src/runtime/packKernelArgs.js";

test("packKernelArgs() aligns each argument to its natural alignment and bytes to 128", () => {
  const params = new Uint8Array(200).map((_, i) => (i * 7 + 3) & 0xff);
  const args: KernelArg[] = [
    { kind: "i32", value: -5 },
    { kind: "ptr", value: 0x7f12_3456_7800n },
    { kind: "f32", value: 0.125 },
    { kind: "u32", value: 0xffff_fffe },
    { kind: "u64", value: (1n << 64n) - 1n },
    { kind: "bytes", value: params },
    { kind: "i32", value: 7 },
  ];
  const packed = packKernelArgs(args);
  assert.deepEqual(packed.offsets, [0, 8, 16, 20, 24, 128, 328]);
  assert.deepEqual(packed.sizes, [4, 8, 4, 4, 8, 200, 4]);
  assert.equal(packed.storage.byteLength, 332);
  packed.offsets.forEach((off, i) => assert.equal(off % (args[i].kind === "bytes" ? BYTES_ARG_ALIGNMENT : packed.sizes[i]), 0, `args[${i}]`));

  const v = new DataView(packed.storage.buffer);
  assert.equal(v.getInt32(0, true), -5);
  assert.equal(v.getBigUint64(8, true), 0x7f12_3456_7800n);
  assert.equal(v.getFloat32(16, true), 0.125);
  assert.equal(v.getUint32(20, true), 0xffff_fffe);
  assert.equal(v.getBigUint64(24, true), (1n << 64n) - 1n);
  assert.deepEqual(packed.storage.subarray(128, 328), params);
  assert.equal(v.getInt32(328, true), 7);
  assert.deepEqual([...packed.storage.subarray(4, 8)], [0, 0, 0, 0], "padding is zero");
});

test("packKernelArgs() of no arguments is empty", () => {
  const packed = packKernelArgs([]);
  assert.equal(packed.storage.byteLength, 0);
  assert.deepEqual(packed.offsets, []);
});

test("packKernelArgs() stores f32 with float32 rounding", () => {
  const v = new DataView(packKernelArgs([{ kind: "f32", value: 0.1 }]).storage.buffer);
  assert.equal(v.getFloat32(0, true), Math.fround(0.1));
});

test("kernelArgSize() gives 8 for pointers and u64, 4 for 32-bit scalars, the length for bytes", () => {
  assert.equal(kernelArgSize({ kind: "ptr", value: 0n }), 8);
  assert.equal(kernelArgSize({ kind: "u64", value: 0n }), 8);
  assert.equal(kernelArgSize({ kind: "i32", value: 0 }), 4);
  assert.equal(kernelArgSize({ kind: "u32", value: 0 }), 4);
  assert.equal(kernelArgSize({ kind: "f32", value: 0 }), 4);
  assert.equal(kernelArgSize({ kind: "bytes", value: new Uint8Array(4160) }), 4160);
});

test("packKernelArgs() rejects out-of-range values, naming the argument", () => {
  const bad: [KernelArg, RegExp][] = [
    [{ kind: "i32", value: 2 ** 31 }, /argument 'args\[1\]': expected i32/],
    [{ kind: "i32", value: 1.5 }, /expected i32/],
    [{ kind: "u32", value: -1 }, /expected u32/],
    [{ kind: "u32", value: 2 ** 32 }, /expected u32/],
    [{ kind: "ptr", value: -1n }, /expected ptr: a bigint/],
    [{ kind: "ptr", value: 5 as unknown as bigint }, /expected ptr: a bigint/],
    [{ kind: "u64", value: 1n << 64n }, /expected u64/],
    [{ kind: "f32", value: "1" as unknown as number }, /expected f32/],
    [{ kind: "bytes", value: new Uint8Array(0) }, /expected bytes: a non-empty Uint8Array/],
    [{ kind: "bytes", value: [1, 2] as unknown as Uint8Array }, /expected bytes/],
    [{ kind: "f64", value: 1 } as unknown as KernelArg, /expected kind "ptr"/],
  ];
  for (const [arg, message] of bad) {
    assert.throws(() => packKernelArgs([{ kind: "i32", value: 0 }, arg], "Kernel(k).launch"), (e: unknown) => {
      assert.ok(e instanceof ArgumentError);
      assert.match(e.message, /^Kernel\(k\)\.launch\(\): /);
      assert.match(e.message, message);
      return true;
    });
  }
});
