import { test } from "node:test";
import assert from "node:assert/strict";
import {
  D_NOPE,
  D_QK,
  D_ROPE,
  FP8_TILE,
  FP8_TOKEN_BYTES,
  dequantizeKvCacheV32,
  dequantizeKvTokenV32,
  fp8TileScale,
  quantizeKvCacheV32,
  quantizeKvTokenV32,
} from "../../../src/numeric/kvCacheFp8.js";
import { bf16BitsToF32, f32ToBf16Bits } from "../../../src/numeric/bf16.js";
import { fp8E4m3ToF32 } from "../../../src/numeric/fp8e4m3.js";
import { Rng, randomBf16 } from "../../../src/numeric/random.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { FP8_E4M3, nearestEven } from "./nearestEven.js";

const hex = (x: number, width = 2): string => `0x${x.toString(16).padStart(width, "0")}`;

/** The 4 scales of a quantized token, read back as little-endian f32 with a DataView. */
function scalesOf(bytes: Uint8Array, tokenOffset = 0): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return [0, 1, 2, 3].map((t) => view.getFloat32(tokenOffset + D_NOPE + 4 * t, true));
}

function isPowerOfTwo(x: number): boolean {
  return x > 0 && Number.isFinite(x) && 2 ** Math.round(Math.log2(x)) === x;
}

function tokenOf(values: number[]): Uint16Array {
  assert.equal(values.length, D_QK);
  return Uint16Array.from(values, f32ToBf16Bits);
}

test("the V32 layout constants match FLASHMLA.md §3", () => {
  assert.equal(D_QK, 576);
  assert.equal(D_NOPE, 512);
  assert.equal(D_ROPE, 64);
  assert.equal(FP8_TILE, 128);
  assert.equal(FP8_TOKEN_BYTES, D_NOPE + 4 * (D_NOPE / FP8_TILE) + 2 * D_ROPE);
});

test("fp8TileScale() is the smallest power of two p with p·448 >= amax, floored at 2^-13", () => {
  assert.equal(fp8TileScale(0), 2 ** -13);
  assert.equal(fp8TileScale(1e-30), 2 ** -13);
  assert.equal(fp8TileScale(448 * 2 ** -13), 2 ** -13); // the floor's own boundary
  assert.equal(fp8TileScale(448 * 2 ** -13 * (1 + 2 ** -52)), 2 ** -12);
  assert.equal(fp8TileScale(1), 2 ** -8); // 2^-9·448 = 0.875 < 1 <= 2^-8·448 = 1.75
  assert.equal(fp8TileScale(1.75), 2 ** -8);
  assert.equal(fp8TileScale(1.7500001), 2 ** -7);
  assert.equal(fp8TileScale(448), 1);
  assert.equal(fp8TileScale(3.3895313892515355e38), 2 ** 120); // the largest bf16
  assert.ok(Number.isNaN(fp8TileScale(NaN)));
  assert.equal(fp8TileScale(Infinity), Infinity);
  assert.throws(() => fp8TileScale(-1), /fp8TileScale\(\): argument 'amax'/);
  assert.throws(() => fp8TileScale(-Infinity), ArgumentError);
});

test("fp8TileScale() gives exactly 2^k at amax = 448·2^k and 2^(k+1) just above", () => {
  for (let k = -13; k <= 110; k++) {
    const boundary = 448 * 2 ** k;
    assert.equal(fp8TileScale(boundary), 2 ** k, `amax 448·2^${k}`);
    assert.equal(fp8TileScale(boundary * (1 + 2 ** -52)), 2 ** (k + 1), `just above 448·2^${k}`);
    assert.equal(fp8TileScale(boundary * (1 - 2 ** -53)), k === -13 ? 2 ** -13 : 2 ** k, `just below 448·2^${k}`);
  }
});

test("fp8TileScale() equals FlashMLA's 2^ceil(log2(max(amax/448, 1e-4))) away from boundaries", () => {
  const rng = new Rng(30);
  for (let i = 0; i < 20_000; i++) {
    const amax = Math.fround(rng.uniform() * 2 ** rng.int(-20, 40));
    const ratio = Math.max(amax / 448, 1e-4);
    // Float log2 is unreliable only right at powers of two; skip those few draws.
    if (Math.abs(Math.log2(ratio) - Math.round(Math.log2(ratio))) < 1e-9) continue;
    const s = fp8TileScale(amax);
    assert.equal(s, 2 ** Math.ceil(Math.log2(ratio)), `amax ${amax}`);
    assert.ok(isPowerOfTwo(s) && s * 448 >= amax && (s === 2 ** -13 || (s / 2) * 448 < amax));
  }
});

test("quantizeKvTokenV32() writes a hand-worked token byte for byte", () => {
  const values = new Array<number>(D_QK).fill(0);
  for (let i = 0; i < 128; i++) values[i] = 1; // tile 0: amax 1 -> s = 2^-8, 1/s = 256 = 0x78
  values[128] = 448; // tile 1: amax 448 -> s = 1
  values[129] = -448;
  values[130] = 0.5; // 0.5 = 1.000·2^-1 -> 0 0110 000
  values[131] = -3; // 1.100·2^1 -> 1 1000 100
  // Tile 2 stays zero: s = 2^-13 and zero codes.
  values[384] = 3; // tile 3: amax 3 -> s = 2^-7 (2^-8·448 = 1.75 < 3 <= 3.5), 3/s = 384 = 1.100·2^8
  values[385] = -0.75; // -96 = -1.100·2^6 -> 1 1101 100
  values[386] = 2 ** -16; // 2^-9 after scaling: the smallest subnormal
  values[387] = 2 ** -17; // 2^-10: the tie with 0 -> 0
  values[388] = 3 * 2 ** -17; // 3·2^-10: tie between subnormals 1 and 2 -> 2
  for (let i = 0; i < D_ROPE; i++) values[D_NOPE + i] = i - 31.5; // exact in bf16

  const src = tokenOf(values);
  const bytes = new Uint8Array(FP8_TOKEN_BYTES);
  quantizeKvTokenV32(src, 0, bytes, 0);

  for (let i = 0; i < 128; i++) assert.equal(hex(bytes[i]), "0x78", `dim ${i}`);
  assert.deepEqual([...bytes.subarray(128, 132)].map((b) => hex(b)), ["0x7e", "0xfe", "0x30", "0xc4"]);
  assert.ok(bytes.subarray(132, 384).every((b) => b === 0));
  assert.deepEqual([...bytes.subarray(384, 389)].map((b) => hex(b)), ["0x7c", "0xec", "0x01", "0x00", "0x02"]);
  assert.ok(bytes.subarray(389, 512).every((b) => b === 0));
  // Scales: 2^-8 = 0x3b800000, 1 = 0x3f800000, 2^-13 = 0x39000000, 2^-7 = 0x3c000000, little endian.
  assert.deepEqual(
    [...bytes.subarray(512, 528)].map((b) => hex(b)),
    ["0x00", "0x00", "0x80", "0x3b", "0x00", "0x00", "0x80", "0x3f", "0x00", "0x00", "0x00", "0x39", "0x00", "0x00", "0x00", "0x3c"],
  );
  assert.deepEqual(scalesOf(bytes), [2 ** -8, 1, 2 ** -13, 2 ** -7]);
  // RoPE: dim 512 holds -31.5 = bf16 0xc1fc, stored low byte first.
  assert.deepEqual([bytes[528], bytes[529]], [0xfc, 0xc1]);

  const back = new Uint16Array(D_QK);
  dequantizeKvTokenV32(bytes, 0, back, 0);
  const expected = [...values];
  expected[387] = 0;
  expected[388] = 2 * 2 ** -16;
  assert.deepEqual(Array.from(back, bf16BitsToF32), expected);
});

test("RoPE dims pass through bit for bit, NaN and inf patterns included", () => {
  const rng = new Rng(31);
  const src = randomBf16(rng, D_QK, { std: 0.1 });
  const special = [0x7fa1, 0xffc0, 0x7f80, 0xff80, 0x8000, 0x0001, 0x7f7f, 0x1234];
  for (let i = 0; i < D_ROPE; i++) src[D_NOPE + i] = i < special.length ? special[i] : rng.nextU32() & 0xffff;
  const bytes = new Uint8Array(FP8_TOKEN_BYTES);
  quantizeKvTokenV32(src, 0, bytes, 0);
  for (let i = 0; i < D_ROPE; i++) {
    assert.equal(bytes[528 + 2 * i] | (bytes[529 + 2 * i] << 8), src[D_NOPE + i], `rope dim ${i}`);
  }
  const back = new Uint16Array(D_QK);
  dequantizeKvTokenV32(bytes, 0, back, 0);
  assert.deepEqual([...back.subarray(D_NOPE)], [...src.subarray(D_NOPE)]);
});

test("quantize then dequantize lands on the nearest point of the scaled e4m3 grid, within 2^-4 relative for normals", () => {
  const rng = new Rng(32);
  const numTokens = 64;
  const kv = new Uint16Array(numTokens * D_QK);
  // Tiles of very different magnitudes, some below the 2^-13 floor, some with a single outlier.
  const stds = [0.1, 1e-3, 1e-5, 30, 1, 5000, 1e-7];
  for (let t = 0; t < numTokens; t++) {
    for (let tile = 0; tile < 4; tile++) {
      const values = randomBf16(rng, FP8_TILE, { std: stds[rng.int(0, stds.length)] });
      if (rng.uniform() < 0.3) values[rng.int(0, FP8_TILE)] = f32ToBf16Bits(rng.normal() * 1000);
      kv.set(values, t * D_QK + tile * FP8_TILE);
    }
    kv.set(randomBf16(rng, D_ROPE), t * D_QK + D_NOPE);
  }
  const bytes = quantizeKvCacheV32(kv);
  assert.equal(bytes.length, numTokens * FP8_TOKEN_BYTES);
  const back = dequantizeKvCacheV32(bytes);
  assert.equal(back.length, kv.length);

  let normalsChecked = 0;
  for (let t = 0; t < numTokens; t++) {
    const scales = scalesOf(bytes, t * FP8_TOKEN_BYTES);
    for (let tile = 0; tile < 4; tile++) {
      const s = scales[tile];
      let amax = 0;
      for (let i = 0; i < FP8_TILE; i++) amax = Math.max(amax, Math.abs(bf16BitsToF32(kv[t * D_QK + tile * FP8_TILE + i])));
      assert.ok(isPowerOfTwo(s), `token ${t} tile ${tile}: scale ${s}`);
      assert.ok(s * 448 >= amax && (s === 2 ** -13 || (s / 2) * 448 < amax), `token ${t} tile ${tile}: scale ${s} for amax ${amax}`);
      for (let i = 0; i < FP8_TILE; i++) {
        const at = t * D_QK + tile * FP8_TILE + i;
        const x = bf16BitsToF32(kv[at]);
        const y = bf16BitsToF32(back[at]);
        const expected = nearestEven(x / s, FP8_E4M3) * s;
        if (!Object.is(y, expected)) assert.fail(`token ${t} dim ${tile * FP8_TILE + i}: x ${x}, s ${s}: got ${y}, expected ${expected}`);
        assert.ok(Math.abs(x - y) <= Math.max(Math.abs(x) * 2 ** -4, s * 2 ** -10));
        if (Math.abs(x / s) >= 2 ** -6) {
          assert.ok(Math.abs(x - y) <= Math.abs(x) * 2 ** -4);
          normalsChecked++;
        }
        assert.equal(y, fp8E4m3ToF32(bytes[t * FP8_TOKEN_BYTES + tile * FP8_TILE + i]) * s);
      }
    }
  }
  assert.ok(normalsChecked > 10_000, `${normalsChecked} normal values checked`);
  for (let t = 0; t < numTokens; t++) {
    assert.deepEqual([...back.subarray(t * D_QK + D_NOPE, (t + 1) * D_QK)], [...kv.subarray(t * D_QK + D_NOPE, (t + 1) * D_QK)]);
  }
});

test("a tile whose amax is exactly 448·2^k gets scale 2^k and its maximum the code 0x7e", () => {
  for (const k of [-13, -5, 0, 3, 20]) {
    const values = new Array<number>(D_QK).fill(0);
    values[5] = -448 * 2 ** k;
    values[6] = 224 * 2 ** k;
    values[128] = 448 * 2 ** k * (1 + 2 ** -7); // the next bf16 above the boundary in tile 1
    const bytes = new Uint8Array(FP8_TOKEN_BYTES);
    quantizeKvTokenV32(tokenOf(values), 0, bytes, 0);
    const scales = scalesOf(bytes);
    assert.equal(scales[0], 2 ** k, `k = ${k}`);
    assert.equal(hex(bytes[5]), "0xfe");
    assert.equal(hex(bytes[6]), "0x76"); // 224 = 1.110·2^7
    assert.equal(scales[1], 2 ** (k + 1));
    assert.equal(hex(bytes[128]), "0x76"); // 452/2 = 226 rounds to 224 (the tie-free nearest)
  }
});

test("a NaN anywhere in a tile makes its scale NaN and all its codes NaN, leaving other tiles alone", () => {
  const rng = new Rng(33);
  const src = randomBf16(rng, D_QK, { std: 0.5 });
  src[200] = 0xffc1; // a negative NaN in tile 1
  const bytes = new Uint8Array(FP8_TOKEN_BYTES);
  quantizeKvTokenV32(src, 0, bytes, 0);
  const view = new DataView(bytes.buffer);
  assert.equal(hex(view.getUint32(512 + 4, true), 8), "0x7fc00000");
  assert.ok(bytes.subarray(128, 256).every((b) => b === 0x7f));
  for (const tile of [0, 2, 3]) assert.ok(isPowerOfTwo(scalesOf(bytes)[tile]));
  assert.ok(!bytes.subarray(0, 128).includes(0x7f));
  const back = new Uint16Array(D_QK);
  dequantizeKvTokenV32(bytes, 0, back, 0);
  assert.ok(back.subarray(128, 256).every((b) => b === 0x7fc0));
  assert.ok(back.subarray(0, 128).every((b) => !Number.isNaN(bf16BitsToF32(b))));
});

test("a tile holding inf gets an inf scale: finite values quantize to signed zero and inf to NaN", () => {
  const values = new Array<number>(D_QK).fill(0.25);
  values[300] = -Infinity;
  values[301] = -2;
  const bytes = new Uint8Array(FP8_TOKEN_BYTES);
  quantizeKvTokenV32(tokenOf(values), 0, bytes, 0);
  assert.equal(scalesOf(bytes)[2], Infinity);
  assert.equal(hex(bytes[300]), "0x7f");
  assert.equal(hex(bytes[301]), "0x80");
  assert.equal(hex(bytes[302]), "0x00");
  assert.equal(scalesOf(bytes)[1], 2 ** -10); // 0.25 tile: 2^-11·448 = 0.21875 < 0.25
});

test("quantizeKvTokenV32() and dequantizeKvTokenV32() honour offsets and reject ranges that do not fit", () => {
  const rng = new Rng(34);
  const kv = randomBf16(rng, 3 * D_QK, { std: 0.2 });
  const whole = quantizeKvCacheV32(kv);
  const single = new Uint8Array(FP8_TOKEN_BYTES + 7);
  quantizeKvTokenV32(kv, 2 * D_QK, single, 7);
  assert.deepEqual([...single.subarray(7)], [...whole.subarray(2 * FP8_TOKEN_BYTES)]);
  const out = new Uint16Array(D_QK + 3).fill(0xabcd);
  dequantizeKvTokenV32(single, 7, out, 3);
  assert.deepEqual([...out.subarray(0, 3)], [0xabcd, 0xabcd, 0xabcd]);
  assert.deepEqual([...out.subarray(3)], [...dequantizeKvCacheV32(whole).subarray(2 * D_QK)]);

  assert.throws(() => quantizeKvTokenV32(kv, 2 * D_QK + 1, single, 0), /quantizeKvTokenV32\(\): argument 'srcOffset'/);
  assert.throws(() => quantizeKvTokenV32(kv, 0, single, 8), /argument 'dstOffset'/);
  assert.throws(() => quantizeKvTokenV32(kv, -1, single, 0), ArgumentError);
  assert.throws(() => dequantizeKvTokenV32(single, 0.5, out, 0), /dequantizeKvTokenV32\(\): argument 'srcOffset'/);
  assert.throws(() => dequantizeKvTokenV32(single, 0, out, 4), /argument 'dstOffset'/);
});

test("quantizeKvCacheV32() and dequantizeKvCacheV32() reject sizes that are not whole tokens", () => {
  assert.throws(() => quantizeKvCacheV32(new Uint16Array(D_QK + 1)), /quantizeKvCacheV32\(\): argument 'kv': expected a multiple of 576/);
  assert.throws(() => dequantizeKvCacheV32(new Uint8Array(FP8_TOKEN_BYTES * 2 - 1)), /dequantizeKvCacheV32\(\): argument 'bytes': expected a multiple of 656/);
  assert.equal(quantizeKvCacheV32(new Uint16Array(0)).length, 0);
  assert.equal(dequantizeKvCacheV32(new Uint8Array(0)).length, 0);
});
