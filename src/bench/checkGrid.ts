import { ArgumentError } from "../errors/ArgumentError.js";
import { Rng } from "../numeric/random.js";

/** One case of `flashmla check`: FlashMLA's test-data recipe with these parameters. */
export interface CheckCaseSpec {
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

/** The grids `flashmla check --grid` knows. */
export const CHECK_GRIDS = ["small", "flashmla"] as const;
export type CheckGridName = (typeof CHECK_GRIDS)[number];

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
 * `dtype` sets every case's dtype; without it the small grid runs one fp16 case among bf16 ones.
 */
export function checkGrid(grid: CheckGridName, dtype?: "bf16" | "fp16"): CheckCaseSpec[] {
  if (grid === "small") return smallGrid(dtype);
  if (grid === "flashmla") return flashmlaGrid(dtype ?? "bf16");
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

function spec(s: Omit<CheckCaseSpec, "name">): CheckCaseSpec {
  const name =
    `b${s.b}-sq${s.s_q}-h${s.h_q}/${s.h_kv}-sk${s.s_k}${s.varlen ? "v" : ""}${s.zeroFraction > 0 ? "-zeros" : ""}` +
    `${s.causal ? "-causal" : ""}${s.dtype === "fp16" ? "-fp16" : ""}`;
  return { name, ...s };
}

/** The lengths of a case's requests, drawn as FlashMLA's tests draw them, from `seed`. */
export function checkCaseSeqlens(c: CheckCaseSpec, seed: number): number[] {
  const rng = new Rng(seed);
  return Array.from({ length: c.b }, () => {
    const len = c.varlen ? Math.round(Math.max(c.s_k + (c.s_k / 2) * rng.normal(), c.s_q)) : c.s_k;
    // Always draw, so the zero fraction does not shift the rest of the stream.
    return rng.uniform() < c.zeroFraction ? 0 : len;
  });
}
