// Where the fixed cost of a dense call is: times whole calls (main kernel + combine, events, median of
// 30 after warm-up, 4 rotating input sets) over a sweep of cache lengths; the intercept of time against
// length is what a call costs besides streaming the cache. Run from the project root on the GPU host:
//   bash .gpu/enter.sh node scripts/device/sweepDense.mjs [h_q] [b] [kernel]   (default 16 128, the API's kernel)
// (SWEEP_SK="8192 16384" replaces the lengths; with fewer than two the fit is skipped)
import { flashMlaWithKvcache, getMlaMetadata, Stream, Tensor } from "../../dist/src/index.js";
import { makeGpuDenseCase } from "../../dist/src/bench/makeGpuDenseCase.js";
import { benchModules } from "../../dist/src/bench/benchModules.js";
import { timeGpuCalls } from "../../dist/src/bench/timeGpuCalls.js";
import { timingStats } from "../../dist/src/bench/timingStats.js";

const h_q = Number(process.argv[2] ?? 16), b = Number(process.argv[3] ?? 128), kernel = process.argv[4];
const stream = Stream.create();
const spin = benchModules(0).spin;
const rows = [];
const lengths = process.env.SWEEP_SK ? process.env.SWEEP_SK.split(/[ ,]+/).map(Number) : [64, 256, 512, 1024, 2048, 4096];
for (const s_k of lengths) {
  const sets = [0, 1, 2, 3].map((i) => makeGpuDenseCase({ b, s_q: 1, h_q, h_kv: 1, seqlens: Array(b).fill(s_k), causal: false, dtype: "bf16" }, { seed: 100 * s_k + i, stream }));
  const meta = getMlaMetadata();
  const outs = sets.map(() => ({ out: Tensor.emptyDevice([b, 1, h_q, 512], "bf16", 0), lse: Tensor.emptyDevice([b, h_q, 1], "f32", 0) }));
  const calls = sets.map((gc, i) => () => void flashMlaWithKvcache({ ...gc, headDimV: 512, schedMeta: meta, stream, out: outs[i].out, lse: outs[i].lse, ...(kernel && kernel !== "default" ? { kernel } : {}) }));
  const t = timeGpuCalls(calls, { stream, iters: 30, spin });
  const med = timingStats(t.samplesUs).median;
  rows.push([s_k, med]);
  console.log(`h_q ${h_q} b ${b} s_k ${s_k}: ${med.toFixed(1)} µs, ${((b * s_k * 1152) / med / 1e3).toFixed(0)} GB/s`);
  for (const o of outs) o.out.dispose(), o.lse.dispose();
  for (const s of sets) s.dispose();
  meta.dispose();
}
if (rows.length < 2) process.exit(0);
const n = rows.length, mx = rows.reduce((a, r) => a + r[0], 0) / n, my = rows.reduce((a, r) => a + r[1], 0) / n;
const slope = rows.reduce((a, r) => a + (r[0] - mx) * (r[1] - my), 0) / rows.reduce((a, r) => a + (r[0] - mx) ** 2, 0);
console.log(`fit: ${(my - slope * mx).toFixed(1)} µs + ${(slope * 1000).toFixed(2)} µs per 1000 tokens (${((b * 1152) / slope / 1e3).toFixed(0)} GB/s marginal)`);
