// Prints seesaw_pipe's schedule as it ran: a build with -DMLA_TRACE=N (scripts/buildExperiments.sh
// "trace:-DMLA_TRACE=48") records clock64 at the events below for CTA (0, 0, 0)'s first N pairs; this
// runs one case a few times with that build and prints, per warpgroup, the median cycles from the top
// of a pair to each event over the steady pairs (the first two and the last skipped), then pair 8's
// raw timeline for both warpgroups on one clock. Run from the project root on the GPU host:
//   FLASHMLA_KERNEL_DIR=dist/kernels-trace bash .gpu/enter.sh node scripts/device/traceDense.mjs [case] [kernel]
// (TRACE_JSON=file keeps the raw events; a build with -DMLA_TRACE_PART=z records CTA (0, 0, z) where this
// says CTA 0: part 1 at dense-compute-mtp begins with split 1 of a two-piece request, docs/dense-decode.md §20)
// (MLA_TRACE_MB=x: m-block x instead of 0, e.g. seesaw_mc's rank 1)
// (every CTA's start, end and SM are recorded too: the line after the call's prints the latest and earliest
// CTAs with their SMs, and the mean end over SM ids in runs of 16, for the memory-bound cases' spread)
// (case: dense-compute (default), dense-compute-mtp, dense-mem-h16, dense-mem-h64, dense-short-h16 or dense-b1, each
// request at the case's length; kernel: the API's choice for the shape, or any dense_seesaw* name: the
// pair events are seesaw_pipe's, the per-CTA and per-request ones every seesaw kernel's).
import { Event, flashMlaWithKvcache, getMlaMetadata, Stream, Tensor } from "../../dist/src/index.js";
import { defaultDenseKernel } from "../../dist/src/mla/flashMlaWithKvcache.js";
import { decodeKernels } from "../../dist/src/mla/decodeKernels.js";
import { makeGpuDenseCase } from "../../dist/src/bench/makeGpuDenseCase.js";
import { benchModules } from "../../dist/src/bench/benchModules.js";

const TRACE_EVENTS = 16;
// What each event index means (dense_seesaw_sm90.cu, TRACE(n)); "→" = queued on the tensor pipe.
const EVENTS = [
  [
    "top of pair (before waiting for S0)", "S0 ready", "m0, s0 published (SCALE0)", "P0 = exp done",
    "→ P0·V0L", "P0·V0L retired", "SCALE1 received", "sP0 stored, O_L rescaled", "pv0r_issued seen",
    "→ sP1·V1L, → next S0 tiles 0-3 (after their loads)", "sP1·V1L retired", "K1 left refilled",
    "→ next S0 tiles 4-8 (after their loads)",
  ],
  [
    "top of pair (before waiting for S1)", "S1 ready", "SCALE0 received", "m1, s1 published (SCALE1)",
    "P1 = exp done, sP1 stored", "→ P1·V1R", "P0_READY received", "→ sP0·V0R", "P1·V1R retired",
    "sP0·V0R retired", "K0 right refilled", "→ next S1 tiles 4-8, 0-3 (after their loads)",
  ],
];

const caseName = process.argv[2] ?? "dense-compute";
// The dense cases of BENCH.md this script can build (one input set, every request at the same length).
const SHAPES = {
  "dense-compute": { b: 128, s_q: 1, h_q: 128, s_k: 8192 },
  "dense-compute-mtp": { b: 128, s_q: 2, h_q: 128, s_k: 8192 },
  "dense-mem-h16": { b: 128, s_q: 1, h_q: 16, s_k: 8192 },
  "dense-mem-h64": { b: 128, s_q: 1, h_q: 64, s_k: 8192 },
  "dense-short-h16": { b: 128, s_q: 1, h_q: 16, s_k: 1024 },
  "dense-b1": { b: 1, s_q: 1, h_q: 128, s_k: 32768 },
};
const shape = SHAPES[caseName];
if (shape === undefined) throw new Error(`traceDense: case must be one of ${Object.keys(SHAPES).join(", ")}, got ${caseName}`);
const { b, s_q, h_q } = shape;
// Default: the kernel the API picks for the shape.
const kernel = process.argv[3] ?? `dense_${defaultDenseKernel(b, s_q * h_q)}`;
const stream = Stream.create();
const gc = makeGpuDenseCase({ b, s_q, h_q, h_kv: 1, seqlens: Array(b).fill(shape.s_k), causal: s_q > 1, dtype: "bf16" }, { seed: 11, stream });
const meta = getMlaMetadata();
for (let i = 0; i < 5; i++) {
  const { out, lse } = flashMlaWithKvcache({ ...gc, headDimV: 512, schedMeta: meta, stream, kernel: kernel.replace(/^dense_/, "") });
  stream.synchronize();
  out.dispose();
  lse.dispose();
}
// The whole call's time (CUDA events, median of 20) against the main kernel's span (%globaltimer from
// the first CTA's start to the last CTA's end) and how the CTAs' end times spread. Each timed call has
// a spin kernel queued before its first event, as the bench does: JavaScript takes tens of µs to queue a
// call, and without that head start the host's time would be measured too. Every call's own span is read
// back, so "call − span" is what the launch and the grid's end add to that same call.
// Outputs preallocated: an allocation inside the timed region (cuMemAlloc, and cuMemFree's implicit
// sync) made the first form of this report 929 µs for a 490 µs call. One input set, so the cache may
// sit in L2 between calls: the bench's rotated figure is the one to quote; this one places the kernel span.
const ev = [Event.create(), Event.create()];
const calls = [];
const outT = Tensor.emptyDevice([b, s_q, h_q, 512], "bf16", 0), lseT = Tensor.emptyDevice([b, h_q, s_q], "f32", 0);
const spin = benchModules(0).spin;
const traceModule = decodeKernels(0).seesawPipeBf16.module;
const CTA_WORDS = 3;  // mla_trace_cta: start and end (%globaltimer, ns), the SM (%smid)
const readCtas = () => {
  const cta = new BigInt64Array(traceModule.readGlobal("mla_trace_cta").slice().buffer);
  const out = [];
  for (let i = 0; i < cta.length / CTA_WORDS; i++) {
    const [s, e, sm] = [0, 1, 2].map((w) => cta[CTA_WORDS * i + w]);
    if (s !== 0n && e > s) out.push({ cta: i, sm: Number(sm), start: Number(s), end: Number(e) });
  }
  return out;
};
let ctas = [];
for (let i = 0; i < 20; i++) {
  spin.launch({ grid: 1, block: 1, stream }, [{ kind: "u64", value: 200_000n }]);
  ev[0].record(stream);
  flashMlaWithKvcache({ ...gc, headDimV: 512, schedMeta: meta, stream, out: outT, lse: lseT, kernel: kernel.replace(/^dense_/, "") });
  ev[1].record(stream);
  ev[1].synchronize();
  ctas = readCtas();
  const spanUs = (Math.max(...ctas.map((c) => c.end)) - Math.min(...ctas.map((c) => c.start))) / 1000;
  calls.push({ call: Event.elapsedMs(ev[0], ev[1]) * 1000, span: spanUs });
}
outT.dispose();
lseT.dispose();
const median = (xs) => {
  const v = [...xs].sort((x, y) => x - y);
  return v.length === 0 ? NaN : v[Math.floor(v.length / 2)];
};
const over = calls.map((c) => c.call - c.span);
console.log(`per call (20, each after a 200 µs spin): whole call median ${median(calls.map((c) => c.call)).toFixed(1)} µs, main kernel span median ${median(calls.map((c) => c.span)).toFixed(1)} µs, call − span median ${median(over).toFixed(1)} µs (min ${Math.min(...over).toFixed(1)}, max ${Math.max(...over).toFixed(1)})`);
const starts = ctas.map((c) => c.start), ends = ctas.map((c) => c.end);
const t0 = Math.min(...starts);
const endUs = ends.map((e) => (e - t0) / 1000).sort((x, y) => x - y);
const q = (f) => endUs[Math.min(endUs.length - 1, Math.floor(f * endUs.length))].toFixed(1);
console.log(`the last call's main kernel: ${starts.length} CTAs, started within ${((Math.max(...starts) - t0) / 1000).toFixed(1)} µs, ended at ${q(0)} / ${q(0.5)} / ${q(0.9)} / ${endUs[endUs.length - 1].toFixed(1)} µs (min / median / p90 / max)`);
// Which SMs the late CTAs ran on (the memory-bound cases give every CTA the same bytes, so their end
// times differ by how fast their SMs were fed): the latest and earliest, and the mean end over SM ids in
// runs of 16.
const byEnd = [...ctas].sort((x, y) => x.end - y.end);
const fmt = (c) => `${c.cta}@${c.sm} ${((c.end - t0) / 1000).toFixed(1)}`;
console.log(`CTA@SM end µs, the 8 latest: ${byEnd.slice(-8).reverse().map(fmt).join(", ")}; the 8 earliest: ${byEnd.slice(0, 8).map(fmt).join(", ")}`);
const runs = new Map();
for (const c of ctas) {
  const k = Math.floor(c.sm / 16);
  const r = runs.get(k) ?? { n: 0, sum: 0 };
  r.n++, (r.sum += (c.end - t0) / 1000);
  runs.set(k, r);
}
console.log(`mean end by SM id: ${[...runs.keys()].sort((x, y) => x - y).map((k) => `${16 * k}-${16 * k + 15}: ${(runs.get(k).sum / runs.get(k).n).toFixed(1)} µs (${runs.get(k).n})`).join(", ")}`);
const bytes = decodeKernels(0).seesawPipeBf16.module.readGlobal("mla_trace");
const t = new BigInt64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
const pairs = t.length / (2 * TRACE_EVENTS);
const at = (wg, pair, ev) => t[(wg * pairs + pair) * TRACE_EVENTS + ev];
let last = 0;
while (last < pairs && at(0, last, 0) !== 0n && at(1, last, 0) !== 0n) last++;
console.log(`${caseName}, ${kernel}: ${last} of ${pairs} traced pairs recorded (CTA 0, last of 5 calls)`);
const steady = [];
for (let p = 2; p < last - 1; p++) steady.push(p);
// A pair's period: W0's top to the next pair's top.
const periods = steady.map((p) => Number(at(0, p + 1, 0) - at(0, p, 0)));
console.log(`pair period (W0 top to next top): median ${median(periods)} cycles, min ${Math.min(...periods)}, max ${Math.max(...periods)}`);
for (let wg = 0; wg < 2; wg++) {
  console.log(`W${wg}: cycles from W0's top of the pair, median over ${steady.length} pairs (and the step from the previous event)`);
  let prev = 0;
  EVENTS[wg].forEach((name, ev) => {
    const d = median(steady.map((p) => Number(at(wg, p, ev) - at(0, p, 0))));
    console.log(`  ${String(ev).padStart(2)} ${String(d).padStart(7)} ${`(+${d - prev})`.padStart(8)}  ${name}`);
    prev = d;
  });
}
// Where the consumer's time goes: the SM clock it ran at (clock64 against %globaltimer over its span),
// and per request the Q load, the pairs and the output store.
const span = new BigInt64Array(decodeKernels(0).seesawPipeBf16.module.readGlobal("mla_trace_span").slice().buffer);
const cyc = Number(span[2] - span[0]), ns = Number(span[3] - span[1]);
console.log(`CTA 0 consumer: ${cyc} cycles in ${(ns / 1000).toFixed(1)} µs: SM clock ${(cyc / ns).toFixed(3)} GHz`);
const req = new BigInt64Array(decodeKernels(0).seesawPipeBf16.module.readGlobal("mla_trace_req").slice().buffer);
let inPairs = 0;
const RE = 7;  // events per request (mla_trace_req)
for (let r = 0; r < req.length / RE && req[RE * r] !== 0n; r++) {
  const e = [0, 1, 2, 3, 4, 5, 6].map((i) => Number(req[RE * r + i] - span[0]));
  const next = r + 1 < req.length / RE && req[RE * (r + 1)] !== 0n ? Number(req[RE * (r + 1)] - span[0]) : cyc;
  inPairs += e[2] - e[1];
  console.log(`  request ${r}: top at ${e[0]}, Q load ${e[1] - e[0]}${req[RE * r + 6] !== 0n ? ` (first S0 ready ${e[6] - e[1]} after it)` : ""}, pairs ${e[2] - e[1]}, l exchange + store ${e[3] - e[2]} (l exchange ${e[4] - e[2]}, stores or merge issued ${e[5] - e[4]}), to the next top ${next - e[3]} cycles`);
}
console.log(`  in pairs: ${((100 * inPairs) / cyc).toFixed(1)} % of the consumer's cycles`);
// seesaw_mc's rank 1 (a build with MLA_TRACE_MB=1): per refill group, its wait for rank 0's release
// before it multicasts the refill.
if (kernel === "dense_seesaw_mc") {
  const mc = new BigInt64Array(decodeKernels(0).seesawPipeBf16.module.readGlobal("mla_trace_mc").slice().buffer);
  const GROUPS = ["K0 left (W0)", "K1 left (W0)", "right (unused in pipe)", "K1 right (W1)", "K0 right + sP0 (W1)"];
  GROUPS.forEach((name, g) => {
    const rows = steady.map((p) => [0, 1].map((i) => mc[(p * GROUPS.length + g) * 2 + i])).filter((r) => r[0] !== 0n);
    if (rows.length === 0) return;
    console.log(`  mc ${name}: ${rows.length} refills; waited ${median(rows.map((r) => Number(r[1] - r[0])))} cycles for rank 0 (median)`);
  });
}
if (process.env.TRACE_JSON) {
  const fs = await import("node:fs");
  fs.writeFileSync(process.env.TRACE_JSON, JSON.stringify({ caseName, kernel, pairs: last, events: Array.from(t, Number), span: Array.from(span, Number), req: Array.from(req, Number), ctas }));
}
const show = Math.min(8, last - 2);
if (show >= 0) {
  console.log(`pair ${show}, raw (cycles from W0's top):`);
  for (let wg = 0; wg < 2; wg++)
    console.log(`  W${wg}: ${EVENTS[wg].map((_, ev) => Number(at(wg, show, ev) - at(0, show, 0))).join(" ")}`);
}
meta.dispose();
gc.dispose();
stream.dispose();
