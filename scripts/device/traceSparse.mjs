// Prints the sparse kernel's schedule as it ran: a build with -DMLA_TRACE=N (scripts/buildExperiments.sh
// "trace:-DMLA_TRACE=64") records clock64 at the events of CTA (0, 0, 0)'s first N blocks (the list in
// sparse_decode_sm90.cu, MLA_TRACE). This runs a sparse bench case a few times through the API's default
// kernel (crossover v3 at 128 heads) and prints, per event, the median cycles from WG0's top of the
// block over the steady blocks, and the block period. Run from the project root on the GPU host:
//   FLASHMLA_KERNEL_DIR=dist/kernels-trace bash .gpu/enter.sh node scripts/device/traceSparse.mjs [case]
// (case: sparse-v32 (default), sparse-v32-h64, sparse-long-topk, sparse-h16; a second argument "h16" runs
// the h16 kernel instead, whose consumer records events 0, 1, 2, 3, 7 and 12 as H16_EVENTS names them;
// "h16x" the h16x kernel, which also records its producers' 13-15).
import { benchCaseByName } from "../../dist/bench/cases.js";
import { benchCaseSeqlens } from "../../dist/src/bench/benchCaseSeqlens.js";
import { makeGpuSparseCase } from "../../dist/src/bench/makeGpuSparseCase.js";
import { sparseBenchSpec } from "../../dist/src/bench/sparseBenchSpec.js";
import { decodeKernels } from "../../dist/src/mla/decodeKernels.js";
import { sparseDecodeGpu } from "../../dist/src/mla/sparseDecodeGpu.js";
import { flashMlaWithKvcache, getMlaMetadata, Stream } from "../../dist/src/index.js";

const EVENTS = [
  "WG0 top of block", "WG0 K full", "WG0 S ready", "WG0 P packed", "WG0 P_FREE passed", "WG0 P_READY arrived",
  "WG0 → P·V_L", "WG0 P·V_L retired", "WG1 top of block", "WG1 P_READY passed", "WG1 → P·V_R",
  "WG1 P·V_R retired", "WG1 P_FREE passed", "producer top", "producer buffer free", "producer K full arrived",
  "producer: first 16 values converted (loads landed)", "producer: all converted and stored", "producer: proxy fence done",
];
const h16x = process.argv[3] === "h16x";
const h16 = process.argv[3] === "h16" || h16x;
if (h16x) {
  // h16x: consumer warpgroups 0 and 1 take the blocks in turn (each row is the block's own warpgroup);
  // the producers' events are those of the first producer warpgroup's lane 0.
  Object.assign(EVENTS, { 0: "top of block (its warpgroup)", 1: "stage full", 2: "Q·Kᵀ done (combined)", 3: "softmax done (Pᵀ stored)", 7: "P·V retired",
    12: "stage released", 13: "producer top", 14: "producer: stage free", 15: "producer: copies issued" });
  for (const ev of [4, 5, 6, 8, 9, 10, 11, 16, 17, 18]) EVENTS[ev] = "(not recorded)";
} else if (h16) {
  Object.assign(EVENTS, { 2: "WG0 Q·Kᵀ retired", 3: "WG0 softmax done", 7: "WG0 P·V retired", 12: "WG0 block barrier passed" });
  for (const ev of [4, 5, 6, 8, 9, 10, 11]) EVENTS[ev] = "(not recorded)";
}
// Events per block in mla_sparse_trace (sparse_decode_sm90.cu); the last slot holds %globaltimer at event 0.
const STRIDE = 20;
const caseName = process.argv[2] ?? "sparse-v32";
const c = benchCaseByName(caseName);
if (c === undefined || c.kind !== "sparse") throw new Error(`traceSparse: ${caseName} is not a sparse bench case`);
const stream = Stream.create();
const gc = makeGpuSparseCase(sparseBenchSpec(c, benchCaseSeqlens(c, 1)), { seed: 11, stream });
const meta = getMlaMetadata();
for (let i = 0; i < 5; i++) {
  const args = {
    q: gc.q, kCache: gc.kCache, indices: gc.indices, attnSink: gc.attnSink, isFp8Kvcache: true, headDimV: 512,
    schedMeta: meta, softmaxScale: gc.softmaxScale, stream,
  };
  const { out, lse } = h16x
    ? sparseDecodeGpu(args, { h16x: true, crossover: false, producer: "v3" })
    : h16 ? sparseDecodeGpu(args, { h16: true, crossover: false, producer: "v3" }) : flashMlaWithKvcache(args);
  stream.synchronize();
  out.dispose();
  lse.dispose();
}
const bytes = decodeKernels(0)[h16x ? "sparseH16xBf16" : h16 ? "sparseH16Bf16" : "sparseCrossoverV3Bf16"].module.readGlobal("mla_sparse_trace");
const t = new BigInt64Array(bytes.slice().buffer);
const n = t.length / STRIDE;
let last = 0;
while (last < n && t[STRIDE * last] !== 0n) last++;
const at = (b, ev) => t[STRIDE * b + ev];
const steady = [];
for (let b = 2; b < last - 1; b++) steady.push(b);
const median = (xs) => {
  const v = [...xs].sort((x, y) => x - y);
  return v.length === 0 ? NaN : v[Math.floor(v.length / 2)];
};
console.log(`${caseName}: ${last} of ${n} traced blocks recorded (CTA 0, last of 5 calls)`);
const periods = steady.map((b) => Number(at(b + 1, 0) - at(b, 0)));
console.log(`block period (WG0 top to next top): median ${median(periods)} cycles, min ${Math.min(...periods)}, max ${Math.max(...periods)}`);
if (h16x) {
  // Rows alternate between the two consumer warpgroups: a warpgroup's own period is two rows apart.
  const own = steady.filter((b) => b + 2 < last).map((b) => Number(at(b + 2, 0) - at(b, 0)));
  console.log(`h16x: one warpgroup's period (its block to its next): median ${median(own)} cycles, so ${median(own) / 2} a block per SM`);
}
// Slot 19: the global timer (ns) at event 0, so cycles per block convert to time at the clock it ran at.
const b0 = steady[0], b1 = steady[steady.length - 1];
if (b1 > b0 && t[STRIDE * b1 + 19] > t[STRIDE * b0 + 19]) {
  const mhz = (Number(at(b1, 0) - at(b0, 0)) / Number(t[STRIDE * b1 + 19] - t[STRIDE * b0 + 19])) * 1000;
  console.log(`SM clock over blocks ${b0}-${b1}: ${mhz.toFixed(0)} MHz (clock64 against %globaltimer)`);
}
let prev = 0;
EVENTS.forEach((name, ev) => {
  if (name === "(not recorded)") return;
  const d = median(steady.map((b) => Number(at(b, ev) - at(b, 0))));
  console.log(`  ${String(ev).padStart(2)} ${String(d).padStart(7)} ${`(${d - prev >= 0 ? "+" : ""}${d - prev})`.padStart(8)}  ${name}`);
  prev = d;
});
const show = Math.min(8, last - 2);
if (show >= 0) console.log(`block ${show}, raw (cycles from WG0's top): ${EVENTS.map((_, ev) => Number(at(show, ev) - at(show, 0))).join(" ")}`);
if (process.env.TRACE_JSON) {
  const fs = await import("node:fs");
  fs.writeFileSync(process.env.TRACE_JSON, JSON.stringify({ caseName, blocks: last, events: Array.from(t, Number) }));
}
meta.dispose();
gc.dispose();
stream.dispose();
