import { test } from "node:test";
import assert from "node:assert/strict";
import { DisposeOnce } from "../../../src/runtime/DisposeOnce.js";

test("DisposeOnce releases exactly once however often dispose() is called", () => {
  let released = 0;
  const d = new DisposeOnce(() => "DeviceBuffer (16 bytes on cuda:0)", () => void released++);
  assert.equal(d.disposed, false);
  d.assertLive("DeviceBuffer.copyToHost");
  d.dispose();
  d.dispose();
  d.dispose();
  assert.equal(released, 1);
  assert.equal(d.disposed, true);
});

test("DisposeOnce.assertLive() throws a message naming the operation and the object after dispose()", () => {
  const d = new DisposeOnce(() => "DeviceBuffer (16 bytes on cuda:0)", () => {});
  d.dispose();
  assert.throws(() => d.assertLive("DeviceBuffer.copyToHost"), {
    message: "DeviceBuffer.copyToHost(): DeviceBuffer (16 bytes on cuda:0) was already disposed",
  });
});

test("DisposeOnce counts as disposed after a failing release and never retries it", () => {
  let calls = 0;
  const d = new DisposeOnce(() => "Stream on cuda:0", () => {
    calls++;
    throw new Error("cuStreamDestroy_v2 failed");
  });
  assert.throws(() => d.dispose(), /cuStreamDestroy_v2 failed/);
  assert.doesNotThrow(() => d.dispose());
  assert.equal(calls, 1);
  assert.equal(d.disposed, true);
});

test("a DisposeOnce-backed object is released at the end of a `using` block, and once only", () => {
  let released = 0;
  class Thing {
    readonly state = new DisposeOnce(() => "Thing", () => void released++);
    [Symbol.dispose](): void {
      this.state.dispose();
    }
  }
  let kept: Thing | undefined;
  {
    using thing = new Thing();
    kept = thing;
    assert.equal(released, 0);
  }
  assert.equal(released, 1);
  kept[Symbol.dispose]();
  assert.equal(released, 1);
  assert.equal(kept.state.disposed, true);
});
