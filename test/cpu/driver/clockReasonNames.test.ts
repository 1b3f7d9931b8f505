import { test } from "node:test";
import assert from "node:assert/strict";
import { clockReasonNames } from "../../../src/driver/clockReasonNames.js";

test("clockReasonNames() names nvml.h's power and thermal reason bits", () => {
  assert.deepEqual(clockReasonNames(0x4n), ["sw-power-cap"]);
  assert.deepEqual(clockReasonNames(0x8n), ["hw-slowdown"]);
  assert.deepEqual(clockReasonNames(0x20n), ["sw-thermal"]);
  assert.deepEqual(clockReasonNames(0x40n), ["hw-thermal"]);
  assert.deepEqual(clockReasonNames(0x80n), ["hw-power-brake"]);
  assert.deepEqual(clockReasonNames(0x4n | 0x8n | 0x20n | 0x40n | 0x80n), ["sw-power-cap", "hw-slowdown", "sw-thermal", "hw-thermal", "hw-power-brake"]);
});

test("clockReasonNames() gives [] for no reason, and unknown bits as hex", () => {
  assert.deepEqual(clockReasonNames(0n), []);
  assert.deepEqual(clockReasonNames(0x1n | 0x10n), ["gpu-idle", "sync-boost"]);
  assert.deepEqual(clockReasonNames(0x4n | 0x400n | (1n << 40n)), ["sw-power-cap", "0x400", "0x10000000000"]);
});
