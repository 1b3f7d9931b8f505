import { test } from "node:test";
import assert from "node:assert/strict";
import { FP8_E4M3_MAX, f32ToFp8E4m3, fp8E4m3ToF32 } from "../../../src/numeric/fp8e4m3.js";
import { Rng } from "../../../src/numeric/random.js";
import { FP8_E4M3, nearestEven } from "./nearestEven.js";

const hex = (code: number): string => `0x${code.toString(16).padStart(2, "0")}`;

/** OCP e4m3fn by its definition: 1 sign, 4 exponent (bias 7), 3 fraction bits, S.1111.111 = NaN, no inf. */
function e4m3ByDefinition(code: number): number {
  const sign = code & 0x80 ? -1 : 1;
  const exponent = (code >> 3) & 0xf;
  const fraction = code & 7;
  if (exponent === 15 && fraction === 7) return NaN;
  if (exponent === 0) return sign * (fraction / 8) * 2 ** -6;
  return sign * (1 + fraction / 8) * 2 ** (exponent - 7);
}

test("fp8E4m3ToF32() decodes hand-worked codes", () => {
  assert.equal(fp8E4m3ToF32(0x00), 0);
  assert.ok(Object.is(fp8E4m3ToF32(0x80), -0));
  assert.equal(fp8E4m3ToF32(0x01), 2 ** -9); // smallest subnormal
  assert.equal(fp8E4m3ToF32(0x07), 7 * 2 ** -9); // largest subnormal
  assert.equal(fp8E4m3ToF32(0x08), 2 ** -6); // smallest normal
  assert.equal(fp8E4m3ToF32(0x38), 1);
  assert.equal(fp8E4m3ToF32(0x39), 1.125);
  assert.equal(fp8E4m3ToF32(0x78), 256);
  assert.equal(fp8E4m3ToF32(0x7e), 448);
  assert.equal(fp8E4m3ToF32(0xfe), -448);
  assert.equal(fp8E4m3ToF32(0xc4), -3);
  assert.ok(Number.isNaN(fp8E4m3ToF32(0x7f)));
  assert.ok(Number.isNaN(fp8E4m3ToF32(0xff)));
  assert.equal(FP8_E4M3_MAX, 448);
});

test("fp8E4m3ToF32() decodes all 256 codes as the e4m3fn definition says", () => {
  let nans = 0;
  for (let code = 0; code < 256; code++) {
    const got = fp8E4m3ToF32(code);
    assert.ok(Object.is(got, e4m3ByDefinition(code)), `${hex(code)}: got ${got}`);
    if (Number.isNaN(got)) nans++;
    else assert.ok(Math.abs(got) <= 448);
  }
  assert.equal(nans, 2, "only S.1111.111 is NaN; there are no infinities");
});

test("f32ToFp8E4m3() gives back every finite code", () => {
  for (let code = 0; code < 256; code++) {
    if ((code & 0x7f) === 0x7f) continue;
    assert.equal(hex(f32ToFp8E4m3(fp8E4m3ToF32(code))), hex(code));
  }
});

test("f32ToFp8E4m3() rounds every midpoint between neighbouring codes to the even code", () => {
  for (const sign of [0, 0x80]) {
    for (let low = sign; low < sign + 0x7e; low++) {
      const high = low + 1;
      const midpoint = (fp8E4m3ToF32(low) + fp8E4m3ToF32(high)) / 2;
      const even = low & 1 ? high : low;
      assert.equal(hex(f32ToFp8E4m3(midpoint)), hex(even), `midpoint ${midpoint} of ${hex(low)} and ${hex(high)}`);
      // Just off the midpoint (a relative 2^-20, far below an e4m3 step, well above an f32 step).
      const nudge = Math.abs(midpoint) * 2 ** -20;
      const away = midpoint + Math.sign(midpoint) * nudge;
      const toward = midpoint - Math.sign(midpoint) * nudge;
      assert.equal(hex(f32ToFp8E4m3(away)), hex(high), `just beyond ${midpoint}`);
      assert.equal(hex(f32ToFp8E4m3(toward)), hex(low), `just short of ${midpoint}`);
    }
  }
  // Hand-worked ones: 1.0625 lies between 1 (0x38) and 1.125 (0x39) -> 1; 1.1875 -> 1.25 (0x3a).
  assert.equal(hex(f32ToFp8E4m3(1.0625)), "0x38");
  assert.equal(hex(f32ToFp8E4m3(1.1875)), "0x3a");
  assert.equal(hex(f32ToFp8E4m3(3 * 2 ** -10)), "0x02"); // subnormal tie between 1 and 2 units -> 2
});

test("f32ToFp8E4m3() does not saturate: (448, 464] rounds to 448, above 464, inf and NaN give the NaN code", () => {
  assert.equal(hex(f32ToFp8E4m3(448)), "0x7e");
  assert.equal(hex(f32ToFp8E4m3(460)), "0x7e");
  assert.equal(hex(f32ToFp8E4m3(464)), "0x7e"); // tie between 448 (even) and the would-be 480
  assert.equal(hex(f32ToFp8E4m3(-464)), "0xfe");
  assert.equal(hex(f32ToFp8E4m3(Math.fround(464 + 2 ** -15))), "0x7f"); // the next f32 above 464
  assert.equal(hex(f32ToFp8E4m3(480)), "0x7f");
  assert.equal(hex(f32ToFp8E4m3(-480)), "0xff");
  assert.equal(hex(f32ToFp8E4m3(1e6)), "0x7f");
  assert.equal(hex(f32ToFp8E4m3(1e300)), "0x7f"); // inf after rounding to f32
  assert.equal(hex(f32ToFp8E4m3(Infinity)), "0x7f");
  assert.equal(hex(f32ToFp8E4m3(-Infinity)), "0xff");
  assert.equal(hex(f32ToFp8E4m3(NaN)), "0x7f");
  assert.equal(hex(f32ToFp8E4m3(416)), "0x7d"); // 1.625 * 2^8, the code below 448
  assert.equal(hex(f32ToFp8E4m3(432)), "0x7e"); // tie between 416 (0x7d, odd) and 448 -> 448
  assert.equal(hex(f32ToFp8E4m3(400)), "0x7c"); // tie between 384 (0x7c, even) and 416 -> 384
});

test("f32ToFp8E4m3() underflows tiny values to signed zero and rounds 2^-10 (a tie) to 0", () => {
  assert.equal(hex(f32ToFp8E4m3(2 ** -10)), "0x00");
  assert.equal(hex(f32ToFp8E4m3(-(2 ** -10))), "0x80");
  assert.equal(hex(f32ToFp8E4m3(Math.fround(2 ** -10 * (1 + 2 ** -23)))), "0x01");
  assert.equal(hex(f32ToFp8E4m3(-(2 ** -10) * (1 + 2 ** -20))), "0x81");
  assert.equal(hex(f32ToFp8E4m3(Math.fround(2 ** -10 * (1 - 2 ** -24)))), "0x00");
  assert.equal(hex(f32ToFp8E4m3(2 ** -12)), "0x00");
  assert.equal(hex(f32ToFp8E4m3(1e-40)), "0x00"); // f32 subnormal
  assert.equal(hex(f32ToFp8E4m3(-1e-45)), "0x80");
  assert.equal(hex(f32ToFp8E4m3(-0)), "0x80");
  assert.equal(hex(f32ToFp8E4m3(2 ** -9)), "0x01");
  assert.equal(hex(f32ToFp8E4m3(15 * 2 ** -10)), "0x08"); // tie between 0x07 (odd) and 2^-6 -> 0x08
});

test("f32ToFp8E4m3() matches a nearest-even oracle on random values", () => {
  const rng = new Rng(5);
  for (let i = 0; i < 100_000; i++) {
    const x = Math.fround((rng.uniform() - 0.5) * 2 ** rng.int(-12, 11));
    const got = fp8E4m3ToF32(f32ToFp8E4m3(x));
    const expected = nearestEven(x, FP8_E4M3);
    if (!Object.is(got, expected)) assert.fail(`x = ${x}: got ${got}, expected ${expected}`);
  }
});
