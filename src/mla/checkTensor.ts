import { ArgumentError, describeValue, formatShape } from "../errors/ArgumentError.js";
import { optionalStream, type Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import type { DType } from "../runtime/dtype.js";

/** What an argument tensor must be. `shape` entries left undefined accept any size. */
export interface TensorSpec {
  dtypes: readonly DType[];
  shape: ReadonlyArray<number | undefined>;
  /** Names for the dimensions, used in messages: ["b", "s_q", "h_q", "d_qk"]. */
  dims: readonly string[];
  /** Require a row-major contiguous layout. */
  contiguous?: boolean;
  /** Require stride 1 in the last dimension. */
  lastDimContiguous?: boolean;
  /** Byte alignment the data pointer and every stride (in bytes) must have. */
  alignBytes?: number;
  /** "cuda": a GPU tensor; "cpu": a host tensor; undefined: either. */
  device?: "cuda" | "cpu";
}

/**
 * Checks one tensor argument in a fixed order (type, dtype, rank, each dimension, layout, device) and
 * throws an ArgumentError naming the function, the argument, what was expected and what was given.
 */
export function checkTensor(fn: string, name: string, t: unknown, spec: TensorSpec): Tensor {
  if (!(t instanceof Tensor)) throw new ArgumentError(fn, name, "a Tensor", describeValue(t));
  if (!spec.dtypes.includes(t.dtype)) throw new ArgumentError(fn, name, `dtype ${spec.dtypes.join(" or ")}`, t.dtype);
  if (t.rank !== spec.shape.length) {
    throw new ArgumentError(fn, name, `rank ${spec.shape.length} [${spec.dims.join(", ")}]`, `rank ${t.rank} ${formatShape(t.shape)}`);
  }
  for (let i = 0; i < spec.shape.length; i++) {
    const want = spec.shape[i];
    if (want !== undefined && t.shape[i] !== want) {
      throw new ArgumentError(fn, name, `${spec.dims[i]} = ${want} (shape [${spec.shape.map((s, j) => s ?? spec.dims[j]).join(", ")}])`, `${t.shape[i]} (shape ${formatShape(t.shape)})`);
    }
  }
  if (spec.contiguous && !t.isContiguous()) throw new ArgumentError(fn, name, "a contiguous tensor", `strides ${formatShape(t.strides)}`);
  if (spec.lastDimContiguous && t.rank > 0 && t.shape[t.rank - 1] > 1 && t.strides[t.rank - 1] !== 1) {
    throw new ArgumentError(fn, name, "stride 1 in the last dimension", `strides ${formatShape(t.strides)}`);
  }
  if (spec.alignBytes !== undefined) {
    const size = t.elementSize;
    for (let i = 0; i < t.rank - 1; i++) {
      if (t.shape[i] > 1 && (t.strides[i] * size) % spec.alignBytes !== 0) {
        throw new ArgumentError(fn, name, `strides that are multiples of ${spec.alignBytes} bytes`, `stride ${t.strides[i]} elements in dim ${spec.dims[i]}`);
      }
    }
  }
  if (spec.device === "cuda" && !t.isCuda) throw new ArgumentError(fn, name, "a CUDA tensor", "a cpu tensor (copy it with Tensor.toDevice)");
  if (spec.device === "cpu" && t.isCuda) throw new ArgumentError(fn, name, "a cpu tensor", `${t.device} (copy it with toHost())`);
  if (spec.alignBytes !== undefined && t.isCuda && t.ptr % BigInt(spec.alignBytes) !== 0n) {
    throw new ArgumentError(fn, name, `data aligned to ${spec.alignBytes} bytes`, `address 0x${t.ptr.toString(16)}`);
  }
  return t;
}

/**
 * Checks an optional `stream` argument: a Stream, and where `on` names a CUDA tensor, one on that
 * tensor's device.
 */
export function checkStream(fn: string, stream: unknown, on?: { name: string; tensor: Tensor }): Stream | undefined {
  const checked = optionalStream(fn, "stream", stream);
  if (checked && on && on.tensor.isCuda && checked.deviceOrdinal !== on.tensor.deviceOrdinal) {
    throw new ArgumentError(fn, "stream", `a stream on ${on.name}'s device (${on.tensor.device})`, `a stream on cuda:${checked.deviceOrdinal}`);
  }
  return checked;
}

/** Checks that all CUDA tensors live on one device. */
export function checkSameDevice(fn: string, tensors: Record<string, Tensor | undefined>): void {
  let first: Tensor | undefined;
  let firstName = "";
  for (const name in tensors) {
    const t = tensors[name];
    if (!t) continue;
    if (!first) (first = t), (firstName = name);
    else if (t.deviceOrdinal !== first.deviceOrdinal) throw new ArgumentError(fn, name, `the device of '${firstName}' (${first.device})`, t.device);
  }
}

export function checkScalar(fn: string, name: string, v: unknown, ok: (v: number) => boolean, expected: string): number {
  if (typeof v !== "number" || !ok(v)) throw new ArgumentError(fn, name, expected, describeValue(v));
  return v;
}

export { describeValue as describe } from "../errors/ArgumentError.js";
