import { test } from "node:test";
import assert from "node:assert/strict";
import { quantizeKvCacheFp8, writeKvCacheFp8 } from "../../../src/mla/kvCache/writeKvCacheFp8.js";
import { quantizeKvTokenV32 } from "../../../src/numeric/kvCacheFp8.js";
import { bf16BitsToF32, f32ToBf16Bits } from "../../../src/numeric/bf16.js";
import { Rng, randomBf16 } from "../../../src/numeric/random.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";

const POISON = 0xab;

describeGpu("writeKvCacheFp8() on the GPU", () => {
  test("writes bytes identical to the CPU quantizer at the given slots and nothing elsewhere", () => {
    const rng = new Rng(2024);
    for (const [pageBlockSize, numBlocks, numTokens, blockPad] of [[64, 10, 300, 0], [61, 7, 200, 16], [2, 300, 500, 32], [1, 50, 50, 0]] as const) {
      const kvHost = randomBf16(rng, numTokens * 576, { std: 1 });
      // Varied magnitudes per tile so the scales differ (tiny, normal, large, and an all-zero tile).
      for (let t = 0; t < numTokens; t++) {
        const scale = [1e-6, 1, 300, 0][t % 4];
        for (let d = 0; d < 128; d++) {
          const i = t * 576 + 128 * (t % 4) + d;
          kvHost[i] = scale === 0 ? 0 : kvHost[i];
        }
        if (scale !== 1 && scale !== 0) for (let d = 0; d < 512; d++) kvHost[t * 576 + d] = bf16Scaled(kvHost[t * 576 + d], scale);
      }
      const numSlots = numBlocks * pageBlockSize;
      const perm = rng.permutation(numSlots);
      const slots = Int32Array.from({ length: numTokens }, (_, i) => (i % 9 === 4 ? -1 : i % 13 === 5 ? numSlots + 3 : perm[i % numSlots]));
      const blockStride = pageBlockSize * 656 + blockPad;
      const cacheBytes = new Uint8Array(numBlocks * blockStride).fill(POISON);
      const kv = Tensor.toDevice(Tensor.fromHost(kvHost, [numTokens, 576], "bf16"));
      const slotMapping = Tensor.toDevice(Tensor.fromHost(slots, [numTokens], "i32"));
      const cacheFlat = Tensor.toDevice(Tensor.fromHost(cacheBytes, [numBlocks * blockStride], "u8"));
      const kCache = cacheFlat.view([numBlocks, pageBlockSize, 1, 656], [blockStride, 656, 656, 1]);
      try {
        writeKvCacheFp8({ kv, slotMapping, kCache });
        const got = cacheFlat.toHost().host as Uint8Array;
        const expected = cacheBytes.slice();
        for (let t = 0; t < numTokens; t++) {
          const s = slots[t];
          if (s < 0 || s >= numSlots) continue;
          quantizeKvTokenV32(kvHost, t * 576, expected, Math.floor(s / pageBlockSize) * blockStride + (s % pageBlockSize) * 656);
        }
        const bad = got.findIndex((v, i) => v !== expected[i]);
        assert.equal(bad, -1, `page ${pageBlockSize}: first differing byte ${bad} (block ${Math.floor(bad / blockStride)}, offset ${bad % blockStride}): got ${got[bad]}, expected ${expected[bad]}`);
      } finally {
        kv.dispose(); slotMapping.dispose(); cacheFlat.dispose();
      }
    }
  });

  test("quantizeKvCacheFp8() gives the same bytes on the GPU and the CPU, NaN tiles included", () => {
    const rng = new Rng(5);
    const n = 257;
    const host = randomBf16(rng, n * 576, { std: 0.5 });
    host[3 * 576 + 200] = 0x7fc0; // a NaN in tile 1 of token 3
    host[4 * 576 + 5] = 0x7f80; // +inf in tile 0 of token 4
    const cpu = quantizeKvCacheFp8(Tensor.fromHost(host, [n, 576], "bf16"));
    const dev = Tensor.toDevice(Tensor.fromHost(host, [n, 576], "bf16"));
    const gpu = quantizeKvCacheFp8(dev);
    try {
      const g = gpu.toHost().host as Uint8Array, c = cpu.host as Uint8Array;
      const bad = g.findIndex((v, i) => v !== c[i]);
      assert.equal(bad, -1, `first differing byte ${bad} (token ${Math.floor(bad / 656)}, byte ${bad % 656}): gpu ${g[bad]}, cpu ${c[bad]}`);
    } finally {
      dev.dispose(); gpu.dispose();
    }
  });
});

function bf16Scaled(bits: number, scale: number): number {
  return f32ToBf16Bits(bf16BitsToF32(bits) * scale);
}
