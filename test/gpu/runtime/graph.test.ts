import { test } from "node:test";
import assert from "node:assert/strict";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { Graph } from "../../../src/runtime/Graph.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { describeGpu } from "../../helpers/gpu.js";

describeGpu(
  "Graph capture and replay",
  () => {
    test("a captured memset + device copy replays correctly, repeatedly", () => {
      const words = 1 << 16;
      using stream = Stream.create();
      using a = DeviceBuffer.alloc(words * 4);
      using b = DeviceBuffer.alloc(words * 4);
      a.memset32(0);
      b.memset32(0);
      using graph = Graph.capture(stream, () => {
        a.memset32(0x12345678, 0, words / 2, stream);
        b.copyFromDevice(a, { stream });
      });
      const back = new Uint32Array(words);
      // Capture only records: nothing ran yet.
      b.copyToHost(back);
      assert.ok(back.every((v) => v === 0));

      for (let replay = 0; replay < 3; replay++) {
        b.memset32(0xdeadbeef);
        a.memset32(7);
        graph.launch(stream);
        stream.synchronize();
        b.copyToHost(back);
        assert.ok(back.subarray(0, words / 2).every((v) => v === 0x12345678), `replay ${replay}`);
        assert.ok(back.subarray(words / 2).every((v) => v === 7), `replay ${replay}`);
      }
    });

    test("an exception inside the capture ends it, is rethrown, and leaves the stream usable", () => {
      using stream = Stream.create();
      using a = DeviceBuffer.alloc(1024);
      assert.throws(
        () =>
          Graph.capture(stream, () => {
            a.memset8(1, 0, 1024, stream);
            throw new Error("boom inside capture");
          }),
        /boom inside capture/,
      );
      a.memset8(9, 0, 1024, stream);
      stream.synchronize();
      const back = new Uint8Array(1024);
      a.copyToHost(back);
      assert.ok(back.every((v) => v === 9));
    });

    test("Graph dispose() twice is fine and launching a disposed graph throws", () => {
      using stream = Stream.create();
      using a = DeviceBuffer.alloc(64);
      const graph = Graph.capture(stream, () => a.memset8(3, 0, 64, stream));
      graph.launch(stream);
      stream.synchronize();
      graph.dispose();
      graph.dispose();
      assert.throws(() => graph.launch(stream), /Graph\.launch\(\): Graph on cuda:0 was already disposed/);
    });
  },
  { needsKernels: false },
);
