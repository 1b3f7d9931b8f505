import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { writeKvCacheModel1 } from "../../../src/mla/kvCache/writeKvCacheModel1.js";
import { f32ToBf16Bits } from "../../../src/numeric/bf16.js";
import { MODEL1_TOKEN_BYTES, model1PageBytes, quantizeKvCacheModel1 } from "../../../src/numeric/kvCacheModel1.js";
import { Rng } from "../../../src/numeric/random.js";
import { Stream } from "../../../src/runtime/Stream.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { randomModel1Tokens } from "../../helpers/model1Tokens.js";

/** What the cache holds before the writer runs: every byte it must not touch stays this. */
const POISON = 0xab;

/** Page sizes, pages, tokens and the kv row stride (elements; 512 is packed). */
const CASES = [
  [2, 300, 500, 512],
  [64, 10, 500, 528],
  [256, 3, 600, 512],
  [1, 50, 50, 512],
  [61, 7, 300, 512],
] as const;

describeGpu("writeKvCacheModel1() on the GPU", () => {
  test("writes exactly the CPU quantizer's bytes at the given slots and nothing elsewhere (page sizes 2, 64, 256, 1, 61)", () => {
    const rng = new Rng(2026);
    for (const [pbs, numBlocks, n, kvStride] of CASES) {
      const tokens = randomModel1Tokens(rng, n);
      // NaN and inf tiles, and NaN RoPE values, in a few tokens: they must match bit for bit too.
      tokens[3 * 512 + 100] = 0x7fc0;
      tokens[4 * 512 + 300] = 0xff80;
      tokens[5 * 512 + 5] = 0x7f80;
      tokens[5 * 512 + 450] = 0xffc1;
      tokens[6 * 512 + 7] = f32ToBf16Bits(3.3895313892515355e38); // the largest bf16: scale byte 247
      const numSlots = numBlocks * pbs;
      const perm = rng.permutation(numSlots);
      // Distinct slots in random order; -1, slots past the cache and other negatives are skipped.
      const skip = [-1, numSlots, numSlots + 3, 2 ** 31 - 1, -7];
      const slots = Int32Array.from({ length: n }, (_, i) => (i % 9 === 4 ? skip[i % skip.length] : perm[i]));
      const cpuSlots = slots.map((s) => (s >= 0 && s < numSlots ? s : -1));
      const S = model1PageBytes(pbs);
      const expected = quantizeKvCacheModel1(tokens, { pageBlockSize: pbs, numBlocks, slotMapping: cpuSlots, fill: POISON });

      const rows = new Uint16Array(n * kvStride);
      for (let t = 0; t < n; t++) rows.set(tokens.subarray(t * 512, (t + 1) * 512), t * kvStride);
      const kvRows = Tensor.toDevice(Tensor.fromHost(rows, [n, kvStride], "bf16"));
      const kv = kvRows.view([n, 512], [kvStride, 1]);
      const slotMapping = Tensor.toDevice(Tensor.fromHost(slots, [n], "i32"));
      const flat = Tensor.toDevice(Tensor.fromHost(new Uint8Array(numBlocks * S).fill(POISON), [numBlocks * S], "u8"));
      const cache = flat.view([numBlocks, pbs, 1, MODEL1_TOKEN_BYTES], [S, MODEL1_TOKEN_BYTES, MODEL1_TOKEN_BYTES, 1]);
      try {
        writeKvCacheModel1({ kv, slotMapping, cache });
        const got = flat.toHost().host as Uint8Array;
        const bad = got.findIndex((v, i) => v !== expected[i]);
        if (bad >= 0) {
          const at = bad % S;
          const where = at < pbs * 576 ? `token row ${Math.floor(at / 576)} byte ${at % 576}` : at < pbs * 584 ? `scale record ${Math.floor((at - pbs * 576) / 8)} byte ${(at - pbs * 576) % 8}` : "padding";
          assert.fail(`page size ${pbs}: first differing byte ${bad} (block ${Math.floor(bad / S)}, ${where}): gpu 0x${got[bad].toString(16)}, cpu 0x${expected[bad].toString(16)}`);
        }
      } finally {
        kvRows.dispose();
        slotMapping.dispose();
        flat.dispose();
      }
    }
  });

  test("runs on a given stream with pageBlockSize named, and packed pages (block stride pbs · 584)", () => {
    const rng = new Rng(7);
    const pbs = 72; // 72 · 584 = 73 · 576: FlashMLA's padded stride is the packed one here
    const n = 100;
    const numBlocks = 2;
    const tokens = randomModel1Tokens(rng, n);
    const slots = Int32Array.from(rng.permutation(numBlocks * pbs).subarray(0, n));
    const expected = quantizeKvCacheModel1(tokens, { pageBlockSize: pbs, numBlocks, slotMapping: slots, fill: POISON });
    const stream = Stream.create();
    const kv = Tensor.toDevice(Tensor.fromHost(tokens, [n, 512], "bf16"));
    const slotMapping = Tensor.toDevice(Tensor.fromHost(slots, [n], "i32"));
    const flat = Tensor.toDevice(Tensor.fromHost(new Uint8Array(expected.length).fill(POISON), [expected.length], "u8"));
    try {
      writeKvCacheModel1({ kv, slotMapping, cache: flat.view([numBlocks, pbs, 1, 584], [pbs * 584, 584, 584, 1], "fp8_e4m3"), pageBlockSize: pbs, stream });
      stream.synchronize();
      const got = flat.toHost().host as Uint8Array;
      assert.equal(got.findIndex((v, i) => v !== expected[i]), -1);
    } finally {
      kv.dispose();
      slotMapping.dispose();
      flat.dispose();
      stream.dispose();
    }
  });

  test("names host tensors, a misaligned cache, a page size that is not the cache's and an empty batch", () => {
    const kv = Tensor.toDevice(Tensor.fromHost(new Uint16Array(2 * 512), [2, 512], "bf16"));
    const slotMapping = Tensor.toDevice(Tensor.fromHost(Int32Array.of(0, 1), [2], "i32"));
    const flat = Tensor.emptyDevice([2 * 1728 + 16], "u8");
    const cache = flat.view([2, 2, 1, 584], [1728, 584, 584, 1]);
    const threeSlots = Tensor.toDevice(Tensor.fromHost(Int32Array.of(0, 1, 2), [3], "i32"));
    const W = "writeKvCacheModel1\\(\\): argument"; // a RegExp source: the parentheses escaped
    const cases: Array<[string, () => void, RegExp]> = [
      ["kv on the host", () => writeKvCacheModel1({ kv: kv.toHost(), slotMapping, cache }), new RegExp(`^${W} 'kv': expected a CUDA tensor, got a cpu tensor`)],
      ["cache on the host", () => writeKvCacheModel1({ kv, slotMapping, cache: Tensor.zerosHost([2, 2, 1, 584], "u8") }), new RegExp(`^${W} 'cache': expected a CUDA tensor`)],
      ["cache 8 bytes off 16", () => writeKvCacheModel1({ kv, slotMapping, cache: Tensor.fromDeviceBuffer(flat.buffer!, [2, 2, 1, 584], "u8", { strides: [1728, 584, 584, 1], byteOffset: 8 }) }), new RegExp(`^${W} 'cache': expected data aligned to 16 bytes`)],
      ["pageBlockSize 64 for pages of 2", () => writeKvCacheModel1({ kv, slotMapping, cache, pageBlockSize: 64 }), new RegExp(`^${W} 'cache': expected page_block_size = 64`)],
      ["slotMapping for 3 tokens", () => writeKvCacheModel1({ kv, slotMapping: threeSlots, cache }), new RegExp(`^${W} 'slotMapping': expected num_tokens = 2`)],
    ];
    try {
      for (const [what, call, message] of cases) assert.throws(call, (e: unknown) => e instanceof ArgumentError && message.test(e.message), what);
      // An empty batch launches nothing and returns.
      const none = Tensor.emptyDevice([0, 512], "bf16");
      const noSlots = Tensor.emptyDevice([0], "i32");
      writeKvCacheModel1({ kv: none, slotMapping: noSlots, cache });
      none.dispose();
      noSlots.dispose();
    } finally {
      kv.dispose();
      slotMapping.dispose();
      threeSlots.dispose();
      flat.dispose();
    }
  });
});
