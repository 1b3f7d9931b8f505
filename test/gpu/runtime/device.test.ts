import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { Device } from "../../../src/runtime/Device.js";
import { describeGpu } from "../../helpers/gpu.js";

describeGpu(
  "Device on a Hopper GPU",
  (device) => {
    test("Device.get() reports plausible Hopper properties", (t) => {
      t.diagnostic(`${device.name}: ${device.smCount} SMs, ${device.clockRateKHz} kHz, L2 ${device.l2CacheBytes} B, opt-in smem ${device.maxSharedMemoryPerBlockOptin} B`);
      assert.deepEqual(device.computeCapability, { major: 9, minor: 0 });
      assert.equal(device.isHopper, true);
      assert.match(device.name, /^NVIDIA /);
      if (/H200|H100 80GB HBM3|H800/.test(device.name)) assert.equal(device.smCount, 132);
      else assert.ok(device.smCount >= 100, `${device.smCount} SMs`);
      assert.ok(device.maxSharedMemoryPerBlockOptin >= 227 * 1024, `opt-in smem ${device.maxSharedMemoryPerBlockOptin}`);
      assert.equal(device.clusterLaunch, true);
      assert.ok(device.l2CacheBytes >= 40 * 2 ** 20, `L2 ${device.l2CacheBytes}`);
      assert.ok(device.clockRateKHz > 1_000_000 && device.clockRateKHz < 3_000_000, `clock ${device.clockRateKHz} kHz`);
      assert.ok(device.memoryBusWidth >= 4096, `bus ${device.memoryBusWidth} bit`);
      assert.ok(device.memoryClockRateKHz > 1_000_000, `memory clock ${device.memoryClockRateKHz} kHz`);
      assert.ok(device.totalMemBytes >= 64 * 2 ** 30, `total ${device.totalMemBytes}`);
    });

    test("Device.get() returns one object per ordinal and memInfo() is consistent", () => {
      assert.equal(Device.get(device.ordinal), device);
      assert.ok(Device.count() >= 1);
      const mem = device.memInfo();
      assert.ok(mem.free > 0 && mem.free <= mem.total, JSON.stringify(mem));
      assert.ok(Math.abs(mem.total - device.totalMemBytes) <= 2 ** 30, `${mem.total} vs ${device.totalMemBytes}`);
      device.synchronize();
    });

    test("Device.get() with an ordinal past the last device is an ArgumentError", () => {
      const count = Device.count();
      assert.throws(() => Device.get(count), (e: unknown) => e instanceof ArgumentError && /ordinal below \d+/.test(e.message));
    });
  },
  { needsKernels: false },
);
