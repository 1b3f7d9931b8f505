import { CUlaunchAttributeID } from "./cudaEnums.js";

/**
 * Byte offsets of `CUlaunchConfig` on LP64 (cuda.h 13.0): seven unsigned ints, padding to 8, then
 * the stream handle, the attribute pointer and the attribute count. A test checks these against
 * the C layout rules via koffi.
 */
export const launchConfigLayout = {
  gridDimX: 0,
  gridDimY: 4,
  gridDimZ: 8,
  blockDimX: 12,
  blockDimY: 16,
  blockDimZ: 20,
  sharedMemBytes: 24,
  hStream: 32,
  attrs: 40,
  numAttrs: 48,
  sizeBytes: 56,
} as const;

/**
 * `CUlaunchAttribute`: a 4-byte id padded to 8, then the 64-byte `CUlaunchAttributeValue` union
 * (clusterDim is its first three unsigned ints; programmaticStreamSerializationAllowed an int).
 */
export const launchAttributeLayout = { id: 0, value: 8, sizeBytes: 72 } as const;

/** One launch attribute we know how to encode. */
export type LaunchAttribute =
  | { id: "clusterDimension"; value: readonly [number, number, number] }
  | { id: "programmaticStreamSerialization"; value: boolean };

/** The fields of one `cuLaunchKernelEx` call's configuration. */
export interface LaunchConfigFields {
  grid: readonly [number, number, number];
  block: readonly [number, number, number];
  sharedMemBytes: number;
  /** CUstream handle; 0n is the legacy default stream. */
  stream: bigint;
  attributes: readonly LaunchAttribute[];
}

/** Bytes `encodeLaunchConfig` writes for `attributeCount` attributes. */
export function launchConfigSizeBytes(attributeCount: number): number {
  return launchConfigLayout.sizeBytes + attributeCount * launchAttributeLayout.sizeBytes;
}

/**
 * Writes a `CUlaunchConfig` at `offset` of `view`, followed directly by its attribute array.
 * `address` is the absolute address of `view`'s byte `offset`: the config points at its attributes
 * by address, so the memory must not move until the launch returns. The attribute array starts
 * at +56, which keeps it 8-byte aligned when `address` is. Returns the number of bytes written.
 */
export function encodeLaunchConfig(view: DataView, offset: number, address: bigint, fields: LaunchConfigFields): number {
  const L = launchConfigLayout;
  const size = launchConfigSizeBytes(fields.attributes.length);
  new Uint8Array(view.buffer, view.byteOffset + offset, size).fill(0);
  view.setUint32(offset + L.gridDimX, fields.grid[0], true);
  view.setUint32(offset + L.gridDimY, fields.grid[1], true);
  view.setUint32(offset + L.gridDimZ, fields.grid[2], true);
  view.setUint32(offset + L.blockDimX, fields.block[0], true);
  view.setUint32(offset + L.blockDimY, fields.block[1], true);
  view.setUint32(offset + L.blockDimZ, fields.block[2], true);
  view.setUint32(offset + L.sharedMemBytes, fields.sharedMemBytes, true);
  view.setBigUint64(offset + L.hStream, fields.stream, true);
  const attrsAddress = fields.attributes.length > 0 ? address + BigInt(L.sizeBytes) : 0n;
  view.setBigUint64(offset + L.attrs, attrsAddress, true);
  view.setUint32(offset + L.numAttrs, fields.attributes.length, true);

  const A = launchAttributeLayout;
  fields.attributes.forEach((attr, i) => {
    const at = offset + L.sizeBytes + i * A.sizeBytes;
    switch (attr.id) {
      case "clusterDimension":
        view.setUint32(at + A.id, CUlaunchAttributeID.CLUSTER_DIMENSION, true);
        view.setUint32(at + A.value, attr.value[0], true);
        view.setUint32(at + A.value + 4, attr.value[1], true);
        view.setUint32(at + A.value + 8, attr.value[2], true);
        break;
      case "programmaticStreamSerialization":
        view.setUint32(at + A.id, CUlaunchAttributeID.PROGRAMMATIC_STREAM_SERIALIZATION, true);
        view.setInt32(at + A.value, attr.value ? 1 : 0, true);
        break;
      default:
        return attr satisfies never;
    }
  });
  return size;
}
