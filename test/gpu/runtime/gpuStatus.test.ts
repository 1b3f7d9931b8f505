import { test } from "node:test";
import assert from "node:assert/strict";
import { config } from "../../../src/config.js";
import { gpuStatus } from "../../../src/mla/gpuStatus.js";
import { Device } from "../../../src/runtime/Device.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";

describeGpu("gpuStatus and the tensor read-back on a Hopper GPU", (device) => {
  test("gpuStatus() is ok and describes the device as Device does", () => {
    const status = gpuStatus(device.ordinal);
    assert.equal(status.ok, true, status.ok ? "" : `${status.reason}: ${status.message}`);
    if (!status.ok) return;
    assert.deepEqual(status.device, {
      ordinal: device.ordinal,
      name: device.name,
      computeCapability: "9.0",
      smCount: device.smCount,
      memoryBytes: device.totalMemBytes,
      driverVersion: status.device.driverVersion,
    });
    assert.match(status.device.driverVersion, /^\d+\.\d+$/);
    assert.equal(status.kernels.dir, config.kernelDir);
    assert.ok(Device.count() >= 1);
    // An ordinal past the last device is an answer too.
    const past = gpuStatus(Device.count());
    assert.equal(past.ok ? undefined : past.reason, "no-device");
  });

  test("toFloat32() on a device tensor gives the host tensor's values, with and without a stream", () => {
    const values = Float32Array.from({ length: 3 * 576 }, (_, i) => Math.sin(i) * 2 ** ((i % 40) - 20));
    for (const dtype of ["bf16", "fp16", "f32"] as const) {
      const host = Tensor.fromFloat32(values, [3, 576], dtype);
      using stream = Stream.create(device.ordinal);
      using onDevice = Tensor.toDevice(host, device.ordinal, stream);
      assert.deepEqual(onDevice.toFloat32(stream), host.toFloat32(), dtype);
      assert.deepEqual(onDevice.toFloat32(), host.toFloat32(), dtype);
    }
  });
}, { needsKernels: true });
