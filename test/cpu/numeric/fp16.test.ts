import { test } from "node:test";
import assert from "node:assert/strict";
import { f32ArrayToFp16, f32ToFp16Bits, f64ToFp16Bits, fp16ArrayToF32, fp16BitsToF32 } from "../../../src/numeric/fp16.js";
import { f32Bits, f32FromBits } from "../../../src/numeric/f32Bits.js";
import { Rng } from "../../../src/numeric/random.js";
import { FP16, nearestEven } from "./nearestEven.js";

const hex = (bits: number): string => `0x${bits.toString(16).padStart(4, "0")}`;

/** IEEE binary16 by its definition: 1 sign, 5 exponent (bias 15), 10 fraction bits. */
function fp16ByDefinition(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0x1f) return fraction === 0 ? sign * Infinity : NaN;
  if (exponent === 0) return sign * (fraction / 1024) * 2 ** -14;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

function isNanCode(bits: number): boolean {
  return (bits & 0x7c00) === 0x7c00 && (bits & 0x3ff) !== 0;
}

test("fp16BitsToF32() decodes all 65536 codes as the IEEE half definition says", () => {
  for (let bits = 0; bits < 0x10000; bits++) {
    const expected = fp16ByDefinition(bits);
    const got = fp16BitsToF32(bits);
    if (!Object.is(got, expected)) assert.fail(`${hex(bits)}: got ${got}, expected ${expected}`);
  }
  assert.equal(fp16BitsToF32(0x3c00), 1);
  assert.equal(fp16BitsToF32(0x7bff), 65504);
  assert.equal(fp16BitsToF32(0x0001), 2 ** -24);
  assert.equal(fp16BitsToF32(0x0400), 2 ** -14);
  assert.equal(fp16BitsToF32(0xfc00), -Infinity);
});

test("f32ToFp16Bits() gives back every non-NaN code and a quiet NaN of the same sign for NaN codes", () => {
  let nanCodes = 0;
  for (let bits = 0; bits < 0x10000; bits++) {
    const encoded = f32ToFp16Bits(fp16BitsToF32(bits));
    if (isNanCode(bits)) {
      nanCodes++;
      // fp16BitsToF32 returns a plain NaN, so only NaN-ness can survive the round trip.
      if (!isNanCode(encoded)) assert.fail(`NaN ${hex(bits)} encoded as ${hex(encoded)}`);
    } else if (encoded !== bits) {
      assert.fail(`${hex(bits)} came back as ${hex(encoded)}`);
    }
  }
  assert.equal(nanCodes, 2 * 1023);
  assert.equal(hex(f32ToFp16Bits(NaN)), "0x7e00");
  assert.equal(hex(f32ToFp16Bits(f32FromBits(0xffc00000))), "0xfe00");
  assert.equal(hex(f32ToFp16Bits(f32FromBits(0x7f800001))), "0x7e00"); // signalling NaN stays NaN
});

test("f32ToFp16Bits() rounds hand-picked ties to even", () => {
  const cases: Array<[number, number]> = [
    [1 + 2 ** -11, 0x3c00], // between 1 (even) and 1 + 2^-10 (odd) -> 1
    [1 + 3 * 2 ** -11, 0x3c02], // between 1 + 2^-10 (odd) and 1 + 2^-9 (even) -> 1 + 2^-9
    [-(1 + 2 ** -11), 0xbc00],
    [2048 + 1, 0x6800], // spacing 2 above 2048: 2049 -> 2048
    [2048 + 3, 0x6802], // 2051 -> 2052
    [65520, 0x7c00], // between 65504 (odd) and 65536 (even, = inf) -> inf
    [-65520, 0xfc00],
    [2 ** -25, 0x0000], // between 0 and the smallest subnormal -> 0
    [3 * 2 ** -25, 0x0002], // between subnormals 1 and 2 -> 2
    [1023.5 * 2 ** -24, 0x0400], // between the largest subnormal (odd) and the smallest normal -> normal
    [1022.5 * 2 ** -24, 0x03fe],
  ];
  for (const [x, expected] of cases) assert.equal(hex(f32ToFp16Bits(x)), hex(expected), `x = ${x}`);
});

test("f32ToFp16Bits() rounds just off a tie to the nearer code and overflows only at 65520", () => {
  assert.equal(hex(f32ToFp16Bits(1 + 2 ** -11 + 2 ** -23)), "0x3c01");
  assert.equal(hex(f32ToFp16Bits(1 + 3 * 2 ** -11 - 2 ** -23)), "0x3c01");
  assert.equal(hex(f32ToFp16Bits(Math.fround(65519.99))), "0x7bff");
  assert.equal(hex(f32ToFp16Bits(65504)), "0x7bff");
  assert.equal(hex(f32ToFp16Bits(2 ** -25 + 2 ** -40)), "0x0001");
  assert.equal(hex(f32ToFp16Bits(2 ** -26)), "0x0000");
  assert.equal(hex(f32ToFp16Bits(-(2 ** -26))), "0x8000");
  assert.equal(hex(f32ToFp16Bits(1e-45)), "0x0000"); // an f32 subnormal
  assert.equal(hex(f32ToFp16Bits(Infinity)), "0x7c00");
  assert.equal(hex(f32ToFp16Bits(-1e30)), "0xfc00");
  assert.equal(hex(f32ToFp16Bits(-0)), "0x8000");
});

test("f32ToFp16Bits() rounds every midpoint between neighbouring codes to the even one and its f32 neighbours to the nearer", () => {
  for (const sign of [0, 0x8000]) {
    for (let low = sign; low < sign + 0x7bff; low++) {
      const high = low + 1;
      const midpoint = (fp16BitsToF32(low) + fp16BitsToF32(high)) / 2;
      const midBits = f32Bits(midpoint);
      assert.equal(f32FromBits(midBits), midpoint, "every fp16 midpoint is an f32");
      const even = low & 1 ? high : low;
      const towardHigh = f32FromBits(midBits + 1);
      const towardLow = f32FromBits(midBits - 1);
      if (f32ToFp16Bits(midpoint) !== even || f32ToFp16Bits(towardHigh) !== high || f32ToFp16Bits(towardLow) !== low) {
        assert.fail(`midpoint of ${hex(low)} and ${hex(high)}: got ${hex(f32ToFp16Bits(midpoint))}, ` +
          `${hex(f32ToFp16Bits(towardLow))}, ${hex(f32ToFp16Bits(towardHigh))}`);
      }
    }
  }
});

test("f32ToFp16Bits() matches a nearest-even oracle on random f32 values around the fp16 range", () => {
  const rng = new Rng(3);
  for (let i = 0; i < 200_000; i++) {
    // Random bit patterns would mostly fall far outside fp16's range; draw exponents that matter.
    const x = Math.fround((rng.uniform() - 0.5) * 2 ** rng.int(-28, 19));
    const got = fp16BitsToF32(f32ToFp16Bits(x));
    const expected = nearestEven(x, FP16);
    if (!Object.is(got, expected)) assert.fail(`x = ${x}: got ${got}, expected ${expected}`);
  }
  for (let i = 0; i < 50_000; i++) {
    const x = f32FromBits(rng.nextU32());
    const got = fp16BitsToF32(f32ToFp16Bits(x));
    const expected = nearestEven(x, FP16);
    if (!Object.is(got, expected)) assert.fail(`x = ${x}: got ${got}, expected ${expected}`);
  }
});

test("f64ToFp16Bits() rounds the f64 once, avoiding double rounding through f32", () => {
  // 1 + 2^-11 + 2^-40 is the tie 1 + 2^-11 in f32.
  assert.equal(hex(f32ToFp16Bits(1 + 2 ** -11 + 2 ** -40)), "0x3c00");
  assert.equal(hex(f64ToFp16Bits(1 + 2 ** -11 + 2 ** -40)), "0x3c01");
  assert.equal(hex(f64ToFp16Bits(1 + 2 ** -11)), "0x3c00");
  assert.equal(hex(f64ToFp16Bits(65520 - 2 ** -30)), "0x7bff");
  assert.equal(hex(f64ToFp16Bits(2 ** -25 + 2 ** -60)), "0x0001");
  assert.equal(hex(f64ToFp16Bits(-(2 ** -25) - 2 ** -60)), "0x8001");
  assert.equal(hex(f64ToFp16Bits(NaN)), "0x7e00");

  const rng = new Rng(4);
  const check = (x: number): void => {
    const got = fp16BitsToF32(f64ToFp16Bits(x));
    const expected = nearestEven(x, FP16);
    if (!Object.is(got, expected)) assert.fail(`x = ${x}: got ${got}, expected ${expected}`);
  };
  for (let low = 0; low < 0x7bff; low++) {
    const midpoint = (fp16BitsToF32(low) + fp16BitsToF32(low + 1)) / 2;
    check(midpoint + midpoint * 2 ** -40);
    check(midpoint - midpoint * 2 ** -40);
    check(-(midpoint + midpoint * 2 ** -40));
  }
  for (let i = 0; i < 50_000; i++) check((rng.uniform() - 0.5) * 2 ** rng.int(-28, 19));
});

test("f32ArrayToFp16() and fp16ArrayToF32() agree with the scalar conversions", () => {
  const values = [0, -0, 1, -1.5, 1 + 2 ** -11, 6e-8, 65519, 70000, Infinity, -Infinity, NaN, Math.PI];
  const bits = f32ArrayToFp16(values);
  assert.ok(bits instanceof Uint16Array);
  assert.deepEqual([...bits], values.map(f32ToFp16Bits));
  const back = fp16ArrayToF32(bits);
  assert.ok(back instanceof Float32Array);
  assert.deepEqual([...back], [...bits].map(fp16BitsToF32));
  assert.deepEqual([...f32ArrayToFp16(new Float32Array([2.5, -7]))], [0x4100, 0xc700]);
});
