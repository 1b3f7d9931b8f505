import { Module, type Kernel } from "../runtime/Module.js";

/**
 * kernels/bench/bench_fill.cu's kernels on one device: the GPU-side data of the case builders. The
 * benchmark builds its cases with them, so the cubin ships with the package (unlike kernels/testing/).
 */
export interface TestFillKernels {
  /** `fill_normal_half(dst, n, seed, scale, clamp, is_fp16)`: N(0,1)·scale clamped to ±clamp, a hash of seed and index. */
  fillNormalHalf: Kernel;
  /** `fill_kv_used_slots(kv, block_table, seqlens, max_blocks_per_seq, h_kv, d_qk, seed, scale, clamp, is_fp16)`: the same, in owned slots only. */
  fillKvUsedSlots: Kernel;
}

const loaded = new Map<number, TestFillKernels>();

/** Loads (once per device) bench_fill.cubin from the kernel folder. */
export function testFillKernels(deviceOrdinal = 0): TestFillKernels {
  let k = loaded.get(deviceOrdinal);
  if (k === undefined) {
    const fill = Module.load("bench_fill", deviceOrdinal);
    k = { fillNormalHalf: fill.getFunction("fill_normal_half"), fillKvUsedSlots: fill.getFunction("fill_kv_used_slots") };
    loaded.set(deviceOrdinal, k);
  }
  return k;
}
