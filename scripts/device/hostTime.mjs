// Where a dense API call's host time goes, on the GPU host (from the project root):
//   bash .gpu/enter.sh node scripts/device/hostTime.mjs [calls]
// Prints the floors (a koffi call into the driver, TensorMap.encodeTiled of the K cache's map, a bare
// Kernel.launch, validateDenseArgs) and then dense-short-h16's flashMlaWithKvcache queued `calls` times
// without a sync after 200 warm-up calls (so V8 has compiled it), with the time spent in the tensor maps,
// the params pack and the launch inside those calls. The GPU needs ~46 µs a call at this shape: a host
// time above that leaves it waiting between calls (a CUDA graph replays without any of this).
import { performance } from "node:perf_hooks";
import { benchSpinKernel } from "../../dist/src/bench/benchSpin.js";
import { loadDriver } from "../../dist/src/driver/loadDriver.js";
import { flashMlaWithKvcache, getMlaMetadata, Stream, Tensor } from "../../dist/src/index.js";
import { DenseParamsStruct } from "../../dist/src/mla/contract/params.js";
import { validateDenseArgs } from "../../dist/src/mla/dense/validateDense.js";
import { makeGpuDenseCase } from "../../dist/src/testing/gpuDenseCase.js";
import { Kernel } from "../../dist/src/runtime/Kernel.js";
import { TensorMap } from "../../dist/src/runtime/TensorMap.js";

const N = Number(process.argv[2] ?? 3000);
if (!Number.isInteger(N) || N < 1) throw new Error(`hostTime: calls must be an integer >= 1, got ${process.argv[2]}`);
const stream = Stream.create();
const spent = new Map();
// Replaces obj[name] with a version that adds its wall time to `label`.
function timeInside(obj, name, label) {
  const f = obj[name];
  obj[name] = function (...a) {
    const t = performance.now();
    try {
      return f.apply(this, a);
    } finally {
      spent.set(label, (spent.get(label) ?? 0) + performance.now() - t);
    }
  };
}
function hostLoop(label, n, fn) {
  for (let i = 0; i < Math.min(200, n); i++) fn();
  stream.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn();
  const us = ((performance.now() - t0) * 1000) / n;
  stream.synchronize();
  console.log(`${label}: ${us.toFixed(2)} µs a call (host)`);
  return us;
}
const count = new Int32Array(1);
const api = loadDriver();
hostLoop("koffi → cuDeviceGetCount", 20000, () => api.cuDeviceGetCount(count));
const b = 128, h_q = 16;
const gc = makeGpuDenseCase({ b, s_q: 1, h_q, h_kv: 1, seqlens: Array(b).fill(1024), causal: false, dtype: "bf16" }, { seed: 3, stream });
const kMap = { dataType: "bf16", globalAddress: gc.kCache.ptr, globalDim: [576, 1, 64, gc.numBlocks], globalStrides: [1152, 1152, 73728], boxDim: [64, 1, 64, 1], swizzle: "128B", l2Promotion: "128B" };
hostLoop("TensorMap.encodeTiled (the K cache's map, asked again)", 5000, () => TensorMap.encodeTiled(kMap));
const spin = benchSpinKernel(0);
hostLoop("Kernel.launch of bench_spin(0)", 5000, () => spin.launch({ grid: 1, block: 1, stream }, [{ kind: "u64", value: 0n }]));
const out = Tensor.emptyDevice([b, 1, h_q, 512], "bf16", 0), lse = Tensor.emptyDevice([b, h_q, 1], "f32", 0);
const args = { q: gc.q, kCache: gc.kCache, blockTable: gc.blockTable, cacheSeqlens: gc.cacheSeqlens, headDimV: 512, schedMeta: getMlaMetadata(), stream, out, lse };
hostLoop("validateDenseArgs", 20000, () => validateDenseArgs(args));
timeInside(TensorMap, "encodeTiled", "tensor maps");
timeInside(DenseParamsStruct, "pack", "params pack");
timeInside(Kernel.prototype, "launch", "launch");
for (let i = 0; i < 200; i++) flashMlaWithKvcache(args);
stream.synchronize();
spent.clear();
const us = hostLoop(`dense-short-h16 flashMlaWithKvcache × ${N}`, N, () => flashMlaWithKvcache(args));
console.log(`  of which: ${[...spent].map(([k, ms]) => `${k} ${((ms * 1000) / (N + Math.min(200, N))).toFixed(2)} µs`).join(", ")} (of ${us.toFixed(2)} µs)`);
out.dispose();
lse.dispose();
gc.dispose();
