// A deliberately plain second formulation of rounding, for the conversion tests: it works on
// values in f64 arithmetic (exact here: only power-of-two scaling, floor and fraction), while the
// code under test works on bit patterns.

/** A binary floating-point format as the oracle needs it. */
export interface BinaryFormat {
  /** Stored fraction bits. */
  mantissaBits: number;
  /** Exponent of the smallest normal value (below it the spacing stays fixed: subnormals). */
  minExponent: number;
  /** Largest finite magnitude. */
  maxFinite: number;
  /** What a value that rounds past maxFinite becomes (sign applied): Infinity or NaN. */
  overflow: number;
}

export const BF16: BinaryFormat = { mantissaBits: 7, minExponent: -126, maxFinite: (2 - 2 ** -7) * 2 ** 127, overflow: Infinity };
export const FP16: BinaryFormat = { mantissaBits: 10, minExponent: -14, maxFinite: 65504, overflow: Infinity };
export const FP8_E4M3: BinaryFormat = { mantissaBits: 3, minExponent: -6, maxFinite: 448, overflow: NaN };

/** `x` rounded to the nearest value of `format`, ties to the even significand; NaN and ±inf map to themselves. */
export function nearestEven(x: number, format: BinaryFormat): number {
  if (Number.isNaN(x)) return NaN;
  if (!Number.isFinite(x)) return format.overflow === Infinity ? x : NaN;
  if (x === 0) return x;
  const magnitude = Math.abs(x);
  let exponent = Math.floor(Math.log2(magnitude));
  // log2 may be off by one next to a power of two; settle it exactly.
  if (2 ** exponent > magnitude) exponent--;
  else if (2 ** (exponent + 1) <= magnitude) exponent++;
  const step = 2 ** (Math.max(exponent, format.minExponent) - format.mantissaBits);
  const steps = magnitude / step;
  const whole = Math.floor(steps);
  const fraction = steps - whole;
  const rounded = (fraction > 0.5 || (fraction === 0.5 && whole % 2 === 1) ? whole + 1 : whole) * step;
  if (rounded > format.maxFinite) return Math.sign(x) * format.overflow;
  return Math.sign(x) * rounded;
}
