import { test } from "node:test";
import assert from "node:assert/strict";
import { Rng, randomBf16, randomFp16 } from "../../../src/numeric/random.js";
import { bf16BitsToF32, f64ToBf16Bits } from "../../../src/numeric/bf16.js";
import { f64ToFp16Bits, fp16BitsToF32 } from "../../../src/numeric/fp16.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";

function meanAndStd(values: ArrayLike<number>): { mean: number; std: number } {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i];
  const mean = sum / values.length;
  let squares = 0;
  for (let i = 0; i < values.length; i++) squares += (values[i] - mean) ** 2;
  return { mean, std: Math.sqrt(squares / values.length) };
}

test("Rng gives the same stream for the same seed", () => {
  const a = new Rng(1234);
  const b = new Rng(1234);
  for (let i = 0; i < 1000; i++) assert.equal(a.nextU32(), b.nextU32());
  assert.equal(a.uniform(), b.uniform());
  assert.equal(a.normal(), b.normal());
  assert.equal(a.normal(), b.normal());
});

test("Rng streams of different seeds differ, including seeds that differ only above bit 32 or in sign", () => {
  const seeds = [0, 1, 2, 2 ** 32, 2 ** 32 + 1, -1, -2, Number.MAX_SAFE_INTEGER];
  const heads = seeds.map((seed) => {
    const rng = new Rng(seed);
    return [rng.nextU32(), rng.nextU32(), rng.nextU32()].join(",");
  });
  assert.equal(new Set(heads).size, seeds.length, heads.join(" | "));
});

test("Rng reproduces its pinned first outputs (the stream must not change across versions or platforms)", () => {
  const rng = new Rng(0);
  assert.deepEqual([rng.nextU32(), rng.nextU32(), rng.nextU32(), rng.nextU32()], [0x4e2ef9d0, 0x376f8367, 0xaa9a94f4, 0x8d5e84be]);
  const other = new Rng(2 ** 40 + 5);
  assert.deepEqual([other.nextU32(), other.nextU32()], [0x60628ffb, 0x0292bf22]);
  assert.equal(other.uniform(), 0.9634154279089003);
  assert.equal(other.int(-5, 5), 0);
  assert.equal(other.normal(), -0.303753761965515);
});

test("Rng.nextU32() gives unsigned 32-bit integers with balanced bits", () => {
  const rng = new Rng(7);
  const ones = new Array<number>(32).fill(0);
  const n = 20_000;
  for (let i = 0; i < n; i++) {
    const u = rng.nextU32();
    assert.ok(Number.isInteger(u) && u >= 0 && u < 2 ** 32);
    for (let bit = 0; bit < 32; bit++) ones[bit] += (u >>> bit) & 1;
  }
  // Each bit is Binomial(n, 1/2): sd = 71, so 0.5 ± 0.02 is a 5.6-sigma band.
  for (let bit = 0; bit < 32; bit++) assert.ok(Math.abs(ones[bit] / n - 0.5) < 0.02, `bit ${bit}: ${ones[bit] / n}`);
});

test("Rng.uniform() stays in [0, 1) with mean 1/2 and variance 1/12", () => {
  const rng = new Rng(8);
  const values = new Float64Array(100_000);
  for (let i = 0; i < values.length; i++) {
    values[i] = rng.uniform();
    assert.ok(values[i] >= 0 && values[i] < 1);
  }
  const { mean, std } = meanAndStd(values);
  assert.ok(Math.abs(mean - 0.5) < 0.005, `mean ${mean}`);
  assert.ok(Math.abs(std - Math.sqrt(1 / 12)) < 0.005, `std ${std}`);
});

test("Rng.normal() has mean 0 and standard deviation 1 over 1e5 draws", () => {
  const rng = new Rng(9);
  const values = new Float64Array(100_000);
  let inside = 0;
  for (let i = 0; i < values.length; i++) {
    values[i] = rng.normal();
    if (Math.abs(values[i]) < 1.959964) inside++;
  }
  const { mean, std } = meanAndStd(values);
  // Standard error of the mean is 0.0032 and of the sd 0.0022: these bands are about 5 sigma.
  assert.ok(Math.abs(mean) < 0.016, `mean ${mean}`);
  assert.ok(Math.abs(std - 1) < 0.011, `std ${std}`);
  assert.ok(Math.abs(inside / values.length - 0.95) < 0.004, `P(|z| < 1.96) = ${inside / values.length}`);
});

test("Rng.fillNormal() applies mean and std and rounds into a Float32Array", () => {
  const rng = new Rng(10);
  const f64 = rng.fillNormal(new Float64Array(50_000), 3, 0.5);
  const { mean, std } = meanAndStd(f64);
  assert.ok(Math.abs(mean - 3) < 0.012, `mean ${mean}`);
  assert.ok(Math.abs(std - 0.5) < 0.008, `std ${std}`);
  const f32 = new Rng(11).fillNormal(new Float32Array(1000));
  const again = new Rng(11);
  for (let i = 0; i < f32.length; i++) assert.equal(f32[i], Math.fround(again.normal()));
});

test("Rng.int() covers exactly [lo, hiExclusive) uniformly", () => {
  const rng = new Rng(12);
  const counts = new Map<number, number>();
  const n = 70_000;
  for (let i = 0; i < n; i++) {
    const k = rng.int(-3, 4);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  assert.deepEqual([...counts.keys()].sort((a, b) => a - b), [-3, -2, -1, 0, 1, 2, 3]);
  for (const [k, c] of counts) assert.ok(Math.abs(c - n / 7) < 600, `value ${k}: ${c} draws`); // sd 93
  assert.equal(rng.int(5, 6), 5);
  const wide = rng.int(0, 2 ** 32);
  assert.ok(Number.isInteger(wide) && wide >= 0 && wide < 2 ** 32);
  const shifted = rng.int(2 ** 40, 2 ** 40 + 3);
  assert.ok(shifted >= 2 ** 40 && shifted < 2 ** 40 + 3);
});

test("Rng.int() and the constructor reject bad arguments with ArgumentError", () => {
  const rng = new Rng(13);
  assert.throws(() => rng.int(3, 3), ArgumentError);
  assert.throws(() => rng.int(0, 2 ** 32 + 1), ArgumentError);
  assert.throws(() => rng.int(0.5, 2), ArgumentError);
  assert.throws(() => rng.int(0, 2.5), /Rng.int\(\): argument 'hiExclusive'/);
  assert.throws(() => new Rng(1.5), /Rng\(\): argument 'seed': expected a safe integer, got 1.5/);
  assert.throws(() => new Rng(NaN), ArgumentError);
  assert.throws(() => rng.permutation(-1), ArgumentError);
});

test("Rng.permutation() is a permutation and every position is equally likely", () => {
  const rng = new Rng(14);
  const p = rng.permutation(1000);
  assert.ok(p instanceof Int32Array);
  assert.deepEqual([...p].sort((a, b) => a - b), Array.from({ length: 1000 }, (_, i) => i));
  assert.notDeepEqual([...p], Array.from({ length: 1000 }, (_, i) => i));
  assert.equal(rng.permutation(0).length, 0);
  assert.deepEqual([...rng.permutation(1)], [0]);
  // Where element 0 lands in a permutation of 5: uniform over the 5 positions.
  const where = new Array<number>(5).fill(0);
  for (let i = 0; i < 20_000; i++) where[rng.permutation(5).indexOf(0)]++;
  for (const c of where) assert.ok(Math.abs(c - 4000) < 300, where.join(",")); // sd 57
});

test("Rng.shuffle() permutes the array in place and returns it", () => {
  const rng = new Rng(15);
  const arr = Array.from({ length: 200 }, (_, i) => `x${i}`);
  const result = rng.shuffle(arr);
  assert.equal(result, arr);
  assert.deepEqual([...arr].sort(), Array.from({ length: 200 }, (_, i) => `x${i}`).sort());
  assert.notDeepEqual(arr, Array.from({ length: 200 }, (_, i) => `x${i}`));
  assert.deepEqual(rng.shuffle([]), []);
  const first = new Array<number>(3).fill(0);
  for (let i = 0; i < 9000; i++) first[rng.shuffle([0, 1, 2])[0]]++;
  for (const c of first) assert.ok(Math.abs(c - 3000) < 250, first.join(",")); // sd 45
});

test("randomBf16() rounds the normal stream once to bf16 and clamps it", () => {
  const bits = randomBf16(new Rng(16), 4096, { mean: 0, std: 0.1 });
  const stream = new Rng(16);
  for (let i = 0; i < bits.length; i++) assert.equal(bits[i], f64ToBf16Bits(0.1 * stream.normal()));

  const clamped = randomBf16(new Rng(17), 50_000, { std: 1, clamp: 0.5 });
  const values = Array.from(clamped, bf16BitsToF32);
  assert.ok(values.every((v) => Math.abs(v) <= 0.5));
  assert.ok(values.filter((v) => Math.abs(v) === 0.5).length > 0.5 * 50_000, "about 62% of N(0,1) lies beyond ±0.5");

  const shifted = Array.from(randomBf16(new Rng(18), 50_000, { mean: 2, std: 0.25 }), bf16BitsToF32);
  const { mean, std } = meanAndStd(shifted);
  assert.ok(Math.abs(mean - 2) < 0.01 && Math.abs(std - 0.25) < 0.01, `mean ${mean}, std ${std}`);
  assert.deepEqual(randomBf16(new Rng(19), 0), new Uint16Array(0));
  assert.throws(() => randomBf16(new Rng(19), -1), ArgumentError);
  assert.throws(() => randomBf16(new Rng(19), 4, { clamp: -1 }), ArgumentError);
});

test("randomFp16() rounds the normal stream once to fp16 and clamps it", () => {
  const bits = randomFp16(new Rng(20), 4096, { std: 3, clamp: 1 });
  const stream = new Rng(20);
  for (let i = 0; i < bits.length; i++) {
    assert.equal(bits[i], f64ToFp16Bits(Math.min(1, Math.max(-1, 3 * stream.normal()))));
    assert.ok(Math.abs(fp16BitsToF32(bits[i])) <= 1);
  }
  const { mean, std } = meanAndStd(Array.from(randomFp16(new Rng(21), 50_000), fp16BitsToF32));
  assert.ok(Math.abs(mean) < 0.02 && Math.abs(std - 1) < 0.015, `mean ${mean}, std ${std}`);
});
