import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { D_V } from "../../../src/mla/contract/shape.js";
import { DENSE_FORMS, type DenseForm } from "../../../src/mla/dense/chooseDenseKernel.js";
import { decodeWithOverrides, flashMlaWithKvcache } from "../../../src/mla/flashMlaWithKvcache.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { Rng } from "../../../src/numeric/random.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeDenseCaseGpu, type GpuDenseCase } from "../../../src/testing/gpuDenseCase.js";
import { type DenseCaseOptions } from "../../../src/testing/denseCase.js";
import { type FlashMlaWithKvcacheArgs } from "../../../src/mla/args.js";
import { makeSparseCase, type SparseCaseOptions } from "../../../src/testing/sparseCase.js";

// A long run as a server would make it: decode steps of 1-60 layers over randomly chosen batch shapes,
// dense (about two steps in three, the API's form or one forced) or sparse FP8 (indices given: the API's
// plan), new metadata per step, outputs allocated by the call or
// preallocated, on the default stream or a stream. Every 500 calls a fixed dense probe case and fixed
// sparse probe cases must give bit-identical out and lse; at the end device free memory and the
// process's open file descriptors must be where they started.
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

/** Sparse batch shapes of the soak, made on the host once and uploaded (seed per entry). */
const SPARSE_SHAPES: Array<Omit<SparseCaseOptions, "seed">> = [
  { b: 8, s_q: 2, h_q: 128, s_k: 2500, topk: 2048, pageBlockSize: 64, sink: true, varlen: true },
  { b: 16, s_q: 1, h_q: 64, s_k: 1000, topk: 500, pageBlockSize: 64, varlen: true },
  { b: 4, s_q: 3, h_q: 16, s_k: 300, topk: 100, pageBlockSize: 2, topkLength: true, sink: true },
  { b: 4, s_q: 1, h_q: 128, s_k: 1500, topk: 640, pageBlockSize: 61, invalidFraction: 0.2, repeat: 0.1, blockPadTokens: 1 },
];
/** Sparse probes: two 64-head CTAs per query token (h_q = 128), and a partial head tile (h_q = 32). */
const SPARSE_PROBES: SparseCaseOptions[] = [
  { seed: 4343, b: 3, s_q: 2, h_q: 128, s_k: 2000, topk: 1024, pageBlockSize: 64, sink: true, topkLength: true, invalidFraction: 0.05 },
  { seed: 4344, b: 5, s_q: 1, h_q: 32, s_k: 700, topk: 333, pageBlockSize: 61, sink: true, repeat: 0.2 },
];

/** A sparse case on the GPU: the arguments of a sparse flashMlaWithKvcache call but the metadata, stream and outputs. */
interface GpuSparseArgs {
  args: Omit<FlashMlaWithKvcacheArgs, "schedMeta">;
  dispose(): void;
}

/** Makes a sparse case on the host and uploads it; the cache keeps its (possibly padded) block stride. */
function uploadSparseCase(opts: SparseCaseOptions): GpuSparseArgs {
  const c = makeSparseCase(opts);
  const owned: Tensor[] = [];
  const up = (t: Tensor): Tensor => {
    owned.push(Tensor.toDevice(t));
    return owned[owned.length - 1];
  };
  try {
    const kStore = up(Tensor.fromHost(c.kCache.host!, [c.kCache.host!.length], "u8"));
    return {
      args: {
        q: up(c.q),
        kCache: kStore.view(c.kCache.shape, c.kCache.strides),
        indices: up(c.indices),
        topkLength: c.topkLength && up(c.topkLength),
        attnSink: c.attnSink && up(c.attnSink),
        isFp8Kvcache: true,
        headDimV: D_V,
        softmaxScale: c.softmaxScale,
      },
      dispose: () => owned.forEach((t) => t.dispose()),
    };
  } catch (e) {
    owned.forEach((t) => t.dispose());
    throw e;
  }
}

/** How one step gets its outputs and stream. */
interface StepMode {
  stream: boolean;
  preallocate: boolean;
}

/**
 * One decode step of `layers` calls with `args` (dense or sparse; `denseForm` forced, or the API's
 * choice): new metadata, then the calls, then a sync and every allocation of the step freed. Returns the
 * number of calls made.
 */
function step(args: Omit<FlashMlaWithKvcacheArgs, "schedMeta">, layers: number, mode: StepMode, stream: Stream, denseForm?: DenseForm): number {
  const [b, s_q, h_q] = args.q.shape;
  const meta = getMlaMetadata();
  const owned: Tensor[] = [];
  const s = mode.stream ? stream : undefined;
  try {
    const pre: { out?: Tensor; lse?: Tensor } = {};
    if (mode.preallocate) {
      owned.push((pre.out = Tensor.emptyDevice([b, s_q, h_q, D_V], args.q.dtype)));
      owned.push((pre.lse = Tensor.emptyDevice([b, h_q, s_q], "f32")));
    }
    for (let l = 0; l < layers; l++) {
      const r = decodeWithOverrides({ ...args, schedMeta: meta, stream: s, ...pre }, { denseForm });
      if (!mode.preallocate) owned.push(r.out, r.lse);
    }
    meta.checkErrors(s);  // valid data: the device-side error record must stay empty
  } finally {
    if (s) s.synchronize();
    for (const t of owned) t.dispose();
    meta.dispose();
  }
  return layers;
}

/** out and lse bits of a probe case (the API's kernel), default stream. */
function runProbe(probe: GpuDenseCase | GpuSparseArgs): { out: Uint16Array; lse: Float32Array } {
  const meta = getMlaMetadata();
  try {
    const args: FlashMlaWithKvcacheArgs = "args" in probe ? { ...probe.args, schedMeta: meta } : { ...probe, schedMeta: meta };
    const { out, lse } = flashMlaWithKvcache(args);
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
  test(`${CALLS} dense and sparse decode calls over random shapes: the probes stay bit-identical, free memory and open descriptors return`, (t) => {
    const rng = new Rng(20260);
    const pool = SHAPES.map((shape, i) => makeDenseCaseGpu({ ...shape, seed: 9100 + i }));
    const sparsePool: GpuSparseArgs[] = [];
    const sparseProbes: GpuSparseArgs[] = [];
    const probe = makeDenseCaseGpu({ seed: 4242, b: 7, s_q: 2, h_q: 128, h_kv: 1, seqlens: { mean: 3000, varlen: true }, causal: true, dtype: "bf16" });
    const stream = Stream.create();
    try {
      SPARSE_SHAPES.forEach((shape, i) => sparsePool.push(uploadSparseCase({ ...shape, seed: 9200 + i })));
      for (const opts of SPARSE_PROBES) sparseProbes.push(uploadSparseCase(opts));
      const expected = runProbe(probe);
      const expectedSparse = sparseProbes.map(runProbe);
      // Warm-up: every shape, form and mode once, so modules, the TMA descriptor path and the
      // driver's first-use pools are in place before the baseline is taken.
      for (const c of pool) for (const denseForm of DENSE_FORMS) for (const preallocate of [false, true]) for (const onStream of [false, true]) {
        step(c, 2, { stream: onStream, preallocate }, stream, denseForm);
      }
      for (const c of sparsePool) for (const preallocate of [false, true]) for (const onStream of [false, true]) {
        step(c.args, 2, { stream: onStream, preallocate }, stream);
      }
      device.synchronize();
      const freeBefore = device.memInfo().free;
      const fdsBefore = openFileDescriptors();
      const rssBefore = process.memoryUsage().rss;
      const t0 = Date.now();

      let calls = 0;
      let denseCalls = 0;
      let sparseCalls = 0;
      let probes = 0;
      let nextProbe = PROBE_EVERY;
      while (calls < CALLS) {
        const layers = Math.min(rng.int(1, 61), CALLS - calls);
        if (rng.uniform() < 1 / 3) {
          const c = sparsePool[rng.int(0, sparsePool.length)];
          const mode = { stream: rng.uniform() < 0.5, preallocate: rng.uniform() < 0.5 };
          sparseCalls += step(c.args, layers, mode, stream);
        } else {
          const c = pool[rng.int(0, pool.length)];
          const denseForm = rng.uniform() < 0.6 ? undefined : DENSE_FORMS[rng.int(0, DENSE_FORMS.length)];
          const mode = { stream: rng.uniform() < 0.5, preallocate: rng.uniform() < 0.5 };
          denseCalls += step(c, layers, mode, stream, denseForm);
        }
        calls = denseCalls + sparseCalls;
        if (calls >= nextProbe || calls === CALLS) {
          const got = runProbe(probe);
          probes++;
          assert.deepEqual(got.out, expected.out, `dense probe out differs from the first run after ${calls} calls`);
          assert.deepEqual(got.lse, expected.lse, `dense probe lse differs from the first run after ${calls} calls`);
          sparseProbes.forEach((p, i) => {
            const g = runProbe(p);
            const label = `sparse probe ${i} (${JSON.stringify(SPARSE_PROBES[i])})`;
            assert.deepEqual(g.out, expectedSparse[i].out, `${label} out differs from the first run after ${calls} calls`);
            assert.deepEqual(g.lse, expectedSparse[i].lse, `${label} lse differs from the first run after ${calls} calls`);
          });
          nextProbe += PROBE_EVERY;
        }
      }
      device.synchronize();
      const seconds = (Date.now() - t0) / 1000;
      const freeAfter = device.memInfo().free;
      const fdsAfter = openFileDescriptors();
      const rssAfter = process.memoryUsage().rss;
      t.diagnostic(
        `${calls} calls (${denseCalls} dense, ${sparseCalls} sparse) and ${probes} probe checks (1 dense + ${sparseProbes.length} sparse cases each) in ${seconds.toFixed(1)} s (${((seconds * 1e6) / calls).toFixed(0)} µs per call with its share of allocation and sync); ` +
          `free device memory ${freeBefore} -> ${freeAfter} B (delta ${freeAfter - freeBefore}); open fds ${fdsBefore} -> ${fdsAfter}; rss ${(rssBefore / 2 ** 20).toFixed(0)} -> ${(rssAfter / 2 ** 20).toFixed(0)} MiB`,
      );
      assert.ok(probes >= Math.floor(CALLS / PROBE_EVERY), `${probes} probe checks`);
      if (CALLS >= 1000) assert.ok(sparseCalls > 0 && denseCalls > 0, `${denseCalls} dense and ${sparseCalls} sparse calls`);
      assert.ok(Math.abs(freeAfter - freeBefore) <= FREE_MEMORY_TOLERANCE, `free device memory moved by ${freeAfter - freeBefore} bytes over ${calls} calls`);
      if (fdsBefore !== undefined) assert.equal(fdsAfter, fdsBefore, "open file descriptors");
    } finally {
      stream.dispose();
      probe.dispose();
      for (const c of pool) c.dispose();
      for (const c of [...sparsePool, ...sparseProbes]) c.dispose();
    }
  });
});
