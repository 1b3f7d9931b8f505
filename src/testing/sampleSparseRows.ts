import { ArgumentError } from "../errors/ArgumentError.js";
import { D_QK, D_V } from "../mla/contract/shape.js";
import type { ReferenceRow } from "../mla/reference/referenceArgs.js";
import { Rng } from "../numeric/random.js";

/** Multiply-adds the float64 reference spends per row and key: 576 for the score, 512 for the output. */
export const REFERENCE_MACS_PER_KEY = D_QK + D_V;
/** Default cap on the reference's work for one sample: about a second of JavaScript. */
export const DEFAULT_SAMPLE_MACS = 2e8;

/** Options of {@link sampleSparseRows}. */
export interface SparseRowSampleOptions {
  b: number;
  s_q: number;
  h_q: number;
  topk: number;
  seed: number;
  /** The case's sink, if any: a head with a finite sink is sampled first (a +inf sink zeroes its head's output). */
  attnSink?: Float32Array;
  /** Requests sampled before the others (the longest, say). */
  requests?: readonly number[];
  /** Cap on rows · topk · 1088 multiply-adds. @default 2e8 */
  maxMacs?: number;
}

/**
 * Output rows of a sparse case for the float64 CPU reference to check: requests 0, b − 1 and a random
 * one (after any given), every query token (or the last, the first and a random one when s_q > 3),
 * and heads 0, h_q − 1 and a random one, a finite-sink head first. When the rows would cost the
 * reference more than `maxMacs`, heads go first, then requests, then tokens, down to one row.
 * Sorted by (batch, token, head); equal options give equal rows.
 */
export function sampleSparseRows(opts: SparseRowSampleOptions): ReferenceRow[] {
  const fn = "sampleSparseRows";
  const { b, s_q, h_q, topk } = opts;
  for (const [name, v] of [["b", b], ["s_q", s_q], ["h_q", h_q], ["topk", topk]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new ArgumentError(fn, `opts.${name}`, "an integer >= 1", String(v));
  }
  const maxMacs = opts.maxMacs ?? DEFAULT_SAMPLE_MACS;
  if (!(maxMacs > 0)) throw new ArgumentError(fn, "opts.maxMacs", "a number > 0", String(maxMacs));
  const rng = new Rng(opts.seed);
  const finiteSink = opts.attnSink === undefined ? -1 : opts.attnSink.findIndex((s) => Number.isFinite(s));
  const heads = unique([...(finiteSink >= 0 ? [finiteSink] : []), 0, h_q - 1, rng.int(0, h_q)]);
  const requests = unique([...(opts.requests ?? []), 0, b - 1, rng.int(0, b)].filter((i) => Number.isInteger(i) && i >= 0 && i < b));
  const tokens = s_q <= 3 ? Array.from({ length: s_q }, (_, j) => s_q - 1 - j) : unique([s_q - 1, 0, rng.int(0, s_q)]);

  const maxRows = Math.max(1, Math.floor(maxMacs / (topk * REFERENCE_MACS_PER_KEY)));
  let [nh, nr, nt] = [heads.length, requests.length, tokens.length];
  while (nh * nr * nt > maxRows && nh > 1) nh--;
  while (nh * nr * nt > maxRows && nr > 1) nr--;
  while (nh * nr * nt > maxRows && nt > 1) nt--;

  const rows: ReferenceRow[] = [];
  for (const batch of requests.slice(0, nr)) {
    for (const token of tokens.slice(0, nt)) for (const head of heads.slice(0, nh)) rows.push({ batch, token, head });
  }
  return rows.sort((x, y) => x.batch - y.batch || x.token - y.token || x.head - y.head);
}

function unique(xs: number[]): number[] {
  return [...new Set(xs)];
}
