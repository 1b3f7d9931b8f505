import { ArgumentError } from "../errors/ArgumentError.js";

/**
 * One kernel argument, by value. "bytes" is a by-value struct, e.g. the single
 * `const __grid_constant__ Params p` of a kernel, possibly several KiB and holding CUtensorMaps.
 */
export type KernelArg =
  | { kind: "ptr"; value: bigint }
  | { kind: "u64"; value: bigint }
  | { kind: "i32"; value: number }
  | { kind: "u32"; value: number }
  | { kind: "f32"; value: number }
  | { kind: "bytes"; value: Uint8Array };

/** The host copy of a launch's arguments: one storage block and where each argument sits in it. */
export interface PackedKernelArgs {
  /** All arguments, each at its offset. */
  storage: Uint8Array;
  /** Byte offset of each argument in `storage`. */
  offsets: number[];
  /** Size in bytes of each argument. */
  sizes: number[];
}

/**
 * Alignment of "bytes" arguments in the storage. The driver copies each argument from its address
 * with the size the kernel declares, so the host copy needs no particular alignment; keeping
 * CUtensorMap's own (alignas(128) in cuda.h 13) lets the storage be read back as the struct it holds.
 */
export const BYTES_ARG_ALIGNMENT = 128;

const U32_MAX = 0xffffffff;
const U64_MAX = (1n << 64n) - 1n;

/** Size in bytes of one argument as the kernel sees it. */
export function kernelArgSize(arg: KernelArg): number {
  switch (arg.kind) {
    case "ptr":
    case "u64":
      return 8;
    case "i32":
    case "u32":
    case "f32":
      return 4;
    case "bytes":
      return arg.value.byteLength;
    default:
      return arg satisfies never;
  }
}

function kernelArgAlignment(arg: KernelArg): number {
  return arg.kind === "bytes" ? BYTES_ARG_ALIGNMENT : kernelArgSize(arg);
}

/**
 * Lays the arguments out in one little-endian block, each at a multiple of its alignment (8 for
 * ptr/u64, 4 for i32/u32/f32, `BYTES_ARG_ALIGNMENT` for bytes), checking every value's range.
 * `fn` names the caller in ArgumentErrors.
 */
export function packKernelArgs(args: readonly KernelArg[], fn = "Kernel.launch"): PackedKernelArgs {
  if (!Array.isArray(args as unknown)) throw new ArgumentError(fn, "args", "an array of KernelArg", typeof args);
  const offsets: number[] = [];
  const sizes: number[] = [];
  let end = 0;
  args.forEach((arg, i) => {
    checkArg(fn, i, arg);
    const align = kernelArgAlignment(arg);
    const offset = Math.ceil(end / align) * align;
    offsets.push(offset);
    sizes.push(kernelArgSize(arg));
    end = offset + sizes[i];
  });

  const storage = new Uint8Array(end);
  const view = new DataView(storage.buffer);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const at = offsets[i];
    switch (arg.kind) {
      case "ptr":
      case "u64":
        view.setBigUint64(at, arg.value, true);
        break;
      case "i32":
        view.setInt32(at, arg.value, true);
        break;
      case "u32":
        view.setUint32(at, arg.value, true);
        break;
      case "f32":
        view.setFloat32(at, arg.value, true);
        break;
      case "bytes":
        storage.set(arg.value, at);
        break;
      default:
        arg satisfies never;
    }
  }
  return { storage, offsets, sizes };
}

function checkArg(fn: string, i: number, arg: KernelArg): void {
  const name = `args[${i}]`;
  const got = (v: unknown) => (typeof v === "bigint" ? `${v}n` : String(v));
  if (arg === null || typeof arg !== "object") throw new ArgumentError(fn, name, "a KernelArg object", String(arg));
  switch (arg.kind) {
    case "ptr":
    case "u64":
      if (typeof arg.value !== "bigint" || arg.value < 0n || arg.value > U64_MAX) {
        throw new ArgumentError(fn, name, `${arg.kind}: a bigint in [0, 2^64)`, got(arg.value));
      }
      return;
    case "i32":
      if (!Number.isInteger(arg.value) || arg.value < -0x80000000 || arg.value > 0x7fffffff) {
        throw new ArgumentError(fn, name, "i32: an integer in [-2^31, 2^31)", got(arg.value));
      }
      return;
    case "u32":
      if (!Number.isInteger(arg.value) || arg.value < 0 || arg.value > U32_MAX) {
        throw new ArgumentError(fn, name, "u32: an integer in [0, 2^32)", got(arg.value));
      }
      return;
    case "f32":
      if (typeof arg.value !== "number") throw new ArgumentError(fn, name, "f32: a number", got(arg.value));
      return;
    case "bytes":
      if (!(arg.value instanceof Uint8Array) || arg.value.byteLength === 0) {
        throw new ArgumentError(fn, name, "bytes: a non-empty Uint8Array", got(arg.value));
      }
      return;
    default:
      throw new ArgumentError(fn, name, 'kind "ptr", "u64", "i32", "u32", "f32" or "bytes"', JSON.stringify((arg as { kind: unknown }).kind));
  }
}
