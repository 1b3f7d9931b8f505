import { ArgumentError } from "../errors/ArgumentError.js";
import { f64ToBf16Bits } from "./bf16.js";
import { f64ToFp16Bits } from "./fp16.js";

const TWO_POW_32 = 2 ** 32;

/** murmur3's 32-bit finalizer: spreads every input bit over the whole word. */
function mix32(z: number): number {
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/**
 * A small seeded generator (xoshiro128**, state filled from the seed by a Weyl sequence through a
 * 32-bit mixer) for tests and benchmarks. Integer streams are identical on every platform because
 * they use only 32-bit integer operations; `normal()` also uses Math.log/cos/sin, which V8
 * computes with the same portable code everywhere. Not for cryptography.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  // Box–Muller makes normals in pairs; the second one waits here.
  private spareNormal: number | undefined;

  /** @param seed any safe integer; equal seeds give equal streams. */
  constructor(seed: number) {
    if (!Number.isSafeInteger(seed)) throw new ArgumentError("Rng", "seed", "a safe integer", String(seed));
    const low = seed >>> 0;
    const high = Math.floor(seed / TWO_POW_32) >>> 0;
    let weyl = mix32(high ^ 0x6a09e667) ^ low;
    const next = (): number => mix32((weyl = (weyl + 0x9e3779b9) | 0));
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
    // xoshiro's only forbidden state; unreachable in practice, but cheap to rule out.
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** The next 32 random bits as an unsigned integer in [0, 2^32). */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** A uniform double in [0, 1) with 53 random bits. */
  uniform(): number {
    const high = this.nextU32() >>> 5; // 27 bits
    const low = this.nextU32() >>> 6; // 26 bits
    return (high * 2 ** 26 + low) / 2 ** 53;
  }

  /** A uniform integer in [lo, hiExclusive), without modulo bias; the range may span at most 2^32. */
  int(lo: number, hiExclusive: number): number {
    if (!Number.isSafeInteger(lo)) throw new ArgumentError("Rng.int", "lo", "a safe integer", String(lo));
    if (!Number.isSafeInteger(hiExclusive) || hiExclusive <= lo || hiExclusive - lo > TWO_POW_32) {
      throw new ArgumentError("Rng.int", "hiExclusive", `an integer in (${lo}, ${lo} + 2^32]`, String(hiExclusive));
    }
    const range = hiExclusive - lo;
    // Accept only draws below the largest multiple of `range`, so every residue is equally likely.
    const limit = TWO_POW_32 - (TWO_POW_32 % range);
    let u = this.nextU32();
    while (u >= limit) u = this.nextU32();
    return lo + (u % range);
  }

  /** One element of `xs`, each equally likely. */
  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new ArgumentError("Rng.pick", "xs", "a non-empty array", "[]");
    return xs[this.int(0, xs.length)];
  }

  /** A standard normal draw (mean 0, standard deviation 1) by the Box–Muller transform. */
  normal(): number {
    if (this.spareNormal !== undefined) {
      const z = this.spareNormal;
      this.spareNormal = undefined;
      return z;
    }
    const u1 = 1 - this.uniform(); // (0, 1]: keeps log finite
    const u2 = this.uniform();
    const radius = Math.sqrt(-2 * Math.log(u1));
    const angle = 2 * Math.PI * u2;
    this.spareNormal = radius * Math.sin(angle);
    return radius * Math.cos(angle);
  }

  /**
   * Fills `dst` with normal draws of the given mean and standard deviation (rounded to f32 when
   * `dst` is a Float32Array) and returns it.
   * @param mean @default 0
   * @param std @default 1
   */
  fillNormal<T extends Float32Array | Float64Array>(dst: T, mean = 0, std = 1): T {
    for (let i = 0; i < dst.length; i++) dst[i] = mean + std * this.normal();
    return dst;
  }

  /** Shuffles `arr` in place (Fisher–Yates, every order equally likely) and returns it. */
  shuffle<T>(arr: T[]): T[] {
    for (let i = arr.length - 1; i > 0; i--) {
      const j = this.int(0, i + 1);
      const tmp = arr[i];
      arr[i] = arr[j];
      arr[j] = tmp;
    }
    return arr;
  }

  /** A uniformly random permutation of 0..n-1. */
  permutation(n: number): Int32Array {
    if (!Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1) {
      throw new ArgumentError("Rng.permutation", "n", "an integer in [0, 2^31)", String(n));
    }
    const out = new Int32Array(n);
    for (let i = 0; i < n; i++) out[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(0, i + 1);
      const tmp = out[i];
      out[i] = out[j];
      out[j] = tmp;
    }
    return out;
  }
}

/** Options of `randomBf16` and `randomFp16`. */
export interface RandomHalfOptions {
  /** Mean of the normal distribution. @default 0 */
  mean?: number;
  /** Standard deviation of the normal distribution. @default 1 */
  std?: number;
  /**
   * When given, each draw is clamped to [-clamp, clamp] before rounding, like FlashMLA's test data
   * (`clamp(-1, 1)`). The rounded value can exceed `clamp` by half a step if `clamp` itself is not
   * representable.
   */
  clamp?: number;
}

function drawRounded(fn: string, rng: Rng, count: number, options: RandomHalfOptions, round: (x: number) => number): Uint16Array {
  if (!Number.isInteger(count) || count < 0) throw new ArgumentError(fn, "count", "a non-negative integer", String(count));
  const { mean = 0, std = 1, clamp } = options;
  if (clamp !== undefined && !(clamp >= 0)) throw new ArgumentError(fn, "options.clamp", "a number >= 0", String(clamp));
  const out = new Uint16Array(count);
  for (let i = 0; i < count; i++) {
    let x = mean + std * rng.normal();
    if (clamp !== undefined) x = Math.min(clamp, Math.max(-clamp, x));
    out[i] = round(x);
  }
  return out;
}

/**
 * `count` normal draws (optionally clamped), each rounded once from f64 to bf16 (nearest even).
 * @example randomBf16(new Rng(0), 64 * 576, { std: 0.1, clamp: 1 }) // FlashMLA's KV test data
 */
export function randomBf16(rng: Rng, count: number, options: RandomHalfOptions = {}): Uint16Array {
  return drawRounded("randomBf16", rng, count, options, f64ToBf16Bits);
}

/** `count` normal draws (optionally clamped), each rounded once from f64 to IEEE half (nearest even). */
export function randomFp16(rng: Rng, count: number, options: RandomHalfOptions = {}): Uint16Array {
  return drawRounded("randomFp16", rng, count, options, f64ToFp16Bits);
}
