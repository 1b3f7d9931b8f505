import { test } from "node:test";
import assert from "node:assert/strict";
import { D_QK, D_V } from "../../../src/mla/contract/shape.js";
import { DENSE_FORMS, type DenseForm } from "../../../src/mla/dense/chooseDenseKernel.js";
import { decodeWithOverrides } from "../../../src/mla/flashMlaWithKvcache.js";
import { writeKvCacheFp8 } from "../../../src/mla/kvCache/writeKvCacheFp8.js";
import { getMlaMetadata } from "../../../src/mla/sched/MlaSchedMeta.js";
import { mlaDecodeReference, type MlaDecodeReferenceArgs, type MlaDecodeReferenceResult } from "../../../src/mla/reference/mlaDecodeReference.js";
import { bf16ArrayToF32 } from "../../../src/numeric/bf16.js";
import { assertClose, DENSE_LSE_TOL, DENSE_OUT_TOL } from "../../../src/numeric/compare.js";
import { fp16ArrayToF32 } from "../../../src/numeric/fp16.js";
import { quantizeKvTokenV32 } from "../../../src/numeric/kvCacheFp8.js";
import { randomBf16, Rng } from "../../../src/numeric/random.js";
import { DeviceBuffer } from "../../../src/runtime/DeviceBuffer.js";
import { Tensor } from "../../../src/runtime/Tensor.js";
import { describeGpu } from "../../helpers/gpu.js";
import { makeDenseCase, NAN_HALF_BITS, type DenseCase } from "../../../src/testing/denseCase.js";

// Out-of-range and non-finite data on the GPU (docs/reliability.md): block ids past the cache or
// negative, lengths past the block table, negative lengths, NaN in q or the cache, FP8 writer slots
// outside the cache. The host cannot see these values (they live on the GPU), so the kernels must
// stay inside every buffer and give the documented result; a crash would also poison every later
// test of the process (a sticky CUDA error), which the last test checks for.

interface Run {
  out: Float32Array;
  lse: Float32Array;
  /** What MlaSchedMeta.checkErrors() threw after the call (the device-side error record), if anything. */
  error?: string;
}

/** Uploads host tensors, runs one decode with `denseForm` (the API's choice without it), and returns out (as f32) and lse on the host. */
function runOnGpu(args: MlaDecodeReferenceArgs, denseForm?: DenseForm): Run {
  const q = Tensor.toDevice(args.q);
  const kCache = Tensor.toDevice(args.kCache);
  const blockTable = Tensor.toDevice(args.blockTable!);
  const cacheSeqlens = Tensor.toDevice(args.cacheSeqlens!);
  const meta = getMlaMetadata();
  try {
    const { out, lse } = decodeWithOverrides({ q, kCache, blockTable, cacheSeqlens, headDimV: D_V, schedMeta: meta, causal: args.causal, softmaxScale: args.softmaxScale }, { denseForm });
    try {
      const bits = out.toHost().host as Uint16Array;
      let error: string | undefined;
      try {
        meta.checkErrors();
      } catch (e) {
        error = e instanceof Error ? e.message : String(e);
      }
      meta.checkErrors(); // cleared by the first read: a second check finds nothing
      return { out: q.dtype === "fp16" ? fp16ArrayToF32(bits) : bf16ArrayToF32(bits), lse: lse.toHost().host as Float32Array, error };
    } finally {
      out.dispose();
      lse.dispose();
    }
  } finally {
    meta.dispose();
    for (const t of [q, kCache, blockTable, cacheSeqlens]) t.dispose();
  }
}

/** The case's cache with one all-zero block appended (its id is the old num_blocks). */
function withZeroBlock(c: DenseCase): { kCache: Tensor; zeroBlock: number } {
  const [num_blocks, page, h_kv] = c.kCache.shape;
  const bits = new Uint16Array((num_blocks + 1) * page * h_kv * D_QK);
  bits.set(c.kCache.host as Uint16Array);
  return { kCache: Tensor.fromHost(bits, [num_blocks + 1, page, h_kv, D_QK], c.kCache.dtype), zeroBlock: num_blocks };
}

function table(values: Int32Array, shape: readonly number[]): Tensor {
  return Tensor.fromHost(values, shape, "i32");
}

/** Checks a GPU run against the reference of `ref` (computed once and reused for every kernel). */
function expectReference(got: Run, ref: MlaDecodeReferenceArgs, label: string, cache = new Map<MlaDecodeReferenceArgs, MlaDecodeReferenceResult>()): void {
  let r = cache.get(ref);
  if (!r) cache.set(ref, (r = mlaDecodeReference(ref)));
  const [b, s_q, h_q] = ref.q.shape;
  assertClose(got.out, r.outF32, DENSE_OUT_TOL, { shape: [b, s_q, h_q, D_V], name: `out (${label})`, roundReferenceTo: ref.q.dtype as "bf16" | "fp16" });
  assertClose(got.lse, r.lse.host as Float32Array, DENSE_LSE_TOL, { shape: [b, h_q, s_q], name: `lse (${label})` });
}

/** Row (request i, token j, head h) of an out array. */
function outRow(out: Float32Array, s_q: number, h_q: number, i: number, j: number, h: number): Float32Array {
  const base = ((i * s_q + j) * h_q + h) * D_V;
  return out.subarray(base, base + D_V);
}

describeGpu("out-of-range and non-finite data on the GPU", () => {
  test("block ids past the cache or negative are read as all-zero blocks, never outside the cache, and reported", () => {
    // Lengths 200, 130, 70: request 0 uses blocks 0-3, request 2 blocks 0-1 (its second block is partial).
    const c = makeDenseCase({ seed: 910, b: 3, s_q: 2, h_q: 16, h_kv: 1, seqlens: [200, 130, 70], causal: true, dtype: "bf16", extraBlocks: 2 });
    const { kCache: zeroed, zeroBlock } = withZeroBlock(c);
    const maxBlocks = c.blockTable.shape[1];
    const num_blocks = c.kCache.shape[0];
    const hits: Array<[number, number]> = [[0, 1], [2, 1]];
    const refTable = Int32Array.from(c.blockTable.host as Int32Array);
    for (const [i, k] of hits) refTable[i * maxBlocks + k] = zeroBlock;
    const model = { ...c, kCache: zeroed, blockTable: table(refTable, c.blockTable.shape) };
    const refs = new Map<MlaDecodeReferenceArgs, MlaDecodeReferenceResult>();
    for (const bad of [num_blocks, num_blocks + 1, 2 ** 31 - 1, -1, -(2 ** 31)]) {
      const gpuTable = Int32Array.from(c.blockTable.host as Int32Array);
      for (const [i, k] of hits) gpuTable[i * maxBlocks + k] = bad;
      for (const form of DENSE_FORMS) {
        const got = runOnGpu({ ...c, blockTable: table(gpuTable, c.blockTable.shape) }, form);
        expectReference(got, model, `${form}, block id ${bad}`, refs);
        // Which of the two bad entries a CTA reaches first is a race; the record names one of them.
        assert.match(got.error ?? "no error", new RegExp(`argument 'blockTable': expected block ids in \\[0, num_blocks = ${num_blocks}\\).*got blockTable\\[(0\\]\\[1|2\\]\\[1)\\] = ${bad}$`), `${form}, block id ${bad}: reported`);
      }
    }
  });

  test("a bad block id deep in a request (pipe loads those ids a pair ahead) is read as zeros and reported at its exact position", () => {
    // Request 0 has six blocks (pairs 0-1, 2-3, 4-5): pipe loads block 4's id at the top of pair 0-1 and
    // checks it at the top of pair 2-3, where fast loads and checks it.
    const c = makeDenseCase({ seed: 911, b: 2, s_q: 1, h_q: 16, h_kv: 1, seqlens: [330, 100], causal: false, dtype: "bf16", extraBlocks: 2 });
    const { kCache: zeroed, zeroBlock } = withZeroBlock(c);
    const maxBlocks = c.blockTable.shape[1];
    const num_blocks = c.kCache.shape[0];
    const refTable = Int32Array.from(c.blockTable.host as Int32Array);
    refTable[4] = zeroBlock;
    const model = { ...c, kCache: zeroed, blockTable: table(refTable, c.blockTable.shape) };
    const refs = new Map<MlaDecodeReferenceArgs, MlaDecodeReferenceResult>();
    assert.ok(maxBlocks >= 6, `block table has ${maxBlocks} columns`);
    for (const bad of [num_blocks, -1]) {
      const gpuTable = Int32Array.from(c.blockTable.host as Int32Array);
      gpuTable[4] = bad;
      for (const form of DENSE_FORMS) {
        const got = runOnGpu({ ...c, blockTable: table(gpuTable, c.blockTable.shape) }, form);
        expectReference(got, model, `${form}, block id ${bad} at [0][4]`, refs);
        assert.match(got.error ?? "no error", new RegExp(`got blockTable\\[0\\]\\[4\\] = ${bad}$`), `${form}, block id ${bad}: reported at [0][4]`);
      }
    }
  });

  test("cacheSeqlens past the block table: that request is decoded as empty (out 0, lse +inf) and reported", () => {
    // Two full blocks in the table; the GPU is told request 0 holds 46 more tokens than the table covers.
    const c = makeDenseCase({ seed: 911, b: 2, s_q: 2, h_q: 64, h_kv: 1, seqlens: [128, 40], causal: true, dtype: "bf16", extraBlocks: 1 });
    assert.equal(c.blockTable.shape[1], 2);
    const lens = Int32Array.of(128 + 46, 40);
    // The model: request 0 empty, request 1 as given.
    const model = { ...c, cacheSeqlens: table(Int32Array.of(0, 40), [2]) };
    const refs = new Map<MlaDecodeReferenceArgs, MlaDecodeReferenceResult>();
    for (const form of DENSE_FORMS) {
      const got = runOnGpu({ ...c, cacheSeqlens: table(lens, [2]) }, form);
      expectReference(got, model, `${form}, length past the table`, refs);
      assert.match(got.error ?? "no error", /argument 'cacheSeqlens': expected lengths <= 64 · max_blocks_per_seq = 128 .*got cacheSeqlens\[0\] = 174$/, `${form}: reported`);
    }
  });

  test("negative lengths give out = 0 and lse = +inf, like empty requests, and are reported", () => {
    for (const causal of [false, true]) {
      const c = makeDenseCase({ seed: 912, b: 3, s_q: 2, h_q: 8, h_kv: 1, seqlens: [0, 90, 0], causal, dtype: "bf16", extraBlocks: 1 });
      const lens = Int32Array.of(-5, 90, -1);
      const refs = new Map<MlaDecodeReferenceArgs, MlaDecodeReferenceResult>();
      for (const form of DENSE_FORMS) {
        const got = runOnGpu({ ...c, cacheSeqlens: table(lens, [3]) }, form);
        for (const i of [0, 2]) {
          for (let j = 0; j < 2; j++) for (let h = 0; h < 8; h++) {
            assert.ok(outRow(got.out, 2, 8, i, j, h).every((x) => x === 0), `${form} causal=${causal}: out of request ${i} is 0`);
            assert.equal(got.lse[(i * 8 + h) * 2 + j], Infinity, `${form} causal=${causal}: lse of request ${i}`);
          }
        }
        // The reference of the same case with lengths 0 covers every row, the valid request included.
        expectReference(got, c, `${form} causal=${causal}, negative lengths`, refs);
        assert.match(got.error ?? "no error", /argument 'cacheSeqlens': expected lengths >= 0 .*got cacheSeqlens\[0\] = -5$/, `${form}: the first negative length is reported`);
      }
    }
  });

  test("NaN in q makes that row's out NaN (every column) and its lse non-finite; all other rows are right", () => {
    // Request 0 (one block) fits in one SM part; request 1 is cut into many pieces.
    const c = makeDenseCase({ seed: 913, b: 2, s_q: 2, h_q: 16, h_kv: 1, seqlens: [40, 9000], causal: true, dtype: "bf16" });
    const [, s_q, h_q] = c.q.shape;
    const poisoned: Array<[number, number, number]> = [[0, 1, 5], [1, 0, 15]];
    const q = Tensor.fromHost(Uint16Array.from(c.q.host as Uint16Array), c.q.shape, "bf16");
    for (const [i, j, h] of poisoned) (q.host as Uint16Array)[((i * s_q + j) * h_q + h) * D_QK + 100] = NAN_HALF_BITS;
    const ref = mlaDecodeReference(c);
    for (const form of DENSE_FORMS) {
      const got = runOnGpu({ ...c, q }, form);
      for (let i = 0; i < 2; i++) for (let j = 0; j < s_q; j++) for (let h = 0; h < h_q; h++) {
        const row = outRow(got.out, s_q, h_q, i, j, h);
        const lse = got.lse[(i * h_q + h) * s_q + j];
        if (poisoned.some(([a, b2, c2]) => a === i && b2 === j && c2 === h)) {
          assert.ok(row.every(Number.isNaN), `${form}: row ${i},${j},${h} is NaN in every column`);
          assert.ok(!Number.isFinite(lse), `${form}: lse of row ${i},${j},${h} is not finite (got ${lse})`);
        } else {
          assertClose(row, outRow(ref.outF32, s_q, h_q, i, j, h), DENSE_OUT_TOL, { name: `${form}: out row ${i},${j},${h}`, roundReferenceTo: "bf16" });
          assertClose([lse], [(ref.lse.host as Float32Array)[(i * h_q + h) * s_q + j]], DENSE_LSE_TOL, { name: `${form}: lse row ${i},${j},${h}` });
        }
      }
    }
  });

  test("NaN in a key's RoPE dims reaches only the rows that attend to that key", () => {
    // Causal, s_q = 2: token 0 sees keys [0, len - 1), token 1 sees [0, len). The last key of request 0,
    // KV head 1, gets a NaN in RoPE dim 560 (K only): rows (0, 1, heads 4-7) see it.
    const c = makeDenseCase({ seed: 914, b: 2, s_q: 2, h_q: 8, h_kv: 2, seqlens: [3000, 3000], causal: true, dtype: "bf16" });
    const kCache = Tensor.fromHost(Uint16Array.from(c.kCache.host as Uint16Array), c.kCache.shape, "bf16");
    const maxBlocks = c.blockTable.shape[1];
    const last = 2999;
    const block = (c.blockTable.host as Int32Array)[Math.floor(last / 64)];
    (kCache.host as Uint16Array)[((block * 64 + (last % 64)) * 2 + 1) * D_QK + 560] = NAN_HALF_BITS;
    assert.ok(maxBlocks >= 47);
    const ref = mlaDecodeReference(c);
    for (const form of DENSE_FORMS) {
      const got = runOnGpu({ ...c, kCache }, form);
      for (let i = 0; i < 2; i++) for (let j = 0; j < 2; j++) for (let h = 0; h < 8; h++) {
        const row = outRow(got.out, 2, 8, i, j, h);
        if (i === 0 && j === 1 && h >= 4) {
          assert.ok(row.every(Number.isNaN), `${form}: row ${i},${j},${h} attends to the NaN key: out NaN`);
        } else {
          assertClose(row, outRow(ref.outF32, 2, 8, i, j, h), DENSE_OUT_TOL, { name: `${form}: out row ${i},${j},${h} does not attend to it`, roundReferenceTo: "bf16" });
        }
      }
    }
  });

  test("NaN in a key's V dims: rows that attend to it are NaN; causally masked rows differ at most in that column", () => {
    // Dim 3 is part of K and V. A row masked from the key multiplies its V row by P = 0 inside the MMA,
    // and 0 · NaN is NaN: today that column may turn NaN in those rows (docs/reliability.md).
    const c = makeDenseCase({ seed: 915, b: 1, s_q: 2, h_q: 4, h_kv: 1, seqlens: [100], causal: true, dtype: "bf16" });
    const kCache = Tensor.fromHost(Uint16Array.from(c.kCache.host as Uint16Array), c.kCache.shape, "bf16");
    const block = (c.blockTable.host as Int32Array)[1];
    (kCache.host as Uint16Array)[(block * 64 + (99 % 64)) * D_QK + 3] = NAN_HALF_BITS;
    const ref = mlaDecodeReference(c);
    for (const form of DENSE_FORMS) {
      const got = runOnGpu({ ...c, kCache }, form);
      for (let h = 0; h < 4; h++) {
        assert.ok(outRow(got.out, 2, 4, 0, 1, h).every(Number.isNaN), `${form}: token 1, head ${h} attends to the key: out NaN`);
        const masked = Float32Array.from(outRow(got.out, 2, 4, 0, 0, h));
        const expected = Float32Array.from(outRow(ref.outF32, 2, 4, 0, 0, h));
        masked[3] = expected[3] = 0;
        assertClose(masked, expected, DENSE_OUT_TOL, { name: `${form}: token 0, head ${h} (masked from the key), columns other than 3`, roundReferenceTo: "bf16" });
      }
    }
  });

  test("writeKvCacheFp8() skips every slot outside the cache and never writes outside it", () => {
    const rng = new Rng(916);
    const pageBlockSize = 16, numBlocks = 5, guard = 4096, numSlots = pageBlockSize * numBlocks;
    const cacheBytes = numBlocks * pageBlockSize * 656;
    const kvHost = randomBf16(rng, 12 * D_QK, { std: 1 });
    const slots = Int32Array.of(-1, -7, -(2 ** 31), numSlots, numSlots + 5, 2 ** 31 - 1, 0, numSlots - 1, 17, -2, 2147480000, 40);
    const buffer = DeviceBuffer.alloc(guard + cacheBytes + guard);
    const kv = Tensor.toDevice(Tensor.fromHost(kvHost, [12, D_QK], "bf16"));
    const slotMapping = Tensor.toDevice(Tensor.fromHost(slots, [12], "i32"));
    try {
      buffer.memset8(0xa5);
      const kCache = Tensor.fromDeviceBuffer(buffer, [numBlocks, pageBlockSize, 1, 656], "u8", { byteOffset: guard });
      writeKvCacheFp8({ kv, slotMapping, kCache });
      const got = new Uint8Array(buffer.sizeBytes);
      buffer.copyToHost(got);
      const expected = new Uint8Array(buffer.sizeBytes).fill(0xa5);
      slots.forEach((s, t) => {
        if (s >= 0 && s < numSlots) quantizeKvTokenV32(kvHost, t * D_QK, expected, guard + s * 656);
      });
      const bad = got.findIndex((v, i) => v !== expected[i]);
      assert.equal(bad, -1, `first differing byte ${bad} (${bad < guard ? "front guard" : bad >= guard + cacheBytes ? "back guard" : `slot ${Math.floor((bad - guard) / 656)}`})`);
    } finally {
      kv.dispose(); slotMapping.dispose(); buffer.dispose();
    }
  });

  test("after all of the above the GPU context is healthy: a clean case matches the reference", () => {
    const c = makeDenseCase({ seed: 917, b: 4, s_q: 2, h_q: 32, h_kv: 2, seqlens: { mean: 700, varlen: true }, causal: true, dtype: "fp16", extraBlocks: 2 });
    const refs = new Map<MlaDecodeReferenceArgs, MlaDecodeReferenceResult>();
    for (const form of DENSE_FORMS) {
      const got = runOnGpu(c, form);
      expectReference(got, c, `${form}, clean case`, refs);
      assert.equal(got.error, undefined, `${form}: a valid call reports nothing`);
    }
  });
});
