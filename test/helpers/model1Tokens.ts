import { f64ToBf16Bits } from "../../src/numeric/bf16.js";
import { Rng } from "../../src/numeric/random.js";

/** Spreads of the normal tiles: below the 2^-13 scale floor, ordinary, large, near bf16's ends. */
const STDS = [1e-30, 1e-6, 1e-3, 0.05, 1, 300, 1e20, 1e35];

/**
 * `[n, 512]` bf16 tokens (bit patterns) for the MODEL1 quantizer tests, each 64-dim NoPE tile drawn in
 * its own way so the scales differ: normal draws at a random spread (an outlier now and then), exact
 * powers of two, a largest value of exactly 448·2^k (a scale boundary) or 450·2^k, the bf16 value just above it,
 * all ±0, or values around amax = 448·1e-4 (the clamp). RoPE dims are any finite bf16 patterns.
 */
export function randomModel1Tokens(rng: Rng, n: number): Uint16Array {
  const out = new Uint16Array(n * 512);
  for (let t = 0; t < n; t++) {
    for (let tile = 0; tile < 7; tile++) {
      const at = t * 512 + tile * 64;
      const kind = rng.int(0, 6);
      const k = rng.int(-20, 100);
      for (let i = 0; i < 64; i++) {
        let x: number;
        if (kind === 0) x = rng.normal() * STDS[rng.int(0, STDS.length)];
        else if (kind === 1) x = (rng.uniform() < 0.5 ? -1 : 1) * 2 ** rng.int(-40, 60);
        else if (kind === 2) x = i === 7 ? (rng.uniform() < 0.5 ? 448 : 450) * 2 ** k : rng.normal() * 2 ** k;
        else if (kind === 3) x = rng.uniform() < 0.5 ? -0 : 0;
        else if (kind === 4) x = 0.0448 * (0.98 + 0.04 * rng.uniform()) * (rng.uniform() < 0.5 ? -1 : 1);
        else x = rng.normal() * STDS[tile % STDS.length];
        out[at + i] = f64ToBf16Bits(x);
      }
    }
    for (let i = 448; i < 512; i++) {
      let bits = rng.nextU32() & 0xffff;
      if ((bits & 0x7f80) === 0x7f80) bits &= 0xbfff; // keep RoPE finite: NaN/inf are tested on their own
      out[t * 512 + i] = bits;
    }
  }
  return out;
}
