import { Module, type Kernel } from "../runtime/Module.js";

const loaded = new Map<number, Kernel>();

/**
 * bench_spin.cu's `bench_spin(ns)` on one device (loaded once): one thread that keeps the stream busy for
 * `ns` nanoseconds, so the host can queue timed calls ahead of the GPU.
 */
export function benchSpinKernel(deviceOrdinal = 0): Kernel {
  let k = loaded.get(deviceOrdinal);
  if (k === undefined) {
    k = Module.load("bench_spin", deviceOrdinal).getFunction("bench_spin");
    loaded.set(deviceOrdinal, k);
  }
  return k;
}
