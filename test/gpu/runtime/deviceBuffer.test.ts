import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { describeGpu } from "../../helpers/gpu.js";

/** Deterministic bytes (a fixed LCG), different for each seed. */
function pattern(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

describeGpu(
  "DeviceBuffer on the GPU",
  () => {
    test("copyFromHost/copyToHost round-trip bytes exactly (sync), including odd sizes and offsets", () => {
      for (const n of [1, 3, 4096, (1 << 20) + 3]) {
        using buf = DeviceBuffer.alloc(n + 5);
        const src = pattern(n, n);
        buf.copyFromHost(src, 5);
        const back = new Uint8Array(n);
        buf.copyToHost(back, 5);
        assert.deepEqual(back, src, `n = ${n}`);
      }
    });

    test("typed arrays and subarray views copy their own bytes", () => {
      using buf = DeviceBuffer.alloc(64);
      const f = new Float32Array([1.5, -2, Math.PI, Number.NaN, Infinity, 0, -0, 1e-40]);
      buf.copyFromHost(f);
      const g = new Float32Array(8);
      buf.copyToHost(g);
      assert.deepEqual(new Uint8Array(g.buffer), new Uint8Array(f.buffer));
      const big = new Uint16Array(100).map((_, i) => i * 3);
      buf.copyFromHost(big.subarray(10, 20), 8);
      const back = new Uint16Array(10);
      buf.copyToHost(back, 8);
      assert.deepEqual(back, big.subarray(10, 20));
    });

    test("async copies on a stream round-trip, and copyFromDevice copies between buffers", () => {
      using stream = Stream.create();
      const n = 3 << 20;
      const src = pattern(n, 7);
      using a = DeviceBuffer.alloc(n);
      using b = DeviceBuffer.alloc(n + 16);
      a.copyFromHost(src, 0, stream);
      b.copyFromDevice(a, { dstOffsetBytes: 16, stream });
      const back = new Uint8Array(n);
      b.copyToHost(back, 16, stream);
      assert.deepEqual(back, src);
      assert.equal(stream.query(), true);

      b.copyFromDevice(a, { srcOffsetBytes: 100, byteCount: 50 });
      const part = new Uint8Array(50);
      b.copyToHost(part);
      assert.deepEqual(part, src.subarray(100, 150));
    });

    test("memset8 and memset32 fill the requested range only", () => {
      using stream = Stream.create();
      using buf = DeviceBuffer.alloc(4096);
      buf.memset8(0xab);
      buf.memset8(0x11, 10, 20);
      const bytes = new Uint8Array(4096);
      buf.copyToHost(bytes);
      assert.ok(bytes.subarray(0, 10).every((v) => v === 0xab));
      assert.ok(bytes.subarray(10, 30).every((v) => v === 0x11));
      assert.ok(bytes.subarray(30).every((v) => v === 0xab));

      buf.memset32(0x7fc00000, 0, undefined, stream);
      buf.memset32(-1, 16, 2, stream);
      stream.synchronize();
      const words = new Float32Array(1024);
      buf.copyToHost(words);
      const u32 = new Uint32Array(words.buffer);
      assert.ok(Number.isNaN(words[0]) && u32[0] === 0x7fc00000);
      assert.deepEqual([...u32.subarray(3, 7)], [0x7fc00000, 0xffffffff, 0xffffffff, 0x7fc00000]);
      assert.ok(u32.subarray(6).every((v) => v === 0x7fc00000));
    });

    test("out-of-range copies and memsets are ArgumentErrors", () => {
      using buf = DeviceBuffer.alloc(16);
      assert.throws(() => buf.copyFromHost(new Uint8Array(17)), ArgumentError);
      assert.throws(() => buf.copyFromHost(new Uint8Array(8), 9), /at most 7 bytes/);
      assert.throws(() => buf.copyToHost(new Uint8Array(4), 13), ArgumentError);
      assert.throws(() => buf.memset8(256), /\[0, 255\]/);
      assert.throws(() => buf.memset32(0, 2), /multiple of 4/);
      assert.throws(() => buf.memset32(0, 0, 5), ArgumentError);
      using small = DeviceBuffer.alloc(8);
      assert.throws(() => small.copyFromDevice(buf), /at most 8 bytes/);
    });

    test("dispose() twice is fine and use after dispose throws a clear Error", () => {
      const buf = DeviceBuffer.alloc(256);
      buf.dispose();
      buf.dispose();
      buf[Symbol.dispose]();
      assert.equal(buf.disposed, true);
      assert.throws(() => buf.ptr, /DeviceBuffer\.ptr\(\): DeviceBuffer \(256 bytes on cuda:0\) was already disposed/);
      assert.throws(() => buf.copyToHost(new Uint8Array(4)), /DeviceBuffer\.copyToHost\(\): .* was already disposed/);
      assert.throws(() => buf.copyFromHost(new Uint8Array(4)), /was already disposed/);
      assert.throws(() => buf.memset8(0), /was already disposed/);
      using other = DeviceBuffer.alloc(256);
      assert.throws(() => other.copyFromDevice(buf), /was already disposed/);
    });

    test("a disposed Stream throws on use and disposing it again is fine", () => {
      const stream = Stream.create();
      stream.synchronize();
      stream.dispose();
      stream.dispose();
      assert.throws(() => stream.synchronize(), /Stream on cuda:0 was already disposed/);
      using buf = DeviceBuffer.alloc(16);
      assert.throws(() => buf.memset8(0, 0, 16, stream), /was already disposed/);
    });
  },
  { needsKernels: false },
);
