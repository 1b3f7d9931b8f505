import { test } from "node:test";
import assert from "node:assert/strict";
import {
  encodeLaunchConfig,
  launchAttributeLayout,
  launchConfigLayout,
  launchConfigSizeBytes,
} from "../../../src/driver/encodeLaunchConfig.js";
import { loadKoffi } from "../../../src/driver/loadKoffi.js";

// Mirrors of cuda.h's structs for koffi, which lays them out by the platform's C rules.
const koffi = loadKoffi();
const AttrValue = koffi.union("T_CUlaunchAttributeValue", {
  pad: koffi.array("char", 64),
  clusterDim: koffi.struct({ x: "uint32_t", y: "uint32_t", z: "uint32_t" }),
  programmaticStreamSerializationAllowed: "int",
  programmaticEvent: koffi.struct({ event: "void *", flags: "int", triggerAtBlockStart: "int" }),
});
const Attr = koffi.struct("T_CUlaunchAttribute", {
  id: "uint32_t",
  pad: koffi.array("char", 4),
  value: AttrValue,
});
const Config = koffi.struct("T_CUlaunchConfig", {
  gridDimX: "uint32_t",
  gridDimY: "uint32_t",
  gridDimZ: "uint32_t",
  blockDimX: "uint32_t",
  blockDimY: "uint32_t",
  blockDimZ: "uint32_t",
  sharedMemBytes: "uint32_t",
  hStream: "void *",
  attrs: "void *",
  numAttrs: "uint32_t",
});

test("launchConfigLayout matches the C layout of CUlaunchConfig", () => {
  for (const field of Object.keys(launchConfigLayout).filter((f) => f !== "sizeBytes")) {
    assert.equal(launchConfigLayout[field as keyof typeof launchConfigLayout], koffi.offsetof(Config, field), field);
  }
  assert.equal(launchConfigLayout.sizeBytes, koffi.sizeof(Config));
});

test("launchAttributeLayout matches the C layout of CUlaunchAttribute", () => {
  assert.equal(koffi.sizeof(AttrValue), 64);
  assert.equal(launchAttributeLayout.id, koffi.offsetof(Attr, "id"));
  assert.equal(launchAttributeLayout.value, koffi.offsetof(Attr, "value"));
  assert.equal(launchAttributeLayout.sizeBytes, koffi.sizeof(Attr));
});

test("encodeLaunchConfig() writes the fields and points attrs at the attributes that follow", () => {
  const bytes = new Uint8Array(16 + launchConfigSizeBytes(2)).fill(0xee);
  const view = new DataView(bytes.buffer);
  const address = 0x7f00_1234_5000n;
  const written = encodeLaunchConfig(view, 16, address, {
    grid: [33, 2, 3],
    block: [384, 1, 1],
    sharedMemBytes: 230_000,
    stream: 0xdead_beef_0000n,
    attributes: [
      { id: "clusterDimension", value: [2, 1, 1] },
      { id: "programmaticStreamSerialization", value: true },
    ],
  });
  assert.equal(written, 56 + 2 * 72);
  assert.deepEqual([...bytes.subarray(0, 16)], new Array(16).fill(0xee), "bytes before offset untouched");

  const cfg = koffi.decode(bytes.subarray(16), Config) as Record<string, number | bigint>;
  assert.deepEqual([cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ], [33, 2, 3]);
  assert.deepEqual([cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ], [384, 1, 1]);
  assert.equal(cfg.sharedMemBytes, 230_000);
  assert.equal(BigInt(cfg.hStream), 0xdead_beef_0000n);
  assert.equal(BigInt(cfg.attrs), address + 56n);
  assert.equal(cfg.numAttrs, 2);

  const a0 = koffi.decode(bytes.subarray(16 + 56), Attr) as { id: number; value: { clusterDim: { x: number; y: number; z: number } } };
  assert.equal(a0.id, 4, "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION");
  const dims = new DataView(bytes.buffer, 16 + 56 + 8, 12);
  assert.deepEqual([dims.getUint32(0, true), dims.getUint32(4, true), dims.getUint32(8, true)], [2, 1, 1]);
  const a1 = new DataView(bytes.buffer, 16 + 56 + 72, 72);
  assert.equal(a1.getUint32(0, true), 6, "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION");
  assert.equal(a1.getInt32(8, true), 1);
  assert.equal(a1.getUint32(12, true), 0, "rest of the union is zeroed");
});

test("encodeLaunchConfig() with no attributes writes a null attrs pointer", () => {
  const bytes = new Uint8Array(launchConfigSizeBytes(0)).fill(0xff);
  encodeLaunchConfig(new DataView(bytes.buffer), 0, 0x1000n, { grid: [1, 1, 1], block: [32, 1, 1], sharedMemBytes: 0, stream: 0n, attributes: [] });
  const view = new DataView(bytes.buffer);
  assert.equal(view.getBigUint64(launchConfigLayout.attrs, true), 0n);
  assert.equal(view.getUint32(launchConfigLayout.numAttrs, true), 0);
  assert.equal(view.getUint32(28, true), 0, "padding after sharedMemBytes is zeroed");
});
