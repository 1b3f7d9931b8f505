import { test } from "node:test";
import assert from "node:assert/strict";
import {
  MODEL1_D_NOPE,
  MODEL1_D_QK,
  MODEL1_D_ROPE,
  MODEL1_TILES,
  MODEL1_TOKEN_BYTES,
  dequantizeKvCacheModel1,
  dequantizeTokenModel1,
  model1PageBytes,
  quantizeKvCacheModel1,
  quantizeTokenModel1,
} from "../../../src/numeric/kvCacheModel1.js";
import { fp8TileScale } from "../../../src/numeric/kvCacheFp8.js";
import { bf16BitsToF32, f32ToBf16Bits } from "../../../src/numeric/bf16.js";
import { fp8E4m3ToF32 } from "../../../src/numeric/fp8e4m3.js";
import { Rng } from "../../../src/numeric/random.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { randomModel1Tokens } from "../../helpers/model1Tokens.js";
import { FP8_E4M3, nearestEven } from "./nearestEven.js";

const hex = (x: number): string => `0x${x.toString(16).padStart(2, "0")}`;
const hexes = (bytes: ArrayLike<number>): string[] => Array.from(bytes, hex);

function tokenOf(values: number[]): Uint16Array {
  assert.equal(values.length, MODEL1_D_QK);
  return Uint16Array.from(values, f32ToBf16Bits);
}

/** A token with NoPE dims 0 and the given RoPE dims 448 + i = i − 31.5 (exact in bf16). */
function zeroToken(): number[] {
  const values = new Array<number>(MODEL1_D_QK).fill(0);
  for (let i = 0; i < MODEL1_D_ROPE; i++) values[MODEL1_D_NOPE + i] = i - 31.5;
  return values;
}

/** The scale byte the rule gives for amax, worked independently: the smallest k >= -13 with 448·2^k >= amax, plus 127. */
function scaleByteByDefinition(amax: number): number {
  let k = -13;
  while (448 * 2 ** k < amax) k++;
  return k + 127;
}

test("the MODEL1 constants and page sizes match DEEPSEEK-V4.md", () => {
  assert.deepEqual([MODEL1_TOKEN_BYTES, MODEL1_D_NOPE, MODEL1_D_ROPE, MODEL1_D_QK, MODEL1_TILES], [584, 448, 64, 512, 7]);
  assert.equal(MODEL1_TOKEN_BYTES, MODEL1_D_NOPE + 2 * MODEL1_D_ROPE + MODEL1_TILES + 1);
  assert.equal(model1PageBytes(2), 1728);
  assert.equal(model1PageBytes(64), 37440);
  assert.equal(model1PageBytes(256), 149760);
  assert.equal(model1PageBytes(1), 1152); // 584 rounded up to 2·576
  assert.equal(model1PageBytes(72), 72 * 584); // 72·584 = 73·576: no padding
  for (let pbs = 1; pbs <= 300; pbs++) {
    const s = model1PageBytes(pbs);
    assert.ok(s % 576 === 0 && s >= pbs * 584 && s - pbs * 584 < 576, `pbs ${pbs}: ${s}`);
  }
});

test("quantizeTokenModel1() writes a hand-worked token byte for byte", () => {
  const values = zeroToken();
  for (let i = 0; i < 64; i++) values[i] = 1; // tile 0: 1/448 -> 2^ceil(-8.8) = 2^-8 (byte 119); 1/s = 256 = 0x78
  values[64] = 448; // tile 1: 448/448 = 1 -> s = 1 (byte 127)
  values[65] = -448;
  values[66] = 0.5; // 1.000·2^-1 -> 0 0110 000
  values[67] = -3; // 1.100·2^1 -> 1 1000 100
  // Tile 2 stays zero: the clamp gives s = 2^ceil(log2 1e-4) = 2^-13 (byte 114), codes 0.
  values[192] = 3; // tile 3: 3/448 -> 2^ceil(-7.2) = 2^-7 (byte 120); 3/s = 384 = 1.100·2^8
  values[193] = -0.75; // -96 = -1.100·2^6 -> 1 1101 100
  values[194] = 2 ** -16; // 2^-9 after scaling: the smallest subnormal
  values[195] = 2 ** -17; // 2^-10: the tie between 0 and 2^-9 goes to 0
  values[196] = 3 * 2 ** -17; // 3·2^-10: the tie between 1 and 2 units goes to 2
  values[256] = 448 * 2 ** -13; // tile 4: 0.0546875, amax/448 = 2^-13 exactly -> s = 2^-13 (byte 114), code 448
  values[320] = 450 * 2 ** -13; // tile 5: the next bf16 -> s = 2^-12 (byte 115); 225 rounds to 224 = 1.110·2^7
  values[384] = -(2 ** -20); // tile 6: far below the clamp -> s = 2^-13; -2^-7 is the subnormal 4·2^-9
  const q = quantizeTokenModel1(tokenOf(values));

  assert.deepEqual(hexes(q.scales), ["0x77", "0x7f", "0x72", "0x78", "0x72", "0x73", "0x72"]);
  for (let i = 0; i < 64; i++) assert.equal(hex(q.nope[i]), "0x78", `dim ${i}`);
  assert.deepEqual(hexes(q.nope.subarray(64, 68)), ["0x7e", "0xfe", "0x30", "0xc4"]);
  assert.ok(q.nope.subarray(68, 192).every((b) => b === 0));
  assert.deepEqual(hexes(q.nope.subarray(192, 197)), ["0x7c", "0xec", "0x01", "0x00", "0x02"]);
  assert.deepEqual(hexes([q.nope[256], q.nope[320], q.nope[384]]), ["0x7e", "0x76", "0x84"]);
  assert.equal(q.nope.length, 448);
  // RoPE: dim 448 holds -31.5 = bf16 0xc1fc.
  assert.equal(q.rope.length, 64);
  assert.equal(q.rope[0], 0xc1fc);
  assert.deepEqual(Array.from(q.rope, bf16BitsToF32), values.slice(MODEL1_D_NOPE));
});

test("quantizeKvCacheModel1() puts the token data, the scale footer and the padding where the note says (pbs 2, 64, 256)", () => {
  const values = zeroToken();
  values[0] = 1; // tile 0: byte 119, code 0x78
  values[447] = -448; // tile 6: byte 127, code 0xfe
  const token = tokenOf(values);
  for (const [pbs, S] of [[2, 1728], [64, 37440], [256, 149760]]) {
    const row = pbs - 1;
    const slot = pbs + row; // block 1, last row
    for (const fill of [undefined, 0xab]) {
      const cache = quantizeKvCacheModel1(token, { pageBlockSize: pbs, numBlocks: 2, slotMapping: Int32Array.of(slot), fill });
      assert.equal(cache.length, 2 * S);
      const data = S + row * 576;
      const record = S + pbs * 576 + row * 8;
      assert.equal(hex(cache[data]), "0x78", `pbs ${pbs}: dim 0`);
      assert.equal(hex(cache[data + 447]), "0xfe", `pbs ${pbs}: dim 447`);
      assert.deepEqual([cache[data + 448], cache[data + 449]], [0xfc, 0xc1], `pbs ${pbs}: RoPE dim 448, low byte first`);
      assert.deepEqual([cache[data + 574], cache[data + 575]], [0xfc, 0x41], `pbs ${pbs}: RoPE dim 511 = 31.5 = 0x41fc`);
      assert.deepEqual(hexes(cache.subarray(record, record + 8)), ["0x77", "0x72", "0x72", "0x72", "0x72", "0x72", "0x7f", "0x00"], `pbs ${pbs}: scale record`);
      // Every other byte, page padding included, holds the fill.
      const want = fill ?? 0;
      for (let i = 0; i < cache.length; i++) {
        if ((i >= data && i < data + 576) || (i >= record && i < record + 8)) continue;
        if (cache[i] !== want) assert.fail(`pbs ${pbs}, fill ${want}: byte ${i} is ${cache[i]}`);
      }
      assert.deepEqual(Array.from(dequantizeTokenModel1(cache, slot, { pageBlockSize: pbs })), values);
    }
  }
});

test("the scale byte is the smallest k >= -13 with 448·2^k >= amax, plus 127, for every finite bf16 amax", () => {
  const token = new Uint16Array(MODEL1_D_QK);
  for (let bits = 0; bits < 0x7f80; bits++) {
    token[3] = bits;
    token[64 + 40] = bits | 0x8000; // the sign does not matter
    const q = quantizeTokenModel1(token);
    const amax = bf16BitsToF32(bits);
    const want = scaleByteByDefinition(amax);
    if (q.scales[0] !== want || q.scales[1] !== want) assert.fail(`amax ${amax} (0x${bits.toString(16)}): bytes ${q.scales[0]}, ${q.scales[1]}, expected ${want}`);
    // V3.2's power-of-two scale is the same rule over 128 dims (FlashMLA's quantizer uses one formula for both).
    if (2 ** (want - 127) !== fp8TileScale(amax)) assert.fail(`amax ${amax}: V32 scale ${fp8TileScale(amax)}`);
    // The code of the tile's largest value lands in [224, 448] (224: 448·2^k·(1 + 2^-7)·2^-(k+1) rounds
    // down to it): the scale wastes no binade.
    const code = fp8E4m3ToF32(q.nope[3]);
    if (want > 114 && !(code >= 224 && code <= 448)) assert.fail(`amax ${amax}: largest code ${code}`);
  }
});

test("exact powers of two: amax 2^k gives s = 2^(k-8) and code 256; 448·2^k gives s = 2^k and code 448, 450·2^k s = 2^(k+1)", () => {
  for (let k = -30; k <= 126; k++) {
    const values = new Array<number>(MODEL1_D_QK).fill(0);
    values[0] = 2 ** k; // tile 0
    values[64] = -(448 * 2 ** k); // tile 1
    values[128] = 450 * 2 ** k; // tile 2: the bf16 value just above the boundary
    values[129] = 2 ** (k + 1); // 2^(k+1)/2^(k+1) = 1
    if (k > 118) values[64] = values[128] = values[129] = 0; // 448·2^k would pass the largest bf16
    const q = quantizeTokenModel1(tokenOf(values));
    const s0 = Math.max(k - 8, -13);
    assert.equal(q.scales[0], s0 + 127, `2^${k}: scale byte`);
    assert.equal(fp8E4m3ToF32(q.nope[0]), nearestEven(2 ** (k - s0), FP8_E4M3), `2^${k}: code`); // 256 from k = -5 up
    if (k > 118) continue;
    const s1 = Math.max(k, -13);
    assert.equal(q.scales[1], s1 + 127, `448·2^${k}`);
    assert.equal(fp8E4m3ToF32(q.nope[64]), nearestEven(-448 * 2 ** (k - s1), FP8_E4M3)); // -448 from k = -13 up
    const s2 = Math.max(k + 1, -13);
    assert.equal(q.scales[2], s2 + 127, `450·2^${k}`);
    assert.equal(fp8E4m3ToF32(q.nope[128]), nearestEven(450 * 2 ** (k - s2), FP8_E4M3));
    assert.equal(fp8E4m3ToF32(q.nope[129]), nearestEven(2 ** (k + 1 - s2), FP8_E4M3));
  }
});

test("all-zero tiles and tiles at the 1e-4 clamp get s = 2^ceil(log2(1e-4)) = 2^-13 (byte 114)", () => {
  assert.equal(Math.ceil(Math.log2(Math.fround(1e-4))), -13);
  const values = new Array<number>(MODEL1_D_QK).fill(0);
  for (let i = 64; i < 128; i++) values[i] = -0; // tile 1: negative zeros keep their sign
  // The clamp: amax/448 = 1e-4 means amax ≈ 0.0448. bf16 values on both sides of it, and the largest
  // bf16 value whose quotient stays below 2^-13 (0.0546875 = 448·2^-13) and the next one up.
  const near = [0.0447, 0.0448, 0.0449, 0.0546875, 450 * 2 ** -13].map((x) => bf16BitsToF32(f32ToBf16Bits(x)));
  assert.ok(near[0] / 448 < 1e-4 && near[2] / 448 > 1e-4, "the draws straddle the clamp");
  near.forEach((x, j) => (values[128 + 64 * j] = x));
  const q = quantizeTokenModel1(tokenOf(values));
  assert.deepEqual(Array.from(q.scales), [114, 114, 114, 114, 114, 114, 115]);
  assert.ok(q.nope.subarray(0, 64).every((b) => b === 0x00));
  assert.ok(q.nope.subarray(64, 128).every((b) => b === 0x80));
  for (let j = 0; j < 4; j++) assert.equal(fp8E4m3ToF32(q.nope[128 + 64 * j]), nearestEven(near[j] * 2 ** 13, FP8_E4M3), `clamp value ${near[j]}`);
  assert.equal(hex(q.nope[128 + 64 * 3]), "0x7e");
  const back = dequantizeTokenModel1(quantizeKvCacheModel1(tokenOf(values), { pageBlockSize: 1, numBlocks: 1 }), 0, { pageBlockSize: 1 });
  assert.ok(Object.is(back[0], 0) && Object.is(back[64], -0));
});

test("dequantize(quantize(x)) is the nearest point of the tile's scaled e4m3 grid: within 2^-4 relative for normals", () => {
  const rng = new Rng(34);
  const n = 96;
  const tokens = randomModel1Tokens(rng, n);
  const pbs = 5;
  const numBlocks = Math.ceil(n / pbs);
  const cache = quantizeKvCacheModel1(tokens, { pageBlockSize: pbs, numBlocks });
  const all = dequantizeKvCacheModel1(cache, { pageBlockSize: pbs, numBlocks });
  assert.equal(all.length, numBlocks * pbs * 512);
  let normals = 0;
  let subnormals = 0;
  for (let t = 0; t < n; t++) {
    const back = dequantizeTokenModel1(cache, t, { pageBlockSize: pbs });
    assert.deepEqual(back, all.subarray(t * 512, (t + 1) * 512));
    const q = quantizeTokenModel1(tokens.subarray(t * 512, (t + 1) * 512));
    for (let tile = 0; tile < 7; tile++) {
      const s = 2 ** (q.scales[tile] - 127);
      let amax = 0;
      for (let i = 0; i < 64; i++) amax = Math.max(amax, Math.abs(bf16BitsToF32(tokens[t * 512 + tile * 64 + i])));
      assert.ok(s * 448 >= amax && (s === 2 ** -13 || (s / 2) * 448 < amax), `token ${t} tile ${tile}: s ${s}, amax ${amax}`);
      for (let i = 0; i < 64; i++) {
        const d = tile * 64 + i;
        const x = bf16BitsToF32(tokens[t * 512 + d]);
        const y = back[d];
        const expected = nearestEven(x / s, FP8_E4M3) * s;
        if (!Object.is(y, Math.fround(expected))) assert.fail(`token ${t} dim ${d}: x ${x}, s ${s}: got ${y}, expected ${expected}`);
        if (Math.abs(x / s) >= 2 ** -6) {
          // Half an e4m3 ulp: 2^-4 of the binade's bottom, so at most 2^-4 of |x|.
          assert.ok(Math.abs(x - y) <= Math.abs(x) * 2 ** -4, `token ${t} dim ${d}: |${x} - ${y}|`);
          normals++;
        } else {
          assert.ok(Math.abs(x - y) <= s * 2 ** -10, `token ${t} dim ${d}: subnormal |${x} - ${y}|`);
          subnormals++;
        }
      }
    }
    for (let i = 448; i < 512; i++) assert.equal(back[i], bf16BitsToF32(tokens[t * 512 + i]), `token ${t} RoPE dim ${i}`);
  }
  assert.ok(normals > 20_000 && subnormals > 1_000, `${normals} normal and ${subnormals} subnormal codes checked`);
});

test("a NaN in a tile gives scale byte 0xff and codes 0x7f; ±inf gives 0xff, ±0 codes and 0x7f; both dequantize to NaN", () => {
  const values = zeroToken();
  for (let i = 0; i < 448; i++) values[i] = 0.25 * (i % 2 ? -1 : 1);
  values[70] = NaN; // tile 1
  values[130] = Infinity; // tile 2
  values[200] = -Infinity; // tile 3
  values[448] = NaN; // RoPE keeps its bits
  values[449] = -Infinity;
  const token = tokenOf(values);
  token[70] = 0xffc1; // a negative NaN with a payload: the codes are still 0x7f
  token[448] = 0x7fa1;
  const q = quantizeTokenModel1(token);
  // ±0.25 elsewhere: 0.25/448 -> 2^ceil(-10.8) = 2^-10 (byte 117 = 0x75), codes ±256 (0x78, 0xf8).
  assert.deepEqual(hexes(q.scales), ["0x75", "0xff", "0xff", "0xff", "0x75", "0x75", "0x75"]);
  assert.ok(q.nope.subarray(64, 128).every((b) => b === 0x7f), "NaN tile: every code 0x7f");
  assert.deepEqual(hexes(q.nope.subarray(128, 132)), ["0x00", "0x80", "0x7f", "0x80"], "+inf tile: finite values ±0, inf NaN");
  assert.deepEqual(hexes(q.nope.subarray(198, 202)), ["0x00", "0x80", "0x7f", "0x80"], "-inf tile");
  assert.deepEqual(hexes(q.nope.subarray(0, 2)), ["0x78", "0xf8"]);
  assert.deepEqual([q.rope[0], q.rope[1]], [0x7fa1, 0xff80]);
  const back = dequantizeTokenModel1(quantizeKvCacheModel1(token, { pageBlockSize: 3, numBlocks: 1 }), 0, { pageBlockSize: 3 });
  assert.ok(back.subarray(64, 256).every(Number.isNaN), "tiles 1-3 dequantize to NaN");
  assert.ok(back.subarray(0, 64).every((v) => Math.abs(v) === 0.25) && back.subarray(256, 448).every((v) => Math.abs(v) === 0.25));
  assert.ok(Number.isNaN(back[448]) && back[449] === -Infinity);
});

test("the largest bf16 value gets scale 2^120 (byte 247) and code 256: it dequantizes to +inf in f32", () => {
  const token = new Uint16Array(MODEL1_D_QK);
  token[0] = 0x7f7f; // (2 - 2^-7)·2^127
  token[1] = 0xff7f;
  token[2] = f32ToBf16Bits(2 ** 126);
  const q = quantizeTokenModel1(token);
  assert.equal(q.scales[0], 247);
  assert.deepEqual(hexes(q.nope.subarray(0, 3)), ["0x78", "0xf8", "0x68"]); // 2^126 / 2^120 = 64 = 1.000·2^6
  const back = dequantizeTokenModel1(quantizeKvCacheModel1(token, { pageBlockSize: 1, numBlocks: 1 }), 0, { pageBlockSize: 1 });
  assert.deepEqual([back[0], back[1], back[2]], [Infinity, -Infinity, 2 ** 126]);
});

test("dequantizeTokenModel1() is e4m3 · 2^(byte − 127) exactly for any bytes, NaN for scale byte 0xff", () => {
  const rng = new Rng(36);
  const pbs = 3;
  const cache = new Uint8Array(2 * model1PageBytes(pbs));
  for (let i = 0; i < cache.length; i++) cache[i] = rng.int(0, 256);
  const S = model1PageBytes(pbs);
  cache[S + pbs * 576 + 8] = 0; // slot 4's tile 0: 2^-127, its smallest codes f32 subnormals
  cache[S + pbs * 576 + 9] = 0xff; // slot 4's tile 1: NaN
  cache[S + pbs * 576 + 10] = 254; // slot 4's tile 2: 2^127, its large codes inf
  for (let slot = 0; slot < 2 * pbs; slot++) {
    const back = dequantizeTokenModel1(cache, slot, { pageBlockSize: pbs });
    const base = Math.floor(slot / pbs) * S;
    const row = slot % pbs;
    for (let d = 0; d < 448; d++) {
      const byte = cache[base + pbs * 576 + row * 8 + Math.floor(d / 64)];
      const want = byte === 0xff ? NaN : Math.fround(fp8E4m3ToF32(cache[base + row * 576 + d]) * 2 ** (byte - 127));
      if (!Object.is(back[d], want)) assert.fail(`slot ${slot} dim ${d}: got ${back[d]}, expected ${want}`);
    }
    for (let i = 0; i < 64; i++) {
      const at = base + row * 576 + 448 + 2 * i;
      assert.ok(Object.is(back[448 + i], bf16BitsToF32(cache[at] | (cache[at + 1] << 8))));
    }
  }
  const four = dequantizeTokenModel1(cache, 4, { pageBlockSize: pbs });
  assert.ok(four.subarray(64, 128).every(Number.isNaN));
});

test("slotMapping: -1 skips a token, slots may come in any order, the later of two tokens on one slot wins", () => {
  const rng = new Rng(37);
  const tokens = randomModel1Tokens(rng, 6);
  const pbs = 2;
  const inOrder = quantizeKvCacheModel1(tokens, { pageBlockSize: pbs, numBlocks: 3 });
  const S = model1PageBytes(pbs);
  const rowOf = (cache: Uint8Array, slot: number) => {
    const base = Math.floor(slot / pbs) * S;
    const r = slot % pbs;
    return [...cache.subarray(base + r * 576, base + r * 576 + 576), ...cache.subarray(base + pbs * 576 + r * 8, base + pbs * 576 + r * 8 + 8)];
  };
  const slots = Int32Array.of(3, -1, 0, 5, 2, 3);
  const mapped = quantizeKvCacheModel1(tokens, { pageBlockSize: pbs, numBlocks: 3, slotMapping: slots, fill: 0xcd });
  assert.deepEqual(rowOf(mapped, 0), rowOf(inOrder, 2));
  assert.deepEqual(rowOf(mapped, 5), rowOf(inOrder, 3));
  assert.deepEqual(rowOf(mapped, 2), rowOf(inOrder, 4));
  assert.deepEqual(rowOf(mapped, 3), rowOf(inOrder, 5), "token 5 overwrote token 0 on slot 3");
  for (const untouched of [1, 4]) assert.ok(rowOf(mapped, untouched).every((b) => b === 0xcd), `slot ${untouched}`);
  for (let block = 0; block < 3; block++) assert.ok(mapped.subarray(block * S + pbs * 584, (block + 1) * S).every((b) => b === 0xcd), `block ${block} padding`);
  // The default mapping is token i to slot i, the identity mapping.
  assert.deepEqual(quantizeKvCacheModel1(tokens, { pageBlockSize: pbs, numBlocks: 3, slotMapping: Int32Array.from({ length: 6 }, (_, i) => i) }), inOrder);
  // The pieces of quantizeTokenModel1 are the cache's bytes.
  const q = quantizeTokenModel1(tokens.subarray(512 * 4, 512 * 5));
  const row = rowOf(inOrder, 4);
  assert.deepEqual([...q.nope], row.slice(0, 448));
  assert.deepEqual([...q.scales], row.slice(576, 583));
  assert.deepEqual([...q.rope], [...tokens.subarray(512 * 4 + 448, 512 * 5)]);
});

test("dequantizeKvCacheModel1() reads pages at a given block stride", () => {
  const rng = new Rng(38);
  const pbs = 4;
  const tokens = randomModel1Tokens(rng, 3 * pbs);
  const padded = quantizeKvCacheModel1(tokens, { pageBlockSize: pbs, numBlocks: 3 });
  const S = model1PageBytes(pbs);
  const stride = pbs * 584; // unpadded pages, packed
  const packed = new Uint8Array(2 * stride + pbs * 584);
  for (let b = 0; b < 3; b++) packed.set(padded.subarray(b * S, b * S + pbs * 584), b * stride);
  const want = dequantizeKvCacheModel1(padded, { pageBlockSize: pbs, numBlocks: 3 });
  assert.deepEqual(dequantizeKvCacheModel1(packed, { pageBlockSize: pbs, numBlocks: 3, blockStrideBytes: stride }), want);
  assert.deepEqual(dequantizeTokenModel1(packed, 9, { pageBlockSize: pbs, blockStrideBytes: stride }), want.subarray(9 * 512, 10 * 512));
  assert.equal(dequantizeKvCacheModel1(new Uint8Array(0), { pageBlockSize: pbs, numBlocks: 0 }).length, 0);
  assert.equal(quantizeKvCacheModel1(new Uint16Array(0), { pageBlockSize: pbs, numBlocks: 0 }).length, 0);
});

test("every MODEL1 function names a bad argument, what it expected and what it got", () => {
  const token = new Uint16Array(512);
  const two = new Uint16Array(1024);
  const cache = new Uint8Array(2 * 1728);
  const cases: Array<[string, () => unknown, string]> = [
    ["model1PageBytes 0", () => model1PageBytes(0), "model1PageBytes(): argument 'pageBlockSize': expected an integer >= 1 (tokens per page), got 0"],
    ["model1PageBytes 1.5", () => model1PageBytes(1.5), "model1PageBytes(): argument 'pageBlockSize': expected an integer >= 1 (tokens per page), got 1.5"],
    ["token f32", () => quantizeTokenModel1(new Float32Array(512) as never), "quantizeTokenModel1(): argument 'token': expected a Uint16Array of 512 bf16 bit patterns, got Float32Array"],
    ["token 576", () => quantizeTokenModel1(new Uint16Array(576)), "quantizeTokenModel1(): argument 'token': expected 512 bf16 values, got 576"],
    ["tokens ragged", () => quantizeKvCacheModel1(new Uint16Array(600), { pageBlockSize: 2, numBlocks: 1 }), "quantizeKvCacheModel1(): argument 'tokens': expected a multiple of 512 bf16 elements ([n, 512]), got 600"],
    ["tokens array", () => quantizeKvCacheModel1([] as never, { pageBlockSize: 2, numBlocks: 1 }), "quantizeKvCacheModel1(): argument 'tokens': expected a Uint16Array of bf16 bit patterns [n, 512], got Array"],
    ["opts missing", () => quantizeKvCacheModel1(token, undefined as never), "quantizeKvCacheModel1(): argument 'opts': expected an options object, got undefined"],
    ["opts number", () => quantizeKvCacheModel1(token, 64 as never), "quantizeKvCacheModel1(): argument 'opts': expected an options object or undefined, got number 64"],
    ["pageBlockSize missing", () => quantizeKvCacheModel1(token, { numBlocks: 1 } as never), "quantizeKvCacheModel1(): argument 'opts.pageBlockSize': expected an integer >= 1 (tokens per page), got undefined"],
    ["numBlocks -1", () => quantizeKvCacheModel1(token, { pageBlockSize: 2, numBlocks: -1 }), "quantizeKvCacheModel1(): argument 'opts.numBlocks': expected an integer >= 0, got -1"],
    ["fill 256", () => quantizeKvCacheModel1(token, { pageBlockSize: 2, numBlocks: 1, fill: 256 }), "quantizeKvCacheModel1(): argument 'opts.fill': expected a byte value, an integer in [0, 255], got 256"],
    ["too many tokens", () => quantizeKvCacheModel1(new Uint16Array(3 * 512), { pageBlockSize: 2, numBlocks: 1 }), "quantizeKvCacheModel1(): argument 'tokens': expected at most numBlocks · pageBlockSize = 2 tokens without opts.slotMapping, got 3"],
    ["slotMapping Uint32", () => quantizeKvCacheModel1(two, { pageBlockSize: 2, numBlocks: 1, slotMapping: new Uint32Array(2) as never }), "quantizeKvCacheModel1(): argument 'opts.slotMapping': expected a Int32Array of physical slots [n], got Uint32Array"],
    ["slotMapping short", () => quantizeKvCacheModel1(two, { pageBlockSize: 2, numBlocks: 1, slotMapping: Int32Array.of(0) }), "quantizeKvCacheModel1(): argument 'opts.slotMapping': expected 2 slots (one per token), got 1"],
    ["slot past the cache", () => quantizeKvCacheModel1(two, { pageBlockSize: 2, numBlocks: 1, slotMapping: Int32Array.of(0, 2) }), "quantizeKvCacheModel1(): argument 'opts.slotMapping': expected -1 or a slot in [0, 2), got 2 at index 1"],
    ["slot -2", () => quantizeKvCacheModel1(two, { pageBlockSize: 2, numBlocks: 1, slotMapping: Int32Array.of(-2, 0) }), "quantizeKvCacheModel1(): argument 'opts.slotMapping': expected -1 or a slot in [0, 2), got -2 at index 0"],
    ["cache Int8", () => dequantizeTokenModel1(new Int8Array(1728) as never, 0, { pageBlockSize: 2 }), "dequantizeTokenModel1(): argument 'cache': expected a Uint8Array of MODEL1 cache bytes, got Int8Array"],
    ["slot 4 of 2 pages", () => dequantizeTokenModel1(cache, 4, { pageBlockSize: 2 }), "dequantizeTokenModel1(): argument 'slot': expected a slot in [0, 4) (whole pages of 2 tokens in 3456 bytes, block stride 1728), got 4"],
    ["slot -1", () => dequantizeTokenModel1(cache, -1, { pageBlockSize: 2 }), "dequantizeTokenModel1(): argument 'slot': expected an integer >= 0, got -1"],
    ["stride under a page", () => dequantizeTokenModel1(cache, 0, { pageBlockSize: 2, blockStrideBytes: 1000 }), "dequantizeTokenModel1(): argument 'opts.blockStrideBytes': expected an integer >= pageBlockSize · 584 = 1168, got 1000"],
    ["pageBlockSize string", () => dequantizeTokenModel1(cache, 0, { pageBlockSize: "2" as never }), "dequantizeTokenModel1(): argument 'opts.pageBlockSize': expected an integer >= 1 (tokens per page), got string 2"],
    ["cache too short", () => dequantizeKvCacheModel1(cache, { pageBlockSize: 2, numBlocks: 3 }), "dequantizeKvCacheModel1(): argument 'cache': expected at least 4624 bytes (3 pages of 2 tokens, block stride 1728), got 3456 bytes"],
    ["numBlocks 1.5", () => dequantizeKvCacheModel1(cache, { pageBlockSize: 2, numBlocks: 1.5 }), "dequantizeKvCacheModel1(): argument 'opts.numBlocks': expected an integer >= 0, got 1.5"],
  ];
  for (const [what, call, message] of cases) {
    assert.throws(call, (e: unknown) => {
      assert.ok(e instanceof ArgumentError, `${what}: an ArgumentError`);
      assert.equal(e.message, message, what);
      return true;
    });
  }
  // The last page needs only its token data and footer, not its padding.
  assert.equal(dequantizeKvCacheModel1(cache.subarray(0, 1728 + 1168), { pageBlockSize: 2, numBlocks: 2 }).length, 4 * 512);
  assert.equal(dequantizeTokenModel1(cache.subarray(0, 1728 + 1168), 3, { pageBlockSize: 2 }).length, 512);
});
