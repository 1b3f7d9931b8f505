import { Module, type Kernel } from "../runtime/Module.js";

/** The helper kernels of the benchmark harness on one device. */
export interface BenchModules {
  /** test_fill.cu: `fill_normal_half(dst, n, seed, scale, clamp, is_fp16)`. */
  fillNormalHalf: Kernel;
  /** test_fill.cu: `fill_kv_used_slots(kv, block_table, seqlens, max_blocks_per_seq, h_kv, seed, scale, clamp, is_fp16)`. */
  fillKvUsedSlots: Kernel;
  /**
   * bench_spin.cu: `bench_spin(ns)`, one thread that keeps the stream busy for `ns` nanoseconds.
   */
  spin: Kernel;
}

const loaded = new Map<number, BenchModules>();

/** Loads (once per device) the cubins the harness needs from the kernel folder. */
export function benchModules(deviceOrdinal = 0): BenchModules {
  let m = loaded.get(deviceOrdinal);
  if (m === undefined) {
    const fill = Module.load("test_fill", deviceOrdinal);
    const spin = Module.load("bench_spin", deviceOrdinal);
    m = {
      fillNormalHalf: fill.getFunction("fill_normal_half"),
      fillKvUsedSlots: fill.getFunction("fill_kv_used_slots"),
      spin: spin.getFunction("bench_spin"),
    };
    loaded.set(deviceOrdinal, m);
  }
  return m;
}
