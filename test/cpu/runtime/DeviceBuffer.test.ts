import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { Device } from "../../../src/runtime/Device.js";

// These run anywhere: argument checks come before any driver call.

test("DeviceBuffer.alloc() rejects 0 and non-integer sizes with an ArgumentError", () => {
  for (const size of [0, -1, 1.5, Number.NaN, 2 ** 60]) {
    assert.throws(() => DeviceBuffer.alloc(size), (e: unknown) => {
      assert.ok(e instanceof ArgumentError);
      assert.equal(e.message, `DeviceBuffer.alloc(): argument 'sizeBytes': expected a positive integer number of bytes, got ${size}`);
      return true;
    });
  }
});

test("Device.get() rejects a negative or fractional ordinal with an ArgumentError", () => {
  assert.throws(() => Device.get(-1), /Device\.get\(\): argument 'ordinal': expected a non-negative integer, got -1/);
  assert.throws(() => Device.get(0.5), ArgumentError);
});
