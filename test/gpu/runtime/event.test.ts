import { test } from "node:test";
import assert from "node:assert/strict";
import { CudaError } from "../../../src/errors/CudaError.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { Event } from "../../../src/runtime/Event.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { describeGpu } from "../../helpers/gpu.js";

describeGpu(
  "Event and Stream ordering",
  () => {
    test("Event.elapsedMs() around a 1 GiB memset is positive and implies a plausible bandwidth", (t) => {
      const bytes = 2 ** 30;
      using stream = Stream.create();
      using buf = DeviceBuffer.alloc(bytes);
      using start = Event.create();
      using end = Event.create();
      buf.memset32(0, 0, undefined, stream); // warm-up: first touch maps the pages
      start.record(stream);
      buf.memset32(0x3f800000, 0, undefined, stream);
      end.record(stream);
      end.synchronize();
      const ms = Event.elapsedMs(start, end);
      const gbPerS = bytes / (ms * 1e-3) / 1e9;
      t.diagnostic(`memset of 1 GiB: ${ms.toFixed(3)} ms, ${gbPerS.toFixed(0)} GB/s`);
      assert.ok(ms > 0, `${ms} ms`);
      assert.ok(gbPerS > 200 && gbPerS < 10_000, `${gbPerS} GB/s`);
      const probe = new Float32Array(4);
      buf.copyToHost(probe, bytes - 16);
      assert.deepEqual([...probe], [1, 1, 1, 1]);
    });

    test("Event.elapsedMs() on events created without timing is a CudaError", () => {
      using stream = Stream.create();
      using a = Event.create({ timing: false });
      using b = Event.create({ timing: false });
      a.record(stream);
      b.record(stream);
      b.synchronize();
      assert.throws(() => Event.elapsedMs(a, b), CudaError);
    });

    test("Stream.waitEvent() orders a copy on one stream after a memset on another", () => {
      const n = 64 << 20;
      using s1 = Stream.create();
      using s2 = Stream.create();
      using src = DeviceBuffer.alloc(n);
      using dst = DeviceBuffer.alloc(n);
      using done = Event.create({ timing: false });
      src.memset8(0, 0, n, s1);
      dst.memset8(0, 0, n, s1);
      s1.synchronize();
      src.memset8(0x5c, 0, n, s1);
      done.record(s1);
      s2.waitEvent(done);
      dst.copyFromDevice(src, { stream: s2 });
      s2.synchronize();
      const tail = new Uint8Array(4096);
      dst.copyToHost(tail, n - 4096);
      assert.ok(tail.every((v) => v === 0x5c));
    });

    test("Event dispose() twice is fine and a disposed event cannot be recorded", () => {
      const e = Event.create();
      e.dispose();
      e.dispose();
      assert.throws(() => e.record(), /Event on cuda:0 was already disposed/);
    });
  },
  { needsKernels: false },
);
