import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { deviceBufferOf } from "./writeDrawnTokens.js";

/** What a GPU case builder allocates its tensors through. */
export interface TensorOwner {
  /** Records a device tensor as owned by what is being built, and returns it. */
  keep<T extends Tensor>(t: T): T;
  /** A new owned device tensor holding `data`, copied on the build's stream (`data` must outlive the copy). */
  upload(data: Int32Array | Float32Array, shape: readonly number[], dtype: "i32" | "f32"): Tensor;
}

/**
 * Runs a GPU case builder on `stream`'s device: `build` allocates its device tensors through the owner;
 * what it returns comes back with a `dispose()` that frees them all (safe to call twice). When `build`
 * throws, the stream is drained first (queued copies and kernels may still use the tensors) and every
 * owned tensor is freed before the error goes on.
 */
export function buildOwningTensors<T extends object>(stream: Stream, build: (owner: TensorOwner) => T): T & { dispose(): void } {
  const owned: Tensor[] = [];
  const keep = <U extends Tensor>(t: U): U => (owned.push(t), t);
  const upload = (data: Int32Array | Float32Array, shape: readonly number[], dtype: "i32" | "f32"): Tensor => {
    const t = keep(Tensor.emptyDevice(shape, dtype, stream.deviceOrdinal));
    deviceBufferOf(t).copyFromHost(data, 0, stream);
    return t;
  };
  try {
    const built = build({ keep, upload });
    let disposed = false;
    return {
      ...built,
      dispose() {
        if (disposed) return;
        disposed = true;
        for (const t of owned) t.dispose();
      },
    };
  } catch (e) {
    try {
      stream.synchronize();
    } catch {
      // A broken context: freeing below is all that is left to do.
    }
    for (const t of owned) t.dispose();
    throw e;
  }
}
