import { DENSE_PAGE_BLOCK_SIZE as PAGE, D_V } from "../mla/contract/shape.js";
import { mlaDecodeReference, type ReferenceRow } from "../mla/reference/mlaDecodeReference.js";
import { mlaDecodeReferenceGpu } from "../mla/reference/mlaDecodeReferenceGpu.js";
import { bf16ArrayToF32 } from "../numeric/bf16.js";
import { DENSE_LSE_TOL, DENSE_OUT_TOL, compareTensors, type CompareResult } from "../numeric/compare.js";
import { fp16ArrayToF32 } from "../numeric/fp16.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import { UNUSED_BLOCK_ID } from "./denseCase.js";
import type { GpuDenseCase } from "./gpuDenseCase.js";

/** The figures of one comparison, without the arrays. */
export type CompareSummary = Pick<CompareResult, "ok" | "count" | "mismatches" | "maxAbsError" | "maxRelError" | "cosDiff" | "message">;

/** Options of {@link checkDenseCase}. */
export interface DenseCheckOptions {
  stream: Stream;
  /** Requests whose rows the float64 CPU reference computes. @default every request */
  requests?: readonly number[];
  /** Query tokens (0 … s_q − 1) checked in each request. @default every token */
  tokens?: readonly number[];
  /** Query heads checked in each (request, query token). @default every head */
  heads?: readonly number[];
  /** Also compare every element with the fp32 GPU reference kernel. @default false */
  gpuReference?: boolean;
}

/** What {@link checkDenseCase} found. */
export interface DenseCheckResult {
  ok: boolean;
  /** Output rows (request, query token, head) the CPU reference checked. */
  rows: number;
  /** out against the float64 CPU reference (reference rounded to the output dtype). */
  out: CompareSummary;
  lse: CompareSummary;
  /**
   * Elements of the whole output that cannot be right: NaN anywhere (poison left unwritten, or NaN
   * computed), ±inf in out, and an lse of ±inf for a request with a cache (or not +inf without one).
   */
  badElements: number;
  /** Every element against the fp32 GPU reference, when asked for. */
  gpu?: { out: CompareSummary; lse: CompareSummary };
  /** One line: "ok" or what failed. */
  message: string;
}

/**
 * Checks the output of one decode call on `gc` (`out` [b, s_q, h_q, 512], `lse` [b, h_q, s_q], on
 * the GPU) against the float64 CPU reference on the chosen rows, with FlashMLA's dense tolerances
 * (DENSE_OUT_TOL, DENSE_LSE_TOL), and scans the whole output for values that cannot be right. Only
 * the cache blocks of the checked requests are copied to the host, so this stays cheap on
 * multi-gigabyte cases.
 */
export function checkDenseCase(gc: GpuDenseCase, result: { out: Tensor; lse: Tensor }, opts: DenseCheckOptions): DenseCheckResult {
  const { b, s_q, h_q, dtype } = gc;
  opts.stream.synchronize();
  const outHost = result.out.toHost().host as Uint16Array; // [b, s_q, h_q, 512]
  const lseHost = result.lse.toHost().host as Float32Array; // [b, h_q, s_q]
  const toF32 = dtype === "bf16" ? bf16ArrayToF32 : fp16ArrayToF32;
  const outF32 = toF32(outHost);
  const badElements = countBadElements(gc, outF32, lseHost);

  const requests = opts.requests ?? Array.from({ length: b }, (_, i) => i);
  const tokens = opts.tokens ?? Array.from({ length: s_q }, (_, j) => j);
  const heads = opts.heads ?? Array.from({ length: h_q }, (_, h) => h);
  const host = compactHostCase(gc, requests);
  const rows: ReferenceRow[] = [];
  for (let r = 0; r < requests.length; r++) {
    for (const j of tokens) for (const h of heads) rows.push({ batch: r, token: j, head: h });
  }
  const allRows = rows.length === requests.length * s_q * h_q;
  const ref = mlaDecodeReference(
    { q: host.q, kCache: host.kCache, blockTable: host.blockTable, cacheSeqlens: host.cacheSeqlens, headDimV: D_V, causal: gc.causal, softmaxScale: gc.softmaxScale },
    allRows ? {} : { rows },
  );
  const refLse = ref.lse.host as Float32Array;
  const actualOut = new Float32Array(rows.length * D_V);
  const expectedOut = new Float32Array(rows.length * D_V);
  const actualLse = new Float32Array(rows.length);
  const expectedLse = new Float32Array(rows.length);
  rows.forEach((row, n) => {
    const i = requests[row.batch];
    const { token: j, head: h } = row;
    actualOut.set(outF32.subarray(((i * s_q + j) * h_q + h) * D_V, ((i * s_q + j) * h_q + h + 1) * D_V), n * D_V);
    const refBase = ((row.batch * s_q + j) * h_q + h) * D_V;
    expectedOut.set(ref.outF32.subarray(refBase, refBase + D_V), n * D_V);
    actualLse[n] = lseHost[(i * h_q + h) * s_q + j];
    expectedLse[n] = refLse[(row.batch * h_q + h) * s_q + j];
  });
  const out = summary(compareTensors(actualOut, expectedOut, DENSE_OUT_TOL, { name: "out", roundReferenceTo: dtype, shape: [rows.length, D_V] }));
  const lse = summary(compareTensors(actualLse, expectedLse, DENSE_LSE_TOL, { name: "lse", shape: [rows.length] }));

  let gpu: DenseCheckResult["gpu"];
  if (opts.gpuReference === true) {
    const g = mlaDecodeReferenceGpu({ q: gc.q, kCache: gc.kCache, blockTable: gc.blockTable, cacheSeqlens: gc.cacheSeqlens, headDimV: D_V, causal: gc.causal, softmaxScale: gc.softmaxScale, stream: opts.stream });
    try {
      opts.stream.synchronize();
      const gOut = g.out.toHost().host as Float32Array;
      const gLse = g.lse.toHost().host as Float32Array;
      gpu = {
        out: summary(compareTensors(outF32, gOut, DENSE_OUT_TOL, { name: "out vs fp32 GPU reference", roundReferenceTo: dtype, shape: [b, s_q, h_q, D_V] })),
        lse: summary(compareTensors(lseHost, gLse, DENSE_LSE_TOL, { name: "lse vs fp32 GPU reference", shape: [b, h_q, s_q] })),
      };
    } finally {
      g.out.dispose();
      g.lse.dispose();
    }
  }

  const failures: string[] = [];
  if (badElements > 0) failures.push(`${badElements} output elements are NaN/inf where a value is due (unwritten or broken)`);
  if (!out.ok) failures.push(out.message);
  if (!lse.ok) failures.push(lse.message);
  if (gpu !== undefined && !gpu.out.ok) failures.push(gpu.out.message);
  if (gpu !== undefined && !gpu.lse.ok) failures.push(gpu.lse.message);
  const result_: DenseCheckResult = { ok: failures.length === 0, rows: rows.length, out, lse, badElements, message: failures.length === 0 ? "ok" : failures.join("; ") };
  if (gpu !== undefined) result_.gpu = gpu;
  return result_;
}

function summary(r: CompareResult): CompareSummary {
  return { ok: r.ok, count: r.count, mismatches: r.mismatches, maxAbsError: r.maxAbsError, maxRelError: r.maxRelError, cosDiff: r.cosDiff, message: r.message };
}

function countBadElements(gc: GpuDenseCase, out: Float32Array, lse: Float32Array): number {
  const { b, s_q, h_q } = gc;
  let bad = 0;
  for (let x = 0; x < out.length; x++) if (!Number.isFinite(out[x])) bad++;
  for (let i = 0; i < b; i++) {
    const empty = gc.seqlens[i] === 0;
    for (let k = i * h_q * s_q; k < (i + 1) * h_q * s_q; k++) {
      // A request without a cache has lse +inf (FlashMLA's convention); any other must be finite.
      if (empty ? lse[k] !== Infinity : !Number.isFinite(lse[k])) bad++;
    }
  }
  return bad;
}

/** The chosen requests of `gc` as host tensors, their blocks renumbered 0.. in request order. */
function compactHostCase(gc: GpuDenseCase, requests: readonly number[]) {
  const { s_q, h_q, h_kv, dtype, d_qk } = gc;
  const es = 2;
  const qRowElems = s_q * h_q * d_qk;
  const q = new Uint16Array(requests.length * qRowElems);
  requests.forEach((i, r) => gc.q.buffer!.copyToHost(q.subarray(r * qRowElems, (r + 1) * qRowElems), i * qRowElems * es));

  const blocksOf = requests.map((i) => Math.ceil(gc.seqlens[i] / PAGE));
  const maxBlocks = Math.max(1, ...blocksOf);
  const numBlocks = Math.max(1, blocksOf.reduce((a, n) => a + n, 0));
  const blockElems = PAGE * h_kv * d_qk;
  const kv = new Uint16Array(numBlocks * blockElems).fill(0x7fc0);
  const blockTable = new Int32Array(requests.length * maxBlocks).fill(UNUSED_BLOCK_ID);
  let next = 0;
  requests.forEach((i, r) => {
    for (let k = 0; k < blocksOf[r]; k++) {
      const physical = gc.blockTableHost[i * gc.maxBlocks + k];
      gc.kCache.buffer!.copyToHost(kv.subarray(next * blockElems, (next + 1) * blockElems), physical * blockElems * es);
      blockTable[r * maxBlocks + k] = next++;
    }
  });
  return {
    q: Tensor.fromHost(q, [requests.length, s_q, h_q, d_qk], dtype),
    kCache: Tensor.fromHost(kv, [numBlocks, PAGE, h_kv, d_qk], dtype),
    blockTable: Tensor.fromHost(blockTable, [requests.length, maxBlocks], "i32"),
    cacheSeqlens: Tensor.fromHost(Int32Array.from(requests.map((i) => gc.seqlens[i])), [requests.length], "i32"),
  };
}
