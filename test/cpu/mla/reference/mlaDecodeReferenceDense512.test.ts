import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { mlaDecodeReference, type MlaDecodeReferenceArgs } from "../../../../src/mla/reference/mlaDecodeReference.js";
import { f64ToBf16Bits } from "../../../../src/numeric/bf16.js";
import { Tensor } from "../../../../src/runtime/Tensor.js";
import { makeDenseCase, NAN_HALF_BITS, type DenseCaseOptions } from "../../../../src/testing/denseCase.js";
import { D_V } from "../../../../src/mla/contract/shape.js";
import { assertMatchesNaive } from "./naiveAttention.js";
import { testRejections, type RejectionCase } from "./testRejections.js";

/** DeepSeek-V4's head: d_qk = d_v = 512, V being the whole row. */
const D_QK_V4 = 512;

const i32 = (values: number[], shape = [values.length]) => Tensor.fromHost(Int32Array.from(values), shape, "i32");

/**
 * A dense case with d_qk 512: makeDenseCase's 576-wide case cut to each row's first 512 dims (its data,
 * NaN poison past each length and block table kept), softmaxScale left to its default. `strided`
 * keeps the cut as views into the 576-wide storage instead of copying it out.
 */
function denseCase512(opts: DenseCaseOptions, strided = false): MlaDecodeReferenceArgs {
  const { q, kCache, blockTable, cacheSeqlens, causal, headDimV } = makeDenseCase(opts);
  const cut = (t: Tensor) => {
    const view = t.view([...t.shape.slice(0, 3), D_QK_V4], t.strides);
    return strided ? view : view.contiguousHost();
  };
  return { q: cut(q), kCache: cut(kCache), blockTable, cacheSeqlens, causal, headDimV };
}

/** b = 1, h_q = h_kv = 1, bf16: one 512-dim query, `keys` as the first tokens of one 64-token block, NaN after them. */
function oneRow512(query: Record<number, number>, keys: Record<number, number>[], extra: Partial<MlaDecodeReferenceArgs> = {}): MlaDecodeReferenceArgs {
  const row = (entries: Record<number, number>) => {
    const bits = new Uint16Array(D_QK_V4);
    for (const [d, x] of Object.entries(entries)) bits[Number(d)] = f64ToBf16Bits(x);
    return bits;
  };
  const cache = new Uint16Array(64 * D_QK_V4).fill(NAN_HALF_BITS);
  keys.forEach((k, t) => cache.set(row(k), t * D_QK_V4));
  return {
    q: Tensor.fromHost(row(query), [1, 1, 1, D_QK_V4], "bf16"),
    kCache: Tensor.fromHost(cache, [1, 64, 1, D_QK_V4], "bf16"),
    blockTable: i32([0], [1, 1]),
    cacheSeqlens: i32([keys.length]),
    headDimV: D_V,
    ...extra,
  };
}

describe("mlaDecodeReference() dense path with d_qk 512", () => {
  // One request of each length: empty, one token, around a page boundary, and several pages.
  const seqlens = [0, 1, 63, 64, 65, 200];
  let seed = 500;
  for (const dtype of ["bf16", "fp16"] as const) {
    for (const h_kv of [1, 2]) {
      test(`mlaDecodeReference() matches naive attention for dense d_qk 512, ${dtype}, h_kv = ${h_kv}, s_q 1..3, causal or not`, () => {
        for (const s_q of [1, 2, 3]) {
          for (const causal of [false, true]) {
            const h_q = h_kv * s_q; // 1..3 query heads per kv head
            const c = denseCase512({ seed: seed++, b: seqlens.length, s_q, h_q, h_kv, seqlens, causal, dtype, extraBlocks: 1 });
            assertMatchesNaive(c, `${dtype} h_q=${h_q} h_kv=${h_kv} s_q=${s_q} causal=${causal}`);
          }
        }
      });
    }
  }

  test("mlaDecodeReference() with d_qk 512 gives lse +inf and out 0 to causal rows that see no key", () => {
    const c = denseCase512({ seed: 520, b: 2, s_q: 3, h_q: 2, h_kv: 1, seqlens: [1, 0], causal: true, dtype: "bf16" });
    const { lse, outF32 } = mlaDecodeReference(c);
    // lse [b, h_q, s_q]: request 0 (one key) lets only query token 2 see it; request 1 sees nothing.
    const lseOf = (i: number, h: number) => Array.from((lse.host as Float32Array).subarray((i * 2 + h) * 3, (i * 2 + h + 1) * 3));
    for (const h of [0, 1]) {
      assert.deepEqual(lseOf(0, h).map(Number.isFinite), [false, false, true]);
      assert.deepEqual(lseOf(1, h), [Infinity, Infinity, Infinity]);
    }
    assert.ok(outF32.subarray(0, 2 * 2 * D_V).every((x) => x === 0), "request 0, tokens 0 and 1: out 0");
  });

  test("mlaDecodeReference() with d_qk 512 gives out = the whole 512-dim key and lse = q·k / sqrt(512) for a single key", () => {
    const key = { 0: 0.25, 300: -1, 447: 0.5, 448: 0.75, 511: -0.125 };
    const { out, lse, outF32 } = mlaDecodeReference(oneRow512({ 0: 2, 511: 4 }, [key]));
    // q·k = 2·0.25 + 4·(−0.125) = 0.
    assert.equal((lse.host as Float32Array)[0], 0);
    const v = new Array<number>(D_V).fill(0);
    for (const [d, x] of Object.entries(key)) v[Number(d)] = x;
    assert.deepEqual(Array.from(outF32), v, "V includes dims 448..511");
    assert.deepEqual(Array.from(out.host as Uint16Array), v.map(f64ToBf16Bits));

    const scored = mlaDecodeReference(oneRow512({ 448: 1, 511: 2 }, [key]));
    // q·k = 0.75 − 0.25 = 0.5 over the last 64 dims alone.
    assert.equal((scored.lse.host as Float32Array)[0], Math.fround(0.5 / Math.sqrt(512)));
  });

  test("mlaDecodeReference() with d_qk 512 defaults softmaxScale to 512^-0.5", () => {
    const args = oneRow512({ 5: 1 }, [{ 5: 2 }, {}]);
    const byDefault = mlaDecodeReference(args);
    const explicit = mlaDecodeReference({ ...args, softmaxScale: 512 ** -0.5 });
    const v3Scale = mlaDecodeReference({ ...args, softmaxScale: 1 / 24 });
    // Scores 2/sqrt(512) and 0: lse = ln(e^(2/sqrt(512)) + 1).
    assert.equal((byDefault.lse.host as Float32Array)[0], Math.fround(Math.log(Math.exp(2 / Math.sqrt(512)) + 1)));
    assert.deepEqual(byDefault.outF32, explicit.outF32);
    assert.deepEqual(byDefault.lse.host, explicit.lse.host);
    assert.notDeepEqual(byDefault.lse.host, v3Scale.lse.host);
  });

  test("mlaDecodeReference() with d_qk 512 honours q and kCache views with a 576-element row stride", () => {
    const opts = { seed: 530, b: 3, s_q: 2, h_q: 4, h_kv: 2, seqlens: [65, 7, 130], causal: true, dtype: "fp16" } as const;
    const strided = denseCase512(opts, true);
    assert.deepEqual(strided.kCache.strides.slice(2), [576, 1]);
    const packed = mlaDecodeReference(denseCase512(opts));
    const viewed = mlaDecodeReference(strided);
    assert.deepEqual(viewed.out.host, packed.out.host);
    assert.deepEqual(viewed.lse.host, packed.lse.host);
    assertMatchesNaive(strided, "strided");
  });

  test("mlaDecodeReference() with d_qk 512 and rows computes just those rows, NaN elsewhere", () => {
    const c = denseCase512({ seed: 540, b: 2, s_q: 3, h_q: 4, h_kv: 2, seqlens: [200, 64], causal: true, dtype: "bf16" });
    const rows = [{ batch: 1, token: 2, head: 3 }, { batch: 0, token: 0, head: 1 }, { batch: 1, token: 0, head: 0 }];
    const full = mlaDecodeReference(c);
    const part = mlaDecodeReference(c, { rows });
    const wanted = new Set(rows.map(({ batch, token, head }) => (batch * 3 + token) * 4 + head));
    const fullLse = full.lse.host as Float32Array;
    const partLse = part.lse.host as Float32Array;
    for (let r = 0; r < 2 * 3 * 4; r++) {
      const [i, j, h] = [Math.floor(r / 12), Math.floor(r / 4) % 3, r % 4];
      const o = part.outF32.subarray(r * D_V, (r + 1) * D_V);
      const l = partLse[(i * 4 + h) * 3 + j];
      if (wanted.has(r)) {
        assert.deepEqual(o, full.outF32.subarray(r * D_V, (r + 1) * D_V), `row ${r} out`);
        assert.equal(l, fullLse[(i * 4 + h) * 3 + j], `row ${r} lse`);
      } else {
        assert.ok(o.every(Number.isNaN) && Number.isNaN(l), `row ${r} is NaN`);
      }
    }
  });
});

describe("mlaDecodeReference() dense d_qk 512 validation", () => {
  const base = (): MlaDecodeReferenceArgs => oneRow512({}, [{}, {}]);
  const half = (shape: number[], dtype: "bf16" | "fp16" = "bf16") => Tensor.zerosHost(shape, dtype);

  const cases: RejectionCase[] = [
    ["a 576-wide kCache with a 512-wide dense q", () => ({ ...base(), kCache: half([1, 64, 1, 576]) }), "argument 'kCache': expected last dim 512 (q's d_qk), got shape [1, 64, 1, 576]"],
    ["a 513-wide kCache with a 512-wide dense q", () => ({ ...base(), kCache: half([1, 64, 1, 513]) }), "argument 'kCache': expected last dim 512 (q's d_qk), got shape [1, 64, 1, 513]"],
    ["a MODEL1 byte cache on the dense path", () => ({ ...base(), kCache: Tensor.zerosHost([1, 64, 1, 584], "u8") }), "argument 'kCache': expected dtype bf16 (q's dtype), got u8"],
    ["a 512-wide fp16 kCache with a bf16 q", () => ({ ...base(), kCache: half([1, 64, 1, 512], "fp16") }), "argument 'kCache': expected dtype bf16 (q's dtype), got fp16"],
    ["a 512-wide kCache of 32-token pages", () => ({ ...base(), kCache: half([1, 32, 1, 512]) }), "argument 'kCache': expected shape [num_blocks, 64, h_kv, 512] with h_q (1) % h_kv == 0, got shape [1, 32, 1, 512]"],
    ["a 512-wide kCache whose h_kv does not divide h_q", () => ({ ...base(), kCache: half([1, 64, 2, 512]) }), "argument 'kCache': expected shape [num_blocks, 64, h_kv, 512] with h_q (1) % h_kv == 0, got shape [1, 64, 2, 512]"],
    ["a 512-wide dense q of dtype f32", () => ({ ...base(), q: Tensor.zerosHost([1, 1, 1, 512], "f32") }), "argument 'q': expected dtype bf16 or fp16 on the dense path (no indices), got f32"],
    ["headDimV 576 with a 512-wide dense q", () => ({ ...base(), headDimV: 576 }), "argument 'headDimV': expected 512, got 576"],
    ["isFp8Kvcache with a 512-wide dense q", () => ({ ...base(), isFp8Kvcache: true }), "argument 'isFp8Kvcache': expected false on the dense path (no indices), got true"],
    ["attnSink with a 512-wide dense q", () => ({ ...base(), attnSink: Tensor.zerosHost([1], "f32") }), "argument 'attnSink': expected undefined on the dense path (no indices), got a value"],
  ];
  testRejections(cases);

  test("mlaDecodeReference() accepts a 512-wide dense q with a 512-wide bf16 or fp16 kCache", () => {
    assert.doesNotThrow(() => mlaDecodeReference(base()));
    assert.doesNotThrow(() => mlaDecodeReference({ ...base(), q: half([1, 1, 1, 512], "fp16"), kCache: half([1, 64, 1, 512], "fp16") }));
  });
});
