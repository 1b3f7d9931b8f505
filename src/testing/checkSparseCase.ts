import { ArgumentError } from "../errors/ArgumentError.js";
import { D_QK, D_V, type SparseFormat } from "../mla/contract/shape.js";
import { mlaDecodeReference, type ReferenceRow } from "../mla/reference/mlaDecodeReference.js";
import { mlaSparseReferenceGpu } from "../mla/reference/mlaSparseReferenceGpu.js";
import { bf16ArrayToF32 } from "../numeric/bf16.js";
import { compareTensors, SPARSE_LSE_TOL, SPARSE_OUT_TOL, type CompareResult, type Tolerance } from "../numeric/compare.js";
import { FP8_TOKEN_BYTES } from "../numeric/kvCacheFp8.js";
import { MODEL1_D_QK, MODEL1_TOKEN_BYTES, model1PageBytes } from "../numeric/kvCacheModel1.js";
import type { Stream } from "../runtime/Stream.js";
import { Tensor } from "../runtime/Tensor.js";
import type { CompareSummary } from "./checkDenseCase.js";
import { compactSparseRows, tokenCopyRuns, type CompactSparseSelection, type SparseIndexSource } from "./compactSparseRows.js";

/** lse of the kernel against the fp32 GPU reference: both accumulate in fp32, so the absolute floor is fp32's, not float64's. */
const GPU_REFERENCE_LSE_TOL: Tolerance = Object.freeze({ abs: 1e-5, rel: 8.01 / 65536 });

/** One FP8 cache of a sparse case and the index list that reads it, as the check needs them. */
export interface SparseCheckCache {
  topk: number;
  /**
   * V32 (q's d_qk 576): [num_blocks, page_block_size, 1, 656] u8 or fp8_e4m3, token stride 656 bytes.
   * MODEL1 (q's d_qk 512): [num_blocks, page_block_size, 1, 584] with strides (S, 584, 584, 1), S ≥
   * page_block_size · 584: pages of data bytes, then scale records.
   */
  kCache: Tensor;
  /** [b, s_q, topk] */
  indicesHost: Int32Array;
  /** [b] */
  topkLengthHost?: Int32Array;
  /** The device tensors of the index list, for the fp32 GPU reference. */
  indices?: Tensor;
  topkLength?: Tensor;
}

/** What the check needs of a sparse case: its tensors (GPU or host) and the host copies of its small ones. */
export interface SparseCheckInput extends SparseCheckCache {
  b: number;
  s_q: number;
  h_q: number;
  /** [b, s_q, h_q, d_qk] bf16, contiguous: d_qk 576 reads the V32 cache, 512 (DeepSeek-V4) the MODEL1 cache. */
  q: Tensor;
  /** DeepSeek-V4's second cache (extra_k_cache), in kCache's format, attended in the same softmax. */
  extra?: SparseCheckCache;
  /** [h_q] */
  attnSinkHost?: Float32Array;
  softmaxScale: number;
  /** The device tensor of the sink, for the fp32 GPU reference. */
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
   * a valid index (in either cache), an lse that is not +inf there, or not finite in any other row.
   */
  badElements: number;
  /** FP8 tokens the checked rows read, over both caches: those copied to the host for the reference. */
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
 * cannot be right. DeepSeek-V3.2's V32 cache (q's d_qk 576) or DeepSeek-V4's MODEL1 cache (d_qk 512),
 * with or without a second cache. Only q's rows of the checked requests and what the checked rows read
 * are copied to the host (compactSparseRows): V32 tokens one by one, MODEL1 pages whole (a token's scale
 * record sits apart from its data), so a sample of a multi-gigabyte cache costs megabytes. On request,
 * every element is also compared with the fp32 GPU reference.
 */
export function checkSparseCase(c: SparseCheckInput, result: { out: Tensor; lse: Tensor }, opts: SparseCheckOptions = {}): SparseCheckResult {
  const fn = "checkSparseCase";
  const { b, s_q, h_q } = c;
  const d_qk = c.q.rank === 4 ? c.q.shape[3] : 0;
  if (c.q.rank !== 4 || c.q.dtype !== "bf16" || (d_qk !== D_QK && d_qk !== MODEL1_D_QK) || c.q.shape.join() !== [b, s_q, h_q, d_qk].join() || !c.q.isContiguous()) {
    throw new ArgumentError(fn, "c.q", `a contiguous bf16 [${b}, ${s_q}, ${h_q}, ${D_QK} or ${MODEL1_D_QK}] tensor`, `${c.q}`);
  }
  const format: SparseFormat = d_qk === MODEL1_D_QK ? "MODEL1" : "V32";
  const main = indexSource(fn, "c", c, format, b, s_q);
  const extra = c.extra === undefined ? undefined : indexSource(fn, "c.extra", c.extra, format, b, s_q);
  opts.stream?.synchronize();
  const outF32 = bf16ArrayToF32(result.out.toHost().host as Uint16Array); // [b, s_q, h_q, 512]
  const lseHost = result.lse.toHost().host as Float32Array; // [b, h_q, s_q]
  const badElements = countSparseBadElements({ ...main, h_q, ...(extra !== undefined ? { extra } : {}) }, outF32, lseHost);

  const allRows = opts.rows === undefined;
  const rows: ReferenceRow[] = [];
  if (opts.rows !== undefined) rows.push(...opts.rows);
  else for (let i = 0; i < b; i++) for (let j = 0; j < s_q; j++) for (let h = 0; h < h_q; h++) rows.push({ batch: i, token: j, head: h });
  // Both selections keep the same requests in the same order: they come from the rows alone.
  const sel = compactSparseRows(main, rows);
  const extraSel = extra === undefined ? undefined : compactSparseRows(extra, rows);

  const qRow = s_q * h_q * d_qk;
  const q = new Uint16Array(sel.requests.length * qRow);
  sel.requests.forEach((i, r) => readInto(c.q, i * c.q.strides[0], q.subarray(r * qRow, (r + 1) * qRow)));
  const R = sel.requests.length;
  const compact = format === "V32" ? compactV32Cache : compactModel1Cache;
  const mainCache = compact(c.kCache, sel);
  const extraCache = extra === undefined ? undefined : compact(c.extra!.kCache, extraSel!);
  const ref = mlaDecodeReference(
    {
      q: Tensor.fromHost(q, [R, s_q, h_q, d_qk], "bf16"),
      kCache: mainCache.kCache,
      indices: Tensor.fromHost(mainCache.indices, [R, s_q, main.topk], "i32"),
      ...(sel.topkLength !== undefined ? { topkLength: Tensor.fromHost(sel.topkLength, [R], "i32") } : {}),
      ...(extraCache !== undefined
        ? {
            extraKCache: extraCache.kCache,
            extraIndices: Tensor.fromHost(extraCache.indices, [R, s_q, extra!.topk], "i32"),
            ...(extraSel!.topkLength !== undefined ? { extraTopkLength: Tensor.fromHost(extraSel!.topkLength, [R], "i32") } : {}),
          }
        : {}),
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
    if (!c.q.isCuda || c.indices === undefined || (c.extra !== undefined && c.extra.indices === undefined)) {
      throw new ArgumentError(fn, "opts.gpuReference", "a case on the GPU (with its indices tensor)", "a host case");
    }
    const g = mlaSparseReferenceGpu({
      q: c.q, kCache: c.kCache, indices: c.indices, topkLength: c.topkLength, attnSink: c.attnSink,
      ...(c.extra !== undefined ? { extraKCache: c.extra.kCache, extraIndices: c.extra.indices, extraTopkLength: c.extra.topkLength } : {}),
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
  const tokensCopied = sel.tokenIds.length + (extraSel?.tokenIds.length ?? 0);
  const result_: SparseCheckResult = { ok: failures.length === 0, rows: rows.length, out, lse, badElements, tokensCopied, message: failures.length === 0 ? "ok" : failures.join("; ") };
  if (gpu !== undefined) result_.gpu = gpu;
  return result_;
}

/**
 * Checks one cache and its index list for `format` (token bytes and strides, as the reference reads
 * them; `name` is "c" or "c.extra") and returns the index side, as compactSparseRows and the
 * bad-element scan read it.
 */
function indexSource(fn: string, name: string, cache: SparseCheckCache, format: SparseFormat, b: number, s_q: number): SparseIndexSource {
  const { kCache, topk } = cache;
  if (!Number.isSafeInteger(topk) || topk < 1) throw new ArgumentError(fn, `${name}.topk`, "an integer >= 1", `${topk}`);
  if (cache.indicesHost.length !== b * s_q * topk) throw new ArgumentError(fn, `${name}.indicesHost`, `${b * s_q * topk} entries ([b, s_q, topk])`, `${cache.indicesHost.length}`);
  const tokenBytes = format === "V32" ? FP8_TOKEN_BYTES : MODEL1_TOKEN_BYTES;
  const [numBlocks, pageBlockSize] = kCache.shape;
  if (kCache.rank !== 4 || kCache.shape[3] !== tokenBytes || kCache.elementSize !== 1 || (pageBlockSize > 1 && kCache.strides[1] !== tokenBytes)) {
    throw new ArgumentError(fn, `${name}.kCache`, `a [num_blocks, page_block_size, 1, ${tokenBytes}] byte tensor with token stride ${tokenBytes}`, `${kCache}`);
  }
  if (format === "MODEL1" && numBlocks > 1 && kCache.strides[0] < pageBlockSize * MODEL1_TOKEN_BYTES) {
    throw new ArgumentError(fn, `${name}.kCache`, `a block stride >= page_block_size · ${MODEL1_TOKEN_BYTES} (whole MODEL1 pages)`, `${kCache}`);
  }
  const source: SparseIndexSource = { b, s_q, topk, numSlots: numBlocks * pageBlockSize, indices: cache.indicesHost };
  if (cache.topkLengthHost !== undefined) source.topkLength = cache.topkLengthHost;
  return source;
}

/** A compact host cache the reference reads as the full one, and the selection's indices into it. */
interface CompactCache {
  kCache: Tensor;
  /** [requests, s_q, topk] ids into kCache, −1 where the selection has −1. */
  indices: Int32Array;
}

/**
 * V32: the selected tokens copied one run of neighbours at a time (tokenCopyRuns) into a cache of
 * one-token blocks, token n at block n: the selection's compact ids as they are.
 */
function compactV32Cache(kCache: Tensor, sel: CompactSparseSelection): CompactCache {
  const pageBlockSize = kCache.shape[1];
  // At least one (poison) token, so a sample without valid entries still makes a well-formed cache.
  const n = Math.max(1, sel.tokenIds.length);
  const cache = new Uint8Array(n * FP8_TOKEN_BYTES).fill(0xff);
  for (const run of tokenCopyRuns(sel.tokenIds, pageBlockSize)) {
    const from = run.block * kCache.strides[0] + run.offset * FP8_TOKEN_BYTES;
    readInto(kCache, from, cache.subarray(run.first * FP8_TOKEN_BYTES, (run.first + run.count) * FP8_TOKEN_BYTES));
  }
  return { kCache: Tensor.fromHost(cache, [n, 1, 1, FP8_TOKEN_BYTES], "u8"), indices: sel.indices };
}

/**
 * MODEL1: a token's data and its scale record sit apart within its page, so the pages the selected
 * tokens live in are copied whole (runs of neighbouring pages in one copy) into a cache of those pages
 * in id order, and each compact id becomes its token's slot there (compact page · page_block_size +
 * offset). The reference then reads the very bytes the kernel read.
 */
function compactModel1Cache(kCache: Tensor, sel: CompactSparseSelection): CompactCache {
  const pageBlockSize = kCache.shape[1];
  const pageBytes = model1PageBytes(pageBlockSize);
  const blockStride = kCache.shape[0] > 1 ? kCache.strides[0] : pageBytes;
  const pages = [...new Set(Array.from(sel.tokenIds, (id) => Math.floor(id / pageBlockSize)))].sort((x, y) => x - y);
  const compactPage = new Map(pages.map((p, n) => [p, n]));
  // At least one (poison) page, so a sample without valid entries still makes a well-formed cache.
  const n = Math.max(1, pages.length);
  const cache = new Uint8Array(n * pageBytes).fill(0xff);
  // A page's bytes past page_block_size · 584 are padding that no read reaches, and the storage under
  // a view need not hold the last page's, so a copy ends at its last page's rows (the rest stays 0xff).
  // Neighbouring pages go in one copy where the source's pages are laid out as the compact ones.
  const used = pageBlockSize * MODEL1_TOKEN_BYTES;
  const mergeable = blockStride === pageBytes;
  for (let first = 0; first < pages.length; ) {
    let count = 1;
    while (mergeable && first + count < pages.length && pages[first + count] === pages[first] + count) count++;
    const span = (count - 1) * pageBytes + used;
    readInto(kCache, pages[first] * blockStride, cache.subarray(first * pageBytes, first * pageBytes + span));
    first += count;
  }
  const indices = Int32Array.from(sel.indices, (k) => {
    if (k < 0) return -1;
    const id = sel.tokenIds[k];
    return compactPage.get(Math.floor(id / pageBlockSize))! * pageBlockSize + (id % pageBlockSize);
  });
  const view = Tensor.fromHost(cache, [cache.length], "u8").view([n, pageBlockSize, 1, MODEL1_TOKEN_BYTES], [pageBytes, MODEL1_TOKEN_BYTES, MODEL1_TOKEN_BYTES, 1]);
  return { kCache: view, indices };
}

/** The index side of a sparse call and its caches' slot counts, for {@link countSparseBadElements}. */
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
  /** The second cache's index side (DeepSeek-V4's extra_k_cache): a row is empty only when both lists are. */
  extra?: { topk: number; numSlots: number; indices: Int32Array; topkLength?: Int32Array };
}

/**
 * Elements of a sparse call's whole output that cannot be right, whatever the data: NaN or ±inf
 * anywhere in out; in a (request, query token) row without a valid entry within topkLength (in either
 * cache), any out ≠ 0 or an lse other than +inf (FlashMLA's convention); in any other row, an lse that
 * is not finite (scores of clamped data are bounded). Catches poison left unwritten and rows computed
 * twice or never.
 */
export function countSparseBadElements(src: SparseRowsSource, out: Float32Array, lse: Float32Array): number {
  const { b, s_q, h_q } = src;
  if (out.length !== b * s_q * h_q * D_V) throw new ArgumentError("countSparseBadElements", "out", `${b * s_q * h_q * D_V} elements`, `${out.length}`);
  if (lse.length !== b * h_q * s_q) throw new ArgumentError("countSparseBadElements", "lse", `${b * h_q * s_q} elements`, `${lse.length}`);
  const lists = src.extra === undefined ? [src] : [src, src.extra];
  // Whether list l holds a valid entry for (request i, query token j).
  const hasValid = (l: SparseRowsSource | NonNullable<SparseRowsSource["extra"]>, i: number, j: number): boolean => {
    const limit = Math.max(0, Math.min(l.topk, l.topkLength?.[i] ?? l.topk));
    const row = (i * s_q + j) * l.topk;
    for (let k = 0; k < limit; k++) if (l.indices[row + k] >= 0 && l.indices[row + k] < l.numSlots) return true;
    return false;
  };
  let bad = 0;
  for (let i = 0; i < b; i++) {
    for (let j = 0; j < s_q; j++) {
      const empty = !lists.some((l) => hasValid(l, i, j));
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
