import { AssertionError } from "node:assert";
import { ArgumentError, formatShape } from "../errors/ArgumentError.js";
import { bf16BitsToF32, f64ToBf16Bits } from "./bf16.js";
import { f64ToFp16Bits, fp16BitsToF32 } from "./fp16.js";

/** Per-element and whole-tensor limits for `compareTensors`. */
export interface Tolerance {
  /** An element passes when |actual - reference| < abs ... */
  abs: number;
  /** ... or |actual - reference| / (|reference| + 1e-6) < rel. */
  rel: number;
  /** When given, the cosine difference 1 - 2Σa·r / Σ(a² + r²) must be <= cos. */
  cos?: number;
}

/** Options of `compareTensors` and `assertClose`. */
export interface CompareOptions {
  /** Shape of both tensors (row-major); failure messages then give indices as [i, j, k]. */
  shape?: readonly number[];
  /** Name used in messages. @default "tensor" */
  name?: string;
  /** Round the reference to this dtype (nearest even, from f64) before comparing. @default "none" */
  roundReferenceTo?: "bf16" | "fp16" | "none";
}

/** Everything `compareTensors` found; `message` says it in one paragraph. */
export interface CompareResult {
  ok: boolean;
  /** Number of elements compared. */
  count: number;
  /** Elements that failed: NaN/inf kind mismatches plus finite elements outside both abs and rel. */
  mismatches: number;
  /** Flat index of the worst element (see `compareTensors`), -1 when there are no elements. */
  worstIndex: number;
  worstActual: number;
  /** The reference value at `worstIndex`, after rounding when `roundReferenceTo` is set. */
  worstReference: number;
  maxAbsError: number;
  maxRelError: number;
  /** 1 - 2Σa·r / Σ(a² + r²) over all elements, non-finite ones counted as 0; 0 when both are all zero. */
  cosDiff: number;
  message: string;
}

/** FlashMLA's dense decode tolerance for `out` (abs 8e-4, rel two bf16 steps, cos 5e-6). */
export const DENSE_OUT_TOL: Tolerance = Object.freeze({ abs: 8e-4, rel: 2.01 / 128, cos: 5e-6 });
/** FlashMLA's dense decode tolerance for `lse`. */
export const DENSE_LSE_TOL: Tolerance = Object.freeze({ abs: 1e-6, rel: 8.01 / 65536 });
/** FlashMLA's sparse decode tolerance for `out`. */
export const SPARSE_OUT_TOL: Tolerance = Object.freeze({ abs: 1e-3, rel: 2.01 / 128, cos: 5e-6 });
/** FlashMLA's sparse decode tolerance for `lse`. */
export const SPARSE_LSE_TOL: Tolerance = Object.freeze({ abs: 1e-6, rel: 8.01 / 65536 });

const REL_EPSILON = 1e-6;

/**
 * A copy of `src` with every value rounded to bf16 (nearest even; NaN to the quiet NaN of its sign),
 * by integer ops on the bit patterns: what f64ToBf16Bits gives for values that are already f32.
 */
export function roundF32ArrayToBf16Values(src: Float32Array): Float32Array {
  const out = new Float32Array(src.length);
  const inBits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const outBits = new Uint32Array(out.buffer);
  for (let i = 0; i < src.length; i++) {
    const b = inBits[i];
    if ((b & 0x7fffffff) > 0x7f800000) {
      outBits[i] = ((b & 0x80000000) | 0x7fc00000) >>> 0;
    } else {
      // Adding 0x7fff plus the kept lsb carries into bit 16 exactly when round-to-nearest-even rounds up.
      outBits[i] = (((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) << 16) >>> 0;
    }
  }
  return out;
}

/** Row-major multi-index of `flat` in `shape`, or the flat index when there is no shape. */
function formatIndex(flat: number, shape: readonly number[] | undefined): string {
  if (shape === undefined) return `[${flat}]`;
  const index = new Array<number>(shape.length);
  let rest = flat;
  for (let d = shape.length - 1; d >= 0; d--) {
    index[d] = rest % shape[d];
    rest = Math.floor(rest / shape[d]);
  }
  return formatShape(index);
}

function describeSpecial(x: number): string {
  return Number.isNaN(x) ? "NaN" : x === Infinity ? "+inf" : x === -Infinity ? "-inf" : String(x);
}

function fmt(x: number): string {
  return Number.isFinite(x) ? x.toPrecision(6) : describeSpecial(x);
}

function roundTo(dtype: CompareOptions["roundReferenceTo"]): ((x: number) => number) | undefined {
  switch (dtype) {
    case undefined:
    case "none":
      return undefined;
    case "bf16":
      return (x) => bf16BitsToF32(f64ToBf16Bits(x));
    case "fp16":
      return (x) => fp16BitsToF32(f64ToFp16Bits(x));
    default:
      throw new ArgumentError("compareTensors", "opts.roundReferenceTo", '"bf16", "fp16" or "none"', String(dtype));
  }
}

/**
 * Compares a computed tensor with a reference the way FlashMLA's tests do (FLASHMLA.md §4):
 * 1. NaN, +inf and -inf must sit at the same positions (same kind) in both; otherwise the result
 *    fails, naming the first position that differs. Those positions then count as 0 below.
 * 2. With `roundReferenceTo`, each reference element is first rounded to that dtype. This is done
 *    before rule 1 looks at it, so a finite reference that overflows the output dtype expects ±inf,
 *    as the kernel's output would hold.
 * 3. Each element passes when |a - r| < abs or |a - r| / (|r| + 1e-6) < rel (or a === r, so that a
 *    zero tolerance means bit equality).
 * 4. With `tol.cos`, the cosine difference 1 - 2Σa·r / Σ(a² + r²), accumulated in f64, must be <= cos.
 * The worst element is the failing one with the largest abs error (or the largest abs error of all
 * when none fails). Never throws for a mismatch: see `ok` and `message`, or use `assertClose`.
 */
export function compareTensors(
  actual: ArrayLike<number>,
  reference: ArrayLike<number>,
  tol: Tolerance,
  opts: CompareOptions = {},
): CompareResult {
  const name = opts.name ?? "tensor";
  const shape = opts.shape;
  if (actual.length !== reference.length) {
    throw new ArgumentError("compareTensors", "reference", `${actual.length} elements like actual`, `${reference.length}`);
  }
  if (shape !== undefined && shape.reduce((a, b) => a * b, 1) !== actual.length) {
    throw new ArgumentError("compareTensors", "opts.shape", `a shape of ${actual.length} elements`, formatShape(shape));
  }
  if (!(tol.abs >= 0) || !(tol.rel >= 0) || (tol.cos !== undefined && !(tol.cos >= 0))) {
    throw new ArgumentError("compareTensors", "tol", "abs, rel (and cos) >= 0", JSON.stringify(tol));
  }
  let round = roundTo(opts.roundReferenceTo);
  // Fast path for the common case (an f32 reference rounded to bf16, millions of elements in the GPU
  // tests): round the whole array with integer ops first; same values as the per-element rounding.
  if (opts.roundReferenceTo === "bf16" && reference instanceof Float32Array) {
    reference = roundF32ArrayToBf16Values(reference);
    round = undefined;
  }
  const count = actual.length;

  let mismatches = 0;
  let specialMismatches = 0;
  let firstSpecialMismatch = -1;
  let worstIndex = -1;
  let worstFailing = false;
  let worstError = -1;
  let worstRelError = 0;
  let maxAbsError = 0;
  let maxRelError = 0;
  let dot = 0;
  let sumSquares = 0;

  for (let i = 0; i < count; i++) {
    let a = actual[i];
    let r = round === undefined ? reference[i] : round(reference[i]);
    if (!Number.isFinite(a) || !Number.isFinite(r)) {
      const sameKind = Number.isNaN(a) ? Number.isNaN(r) : a === r;
      if (!sameKind) {
        specialMismatches++;
        mismatches++;
        if (firstSpecialMismatch < 0) firstSpecialMismatch = i;
      }
      a = 0;
      r = 0;
    }
    const absError = Math.abs(a - r);
    const relError = absError / (Math.abs(r) + REL_EPSILON);
    const passes = a === r || absError < tol.abs || relError < tol.rel;
    if (!passes) mismatches++;
    if (absError > maxAbsError) maxAbsError = absError;
    if (relError > maxRelError) maxRelError = relError;
    // A failing element always outranks a passing one, then the larger abs error wins.
    if ((!passes && !worstFailing) || (!passes === worstFailing && absError > worstError)) {
      worstIndex = i;
      worstFailing = !passes;
      worstError = absError;
      worstRelError = relError;
    }
    dot += a * r;
    sumSquares += a * a + r * r;
  }

  const cosDiff = sumSquares === 0 ? 0 : 1 - (2 * dot) / sumSquares;
  const cosOk = tol.cos === undefined || cosDiff <= tol.cos;
  const ok = mismatches === 0 && cosOk;

  const worstActual = worstIndex < 0 ? NaN : actual[worstIndex];
  const worstReferenceRaw = worstIndex < 0 ? NaN : reference[worstIndex];
  const worstReference = round === undefined || worstIndex < 0 ? worstReferenceRaw : round(worstReferenceRaw);

  const tolText = `abs ${tol.abs}, rel ${tol.rel}${tol.cos === undefined ? "" : `, cos ${tol.cos}`}`;
  const cosText = `cosine difference ${cosDiff.toExponential(3)}${tol.cos === undefined ? " (not checked)" : ` (limit ${tol.cos})`}`;
  const parts: string[] = [];
  if (ok) {
    parts.push(`${name}: all ${count} elements within tolerance (${tolText}); max abs error ${fmt(maxAbsError)}, max rel error ${fmt(maxRelError)}; ${cosText}`);
  } else {
    parts.push(`${name}: ${mismatches} of ${count} elements outside tolerance (${tolText})`);
    if (firstSpecialMismatch >= 0) {
      const roundedRef = round === undefined ? reference[firstSpecialMismatch] : round(reference[firstSpecialMismatch]);
      parts.push(
        `NaN/inf positions differ at ${specialMismatches} element(s), first at ${formatIndex(firstSpecialMismatch, shape)}: ` +
          `actual ${describeSpecial(actual[firstSpecialMismatch])}, reference ${describeSpecial(roundedRef)}`,
      );
    }
    if (worstIndex >= 0) {
      parts.push(
        `worst at ${formatIndex(worstIndex, shape)}: actual ${fmt(worstActual)}, reference ${fmt(worstReference)}, ` +
          `abs error ${fmt(worstError)}, rel error ${fmt(worstRelError)}`,
      );
    }
    parts.push(`max abs error ${fmt(maxAbsError)}, max rel error ${fmt(maxRelError)}`);
    parts.push(cosOk ? cosText : `${cosText} EXCEEDED`);
  }

  return {
    ok,
    count,
    mismatches,
    worstIndex,
    worstActual,
    worstReference,
    maxAbsError,
    maxRelError,
    cosDiff,
    message: parts.join("; "),
  };
}

/**
 * `compareTensors`, throwing a node:assert `AssertionError` carrying the result's message when the
 * comparison fails; returns the result when it passes.
 */
export function assertClose(
  actual: ArrayLike<number>,
  reference: ArrayLike<number>,
  tol: Tolerance,
  opts: CompareOptions = {},
): CompareResult {
  const result = compareTensors(actual, reference, tol, opts);
  if (!result.ok) {
    throw new AssertionError({ message: result.message, operator: "assertClose" });
  }
  return result;
}
