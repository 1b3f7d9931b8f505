import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { DENSE_KERNELS, flashMlaWithKvcache, type DenseKernelName } from "../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata } from "../../../src/mla/MlaSchedMeta.js";
import { Rng } from "../../../src/numeric/random.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeDenseCaseGpu, type GpuDenseCase } from "../../helpers/gpuDecodeCase.js";
import type { DenseCaseOptions } from "../../helpers/makeDecodeCase.js";

// A long run as a server would make it: decode steps of 1-60 layers over randomly chosen batch shapes,
// new metadata per step, outputs allocated by the call or preallocated, on the default stream or a
// stream. Every 500 calls a fixed probe case must give bit-identical out and lse; at the end device
// free memory and the process's open file descriptors must be where they started.
// FLASHMLA_SOAK_CALLS sets the number of calls (default 10,000).

const CALLS = Number(process.env.FLASHMLA_SOAK_CALLS ?? "10000");
const PROBE_EVERY = 500;
/** cuMemGetInfo reports at page granularity and the driver may keep small pools: the allowed drift. */
const FREE_MEMORY_TOLERANCE = 4 * 2 ** 20;

/** Batch shapes of the soak (seed and lengths vary per entry). */
const SHAPES: Array<Omit<DenseCaseOptions, "seed">> = [
  { b: 1, s_q: 1, h_q: 128, h_kv: 1, seqlens: { mean: 4096, varlen: false }, causal: false, dtype: "bf16" },
  { b: 16, s_q: 2, h_q: 128, h_kv: 1, seqlens: { mean: 2000, varlen: true, zeroFraction: 0.1 }, causal: true, dtype: "bf16" },
  { b: 64, s_q: 1, h_q: 64, h_kv: 1, seqlens: { mean: 1000, varlen: true }, causal: false, dtype: "bf16" },
  { b: 3, s_q: 4, h_q: 16, h_kv: 2, seqlens: [0, 1, 65], causal: true, dtype: "fp16" },
  { b: 8, s_q: 1, h_q: 126, h_kv: 3, seqlens: { mean: 300, varlen: true }, causal: false, dtype: "bf16" },
  { b: 128, s_q: 2, h_q: 128, h_kv: 1, seqlens: { mean: 512, varlen: true, zeroFraction: 0.3 }, causal: true, dtype: "bf16" },
  { b: 2, s_q: 1, h_q: 1, h_kv: 1, seqlens: [64, 63], causal: false, dtype: "fp16" },
  { b: 32, s_q: 3, h_q: 9, h_kv: 3, seqlens: { mean: 700, varlen: true }, causal: true, dtype: "bf16" },
];

/** How one step gets its outputs and stream. */
interface StepMode {
  stream: boolean;
  preallocate: boolean;
}

/**
 * One decode step of `layers` calls on case `c`: new metadata, then the calls, then a sync and every
 * allocation of the step freed. Returns the number of calls made.
 */
function step(c: GpuDenseCase, layers: number, kernel: DenseKernelName, mode: StepMode, stream: Stream): number {
  const [b, s_q, h_q] = c.q.shape;
  const meta = getMlaMetadata();
  const owned: Tensor[] = [];
  const s = mode.stream ? stream : undefined;
  try {
    const pre: { out?: Tensor; lse?: Tensor } = {};
    if (mode.preallocate) {
      owned.push((pre.out = Tensor.emptyDevice([b, s_q, h_q, 512], c.q.dtype)));
      owned.push((pre.lse = Tensor.emptyDevice([b, h_q, s_q], "f32")));
    }
    for (let l = 0; l < layers; l++) {
      const r = flashMlaWithKvcache({ ...c, schedMeta: meta, kernel, stream: s, ...pre });
      if (!mode.preallocate) owned.push(r.out, r.lse);
    }
  } finally {
    if (s) s.synchronize();
    for (const t of owned) t.dispose();
    meta.dispose();
  }
  return layers;
}

/** out and lse bits of the probe case, default kernel, default stream. */
function runProbe(probe: GpuDenseCase): { out: Uint16Array; lse: Float32Array } {
  const meta = getMlaMetadata();
  try {
    const { out, lse } = flashMlaWithKvcache({ ...probe, schedMeta: meta });
    try {
      return { out: out.toHost().host as Uint16Array, lse: lse.toHost().host as Float32Array };
    } finally {
      out.dispose();
      lse.dispose();
    }
  } finally {
    meta.dispose();
  }
}

function openFileDescriptors(): number | undefined {
  try {
    return readdirSync("/proc/self/fd").length;
  } catch {
    return undefined;
  }
}

describeGpu("soak: a long run of decode calls", (device) => {
  test(`${CALLS} decode calls over random shapes: the probe stays bit-identical, free memory and open descriptors return`, (t) => {
    const rng = new Rng(20260);
    const pool = SHAPES.map((shape, i) => makeDenseCaseGpu({ ...shape, seed: 9100 + i }));
    const probe = makeDenseCaseGpu({ seed: 4242, b: 7, s_q: 2, h_q: 128, h_kv: 1, seqlens: { mean: 3000, varlen: true }, causal: true, dtype: "bf16" });
    const stream = Stream.create();
    try {
      const expected = runProbe(probe);
      // Warm-up: every shape, kernel and mode once, so modules, the TMA descriptor path and the
      // driver's first-use pools are in place before the baseline is taken.
      for (const c of pool) for (const kernel of DENSE_KERNELS) for (const preallocate of [false, true]) for (const onStream of [false, true]) {
        step(c, 2, kernel, { stream: onStream, preallocate }, stream);
      }
      device.synchronize();
      const freeBefore = device.memInfo().free;
      const fdsBefore = openFileDescriptors();
      const rssBefore = process.memoryUsage().rss;
      const t0 = Date.now();

      let calls = 0;
      let probes = 0;
      let nextProbe = PROBE_EVERY;
      while (calls < CALLS) {
        const c = pool[rng.int(0, pool.length)];
        const kernel = rng.uniform() < 0.6 ? "seesaw" : DENSE_KERNELS[rng.int(0, DENSE_KERNELS.length)];
        const mode = { stream: rng.uniform() < 0.5, preallocate: rng.uniform() < 0.5 };
        calls += step(c, Math.min(rng.int(1, 61), CALLS - calls), kernel, mode, stream);
        if (calls >= nextProbe || calls === CALLS) {
          const got = runProbe(probe);
          probes++;
          assert.deepEqual(got.out, expected.out, `probe out differs from the first run after ${calls} calls`);
          assert.deepEqual(got.lse, expected.lse, `probe lse differs from the first run after ${calls} calls`);
          nextProbe += PROBE_EVERY;
        }
      }
      device.synchronize();
      const seconds = (Date.now() - t0) / 1000;
      const freeAfter = device.memInfo().free;
      const fdsAfter = openFileDescriptors();
      const rssAfter = process.memoryUsage().rss;
      t.diagnostic(
        `${calls} calls and ${probes} probe checks in ${seconds.toFixed(1)} s (${((seconds * 1e6) / calls).toFixed(0)} µs per call with its share of allocation and sync); ` +
          `free device memory ${freeBefore} -> ${freeAfter} B (delta ${freeAfter - freeBefore}); open fds ${fdsBefore} -> ${fdsAfter}; rss ${(rssBefore / 2 ** 20).toFixed(0)} -> ${(rssAfter / 2 ** 20).toFixed(0)} MiB`,
      );
      assert.ok(probes >= Math.floor(CALLS / PROBE_EVERY), `${probes} probe checks`);
      assert.ok(Math.abs(freeAfter - freeBefore) <= FREE_MEMORY_TOLERANCE, `free device memory moved by ${freeAfter - freeBefore} bytes over ${calls} calls`);
      if (fdsBefore !== undefined) assert.equal(fdsAfter, fdsBefore, "open file descriptors");
    } finally {
      stream.dispose();
      probe.dispose();
      for (const c of pool) c.dispose();
    }
  });
});
