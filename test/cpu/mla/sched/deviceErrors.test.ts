import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../../src/errors/ArgumentError.js";
import { MlaSchedMeta } from "../../../../src/mla/sched/MlaSchedMeta.js";
import { DEVICE_ERROR_WORDS } from "../../../../src/mla/contract/shape.js";
import { DeviceErrorCode, deviceErrorToArgumentError } from "../../../../src/mla/sched/deviceErrors.js";

// The device-side error record (kernels/mla/params.h: code, request, position, value, limit) and
// the ArgumentError that MlaSchedMeta.checkErrors() throws for it.

function record(...words: number[]): Int32Array {
  const r = new Int32Array(DEVICE_ERROR_WORDS);
  r.set(words);
  return r;
}

test("an empty record describes no error", () => {
  assert.equal(deviceErrorToArgumentError(record(0, 5, 6, 7, 8)), undefined);
});

test("a negative length names cacheSeqlens, the request and the value", () => {
  const e = deviceErrorToArgumentError(record(DeviceErrorCode.negativeLength, 3, 0, -5, 640));
  assert.ok(e instanceof ArgumentError);
  assert.equal(e.argument, "cacheSeqlens");
  assert.match(e.message, /^flashMlaWithKvcache\(\): argument 'cacheSeqlens': expected lengths >= 0 \(that request was decoded as empty: out 0, lse \+inf\), got cacheSeqlens\[3\] = -5$/);
});

test("a length past the block table names the limit 64 · max_blocks_per_seq", () => {
  const e = deviceErrorToArgumentError(record(DeviceErrorCode.lengthPastTable, 0, 0, 174, 128));
  assert.ok(e instanceof ArgumentError);
  assert.equal(e.argument, "cacheSeqlens");
  assert.match(e.message, /expected lengths <= 64 · max_blocks_per_seq = 128 .*got cacheSeqlens\[0\] = 174$/);
});

test("a block id outside the cache names blockTable[request][block], the id and num_blocks", () => {
  const e = deviceErrorToArgumentError(record(DeviceErrorCode.blockId, 2, 7, -1, 1024));
  assert.ok(e instanceof ArgumentError);
  assert.equal(e.argument, "blockTable");
  assert.match(e.message, /expected block ids in \[0, num_blocks = 1024\) for every block a request uses \(that block was read as zeros\), got blockTable\[2\]\[7\] = -1$/);
});

test("an unknown code is still an error, with the raw words", () => {
  const e = deviceErrorToArgumentError(record(9, 1, 2, 3, 4));
  assert.ok(e instanceof ArgumentError);
  assert.match(e.message, /got code 9 \(words 9, 1, 2, 3, 4, 0, 0, 0\)$/);
});

test("checkErrors() before the first call of a step, or after dispose, does nothing", () => {
  const meta = new MlaSchedMeta();
  assert.doesNotThrow(() => meta.checkErrors());
  meta.dispose();
  assert.doesNotThrow(() => meta.checkErrors());
});
