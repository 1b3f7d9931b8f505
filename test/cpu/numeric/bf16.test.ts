import { test } from "node:test";
import assert from "node:assert/strict";
import { bf16ArrayToF32, bf16BitsToF32, f32ArrayToBf16, f32ToBf16Bits, f64ToBf16Bits } from "../../../src/numeric/bf16.js";
import { f32Bits, f32FromBits } from "../../../src/numeric/f32Bits.js";
import { Rng } from "../../../src/numeric/random.js";
import { BF16, nearestEven } from "./nearestEven.js";

const hex = (bits: number): string => `0x${bits.toString(16).padStart(4, "0")}`;

/** bf16 by its definition: 1 sign, 8 exponent (bias 127), 7 fraction bits. */
function bf16ByDefinition(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 7) & 0xff;
  const fraction = bits & 0x7f;
  if (exponent === 0xff) return fraction === 0 ? sign * Infinity : NaN;
  if (exponent === 0) return sign * fraction * 2 ** -133;
  return sign * (1 + fraction / 128) * 2 ** (exponent - 127);
}

function isNanCode(bits: number): boolean {
  return (bits & 0x7f80) === 0x7f80 && (bits & 0x7f) !== 0;
}

test("bf16BitsToF32() decodes all 65536 codes as the bf16 definition says", () => {
  for (let bits = 0; bits < 0x10000; bits++) {
    const expected = bf16ByDefinition(bits);
    const got = bf16BitsToF32(bits);
    if (!Object.is(got, expected)) assert.fail(`${hex(bits)}: got ${got}, expected ${expected}`);
  }
  assert.equal(bf16BitsToF32(0x3f80), 1);
  assert.equal(bf16BitsToF32(0xc000), -2);
  assert.equal(bf16BitsToF32(0x0001), 2 ** -133);
  assert.equal(bf16BitsToF32(0x7f7f), 3.3895313892515355e38);
});

test("f32ToBf16Bits() gives back every non-NaN code and a quiet NaN of the same sign for NaN codes", () => {
  let nanCodes = 0;
  for (let bits = 0; bits < 0x10000; bits++) {
    const encoded = f32ToBf16Bits(bf16BitsToF32(bits));
    if (isNanCode(bits)) {
      nanCodes++;
      const expected = bits & 0x8000 ? 0xffc0 : 0x7fc0;
      if (encoded !== expected) assert.fail(`NaN ${hex(bits)} encoded as ${hex(encoded)}, expected ${hex(expected)}`);
    } else if (encoded !== bits) {
      assert.fail(`${hex(bits)} came back as ${hex(encoded)}`);
    }
  }
  assert.equal(nanCodes, 2 * 127);
});

test("f32ToBf16Bits() rounds hand-picked ties to even", () => {
  const cases: Array<[number, number]> = [
    [1 + 2 ** -8, 0x3f80], // halfway between 1 (even) and 1 + 2^-7 (odd) -> 1
    [1 + 3 * 2 ** -8, 0x3f82], // halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6
    [-(1 + 2 ** -8), 0xbf80],
    [-(1 + 3 * 2 ** -8), 0xbf82],
    [2 + 2 ** -7, 0x4000], // one exponent up, same pattern
    [1 - 2 ** -9, 0x3f80], // halfway between 1 - 2^-8 (0x3f7f, odd) and 1 -> 1
    [1 - 3 * 2 ** -9, 0x3f7e], // halfway between 0x3f7d and 0x3f7e -> 0x3f7e
    [2 ** -134, 0x0000], // halfway between 0 and the smallest subnormal -> 0
    [3 * 2 ** -134, 0x0002], // halfway between subnormals 1 and 2 -> 2
    [(2 - 2 ** -8) * 2 ** 127, 0x7f80], // halfway between the largest finite (odd) and 2^128 -> inf
  ];
  for (const [x, expected] of cases) assert.equal(hex(f32ToBf16Bits(x)), hex(expected), `x = ${x}`);
});

test("f32ToBf16Bits() rounds just off a tie to the nearer code", () => {
  const ulp32 = 2 ** -23;
  assert.equal(hex(f32ToBf16Bits(1 + 2 ** -8 + ulp32)), "0x3f81");
  assert.equal(hex(f32ToBf16Bits(1 + 2 ** -8 - ulp32)), "0x3f80");
  assert.equal(hex(f32ToBf16Bits(1 + 3 * 2 ** -8 - ulp32)), "0x3f81");
  assert.equal(hex(f32ToBf16Bits(2 ** -134 + 2 ** -149)), "0x0001");
});

test("f32ToBf16Bits() rounds every midpoint between neighbouring codes to the even one and its f32 neighbours to the nearer", () => {
  for (const sign of [0, 0x8000]) {
    // Finite pairs only: the tie between 0x7f7f and inf is a hand-picked case above.
    for (let low = sign; low < sign + 0x7f7f; low++) {
      const high = low + 1;
      const midpoint = (bf16BitsToF32(low) + bf16BitsToF32(high)) / 2;
      const midBits = f32Bits(midpoint);
      assert.equal(f32FromBits(midBits), midpoint, "every bf16 midpoint is an f32");
      const even = low & 1 ? high : low;
      const towardHigh = f32FromBits(midBits + 1); // one f32 step away from zero
      const towardLow = f32FromBits(midBits - 1);
      if (f32ToBf16Bits(midpoint) !== even || f32ToBf16Bits(towardHigh) !== high || f32ToBf16Bits(towardLow) !== low) {
        assert.fail(`midpoint of ${hex(low)} and ${hex(high)}: got ${hex(f32ToBf16Bits(midpoint))}, ` +
          `${hex(f32ToBf16Bits(towardLow))}, ${hex(f32ToBf16Bits(towardHigh))}`);
      }
    }
  }
});

test("f32ToBf16Bits() matches a nearest-even oracle on 200000 random f32 bit patterns", () => {
  const rng = new Rng(1);
  for (let i = 0; i < 200_000; i++) {
    const x = f32FromBits(rng.nextU32());
    const got = bf16BitsToF32(f32ToBf16Bits(x));
    const expected = nearestEven(x, BF16);
    if (!Object.is(got, expected)) assert.fail(`x = ${x} (${f32Bits(x).toString(16)}): got ${got}, expected ${expected}`);
  }
});

test("f32ToBf16Bits() keeps signed zeros and infinities, overflows past the largest finite and rounds x to f32 first", () => {
  assert.equal(hex(f32ToBf16Bits(0)), "0x0000");
  assert.equal(hex(f32ToBf16Bits(-0)), "0x8000");
  assert.equal(hex(f32ToBf16Bits(Infinity)), "0x7f80");
  assert.equal(hex(f32ToBf16Bits(-Infinity)), "0xff80");
  assert.equal(hex(f32ToBf16Bits(3.4028234663852886e38)), "0x7f80"); // f32 max
  assert.equal(hex(f32ToBf16Bits(-1e300)), "0xff80");
  assert.equal(hex(f32ToBf16Bits(1e-300)), "0x0000");
  assert.equal(hex(f32ToBf16Bits(NaN)), "0x7fc0");
  assert.equal(hex(f32ToBf16Bits(f32FromBits(0xff800001))), "0xffc0"); // negative signalling NaN
  // 1 + 2^-8 + 2^-40 is 1 + 2^-8 in f32: a tie, so the f32 path goes to even.
  assert.equal(hex(f32ToBf16Bits(1 + 2 ** -8 + 2 ** -40)), "0x3f80");
});

test("f64ToBf16Bits() rounds the f64 once, avoiding double rounding through f32", () => {
  assert.equal(hex(f64ToBf16Bits(1 + 2 ** -8 + 2 ** -40)), "0x3f81");
  assert.equal(hex(f64ToBf16Bits(1 + 2 ** -8 - 2 ** -40)), "0x3f80");
  assert.equal(hex(f64ToBf16Bits(1 + 2 ** -8)), "0x3f80");
  assert.equal(hex(f64ToBf16Bits(-(1 + 3 * 2 ** -8 - 2 ** -40))), "0xbf81");
  assert.equal(hex(f64ToBf16Bits(2 ** -134 + 2 ** -180)), "0x0001");
  assert.equal(hex(f64ToBf16Bits((2 - 2 ** -8) * 2 ** 127 - 2 ** 90)), "0x7f7f");
  assert.equal(hex(f64ToBf16Bits(1e39)), "0x7f80");
  assert.equal(hex(f64ToBf16Bits(NaN)), "0x7fc0");

  // Every midpoint nudged by far less than an f32 step, plus random doubles, against the oracle.
  const rng = new Rng(2);
  const check = (x: number): void => {
    const got = bf16BitsToF32(f64ToBf16Bits(x));
    const expected = nearestEven(x, BF16);
    if (!Object.is(got, expected)) assert.fail(`x = ${x}: got ${got}, expected ${expected}`);
  };
  for (let low = 0; low < 0x7f7f; low += 1 + rng.int(0, 4)) {
    const midpoint = (bf16BitsToF32(low) + bf16BitsToF32(low + 1)) / 2;
    const nudge = Math.max(midpoint * 2 ** -40, 2 ** -1000);
    check(midpoint + nudge);
    check(midpoint - nudge);
    check(-(midpoint + nudge));
  }
  for (let i = 0; i < 50_000; i++) check((rng.uniform() - 0.5) * 2 ** rng.int(-140, 130));
});

test("f32ArrayToBf16() and bf16ArrayToF32() agree with the scalar conversions", () => {
  const values = [0, -0, 1, -1.5, 1 + 2 ** -8, 1e-40, 3e38, 1e39, Infinity, -Infinity, NaN, Math.PI];
  const bits = f32ArrayToBf16(values);
  assert.ok(bits instanceof Uint16Array);
  assert.deepEqual([...bits], values.map(f32ToBf16Bits));
  const back = bf16ArrayToF32(bits);
  assert.ok(back instanceof Float32Array);
  assert.deepEqual([...back], [...bits].map(bf16BitsToF32));
  assert.deepEqual([...f32ArrayToBf16(new Float32Array([2.5, -7]))], [0x4020, 0xc0e0]);
});
