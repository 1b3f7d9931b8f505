import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { mlaDecodeReference, type MlaDecodeReferenceArgs } from "../../../../src/mla/reference/mlaDecodeReference.js";
import { bf16BitsToF32, f64ToBf16Bits } from "../../../../src/numeric/bf16.js";
import { fp16BitsToF32 } from "../../../../src/numeric/fp16.js";
import { dequantizeKvTokenV32, quantizeKvCacheV32 } from "../../../../src/numeric/kvCacheFp8.js";
import { DeviceBuffer } from "../../../../src/runtime/DeviceBuffer.js";
import { Tensor } from "../../../../src/runtime/Tensor.js";
import { makeDenseCase, NAN_HALF_BITS, UNUSED_BLOCK_ID } from "../../../../src/testing/denseCase.js";
import { assertMatchesNaive } from "./naiveAttention.js";
import { testRejections, type RejectionCase } from "./testRejections.js";
import { makeSparseCase } from "../../../../src/testing/sparseCase.js";
import { D_QK, D_V } from "../../../../src/mla/contract/shape.js";

/** 576 zeros with the given dims set. */
function vec(entries: Record<number, number>): number[] {
  const v = new Array<number>(D_QK).fill(0);
  for (const [d, x] of Object.entries(entries)) v[Number(d)] = x;
  return v;
}

function bf16Tensor(values: number[], shape: number[]): Tensor {
  return Tensor.fromHost(Uint16Array.from(values, f64ToBf16Bits), shape, "bf16");
}

/** b = 1, h_q = h_kv = 1: one query row per query token, `keys` as the first cached tokens of one 64-token block. */
function tinyDense(queries: number[][], keys: number[][], extra: Partial<MlaDecodeReferenceArgs> = {}): MlaDecodeReferenceArgs {
  const cache = new Uint16Array(64 * D_QK).fill(NAN_HALF_BITS);
  keys.forEach((k, t) => cache.set(Uint16Array.from(k, f64ToBf16Bits), t * D_QK));
  return {
    q: bf16Tensor(queries.flat(), [1, queries.length, 1, D_QK]),
    kCache: Tensor.fromHost(cache, [1, 64, 1, D_QK], "bf16"),
    blockTable: Tensor.fromHost(Int32Array.of(0), [1, 1], "i32"),
    cacheSeqlens: Tensor.fromHost(Int32Array.of(keys.length), [1], "i32"),
    headDimV: D_V,
    ...extra,
  };
}

/** b = s_q = 1, h_q heads sharing the query `query`, tokens of one block of 4 (page_block_size 4), indices `ids`. */
function tinySparse(query: number[], h_q: number, tokens: number[][], ids: number[], extra: Partial<MlaDecodeReferenceArgs> = {}): MlaDecodeReferenceArgs {
  const kv = new Uint16Array(4 * D_QK);
  tokens.forEach((k, t) => kv.set(Uint16Array.from(k, f64ToBf16Bits), t * D_QK));
  return {
    q: bf16Tensor(Array.from({ length: h_q }, () => query).flat(), [1, 1, h_q, D_QK]),
    kCache: Tensor.fromHost(quantizeKvCacheV32(kv), [1, 4, 1, 656], "u8"),
    indices: Tensor.fromHost(Int32Array.from(ids), [1, 1, ids.length], "i32"),
    isFp8Kvcache: true,
    headDimV: D_V,
    ...extra,
  };
}

function closeTo(actual: number, expected: number, tol: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= tol, `${what}: expected ${expected} ± ${tol}, got ${actual}`);
}

/** An f32 output equal to `expected` up to its own rounding to f32 (and 1e-12 relative). */
function closeToF32(actual: number, expected: number, what: string): void {
  closeTo(actual, expected, (2 ** -24 + 1e-12) * Math.abs(expected) + 1e-15, what);
}

describe("mlaDecodeReference() dense path", () => {
  const HEAD_PAIRS = [[1, 1], [3, 1], [4, 2], [6, 3]] as const;
  let caseNo = 0;
  for (const s_k of [1, 5, 70, 130]) {
    test(`mlaDecodeReference() matches naive attention for dense s_k = ${s_k} over head pairs, b, s_q and causal`, () => {
      for (const [h_q, h_kv] of HEAD_PAIRS) {
        for (const causal of [false, true]) {
          // Cycles b over {1,2,3} and s_q over {1,2,4}; request 1 is empty, request 2 one token longer.
          const b = [1, 2, 3][caseNo % 3];
          const s_q = [1, 2, 4][Math.floor(caseNo / 3) % 3];
          const seqlens = [s_k, 0, s_k + 1].slice(0, b);
          const c = makeDenseCase({ seed: 100 + caseNo, b, s_q, h_q, h_kv, seqlens, causal, dtype: "bf16", extraBlocks: 2 });
          assertMatchesNaive(c, `case ${caseNo} (b=${b}, s_q=${s_q}, h_q=${h_q}, h_kv=${h_kv}, causal=${causal})`);
          caseNo++;
        }
      }
    });
  }

  test("mlaDecodeReference() matches naive attention for a varlen batch with zero lengths", () => {
    const c = makeDenseCase({ seed: 3, b: 4, s_q: 2, h_q: 2, h_kv: 1, seqlens: { mean: 90, varlen: true, zeroFraction: 0.5 }, causal: true, dtype: "bf16" });
    assert.ok(c.seqlens.some((n) => n === 0) && c.seqlens.some((n) => n > 0), `want both empty and full requests, got ${c.seqlens}`);
    assertMatchesNaive(c, "varlen");
  });

  test("mlaDecodeReference() computes fp16 q and cache into fp16 out", () => {
    const c = makeDenseCase({ seed: 8, b: 2, s_q: 2, h_q: 4, h_kv: 2, seqlens: [70, 3], causal: true, dtype: "fp16" });
    const { out } = mlaDecodeReference(c);
    assert.equal(out.dtype, "fp16");
    assertMatchesNaive(c, "fp16");
  });

  test("mlaDecodeReference() honours q and kCache strides", () => {
    const c = makeDenseCase({ seed: 9, b: 2, s_q: 2, h_q: 2, h_kv: 2, seqlens: [65, 9], causal: false, dtype: "bf16" });
    // q with padded heads (stride 600 instead of 576).
    const qPadded = new Uint16Array(2 * 2 * 2 * 600);
    const qSrc = c.q.host as Uint16Array;
    for (let r = 0; r < 8; r++) qPadded.set(qSrc.subarray(r * D_QK, (r + 1) * D_QK), r * 600);
    const q = Tensor.fromHost(qPadded, [2, 2, 2, 600], "bf16").view([2, 2, 2, D_QK], [2400, 1200, 600, 1]);
    // The cache stored head-major ([num_blocks, h_kv, 64, 576]) and viewed as [num_blocks, 64, h_kv, 576].
    const [num_blocks] = c.kCache.shape;
    const kSrc = c.kCache.host as Uint16Array;
    const headMajor = new Uint16Array(kSrc.length);
    for (let blk = 0; blk < num_blocks; blk++) {
      for (let row = 0; row < 64; row++) {
        for (let g = 0; g < 2; g++) {
          const from = ((blk * 64 + row) * 2 + g) * D_QK;
          headMajor.set(kSrc.subarray(from, from + D_QK), ((blk * 2 + g) * 64 + row) * D_QK);
        }
      }
    }
    const kCache = Tensor.fromHost(headMajor, [num_blocks, 2, 64, D_QK], "bf16").view(c.kCache.shape, [2 * 64 * D_QK, D_QK, 64 * D_QK, 1]);
    const expected = mlaDecodeReference(c);
    const strided = mlaDecodeReference({ ...c, q, kCache });
    assert.deepEqual(strided.out.host, expected.out.host);
    assert.deepEqual(strided.lse.host, expected.lse.host);
    assertMatchesNaive({ ...c, q, kCache }, "strided");
  });

  test("mlaDecodeReference() gives out = V and lse = score for a single key", () => {
    const key = vec({ 0: 0.25, 1: 0.75, 100: -1, 511: 0.5, 513: 0.125 });
    const args = tinyDense([vec({ 0: 0.5, 513: -2 })], [key]);
    const { out, lse, outF32 } = mlaDecodeReference(args);
    // q·k = 0.5·0.25 − 2·0.125 = −0.125, times the default scale 1/24.
    assert.equal((lse.host as Float32Array)[0], Math.fround(-0.125 / 24));
    assert.deepEqual(Array.from(outF32), key.slice(0, D_V));
    assert.deepEqual(Array.from(out.host as Uint16Array), key.slice(0, D_V).map(f64ToBf16Bits));
  });

  test("mlaDecodeReference() averages two keys of equal score and adds ln 2 to lse", () => {
    const k1 = vec({ 0: 0.5, 1: 0.25, 2: -1 });
    const k2 = vec({ 0: 0.5, 1: 0.75, 3: 0.5, 520: 3 });
    const { outF32, lse } = mlaDecodeReference(tinyDense([vec({ 0: 1 })], [k1, k2]));
    const mean = k1.slice(0, D_V).map((x, d) => (x + k2[d]) / 2);
    mean.forEach((m, d) => closeToF32(outF32[d], m, `out[${d}]`));
    assert.deepEqual([outF32[0], outF32[1], outF32[2], outF32[3]], [0.5, 0.5, -0.5, 0.25]);
    assert.equal((lse.host as Float32Array)[0], Math.fround(0.5 / 24 + Math.LN2));
  });

  test("mlaDecodeReference() defaults softmaxScale to 1/24 = 576^-0.5", () => {
    const args = tinyDense([vec({ 0: 1 })], [vec({ 0: 2 }), vec({})]);
    const byDefault = mlaDecodeReference(args);
    const explicit = mlaDecodeReference({ ...args, softmaxScale: 1 / 24 });
    const unscaled = mlaDecodeReference({ ...args, softmaxScale: 1 });
    // Scores 2/24 and 0: lse = ln(e^(1/12) + 1), out[0] = 2·e^(1/12) / (e^(1/12) + 1).
    const e = Math.exp(1 / 12);
    assert.equal((byDefault.lse.host as Float32Array)[0], Math.fround(Math.log(e + 1)));
    closeTo(byDefault.outF32[0], (2 * e) / (e + 1), 2e-7, "out[0]");
    assert.deepEqual(byDefault.outF32, explicit.outF32);
    assert.equal((unscaled.lse.host as Float32Array)[0], Math.fround(Math.log(Math.exp(2) + 1)));
  });

  test("mlaDecodeReference() lets causal query j see keys [0, s_k − (s_q − 1 − j))", () => {
    // Zero queries give equal scores, so each row's out[0] is the mean of the visible V[0] = 1, 2, 3, 4.
    const zeros = [vec({}), vec({}), vec({})];
    const keys = [1, 2, 3, 4].map((x) => vec({ 0: x }));
    const causal = mlaDecodeReference(tinyDense(zeros, keys, { causal: true }));
    assert.deepEqual([0, 1, 2].map((j) => causal.outF32[j * D_V]), [1.5, 2, 2.5]);
    assert.deepEqual(Array.from(causal.lse.host as Float32Array), [Math.log(2), Math.log(3), Math.log(4)].map(Math.fround));

    const full = mlaDecodeReference(tinyDense(zeros, keys, { causal: false }));
    assert.deepEqual([0, 1, 2].map((j) => full.outF32[j * D_V]), [2.5, 2.5, 2.5]);

    // s_k = 1 < s_q: queries 0 and 1 see nothing (out 0, lse +inf), query 2 sees the one key.
    const short = mlaDecodeReference(tinyDense(zeros, [vec({ 0: 1 })], { causal: true }));
    assert.deepEqual([0, 1, 2].map((j) => short.outF32[j * D_V]), [0, 0, 1]);
    assert.deepEqual(Array.from(short.lse.host as Float32Array), [Infinity, Infinity, 0]);

    // s_q = 1 ignores causal.
    const single = mlaDecodeReference(tinyDense([vec({})], keys, { causal: true }));
    assert.equal(single.outF32[0], 2.5);
  });

  test("mlaDecodeReference() gives out 0 and lse +inf for a zero-length request", () => {
    const args = tinyDense([vec({ 0: 1 })], []);
    const { out, lse, outF32 } = mlaDecodeReference(args);
    assert.ok(outF32.every((x) => x === 0));
    assert.ok((out.host as Uint16Array).every((x) => x === 0));
    assert.equal((lse.host as Float32Array)[0], Infinity);
  });
});

describe("mlaDecodeReference() sparse path", () => {
  let caseNo = 0;
  for (const pageBlockSize of [2, 61, 64]) {
    test(`mlaDecodeReference() matches naive attention for sparse page_block_size = ${pageBlockSize}`, () => {
      for (const [s_k, topk] of [[3, 5], [100, 70], [200, 130]] as const) {
        const b = [1, 2, 3][caseNo % 3];
        const s_q = [1, 2, 3][Math.floor(caseNo / 3) % 3];
        const c = makeSparseCase({
          seed: 200 + caseNo, b, s_q, h_q: 3, s_k, topk, pageBlockSize,
          topkLength: caseNo % 2 === 1, sink: caseNo % 4 < 2, invalidFraction: 0.2, repeat: 0.2,
          varlen: caseNo % 3 === 2, blockPadTokens: caseNo % 3,
        });
        // Make the last row all invalid (−1 and out-of-range ids) and put out-of-range ids into the first row.
        const ids = c.indices.host as Int32Array;
        const numTokens = c.kCache.shape[0] * pageBlockSize;
        ids.fill(-1, ids.length - topk);
        ids[ids.length - 1] = numTokens;
        ids[ids.length - 2] = -7;
        ids[0] = UNUSED_BLOCK_ID;
        assertMatchesNaive(c, `case ${caseNo} (b=${b}, s_q=${s_q}, s_k=${s_k}, topk=${topk})`);
        const { lse } = mlaDecodeReference(c);
        // The all-invalid row is request b−1, token s_q−1: lse +inf for every head.
        for (let h = 0; h < 3; h++) assert.equal((lse.host as Float32Array)[((b - 1) * 3 + h) * s_q + s_q - 1], Infinity);
        caseNo++;
      }
    });
  }

  test("mlaDecodeReference() matches naive attention with sinks +inf, −inf and finite", () => {
    const c = makeSparseCase({ seed: 31, b: 2, s_q: 2, h_q: 3, s_k: 50, topk: 20, pageBlockSize: 61, topkLength: true });
    const attnSink = Tensor.fromHost(Float32Array.of(Infinity, -Infinity, 0.7), [3], "f32");
    assertMatchesNaive({ ...c, attnSink }, "sinks");
    const withSink = mlaDecodeReference({ ...c, attnSink });
    const without = mlaDecodeReference(c);
    assert.deepEqual(withSink.lse.host, without.lse.host, "the sink leaves lse unchanged");
  });

  test("mlaDecodeReference() reads an fp8_e4m3 cache like a u8 one", () => {
    const c = makeSparseCase({ seed: 32, b: 1, s_q: 2, h_q: 2, s_k: 40, topk: 30, pageBlockSize: 64 });
    const asFp8 = c.kCache.view(c.kCache.shape, c.kCache.strides, "fp8_e4m3");
    assert.deepEqual(mlaDecodeReference({ ...c, kCache: asFp8 }).outF32, mlaDecodeReference(c).outF32);
  });

  test("mlaDecodeReference() honours a block stride larger than page_block_size · 656", () => {
    const opts = { seed: 33, b: 2, s_q: 1, h_q: 2, s_k: 30, topk: 12, pageBlockSize: 5 };
    const plain = makeSparseCase(opts);
    const padded = makeSparseCase({ ...opts, blockPadTokens: 3 });
    assert.deepEqual(padded.kCache.strides, [8 * 656, 656, 656, 1]);
    assert.deepEqual(mlaDecodeReference(padded).outF32, mlaDecodeReference(plain).outF32);
  });

  test("mlaDecodeReference() scales out by 1/(1 + e^(sink − lse)): sink ln 3 at lse 0 gives 1/4", () => {
    const token = vec({ 0: 1, 5: 0.5, 300: -0.25 });
    const attnSink = Tensor.fromHost(Float32Array.of(Math.log(3), Infinity, -Infinity), [3], "f32");
    const { outF32, lse } = mlaDecodeReference(tinySparse(vec({}), 3, [token], [0], { attnSink }));
    assert.deepEqual(Array.from(lse.host as Float32Array), [0, 0, 0]);
    const v = token.slice(0, D_V);
    v.forEach((x, d) => {
      closeToF32(outF32[d], 0.25 * x, `head 0 out[${d}]`);
      assert.ok(outF32[D_V + d] === 0, `head 1 (sink +inf) out[${d}] is ±0`);
      assert.equal(outF32[2 * D_V + d], x, `head 2 (sink −inf) out[${d}]`);
    });
  });

  test("mlaDecodeReference() keeps out 0 and lse +inf for an empty row whatever the sink", () => {
    const attnSink = Tensor.fromHost(Float32Array.of(0.5, Infinity, -Infinity), [3], "f32");
    const { outF32, out, lse } = mlaDecodeReference(tinySparse(vec({ 0: 1 }), 3, [vec({ 0: 1 })], [-1, 4, -1], { attnSink }));
    assert.ok(outF32.every((x) => x === 0));
    assert.ok((out.host as Uint16Array).every((x) => x === 0));
    assert.deepEqual(Array.from(lse.host as Float32Array), [Infinity, Infinity, Infinity]);
  });

  test("mlaDecodeReference() counts repeated indices as separate tokens", () => {
    const tokens = [vec({ 0: 1, 1: 0.5 }), vec({ 0: 0.5 })];
    const { outF32, lse } = mlaDecodeReference(tinySparse(vec({}), 1, tokens, [0, 1, 0]));
    assert.equal(outF32[0], Math.fround(2.5 / 3));
    assert.equal(outF32[1], Math.fround(1 / 3));
    assert.equal((lse.host as Float32Array)[0], Math.fround(Math.log(3)));
  });

  test("mlaDecodeReference() uses the dequantized FP8 token as K (576 dims) and V (dims 0..511)", () => {
    const token = vec({ 0: 0.3, 7: -0.11, 200: 0.9, 520: 0.77, 575: -0.5 });
    const query = vec({ 0: 0.5, 7: 1, 520: -1, 575: 0.25 });
    const args = tinySparse(query, 1, [token, vec({})], [1, 0], { softmaxScale: 1 });
    const deq = new Uint16Array(D_QK);
    dequantizeKvTokenV32(args.kCache.host as Uint8Array, 0, deq, 0);
    const k = Array.from(deq, bf16BitsToF32);
    const q = query.map((x) => bf16BitsToF32(f64ToBf16Bits(x)));
    const score = q.reduce((a, x, d) => a + x * k[d], 0);
    // Keys: the zero token (score 0) and the dequantized one.
    const lse = Math.log(1 + Math.exp(score));
    const { outF32, lse: lseT } = mlaDecodeReference(args);
    assert.equal((lseT.host as Float32Array)[0], Math.fround(lse));
    for (let d = 0; d < D_V; d++) closeToF32(outF32[d], Math.exp(score - lse) * k[d], `out[${d}]`);
  });
});

describe("mlaDecodeReference() rows option", () => {
  const rows = [
    { batch: 1, token: 1, head: 3 },
    { batch: 0, token: 0, head: 0 },
    { batch: 1, token: 1, head: 3 },
    { batch: 1, token: 0, head: 1 },
  ];
  const picked = new Set(rows.map((r) => `${r.batch},${r.token},${r.head}`));

  function assertRowsMatch(args: MlaDecodeReferenceArgs): void {
    const full = mlaDecodeReference(args);
    const part = mlaDecodeReference(args, { rows });
    const [b, s_q, h_q] = args.q.shape;
    const outBits = part.out.host as Uint16Array;
    const lse = part.lse.host as Float32Array;
    for (let i = 0; i < b; i++) {
      for (let j = 0; j < s_q; j++) {
        for (let h = 0; h < h_q; h++) {
          const base = ((i * s_q + j) * h_q + h) * D_V;
          const lseAt = (i * h_q + h) * s_q + j;
          if (picked.has(`${i},${j},${h}`)) {
            assert.deepEqual(outBits.subarray(base, base + D_V), (full.out.host as Uint16Array).subarray(base, base + D_V));
            assert.deepEqual(part.outF32.subarray(base, base + D_V), full.outF32.subarray(base, base + D_V));
            assert.equal(lse[lseAt], (full.lse.host as Float32Array)[lseAt]);
          } else {
            assert.ok(outBits.subarray(base, base + D_V).every((x) => Number.isNaN(bf16BitsToF32(x))), `out row ${i},${j},${h} is NaN`);
            assert.ok(part.outF32.subarray(base, base + D_V).every(Number.isNaN));
            assert.ok(Number.isNaN(lse[lseAt]));
          }
        }
      }
    }
  }

  test("mlaDecodeReference() computes the same dense rows as the full run and NaN elsewhere", () => {
    assertRowsMatch(makeDenseCase({ seed: 40, b: 2, s_q: 2, h_q: 4, h_kv: 2, seqlens: [70, 20], causal: true, dtype: "bf16" }));
  });

  test("mlaDecodeReference() computes the same sparse rows as the full run and NaN elsewhere", () => {
    assertRowsMatch(makeSparseCase({ seed: 41, b: 2, s_q: 2, h_q: 4, s_k: 80, topk: 33, pageBlockSize: 61, sink: true }));
  });

  test("mlaDecodeReference() with rows reads only the cache of the requests asked for", () => {
    const c = makeDenseCase({ seed: 42, b: 2, s_q: 1, h_q: 1, h_kv: 1, seqlens: [3, 64 * 3], causal: false, dtype: "bf16" });
    // Record which cache slots are read, through a proxy over the cache's storage.
    const touched = new Set<number>();
    const storage = c.kCache.host as Uint16Array;
    const spy = new Proxy(storage, {
      get(target, prop) {
        if (typeof prop === "string" && /^\d+$/.test(prop)) touched.add(Math.floor(Number(prop) / D_QK));
        return Reflect.get(target, prop);
      },
    });
    const kCache = Tensor.fromHost(spy, c.kCache.shape, "bf16");
    const part = mlaDecodeReference({ ...c, kCache }, { rows: [{ batch: 0, token: 0, head: 0 }] });
    const block0 = (c.blockTable.host as Int32Array)[0];
    assert.deepEqual([...touched].sort((x, y) => x - y), [0, 1, 2].map((t) => block0 * 64 + t));
    assert.deepEqual(part.outF32.subarray(0, D_V), mlaDecodeReference(c).outF32.subarray(0, D_V));
    assert.ok(Number.isNaN(part.outF32[D_V]));
  });
});

describe("mlaDecodeReference() validation", () => {
  const dense = (): MlaDecodeReferenceArgs => tinyDense([vec({})], [vec({}), vec({})]);
  const sparse = (): MlaDecodeReferenceArgs => tinySparse(vec({}), 1, [vec({})], [0, 1, -1, 3]);
  const f32 = (shape: number[]) => Tensor.zerosHost(shape, "f32");
  const i32 = (values: number[], shape = [values.length]) => Tensor.fromHost(Int32Array.from(values), shape, "i32");
  const fakeCuda = (): Tensor => {
    // A device tensor without a GPU: a DeviceBuffer-shaped object is enough, nothing is read through it.
    const buffer = Object.defineProperties(Object.create(DeviceBuffer.prototype), {
      ptr: { value: 4096n },
      sizeBytes: { value: 1 << 20 },
      deviceOrdinal: { value: 0 },
    }) as DeviceBuffer;
    return Tensor.fromDeviceBuffer(buffer, [1, 1, 1, D_QK], "bf16");
  };

  const cases: RejectionCase[] = [
    ["q missing", () => ({ ...dense(), q: undefined as unknown as Tensor }), "argument 'q': expected a Tensor, got undefined"],
    ["q on the GPU", () => ({ ...dense(), q: fakeCuda() }), "argument 'q': expected a host tensor (call toHost() first), got a tensor on cuda:0"],
    ["q rank 3", () => ({ ...dense(), q: bf16Tensor(vec({}), [1, 1, D_QK]) }), "argument 'q': expected rank 4 [b, s_q, h_q, 576 or 512], got shape [1, 1, 576]"],
    ["q d_qk 500", () => ({ ...dense(), q: Tensor.zerosHost([1, 1, 1, 500], "bf16") }), "argument 'q': expected last dim d_qk = 576 or 512 on the dense path (no indices), got shape [1, 1, 1, 500]"],
    ["q b = 0", () => ({ ...dense(), q: Tensor.zerosHost([0, 1, 1, D_QK], "bf16") }), "argument 'q': expected b, s_q and h_q ≥ 1, got shape [0, 1, 1, 576]"],
    ["q f32", () => ({ ...dense(), q: f32([1, 1, 1, D_QK]) }), "argument 'q': expected dtype bf16 or fp16 on the dense path (no indices), got f32"],
    ["sparse q fp16", () => ({ ...sparse(), q: Tensor.zerosHost([1, 1, 1, D_QK], "fp16") }), "argument 'q': expected dtype bf16 on the sparse path (indices given), got fp16"],
    ["q view outside its storage", () => ({ ...dense(), q: dense().q.view([1, 2, 1, D_QK], [D_QK, D_QK, D_QK, 1]) }), "argument 'q': expected a view inside its 576-element storage, got offset 0, strides [576, 576, 576, 1]"],
    ["headDimV 576", () => ({ ...dense(), headDimV: 576 }), "argument 'headDimV': expected 512, got 576"],
    ["softmaxScale 0", () => ({ ...dense(), softmaxScale: 0 }), "argument 'softmaxScale': expected a finite number > 0, got 0"],
    ["softmaxScale NaN", () => ({ ...dense(), softmaxScale: NaN }), "argument 'softmaxScale': expected a finite number > 0, got NaN"],
    ["softmaxScale inf", () => ({ ...dense(), softmaxScale: Infinity }), "argument 'softmaxScale': expected a finite number > 0, got Infinity"],
    ["causal not boolean", () => ({ ...dense(), causal: "yes" as unknown as boolean }), "argument 'causal': expected a boolean, got string yes"],
    ["isFp8Kvcache not boolean", () => ({ ...dense(), isFp8Kvcache: 1 as unknown as boolean }), "argument 'isFp8Kvcache': expected a boolean, got 1"],
    ["kCache missing", () => ({ ...dense(), kCache: undefined as unknown as Tensor }), "argument 'kCache': expected a Tensor, got undefined"],
    ["kCache rank 3", () => ({ ...dense(), kCache: Tensor.zerosHost([1, 64, D_QK], "bf16") }), "argument 'kCache': expected rank 4 [num_blocks, page_block_size, h_kv, d], got shape [1, 64, 576]"],
    ["kCache dtype", () => ({ ...dense(), kCache: Tensor.zerosHost([1, 64, 1, D_QK], "fp16") }), "argument 'kCache': expected dtype bf16 (q's dtype), got fp16"],
    ["kCache page 32", () => ({ ...dense(), kCache: Tensor.zerosHost([1, 32, 1, D_QK], "bf16") }), "argument 'kCache': expected shape [num_blocks, 64, h_kv, 576] with h_q (1) % h_kv == 0, got shape [1, 32, 1, 576]"],
    ["kCache d 512 with a 576-wide q", () => ({ ...dense(), kCache: Tensor.zerosHost([1, 64, 1, 512], "bf16") }), "argument 'kCache': expected last dim 576 (q's d_qk), got shape [1, 64, 1, 512]"],
    ["h_q % h_kv", () => ({ ...dense(), kCache: Tensor.zerosHost([1, 64, 2, D_QK], "bf16") }), "argument 'kCache': expected shape [num_blocks, 64, h_kv, 576] with h_q (1) % h_kv == 0, got shape [1, 64, 2, 576]"],
    ["isFp8Kvcache on dense", () => ({ ...dense(), isFp8Kvcache: true }), "argument 'isFp8Kvcache': expected false on the dense path (no indices), got true"],
    ["topkLength on dense", () => ({ ...dense(), topkLength: i32([1]) }), "argument 'topkLength': expected undefined on the dense path (no indices), got a value"],
    ["attnSink on dense", () => ({ ...dense(), attnSink: f32([1]) }), "argument 'attnSink': expected undefined on the dense path (no indices), got a value"],
    ["cacheSeqlens missing", () => ({ ...dense(), cacheSeqlens: undefined }), "argument 'cacheSeqlens': expected a Tensor, got undefined"],
    ["cacheSeqlens f32", () => ({ ...dense(), cacheSeqlens: f32([1]) }), "argument 'cacheSeqlens': expected i32 [b] = [1], got f32 [1]"],
    ["cacheSeqlens shape", () => ({ ...dense(), cacheSeqlens: i32([2, 2]) }), "argument 'cacheSeqlens': expected i32 [b] = [1], got i32 [2]"],
    ["cacheSeqlens negative", () => ({ ...dense(), cacheSeqlens: i32([-1]) }), "argument 'cacheSeqlens': expected lengths ≥ 0, got cacheSeqlens[0] = -1"],
    ["blockTable missing", () => ({ ...dense(), blockTable: undefined }), "argument 'blockTable': expected a Tensor, got undefined"],
    ["blockTable shape", () => ({ ...dense(), blockTable: i32([0, 0], [2, 1]) }), "argument 'blockTable': expected i32 [b=1, max_blocks], got i32 [2, 1]"],
    ["blockTable too narrow", () => ({ ...dense(), cacheSeqlens: i32([65]) }), "argument 'blockTable': expected at least 2 columns for request 0 (cacheSeqlens[0] = 65), got 1"],
    ["blockTable bad id", () => ({ ...dense(), blockTable: i32([UNUSED_BLOCK_ID], [1, 1]) }), "argument 'blockTable': expected block ids in [0, 1) for the 1 used blocks of request 0, got blockTable[0][0] = 2147480000"],
    ["blockTable negative id", () => ({ ...dense(), blockTable: i32([-1], [1, 1]) }), "argument 'blockTable': expected block ids in [0, 1) for the 1 used blocks of request 0, got blockTable[0][0] = -1"],
    ["blockTable on sparse", () => ({ ...sparse(), blockTable: i32([0], [1, 1]) }), "argument 'blockTable': expected undefined on the sparse path (indices given), got a value"],
    ["cacheSeqlens on sparse", () => ({ ...sparse(), cacheSeqlens: i32([1]) }), "argument 'cacheSeqlens': expected undefined on the sparse path (indices given), got a value"],
    ["causal on sparse", () => ({ ...sparse(), causal: true }), "argument 'causal': expected false on the sparse path (indices given), got true"],
    ["isFp8Kvcache missing on sparse", () => ({ ...sparse(), isFp8Kvcache: undefined }), "argument 'isFp8Kvcache': expected true on the sparse path (indices given), got undefined"],
    ["sparse kCache bf16", () => ({ ...sparse(), kCache: Tensor.zerosHost([1, 4, 1, 656], "bf16") }), "argument 'kCache': expected dtype u8 or fp8_e4m3 on the sparse path (indices given), got bf16"],
    ["sparse kCache 584-byte tokens", () => ({ ...sparse(), kCache: Tensor.zerosHost([1, 4, 1, 584], "u8") }), "argument 'kCache': expected shape [num_blocks, page_block_size ≥ 1, 1, 656] (the V32 format, which q's d_qk = 576 selects), got shape [1, 4, 1, 584]"],
    ["sparse kCache h_kv 2", () => ({ ...sparse(), kCache: Tensor.zerosHost([1, 4, 2, 656], "u8") }), "argument 'kCache': expected shape [num_blocks, page_block_size ≥ 1, 1, 656] (the V32 format, which q's d_qk = 576 selects), got shape [1, 4, 2, 656]"],
    ["sparse kCache token stride", () => ({ ...sparse(), kCache: Tensor.zerosHost([1, 8, 1, 656], "u8").view([1, 4, 1, 656], [8 * 656, 2 * 656, 656, 1]) }), "argument 'kCache': expected token stride 656 and byte stride 1, got strides [5248, 1312, 656, 1]"],
    ["indices f32", () => ({ ...sparse(), indices: f32([1, 1, 4]) }), "argument 'indices': expected i32 [b=1, s_q=1, topk ≥ 1], got f32 [1, 1, 4]"],
    ["indices shape", () => ({ ...sparse(), indices: i32([0, 0], [1, 2, 1]) }), "argument 'indices': expected i32 [b=1, s_q=1, topk ≥ 1], got i32 [1, 2, 1]"],
    ["indices topk 0", () => ({ ...sparse(), indices: i32([], [1, 1, 0]) }), "argument 'indices': expected i32 [b=1, s_q=1, topk ≥ 1], got i32 [1, 1, 0]"],
    ["topkLength shape", () => ({ ...sparse(), topkLength: i32([1, 1]) }), "argument 'topkLength': expected i32 [b] = [1], got i32 [2]"],
    ["topkLength above topk", () => ({ ...sparse(), topkLength: i32([5]) }), "argument 'topkLength': expected values in [0, topk=4], got topkLength[0] = 5"],
    ["topkLength negative", () => ({ ...sparse(), topkLength: i32([-1]) }), "argument 'topkLength': expected values in [0, topk=4], got topkLength[0] = -1"],
    ["attnSink shape", () => ({ ...sparse(), attnSink: f32([2]) }), "argument 'attnSink': expected f32 [h_q=1], got f32 [2]"],
    ["attnSink dtype", () => ({ ...sparse(), attnSink: i32([0]) }), "argument 'attnSink': expected f32 [h_q=1], got i32 [1]"],
  ];
  testRejections(cases);

  test("mlaDecodeReference() rejects args that are not an object", () => {
    assert.throws(() => mlaDecodeReference(null as unknown as MlaDecodeReferenceArgs), {
      name: "ArgumentError",
      message: "mlaDecodeReference(): argument 'args': expected an object, got null",
    });
  });

  test("mlaDecodeReference() rejects rows outside the shape", () => {
    assert.throws(() => mlaDecodeReference(dense(), { rows: [{ batch: 0, token: 0, head: 0 }, { batch: 0, token: 1, head: 0 }] }), {
      name: "ArgumentError",
      message: 'mlaDecodeReference(): argument \'opts.rows\': expected integers batch < 1, token < 1, head < 1, got rows[1] = {"batch":0,"token":1,"head":0}',
    });
    assert.throws(() => mlaDecodeReference(dense(), { rows: [{ batch: 0.5, token: 0, head: 0 }] }), /argument 'opts.rows'/);
    assert.throws(() => mlaDecodeReference(dense(), { rows: 3 as unknown as [] }), /argument 'opts.rows': expected an array/);
  });

  test("mlaDecodeReference() accepts the unchanged base arguments", () => {
    assert.doesNotThrow(() => mlaDecodeReference(dense()));
    assert.doesNotThrow(() => mlaDecodeReference(sparse()));
  });
});

describe("makeDenseCase() and makeSparseCase()", () => {
  test("makeDenseCase() is deterministic in its seed", () => {
    const opts = { seed: 5, b: 3, s_q: 2, h_q: 2, h_kv: 1, seqlens: { mean: 40, varlen: true }, causal: false, dtype: "bf16" as const };
    const a = makeDenseCase(opts);
    const b = makeDenseCase(opts);
    const c = makeDenseCase({ ...opts, seed: 6 });
    assert.deepEqual(a.q.host, b.q.host);
    assert.deepEqual(a.kCache.host, b.kCache.host);
    assert.deepEqual(a.blockTable.host, b.blockTable.host);
    assert.notDeepEqual(a.q.host, c.q.host);
  });

  test("makeDenseCase() poisons every slot past each length and pads the block table with 2147480000", () => {
    const c = makeDenseCase({ seed: 11, b: 3, s_q: 2, h_q: 2, h_kv: 2, seqlens: [70, 0, 130], causal: true, dtype: "fp16", extraBlocks: 2 });
    const [num_blocks, page, h_kv] = c.kCache.shape;
    assert.equal(num_blocks, 2 + 0 + 3 + 2);
    assert.deepEqual(c.blockTable.shape, [3, 3]);
    const table = c.blockTable.host as Int32Array;
    const used = [0, 1, 6, 7, 8].map((k) => table[k]);
    assert.deepEqual([...used].sort((x, y) => x - y), [...new Set(used)].sort((x, y) => x - y), "distinct physical blocks");
    assert.ok(used.every((id) => id >= 0 && id < num_blocks));
    assert.deepEqual([2, 3, 4, 5].map((k) => table[k]), [UNUSED_BLOCK_ID, UNUSED_BLOCK_ID, UNUSED_BLOCK_ID, UNUSED_BLOCK_ID]);
    // Mark the slots holding data; all others must be NaN in every element.
    const live = new Uint8Array(num_blocks * page);
    c.seqlens.forEach((len, i) => {
      for (let t = 0; t < len; t++) live[table[i * 3 + Math.floor(t / 64)] * page + (t % 64)] = 1;
    });
    const cache = c.kCache.host as Uint16Array;
    for (let slot = 0; slot < num_blocks * page; slot++) {
      const row = cache.subarray(slot * h_kv * D_QK, (slot + 1) * h_kv * D_QK);
      if (live[slot]) assert.ok(row.every((x) => Math.abs(fp16BitsToF32(x)) <= 1), `slot ${slot} holds data in [-1, 1]`);
      else assert.ok(row.every((x) => x === NAN_HALF_BITS), `slot ${slot} is NaN`);
    }
  });

  test("makeDenseCase() draws varlen lengths of at least s_q and zeroes them with zeroFraction", () => {
    const varlen = makeDenseCase({ seed: 12, b: 40, s_q: 4, h_q: 1, h_kv: 1, seqlens: { mean: 20, varlen: true }, causal: false, dtype: "bf16" });
    assert.ok(varlen.seqlens.every((n) => Number.isInteger(n) && n >= 4));
    assert.ok(new Set(varlen.seqlens).size > 5, "lengths vary");
    const zeros = makeDenseCase({ seed: 12, b: 4, s_q: 1, h_q: 1, h_kv: 1, seqlens: { mean: 10, varlen: false, zeroFraction: 1 }, causal: false, dtype: "bf16" });
    assert.deepEqual(zeros.seqlens, [0, 0, 0, 0]);
    assert.deepEqual(Array.from(zeros.cacheSeqlens.host as Int32Array), [0, 0, 0, 0]);
  });

  test("makeSparseCase() indexes distinct live tokens, pads with −1 and poisons every other token", () => {
    const c = makeSparseCase({ seed: 13, b: 2, s_q: 2, h_q: 1, s_k: 50, topk: 64, pageBlockSize: 7, topkLength: true, sink: true });
    assert.equal(c.softmaxScale, 576 ** -0.55);
    const ids = c.indices.host as Int32Array;
    const limits = c.topkLength!.host as Int32Array;
    const [num_blocks, page] = c.kCache.shape;
    const bytes = c.kCache.host as Uint8Array;
    const referenced = new Set<number>();
    for (let r = 0; r < 4; r++) {
      const row = Array.from(ids.subarray(r * 64, (r + 1) * 64));
      const filled = row.slice(0, 50);
      assert.equal(new Set(filled).size, 50, "50 distinct ids below the length");
      assert.ok(filled.every((id) => id >= 0 && id < num_blocks * page));
      assert.ok(row.slice(50).every((id) => id === -1), "padded with −1");
      row.slice(0, limits[r >> 1]).forEach((id) => id >= 0 && referenced.add(id));
    }
    assert.ok(Array.from(limits).every((n) => n >= 0 && n <= 64));
    for (let id = 0; id < num_blocks * page; id++) {
      const token = bytes.subarray(id * 656, (id + 1) * 656);
      if (referenced.has(id)) assert.ok(token.subarray(512).some((x) => x !== 0xff), `token ${id} holds data`);
      else assert.ok(token.every((x) => x === 0xff), `token ${id} is poison`);
    }
    assert.deepEqual(c.attnSink!.shape, [1]);
  });

  test("makeSparseCase() sinks mix +inf, −inf and finite values", () => {
    const c = makeSparseCase({ seed: 14, b: 1, s_q: 1, h_q: 64, s_k: 10, topk: 8, pageBlockSize: 64, sink: true });
    const sink = Array.from(c.attnSink!.host as Float32Array);
    assert.ok(sink.includes(Infinity) && sink.includes(-Infinity) && sink.some(Number.isFinite));
  });

  test("makeSparseCase() repeats and invalidates entries on request", () => {
    const c = makeSparseCase({ seed: 15, b: 1, s_q: 4, h_q: 1, s_k: 200, topk: 100, pageBlockSize: 64, invalidFraction: 0.3, repeat: 0.3 });
    const ids = Array.from(c.indices.host as Int32Array);
    const invalid = ids.filter((x) => x === -1).length;
    assert.ok(invalid > 60 && invalid < 180, `about 30% of 400 invalid, got ${invalid}`);
    let repeats = 0;
    for (let r = 0; r < 4; r++) {
      const valid = ids.slice(r * 100, (r + 1) * 100).filter((x) => x >= 0);
      repeats += valid.length - new Set(valid).size;
    }
    assert.ok(repeats > 20, `repeated ids present, got ${repeats}`);
  });
});
