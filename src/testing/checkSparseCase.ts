import { ArgumentError } from "../errors/ArgumentError.js";
import { D_QK, D_V } from "../mla/contract/shape.js";
import { mlaDecodeReference, type ReferenceRow } from "../mla/reference/mlaDecodeReference.js";
import { mlaSparseReferenceGpu } from "../mla/reference/mlaSparseReferenceGpu.js";
import { bf16ArrayToF32 } from "../numeric/bf16.js";
import { compareTensors, SPARSE_LSE_TOL, SPARSE_OUT_TOL, type CompareResult, type Tolerance } from "../numeric/compare.js";
import { FP8_TOKEN_BYTES } from "../numeric/kvCacheFp8.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import type { CompareSummary } from "./checkDenseCase.js";
import { compactSparseRows, tokenCopyRuns } from "./compactSparseRows.js";

/** lse of the kernel against the fp32 GPU reference: both accumulate in fp32, so the absolute floor is fp32's, not float64's. */
const GPU_REFERENCE_LSE_TOL: Tolerance = Object.freeze({ abs: 1e-5, rel: 8.01 / 65536 });

/** What the check needs of a sparse case: its tensors (GPU or host) and the host copies of its small ones. */
export interface SparseCheckInput {
  b: number;
  s_q: number;
  h_q: number;
  topk: number;
  /** [b, s_q, h_q, 576] bf16, contiguous. */
  q: Tensor;
  /** [num_blocks, page_block_size, 1, 656] u8 or fp8_e4m3, token stride 656 bytes. */
  kCache: Tensor;
  /** [b, s_q, topk] */
  indicesHost: Int32Array;
  /** [b] */
  topkLengthHost?: Int32Array;
  /** [h_q] */
  attnSinkHost?: Float32Array;
  softmaxScale: number;
  /** The device tensors of the small arguments, for the fp32 GPU reference. */
  indices?: Tensor;
  topkLength?: Tensor;
  attnSink?: Tensor;
}

/** Options of {@link checkSparseCase}. */
export interface SparseCheckOptions {
  /** The stream the call ran on (synchronized before reading). */
  stream?: Stream;
  /** Rows (request, query token, head) the float64 CPU reference computes. @default every row */
  rows?: readonly ReferenceRow[];
  /** Also compare every element with the fp32 GPU reference (mlaSparseReferenceGpu); needs the case on the GPU. @default false */
  gpuReference?: boolean;
}

/** What {@link checkSparseCase} found. */
export interface SparseCheckResult {
  ok: boolean;
  /** Output rows the CPU reference checked. */
  rows: number;
  /** out against the float64 CPU reference (rounded to bf16), with FlashMLA's sparse tolerances. */
  out: CompareSummary;
  lse: CompareSummary;
  /**
   * Elements of the whole output that cannot be right: NaN or ±inf in out, out ≠ 0 in a row without
   * a valid index, an lse that is not +inf there, or not finite in any other row.
   */
  badElements: number;
  /** FP8 tokens copied to the host for the reference (the distinct ones the checked rows read). */
  tokensCopied: number;
  /** Every element against the fp32 GPU reference, when asked for. */
  gpu?: { out: CompareSummary; lse: CompareSummary };
  /** One line: "ok" or what failed. */
  message: string;
}

/**
 * Checks the output of one sparse decode call (`out` [b, s_q, h_q, 512] bf16, `lse` [b, h_q, s_q]
 * f32, on the GPU or the host) against the float64 CPU reference on the chosen rows, with FlashMLA's
 * sparse tolerances (SPARSE_OUT_TOL, SPARSE_LSE_TOL), and scans the whole output for values that
 * cannot be right. Only q's rows of the checked requests and the FP8 tokens the checked rows read
 * are copied to the host (compactSparseRows), so a sample of a 2.7 GB cache costs megabytes. On
 * request, every element is also compared with the fp32 GPU reference.
 */
export function checkSparseCase(c: SparseCheckInput, result: { out: Tensor; lse: Tensor }, opts: SparseCheckOptions = {}): SparseCheckResult {
  const fn = "checkSparseCase";
  const { b, s_q, h_q, topk } = c;
  if (c.indicesHost.length !== b * s_q * topk) throw new ArgumentError(fn, "c.indicesHost", `${b * s_q * topk} entries ([b, s_q, topk])`, `${c.indicesHost.length}`);
  const [numBlocks, pageBlockSize] = c.kCache.shape;
  if (c.kCache.rank !== 4 || c.kCache.shape[3] !== FP8_TOKEN_BYTES || c.kCache.elementSize !== 1 || (pageBlockSize > 1 && c.kCache.strides[1] !== FP8_TOKEN_BYTES)) {
    throw new ArgumentError(fn, "c.kCache", `a [num_blocks, page_block_size, 1, ${FP8_TOKEN_BYTES}] byte tensor with token stride ${FP8_TOKEN_BYTES}`, `${c.kCache}`);
  }
  if (c.q.rank !== 4 || c.q.dtype !== "bf16" || c.q.shape.join() !== [b, s_q, h_q, D_QK].join() || !c.q.isContiguous()) {
    throw new ArgumentError(fn, "c.q", `a contiguous bf16 [${b}, ${s_q}, ${h_q}, ${D_QK}] tensor`, `${c.q}`);
  }
  opts.stream?.synchronize();
  const outF32 = bf16ArrayToF32(result.out.toHost().host as Uint16Array); // [b, s_q, h_q, 512]
  const lseHost = result.lse.toHost().host as Float32Array; // [b, h_q, s_q]
  const numSlots = numBlocks * pageBlockSize;
  const badElements = countSparseBadElements({ b, s_q, h_q, topk, numSlots, indices: c.indicesHost, topkLength: c.topkLengthHost }, outF32, lseHost);

  const allRows = opts.rows === undefined;
  const rows: ReferenceRow[] = [];
  if (opts.rows !== undefined) rows.push(...opts.rows);
  else for (let i = 0; i < b; i++) for (let j = 0; j < s_q; j++) for (let h = 0; h < h_q; h++) rows.push({ batch: i, token: j, head: h });
  const sel = compactSparseRows({ b, s_q, topk, numSlots, indices: c.indicesHost, topkLength: c.topkLengthHost }, rows);

  const qRow = s_q * h_q * D_QK;
  const q = new Uint16Array(sel.requests.length * qRow);
  sel.requests.forEach((i, r) => readInto(c.q, i * c.q.strides[0], q.subarray(r * qRow, (r + 1) * qRow)));
  // At least one (poison) token, so a sample without valid entries still makes a well-formed cache.
  const cache = new Uint8Array(Math.max(1, sel.tokenIds.length) * FP8_TOKEN_BYTES).fill(0xff);
  for (const run of tokenCopyRuns(sel.tokenIds, pageBlockSize)) {
    const from = run.block * c.kCache.strides[0] + run.offset * FP8_TOKEN_BYTES;
    readInto(c.kCache, from, cache.subarray(run.first * FP8_TOKEN_BYTES, (run.first + run.count) * FP8_TOKEN_BYTES));
  }
  const R = sel.requests.length;
  const ref = mlaDecodeReference(
    {
      q: Tensor.fromHost(q, [R, s_q, h_q, D_QK], "bf16"),
      kCache: Tensor.fromHost(cache, [Math.max(1, sel.tokenIds.length), 1, 1, FP8_TOKEN_BYTES], "u8"),
      indices: Tensor.fromHost(sel.indices, [R, s_q, topk], "i32"),
      ...(sel.topkLength !== undefined ? { topkLength: Tensor.fromHost(sel.topkLength, [R], "i32") } : {}),
      ...(c.attnSinkHost !== undefined ? { attnSink: Tensor.fromHost(c.attnSinkHost, [h_q], "f32") } : {}),
      isFp8Kvcache: true,
      headDimV: D_V,
      softmaxScale: c.softmaxScale,
    },
    allRows ? {} : { rows: sel.rows },
  );
  const refLse = ref.lse.host as Float32Array;
  const actualOut = new Float32Array(rows.length * D_V);
  const expectedOut = new Float32Array(rows.length * D_V);
  const actualLse = new Float32Array(rows.length);
  const expectedLse = new Float32Array(rows.length);
  rows.forEach((row, n) => {
    const { batch: i, token: j, head: h } = row;
    const r = sel.rows[n].batch;
    const at = ((i * s_q + j) * h_q + h) * D_V;
    actualOut.set(outF32.subarray(at, at + D_V), n * D_V);
    const refAt = ((r * s_q + j) * h_q + h) * D_V;
    expectedOut.set(ref.outF32.subarray(refAt, refAt + D_V), n * D_V);
    actualLse[n] = lseHost[(i * h_q + h) * s_q + j];
    expectedLse[n] = refLse[(r * h_q + h) * s_q + j];
  });
  const out = summary(compareTensors(actualOut, expectedOut, SPARSE_OUT_TOL, { name: "out", roundReferenceTo: "bf16", shape: [rows.length, D_V] }));
  const lse = summary(compareTensors(actualLse, expectedLse, SPARSE_LSE_TOL, { name: "lse", shape: [rows.length] }));

  let gpu: SparseCheckResult["gpu"];
  if (opts.gpuReference === true) {
    if (!c.q.isCuda || c.indices === undefined) throw new ArgumentError(fn, "opts.gpuReference", "a case on the GPU (with its indices tensor)", "a host case");
    const g = mlaSparseReferenceGpu({
      q: c.q, kCache: c.kCache, indices: c.indices, topkLength: c.topkLength, attnSink: c.attnSink,
      isFp8Kvcache: true, headDimV: D_V, softmaxScale: c.softmaxScale, stream: opts.stream,
    });
    try {
      opts.stream?.synchronize();
      const gOut = g.out.toHost().host as Float32Array;
      const gLse = g.lse.toHost().host as Float32Array;
      gpu = {
        out: summary(compareTensors(outF32, gOut, SPARSE_OUT_TOL, { name: "out vs fp32 GPU reference", roundReferenceTo: "bf16", shape: [b, s_q, h_q, D_V] })),
        lse: summary(compareTensors(lseHost, gLse, GPU_REFERENCE_LSE_TOL, { name: "lse vs fp32 GPU reference", shape: [b, h_q, s_q] })),
      };
    } finally {
      g.out.dispose();
      g.lse.dispose();
    }
  }

  const failures: string[] = [];
  if (badElements > 0) failures.push(`${badElements} output elements cannot be right (NaN/inf in out, out ≠ 0 or lse ≠ +inf without a valid index, lse not finite with one)`);
  if (!out.ok) failures.push(out.message);
  if (!lse.ok) failures.push(lse.message);
  if (gpu !== undefined && !gpu.out.ok) failures.push(gpu.out.message);
  if (gpu !== undefined && !gpu.lse.ok) failures.push(gpu.lse.message);
  const result_: SparseCheckResult = { ok: failures.length === 0, rows: rows.length, out, lse, badElements, tokensCopied: sel.tokenIds.length, message: failures.length === 0 ? "ok" : failures.join("; ") };
  if (gpu !== undefined) result_.gpu = gpu;
  return result_;
}

/** The index side of a sparse call and its cache's slot count, for {@link countSparseBadElements}. */
export interface SparseRowsSource {
  b: number;
  s_q: number;
  h_q: number;
  topk: number;
  numSlots: number;
  /** [b, s_q, topk] */
  indices: Int32Array;
  /** [b] */
  topkLength?: Int32Array;
}

/**
 * Elements of a sparse call's whole output that cannot be right, whatever the data: NaN or ±inf
 * anywhere in out; in a (request, query token) row without a valid entry within topkLength, any out
 * ≠ 0 or an lse other than +inf (FlashMLA's convention); in any other row, an lse that is not
 * finite (scores of clamped data are bounded). Catches poison left unwritten and rows computed twice
 * or never.
 */
export function countSparseBadElements(src: SparseRowsSource, out: Float32Array, lse: Float32Array): number {
  const { b, s_q, h_q, topk, numSlots, indices, topkLength } = src;
  if (out.length !== b * s_q * h_q * D_V) throw new ArgumentError("countSparseBadElements", "out", `${b * s_q * h_q * D_V} elements`, `${out.length}`);
  if (lse.length !== b * h_q * s_q) throw new ArgumentError("countSparseBadElements", "lse", `${b * h_q * s_q} elements`, `${lse.length}`);
  let bad = 0;
  for (let i = 0; i < b; i++) {
    const limit = Math.max(0, Math.min(topk, topkLength?.[i] ?? topk));
    for (let j = 0; j < s_q; j++) {
      const row = (i * s_q + j) * topk;
      let empty = true;
      for (let k = 0; k < limit && empty; k++) empty = !(indices[row + k] >= 0 && indices[row + k] < numSlots);
      const base = (i * s_q + j) * h_q * D_V;
      for (let x = base; x < base + h_q * D_V; x++) if (!Number.isFinite(out[x]) || (empty && out[x] !== 0)) bad++;
      for (let h = 0; h < h_q; h++) {
        const v = lse[(i * h_q + h) * s_q + j];
        if (empty ? v !== Infinity : !Number.isFinite(v)) bad++;
      }
    }
  }
  return bad;
}

/** Copies `dst.byteLength` bytes of `t`'s storage, from `elementOffset` elements past its first element, into `dst`. */
function readInto(t: Tensor, elementOffset: number, dst: Uint8Array | Uint16Array): void {
  const byteOffset = (t.offset + elementOffset) * t.elementSize;
  if (t.buffer !== undefined) {
    t.buffer.copyToHost(dst, byteOffset);
    return;
  }
  const src = t.host!;
  const bytes = new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
  new Uint8Array(dst.buffer, dst.byteOffset, dst.byteLength).set(bytes.subarray(byteOffset, byteOffset + dst.byteLength));
}

function summary(r: CompareResult): CompareSummary {
  return { ok: r.ok, count: r.count, mismatches: r.mismatches, maxAbsError: r.maxAbsError, maxRelError: r.maxRelError, cosDiff: r.cosDiff, message: r.message };
}
