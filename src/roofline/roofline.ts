import { ArgumentError } from "../errors/ArgumentError.js";
import { D_NOPE, D_QK } from "../numeric/kvCacheFp8.js";
import type { MlaCost } from "./mlaCost.js";

export type Bound = "compute" | "memory";

/** A compute roof and a bandwidth roof. */
export interface Roofs {
  tflops: number;
  gbPerS: number;
}

/** Where one call sits under one pair of roofs. */
export interface RooflinePoint {
  intensity: number;
  /** FLOP per byte where the roofs meet. */
  ridge: number;
  bound: Bound;
  /** FLOP / peak, in µs. */
  computeUs: number;
  /** bytes / bandwidth, in µs. */
  memoryUs: number;
  /** max(computeUs, memoryUs): no kernel can be faster. */
  idealUs: number;
  /** The throughput the ideal time implies (the roofline's height at this intensity). */
  attainableTflops: number;
}

/**
 * Places `cost` under `roofs`: the ridge point, which roof binds, and the ideal time
 * max(FLOP/peak, bytes/bandwidth).
 *
 * @example roofline(mlaCost(shape), { tflops: 767, gbPerS: 4138 }).idealUs
 */
export function roofline(cost: Pick<MlaCost, "flop" | "bytes">, roofs: Roofs): RooflinePoint {
  requirePositive("roofline", "roofs.tflops", roofs.tflops);
  requirePositive("roofline", "roofs.gbPerS", roofs.gbPerS);
  requirePositive("roofline", "cost.flop", cost.flop);
  requirePositive("roofline", "cost.bytes", cost.bytes);
  const intensity = cost.flop / cost.bytes;
  const ridge = ridgePoint(roofs.tflops, roofs.gbPerS);
  const computeUs = cost.flop / (roofs.tflops * 1e6);
  const memoryUs = cost.bytes / (roofs.gbPerS * 1e3);
  const idealUs = Math.max(computeUs, memoryUs);
  return {
    intensity,
    ridge,
    // At exactly the ridge both roofs bind; call it compute, as the seed's "≥" does.
    bound: intensity >= ridge ? "compute" : "memory",
    computeUs,
    memoryUs,
    idealUs,
    attainableTflops: achievedTflops(cost.flop, idealUs),
  };
}

/** FLOP per byte at which a `tflops` peak and a `gbPerS` bandwidth meet (989.4 / 4.8 TB/s ≈ 206). */
export function ridgePoint(tflops: number, gbPerS: number): number {
  requirePositive("ridgePoint", "tflops", tflops);
  requirePositive("ridgePoint", "gbPerS", gbPerS);
  return (tflops * 1e12) / (gbPerS * 1e9);
}

/**
 * The h_q·s_q at which dense MLA decode reaches the ridge, for long caches (s̄ ≫ h_q·s_q): the
 * intensity tends to h_q·s_q·(d_qk + d_v)/d_qk ≈ 1.89·h_q·s_q. The seed rounds the factor to 2,
 * giving ½·865/3.35 ≈ 129 on a throttled H800 ("128"); pass `approximateFactor: 2` for that.
 */
export function ridgeHeadsTimesQueries(
  ridge: number,
  options: { d_qk?: number; d_v?: number; approximateFactor?: number } = {},
): number {
  requirePositive("ridgeHeadsTimesQueries", "ridge", ridge);
  const d_qk = options.d_qk ?? D_QK;
  const d_v = options.d_v ?? D_NOPE;
  const factor = options.approximateFactor ?? (d_qk + d_v) / d_qk;
  return ridge / factor;
}

/** TFLOPS achieved by `flop` FLOPs in `timeUs` µs. */
export function achievedTflops(flop: number, timeUs: number): number {
  requirePositive("achievedTflops", "timeUs", timeUs);
  return flop / (timeUs * 1e6);
}

/** GB/s achieved by moving `bytes` bytes in `timeUs` µs. */
export function achievedGbPerS(bytes: number, timeUs: number): number {
  requirePositive("achievedGbPerS", "timeUs", timeUs);
  return bytes / (timeUs * 1e3);
}

/** `value` as a percentage of `ceiling` (646 of 767 TFLOPS → 84.2). */
export function percentOfCeiling(value: number, ceiling: number): number {
  requirePositive("percentOfCeiling", "ceiling", ceiling);
  return (100 * value) / ceiling;
}

/** Everything a measured time says about one call under one pair of roofs. */
export interface MeasuredPoint {
  timeUs: number;
  tflops: number;
  gbPerS: number;
  /** Achieved TFLOPS as % of the compute roof. */
  percentOfPeak: number;
  /** Achieved GB/s as % of the bandwidth roof. */
  percentOfBandwidth: number;
  /** Ideal time / measured time, as %: the share of the roofline reached, whichever roof binds. */
  percentOfRoofline: number;
}

/** Turns a measured time for `cost` into TFLOPS, GB/s and percentages of `roofs`. */
export function measuredPoint(cost: Pick<MlaCost, "flop" | "bytes">, timeUs: number, roofs: Roofs): MeasuredPoint {
  const tflops = achievedTflops(cost.flop, timeUs);
  const gbPerS = achievedGbPerS(cost.bytes, timeUs);
  return {
    timeUs,
    tflops,
    gbPerS,
    percentOfPeak: percentOfCeiling(tflops, roofs.tflops),
    percentOfBandwidth: percentOfCeiling(gbPerS, roofs.gbPerS),
    percentOfRoofline: percentOfCeiling(roofline(cost, roofs).idealUs, timeUs),
  };
}

function requirePositive(fn: string, name: string, v: number): void {
  if (!(typeof v === "number" && Number.isFinite(v) && v > 0)) {
    throw new ArgumentError(fn, name, "a positive finite number", String(v));
  }
}
