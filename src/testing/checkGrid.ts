import { ArgumentError } from "../errors/ArgumentError.js";
import { Rng } from "../numeric/random.js";
import { REFERENCE_MACS_PER_KEY } from "./sampleSparseRows.js";

/** One dense case of `flashmla check`: FlashMLA's test-data recipe with these parameters. */
export interface CheckCaseSpec {
  kind?: "dense";
  name: string;
  b: number;
  s_q: number;
  h_q: number;
  h_kv: number;
  /** Length of every request, or the mean of the varlen draw. */
  s_k: number;
  /** FlashMLA's varlen draw round(max(N(s_k, s_k/2), s_q)). */
  varlen: boolean;
  /** Probability that a request's length becomes 0 (FlashMLA's corner cases use 0.5). */
  zeroFraction: number;
  causal: boolean;
  dtype: "bf16" | "fp16";
  /** Check every row against the float64 CPU reference (small shapes) rather than a sample. */
  allRows: boolean;
}

/** One sparse FP8 case of `flashmla check`: FlashMLA's sparse test-data recipe with these parameters. */
export interface SparseCheckCaseSpec {
  kind: "sparse";
  name: string;
  b: number;
  s_q: number;
  h_q: number;
  /** Length of every request, or the mean of the varlen draw. */
  s_k: number;
  topk: number;
  pageBlockSize: number;
  /** FlashMLA's varlen draw round(max(N(s_k, s_k/2), s_q)). */
  varlen: boolean;
  /** Probability that a request's length becomes 0. */
  zeroFraction: number;
  /** attn_sink with about 31% +inf and 31% −inf. */
  withSink: boolean;
  /** topkLength drawn from U[0, topk]. */
  withTopkLength: boolean;
  /** Probability that an index entry becomes −1 (1: every row is empty). */
  invalidFraction: number;
  /** Poisoned rows after each block (FlashMLA's tests pad 1). */
  blockPadTokens: number;
  /** Check every row against the float64 CPU reference rather than a sample. */
  allRows: boolean;
}

/** A case of any grid. */
export type AnyCheckCaseSpec = CheckCaseSpec | SparseCheckCaseSpec;

/** The grids `flashmla check --grid` knows. */
export const CHECK_GRIDS = ["small", "flashmla", "sparse"] as const;
export type CheckGridName = (typeof CHECK_GRIDS)[number];

/** Which decode each grid checks. */
export const CHECK_GRID_KINDS: Readonly<Record<CheckGridName, "dense" | "sparse">> = Object.freeze({ small: "dense", flashmla: "dense", sparse: "sparse" });

/** FlashMLA's sparse (s_k, topk, page_block_size) triples for d_qk = 576. */
export const FLASHMLA_SPARSE_TRIPLES: ReadonlyArray<readonly [number, number, number]> = [
  [512, 64, 2], [512, 64, 64], [512, 64, 69],
  [1024, 576, 2], [1024, 576, 61],
  [2046, 2048, 2], [2046, 2048, 64], [2046, 2048, 576],
];
/** FlashMLA's sparse head counts (64, 128) and the ones we run natively beyond them. */
export const SPARSE_CHECK_HEADS: readonly number[] = [8, 16, 32, 64, 128];
/** A sparse case is checked on every row when the float64 reference needs at most this many multiply-adds. */
export const SPARSE_ALL_ROWS_MAX_MACS = 1e8;

/** FlashMLA's 16 (h_q, h_kv) pairs: h_q ∈ {1, 3, 9, 63, 64, 126, 128}, h_kv ∈ {1, 2, 3, 8}, h_kv | h_q. */
export const FLASHMLA_HEAD_PAIRS: ReadonlyArray<readonly [number, number]> = [1, 3, 9, 63, 64, 126, 128].flatMap((h_q) =>
  [1, 2, 3, 8].filter((h_kv) => h_q % h_kv === 0).map((h_kv) => [h_q, h_kv] as const),
);

/**
 * The cases of a check grid.
 * - small (11 cases, seconds): the shapes that catch most bugs — one head, odd head counts, GQA,
 *   s_q up to 4 with causal masking, varlen with zero lengths, lengths off the 64-token page, fp16.
 *   Every row is checked against the CPU reference.
 * - flashmla (2336 cases, a few minutes): FlashMLA's dense correctness grid, b ∈ {1, 2, 6, 64} ×
 *   s_q ∈ {1, 2, 4} × s_k ∈ {20, 140, 4096} × 16 head pairs × varlen × causal, plus its 32 corner
 *   cases (b 128, s_q 2, s_k 4096, varlen with about half the lengths 0). Sampled rows against the CPU
 *   reference, every element against the fp32 GPU reference.
 * - sparse (368 cases): FlashMLA's sparse FP8 grid for d_qk = 576, h_q ∈ {64, 128} plus our native
 *   8, 16 and 32 × (s_k, topk, page_block_size) ∈ {(512, 64, 2|64|69), (1024, 576, 2|61),
 *   (2046, 2048, 2|64|576)} × b ∈ {4, 74, 321} × s_q ∈ {1, 3}, varlen (plus fixed lengths at b = 74),
 *   sink on (about 31% +inf, 31% −inf), topkLength on the varlen b = 74 cases, blocks padded by one
 *   token (FlashMLA's layout) except at fixed lengths; then FlashMLA's corner cases (512, 64, 61) and
 *   (650, 576, 53) at s_q = 3 for h_q ∈ {16, 64, 128}, crossing all-invalid indices × zero lengths ×
 *   sink. Every row against the CPU reference when that costs at most SPARSE_ALL_ROWS_MAX_MACS
 *   multiply-adds, else sampled rows and every element against the fp32 GPU sparse reference; b = 321
 *   stays in because the sample's cost does not grow with b. Always bf16.
 * `dtype` sets every dense case's dtype; without it the small grid runs one fp16 case among bf16 ones.
 */
export function checkGrid(grid: "sparse"): SparseCheckCaseSpec[];
export function checkGrid(grid: "small" | "flashmla", dtype?: "bf16" | "fp16"): CheckCaseSpec[];
export function checkGrid(grid: CheckGridName, dtype?: "bf16" | "fp16"): AnyCheckCaseSpec[];
export function checkGrid(grid: CheckGridName, dtype?: "bf16" | "fp16"): AnyCheckCaseSpec[] {
  if (grid === "small") return smallGrid(dtype);
  if (grid === "flashmla") return flashmlaGrid(dtype ?? "bf16");
  if (grid === "sparse") return sparseGrid();
  throw new ArgumentError("checkGrid", "grid", CHECK_GRIDS.join(" or "), JSON.stringify(grid));
}

function smallGrid(dtype: "bf16" | "fp16" | undefined): CheckCaseSpec[] {
  const rows: Array<[number, number, number, number, number, boolean, number, boolean, "bf16" | "fp16"]> = [
    // b, s_q, h_q, h_kv, s_k, varlen, zeroFraction, causal, dtype
    [1, 1, 1, 1, 20, false, 0, false, "bf16"],
    [2, 2, 3, 1, 140, true, 0, true, "bf16"],
    [2, 1, 16, 1, 4096, false, 0, false, "bf16"],
    [1, 4, 9, 3, 140, false, 0, true, "bf16"],
    [2, 1, 64, 1, 300, true, 0, false, "bf16"],
    [2, 2, 128, 1, 1000, false, 0, true, "bf16"],
    [2, 1, 126, 2, 140, false, 0, false, "bf16"],
    [4, 2, 64, 8, 140, true, 0.5, true, "bf16"],
    [1, 1, 128, 1, 4096, false, 0, false, "bf16"],
    [3, 2, 16, 1, 140, false, 0, true, "fp16"],
    [6, 1, 63, 3, 20, true, 0, false, "bf16"],
  ];
  return rows.map(([b, s_q, h_q, h_kv, s_k, varlen, zeroFraction, causal, dt]) =>
    spec({ b, s_q, h_q, h_kv, s_k, varlen, zeroFraction, causal, dtype: dtype ?? dt, allRows: true }),
  );
}

function flashmlaGrid(dtype: "bf16" | "fp16"): CheckCaseSpec[] {
  const out: CheckCaseSpec[] = [];
  for (const b of [1, 2, 6, 64]) {
    for (const s_q of [1, 2, 4]) {
      for (const s_k of [20, 140, 4096]) {
        for (const [h_q, h_kv] of FLASHMLA_HEAD_PAIRS) {
          for (const varlen of [false, true]) {
            for (const causal of [false, true]) out.push(spec({ b, s_q, h_q, h_kv, s_k, varlen, zeroFraction: 0, causal, dtype, allRows: false }));
          }
        }
      }
    }
  }
  for (const [h_q, h_kv] of FLASHMLA_HEAD_PAIRS) {
    for (const causal of [false, true]) out.push(spec({ b: 128, s_q: 2, h_q, h_kv, s_k: 4096, varlen: true, zeroFraction: 0.5, causal, dtype, allRows: false }));
  }
  return out;
}

function sparseGrid(): SparseCheckCaseSpec[] {
  const out: SparseCheckCaseSpec[] = [];
  for (const h_q of SPARSE_CHECK_HEADS) {
    for (const [s_k, topk, pageBlockSize] of FLASHMLA_SPARSE_TRIPLES) {
      for (const b of [4, 74, 321]) {
        for (const s_q of [1, 3]) {
          for (const varlen of b === 74 ? [true, false] : [true]) {
            out.push(sparseSpec({ b, s_q, h_q, s_k, topk, pageBlockSize, varlen, zeroFraction: 0, withSink: true, withTopkLength: varlen && b === 74, invalidFraction: 0, blockPadTokens: varlen ? 1 : 0 }));
          }
        }
      }
    }
  }
  for (const h_q of [16, 64, 128]) {
    for (const [s_k, topk, pageBlockSize] of [[512, 64, 61], [650, 576, 53]] as const) {
      for (const invalidFraction of [0, 1]) {
        for (const zeroFraction of [0, 0.5]) {
          for (const withSink of [false, true]) {
            out.push(sparseSpec({ b: 8, s_q: 3, h_q, s_k, topk, pageBlockSize, varlen: true, zeroFraction, withSink, withTopkLength: false, invalidFraction, blockPadTokens: 1 }));
          }
        }
      }
    }
  }
  return out;
}

function sparseSpec(s: Omit<SparseCheckCaseSpec, "name" | "kind" | "allRows">): SparseCheckCaseSpec {
  const name =
    `sparse-b${s.b}-sq${s.s_q}-h${s.h_q}-sk${s.s_k}${s.varlen ? "v" : ""}-topk${s.topk}-pbs${s.pageBlockSize}` +
    `${s.withSink ? "-sink" : ""}${s.withTopkLength ? "-topklen" : ""}${s.invalidFraction > 0 ? "-invalid" : ""}${s.zeroFraction > 0 ? "-zeros" : ""}`;
  const allRows = s.b * s.s_q * s.h_q * s.topk * REFERENCE_MACS_PER_KEY <= SPARSE_ALL_ROWS_MAX_MACS;
  return { kind: "sparse", name, ...s, allRows };
}

function spec(s: Omit<CheckCaseSpec, "name">): CheckCaseSpec {
  const name =
    `b${s.b}-sq${s.s_q}-h${s.h_q}/${s.h_kv}-sk${s.s_k}${s.varlen ? "v" : ""}${s.zeroFraction > 0 ? "-zeros" : ""}` +
    `${s.causal ? "-causal" : ""}${s.dtype === "fp16" ? "-fp16" : ""}`;
  return { name, ...s };
}

/** The lengths of a case's requests, drawn as FlashMLA's tests draw them, from `seed`. */
export function checkCaseSeqlens(c: Pick<CheckCaseSpec, "b" | "s_q" | "s_k" | "varlen" | "zeroFraction">, seed: number): number[] {
  const rng = new Rng(seed);
  return Array.from({ length: c.b }, () => {
    const len = c.varlen ? Math.round(Math.max(c.s_k + (c.s_k / 2) * rng.normal(), c.s_q)) : c.s_k;
    // Always draw, so the zero fraction does not shift the rest of the stream.
    return rng.uniform() < c.zeroFraction ? 0 : len;
  });
}
