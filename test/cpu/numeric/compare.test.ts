import { test } from "node:test";
import assert, { AssertionError } from "node:assert/strict";
import {
  DENSE_LSE_TOL,
  DENSE_OUT_TOL,
  SPARSE_LSE_TOL,
  SPARSE_OUT_TOL,
  assertClose,
  compareTensors,
  type Tolerance,
} from "../../../src/numeric/compare.js";
import { bf16BitsToF32 } from "../../../src/numeric/bf16.js";
import { Rng } from "../../../src/numeric/random.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";

const TOL: Tolerance = { abs: 1e-3, rel: 1e-2 };

function randomVector(seed: number, n: number): Float64Array {
  return new Rng(seed).fillNormal(new Float64Array(n));
}

test("the tolerance presets are FlashMLA's", () => {
  assert.deepEqual({ ...DENSE_OUT_TOL }, { abs: 8e-4, rel: 2.01 / 128, cos: 5e-6 });
  assert.deepEqual({ ...DENSE_LSE_TOL }, { abs: 1e-6, rel: 8.01 / 65536 });
  assert.deepEqual({ ...SPARSE_OUT_TOL }, { abs: 1e-3, rel: 2.01 / 128, cos: 5e-6 });
  assert.deepEqual({ ...SPARSE_LSE_TOL }, { abs: 1e-6, rel: 8.01 / 65536 });
  assert.ok(Object.isFrozen(DENSE_OUT_TOL));
});

test("compareTensors() passes on equal inputs, with the same NaN/inf positions and even at zero tolerance", () => {
  const a = [...randomVector(40, 1000), NaN, Infinity, -Infinity, 0, -0];
  const result = compareTensors(a, [...a], DENSE_OUT_TOL, { name: "out" });
  assert.equal(result.ok, true, result.message);
  assert.equal(result.count, 1005);
  assert.equal(result.mismatches, 0);
  assert.equal(result.maxAbsError, 0);
  assert.ok(Math.abs(result.cosDiff) < 1e-15);
  assert.match(result.message, /^out: all 1005 elements within tolerance/);
  assert.equal(compareTensors(a, a, { abs: 0, rel: 0, cos: 0 }).ok, true);
  assert.equal(compareTensors(new Float32Array(0), [], DENSE_OUT_TOL).ok, true);
  assert.equal(compareTensors([0, 0, 0], [0, 0, 0], DENSE_OUT_TOL).cosDiff, 0);
});

test("compareTensors() fails when NaN positions differ and names the first one", () => {
  const ref = [1, 2, 3, 4, 5, 6];
  const act = [1, 2, NaN, 4, NaN, 6];
  const result = compareTensors(act, ref, TOL, { name: "lse", shape: [2, 3] });
  assert.equal(result.ok, false);
  assert.equal(result.mismatches, 2);
  assert.match(result.message, /^lse: 2 of 6 elements outside tolerance/);
  assert.match(result.message, /NaN\/inf positions differ at 2 element\(s\), first at \[0, 2\]: actual NaN, reference 3/);
  // NaN in the reference only also fails.
  assert.equal(compareTensors([1, 2], [1, NaN], TOL).ok, false);
});

test("compareTensors() fails when an infinity has the other sign or sits where a NaN is expected", () => {
  const inf = compareTensors([1, -Infinity], [1, Infinity], TOL);
  assert.equal(inf.ok, false);
  assert.match(inf.message, /first at \[1\]: actual -inf, reference \+inf/);
  assert.equal(compareTensors([Infinity], [NaN], TOL).ok, false);
  assert.equal(compareTensors([Infinity], [1e308], { abs: Infinity, rel: Infinity }).ok, false, "abs tolerance cannot excuse a misplaced inf");
  // Matching specials are then zeroed: they neither fail nor spoil the statistics.
  const matched = compareTensors([Infinity, 1, NaN], [Infinity, 1, NaN], TOL);
  assert.equal(matched.ok, true);
  assert.equal(matched.maxAbsError, 0);
});

test("compareTensors() fails on one element outside both abs and rel and reports it as the worst", () => {
  const ref = Array.from(randomVector(41, 600));
  const act = [...ref];
  act[123] = ref[123] + 0.5;
  act[7] = ref[7] + 5e-4; // within abs: passes
  const result = compareTensors(act, ref, { abs: 1e-3, rel: 1e-3 }, { name: "out" });
  assert.equal(result.ok, false);
  assert.equal(result.mismatches, 1);
  assert.equal(result.worstIndex, 123);
  assert.equal(result.worstActual, act[123]);
  assert.equal(result.worstReference, ref[123]);
  assert.ok(Math.abs(result.maxAbsError - 0.5) < 1e-12);
  assert.match(result.message, /^out: 1 of 600 elements outside tolerance \(abs 0.001, rel 0.001\)/);
  assert.match(result.message, /worst at \[123\]: actual .+, reference .+, abs error 0.500000, rel error /);
  assert.match(result.message, /cosine difference [0-9.e+-]+ \(not checked\)/);
});

test("compareTensors() lets an element pass on abs or on rel alone, with strict inequalities", () => {
  // Big values: abs error 0.01 fails abs 1e-3, but rel 0.01/1000 = 1e-5 < 1e-4 passes.
  assert.equal(compareTensors([1000.01], [1000], { abs: 1e-3, rel: 1e-4 }).ok, true);
  // Tiny values: rel error 1 fails, abs 1e-7 < 1e-6 passes.
  assert.equal(compareTensors([2e-7], [1e-7], { abs: 1e-6, rel: 1e-3 }).ok, true);
  // Exactly at the limits fails: |a - r| < abs and rel < rel are strict.
  assert.equal(compareTensors([1.5], [1], { abs: 0.5, rel: 0 }).ok, false);
  assert.equal(compareTensors([0.5], [1], { abs: 0, rel: 0.75 }).ok, true); // 0.5 / (1 + 1e-6) < 0.75
  assert.equal(compareTensors([1.25], [1], { abs: 0, rel: 0.25 / (1 + 1e-6) }).ok, false);
});

test("compareTensors() fails on the cosine difference even when every element is within abs", () => {
  // Signal far below abs: every element passes elementwise, but the two vectors point elsewhere.
  const ref = Array.from(randomVector(42, 512), (x) => x * 1e-5);
  const act = Array.from(randomVector(43, 512), (x) => x * 1e-5);
  const result = compareTensors(act, ref, DENSE_OUT_TOL, { name: "out" });
  assert.equal(result.mismatches, 0);
  assert.equal(result.ok, false);
  assert.ok(result.cosDiff > 0.5, `cosDiff ${result.cosDiff}`);
  assert.match(result.message, /^out: 0 of 512 elements outside tolerance/);
  assert.match(result.message, /cosine difference [0-9.e+-]+ \(limit 0.000005\) EXCEEDED/);
  assert.throws(() => assertClose(act, ref, DENSE_OUT_TOL), AssertionError);
  // Without a cos limit the same data passes.
  assert.equal(compareTensors(act, ref, { abs: DENSE_OUT_TOL.abs, rel: DENSE_OUT_TOL.rel }).ok, true);
});

test("compareTensors() computes the cosine difference as 1 - 2Σar/Σ(a²+r²)", () => {
  const result = compareTensors([1, 0], [0, 1], { abs: 10, rel: 10, cos: 0.5 });
  assert.equal(result.cosDiff, 1);
  assert.equal(result.ok, false);
  const scaled = compareTensors([2, 2], [1, 1], { abs: 10, rel: 10 });
  assert.ok(Math.abs(scaled.cosDiff - (1 - 8 / 10)) < 1e-15);
});

test("compareTensors() gives the worst index as a multi-dimensional index when a shape is given", () => {
  const shape = [2, 3, 4, 5];
  const ref = new Float32Array(120).fill(1);
  const act = Float32Array.from(ref);
  const flat = ((1 * 3 + 2) * 4 + 1) * 5 + 3; // [1, 2, 1, 3]
  act[flat] = 9;
  act[4] = 1.5;
  const result = compareTensors(act, ref, TOL, { shape, name: "o" });
  assert.equal(result.worstIndex, flat);
  assert.equal(result.mismatches, 2);
  assert.match(result.message, /worst at \[1, 2, 1, 3\]: actual 9.00000, reference 1.00000, abs error 8.00000, rel error 7.99999/);
  assert.match(compareTensors(act, ref, TOL).message, new RegExp(`worst at \\[${flat}\\]`));
  assert.match(compareTensors(act, ref, TOL).message, /^tensor: /);
});

test("compareTensors() rounds the reference to bf16 or fp16 first when asked", () => {
  // A bf16 kernel output of 1 + 2^-7 against an f64 reference 1.004, which rounds to 1 + 2^-7 in bf16
  // (the midpoint with 1 being 1.00390625).
  const act = [bf16BitsToF32(0x3f81)];
  const ref = [1.004];
  const tight: Tolerance = { abs: 0, rel: 1e-6 };
  assert.equal(compareTensors(act, ref, tight).ok, false);
  const rounded = compareTensors(act, ref, tight, { roundReferenceTo: "bf16" });
  assert.equal(rounded.ok, true, rounded.message);
  assert.equal(rounded.worstReference, 1 + 2 ** -7);
  assert.equal(compareTensors(act, ref, tight, { roundReferenceTo: "none" }).ok, false);
  // fp16 rounds 1.004 (4.096 steps of 2^-10 above 1) to 1 + 2^-8.
  assert.equal(compareTensors([1 + 2 ** -8], ref, tight, { roundReferenceTo: "fp16" }).ok, true);
  assert.equal(compareTensors([1 + 2 ** -7], ref, tight, { roundReferenceTo: "fp16" }).ok, false);
  // A finite reference that overflows the output dtype expects the kernel's inf.
  assert.equal(compareTensors([Infinity], [70000], tight, { roundReferenceTo: "fp16" }).ok, true);
  assert.equal(compareTensors([Infinity], [70000], tight).ok, false);
});

test("assertClose() throws an AssertionError carrying the message and returns the result when it passes", () => {
  const ok = assertClose([1, 2], [1, 2.0001], { abs: 1e-3, rel: 0 });
  assert.equal(ok.ok, true);
  try {
    assertClose([1, 2], [1, 3], { abs: 1e-3, rel: 1e-3 }, { name: "lse" });
    assert.fail("assertClose did not throw");
  } catch (error) {
    assert.ok(error instanceof AssertionError);
    assert.match(error.message, /^lse: 1 of 2 elements outside tolerance .*worst at \[1\]: actual 2.00000, reference 3.00000/);
  }
});

test("compareTensors() rejects mismatched lengths, shapes and tolerances with ArgumentError", () => {
  assert.throws(() => compareTensors([1, 2], [1], TOL), /compareTensors\(\): argument 'reference': expected 2 elements like actual, got 1/);
  assert.throws(() => compareTensors([1, 2], [1, 2], TOL, { shape: [3] }), /argument 'opts.shape': expected a shape of 2 elements, got \[3\]/);
  assert.throws(() => compareTensors([1], [1], { abs: -1, rel: 0 }), ArgumentError);
  assert.throws(() => compareTensors([1], [1], { abs: 0, rel: NaN }), ArgumentError);
  assert.throws(
    () => compareTensors([1], [1], TOL, { roundReferenceTo: "f32" as unknown as "bf16" }),
    /argument 'opts.roundReferenceTo'/,
  );
});

test("roundF32ArrayToBf16Values() equals per-element bf16 rounding on ties, NaN, inf and random bit patterns", async () => {
  const { roundF32ArrayToBf16Values } = await import("../../../src/numeric/compare.js");
  const { bf16BitsToF32, f64ToBf16Bits } = await import("../../../src/numeric/bf16.js");
  const { Rng } = await import("../../../src/numeric/random.js");
  const rng = new Rng(77);
  const bits = new Uint32Array(200_000);
  for (let i = 0; i < bits.length; i++) bits[i] = rng.nextU32();
  // Ties to even both ways, the largest finite value (rounds to inf), infinities, NaNs, -0.
  [0x3f808000, 0x3f818000, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00001, 0xffc00000, 0x80000000].forEach((b, i) => (bits[i] = b));
  const src = new Float32Array(bits.buffer);
  const got = new Uint32Array(roundF32ArrayToBf16Values(src).buffer);
  const want = new Uint32Array(Float32Array.from(src, (x) => bf16BitsToF32(f64ToBf16Bits(x))).buffer);
  const bad = got.findIndex((g, i) => g !== want[i]);
  assert.equal(bad, -1, `bits 0x${bits[bad]?.toString(16)}: got 0x${got[bad]?.toString(16)}, want 0x${want[bad]?.toString(16)}`);
});
