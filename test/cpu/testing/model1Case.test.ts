import assert from "node:assert/strict";
import { test } from "node:test";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { bf16BitsToF32 } from "../../../src/numeric/bf16.js";
import { dequantizeTokenModel1, model1PageBytes } from "../../../src/numeric/kvCacheModel1.js";
import type { Tensor } from "../../../src/runtime/Tensor.js";
import { makeModel1Case, type Model1CaseOptions } from "../../../src/testing/model1Case.js";

const BASE: Model1CaseOptions = { seed: 7, b: 3, s_q: 2, h_q: 4, topk: 40, s_k: 30, pageBlockSize: 8 };

/** Rows of an index tensor, with each request's valid length. */
function rowsOf(indices: Tensor, topkLength: Tensor | undefined): { i: number; ids: number[]; limit: number }[] {
  const [b, s_q, topk] = indices.shape;
  const ids = indices.host as Int32Array;
  const lengths = topkLength?.host as Int32Array | undefined;
  return Array.from({ length: b * s_q }, (_, r) => {
    const i = Math.floor(r / s_q);
    return { i, ids: Array.from(ids.subarray(r * topk, (r + 1) * topk)), limit: lengths?.[i] ?? topk };
  });
}

/** Checks one cache of a case: geometry, index rows, and that exactly the referenced tokens hold data. */
function checkCache(kCache: Tensor, indices: Tensor, topkLength: Tensor | undefined, seqlens: number[], pageBlockSize: number): void {
  const [num_blocks, pbs, h_kv, tokenBytes] = kCache.shape;
  assert.deepEqual([pbs, h_kv, tokenBytes], [pageBlockSize, 1, 584]);
  assert.equal(kCache.dtype, "u8");
  const stride = model1PageBytes(pageBlockSize);
  assert.deepEqual(kCache.strides, [stride, 584, 584, 1]);
  const bytes = kCache.host as Uint8Array;
  assert.equal(bytes.length, num_blocks * stride);
  // One page per ceil(length / pbs) of each request, plus a spare.
  assert.equal(num_blocks, seqlens.reduce((a, n) => a + Math.ceil(n / pbs), 0) + 1);

  const referenced = new Set<number>();
  for (const { i, ids, limit } of rowsOf(indices, topkLength)) {
    const filled = Math.min(ids.length, seqlens[i]);
    assert.equal(new Set(ids.slice(0, filled)).size, filled, "distinct ids");
    assert.ok(ids.slice(0, filled).every((id) => id >= 0 && id < num_blocks * pbs), "ids inside the cache");
    assert.ok(ids.slice(filled).every((id) => id === -1), "padded with −1");
    ids.slice(0, limit).forEach((id) => id >= 0 && referenced.add(id));
  }
  for (let slot = 0; slot < num_blocks * pbs; slot++) {
    const page = Math.floor(slot / pbs) * stride;
    const row = slot % pbs;
    const data = bytes.subarray(page + row * 576, page + row * 576 + 576);
    const record = bytes.subarray(page + pbs * 576 + row * 8, page + pbs * 576 + row * 8 + 8);
    if (referenced.has(slot)) {
      const k = dequantizeTokenModel1(bytes, slot, { pageBlockSize });
      assert.ok(k.every((x) => Math.abs(x) <= 1), `slot ${slot} holds N(0,1)/10 clamped to ±1`);
      assert.equal(record[7], 0, "pad byte 0");
    } else {
      assert.ok(data.every((x) => x === 0xff) && record.every((x) => x === 0xff), `slot ${slot} is poison`);
    }
  }
  for (let blk = 0; blk < num_blocks; blk++) {
    assert.ok(bytes.subarray(blk * stride + pbs * 584, (blk + 1) * stride).every((x) => x === 0xff), `page ${blk}'s padding is 0xff`);
  }
}

test("makeModel1Case() builds FlashMLA's MODEL1 test data: q, caches, −1-padded distinct ids, poisoned unreferenced tokens", () => {
  const c = makeModel1Case({ ...BASE, topkLength: true, sink: true, extra: { topk: 12, s_k: 20, pageBlockSize: 2, topkLengthRandom: true } });
  assert.deepEqual(c.q.shape, [3, 2, 4, 512]);
  assert.equal(c.q.dtype, "bf16");
  const q = Array.from(c.q.host as Uint16Array, bf16BitsToF32);
  assert.ok(q.every((x) => Math.abs(x) <= 1) && q.some((x) => Math.abs(x) === 1), "N(0,1) clamped to ±1");
  assert.equal(c.softmaxScale, 512 ** -0.55);
  assert.equal(c.headDimV, 512);
  assert.equal(c.isFp8Kvcache, true);
  assert.deepEqual(c.indices.shape, [3, 2, 40]);
  assert.deepEqual(c.extraIndices!.shape, [3, 2, 12]);
  for (const [lengths, topk] of [[c.topkLength!, 40], [c.extraTopkLength!, 12]] as const) {
    assert.deepEqual(lengths.shape, [3]);
    assert.ok(Array.from(lengths.host as Int32Array).every((n) => n >= 0 && n <= topk));
  }
  checkCache(c.kCache, c.indices, c.topkLength, c.seqlens, 8);
  checkCache(c.extraKCache!, c.extraIndices!, c.extraTopkLength, c.extraSeqlens!, 2);
  assert.deepEqual(c.attnSink!.shape, [4]);
});

test("makeModel1Case() draws lengths max(trunc(N(s_k, s_k/2)), s_q) per cache, or all s_k without varlen", () => {
  const c = makeModel1Case({ ...BASE, b: 60, s_q: 3, s_k: 6, topk: 4, extra: { topk: 4, s_k: 100, pageBlockSize: 64 } });
  for (const [seqlens, s_k] of [[c.seqlens, 6], [c.extraSeqlens!, 100]] as const) {
    assert.ok(seqlens.every((n) => Number.isInteger(n) && n >= 3), `lengths ≥ s_q: ${seqlens}`);
    assert.ok(new Set(seqlens).size > 4, "lengths vary");
    const mean = seqlens.reduce((a, n) => a + n, 0) / seqlens.length;
    assert.ok(Math.abs(mean - s_k) < s_k / 2, `mean ${mean} near ${s_k}`);
  }
  assert.ok(c.seqlens.includes(3), "the floor at s_q is reached");
  const fixed = makeModel1Case({ ...BASE, varlen: false, extra: { topk: 4, s_k: 9, pageBlockSize: 3 } });
  assert.deepEqual(fixed.seqlens, [30, 30, 30]);
  assert.deepEqual(fixed.extraSeqlens, [9, 9, 9]);
});

test("makeModel1Case() is deterministic in its seed and leaves out what is not asked for", () => {
  const a = makeModel1Case(BASE);
  const b = makeModel1Case(BASE);
  assert.deepEqual(a.q.host, b.q.host);
  assert.deepEqual(a.kCache.host, b.kCache.host);
  assert.deepEqual(a.indices.host, b.indices.host);
  assert.notDeepEqual(makeModel1Case({ ...BASE, seed: 8 }).kCache.host, a.kCache.host);
  for (const key of ["topkLength", "attnSink", "extraKCache", "extraIndices", "extraTopkLength", "extraSeqlens"] as const) {
    assert.ok(!(key in a), `no ${key}`);
  }
  checkCache(a.kCache, a.indices, undefined, a.seqlens, 8);
  const noRandomLength = makeModel1Case({ ...BASE, extra: { topk: 5, s_k: 5, pageBlockSize: 4 } });
  assert.ok(noRandomLength.extraKCache !== undefined && !("extraTopkLength" in noRandomLength));
});

test("makeModel1Case() sinks mix +inf, −inf and finite values", () => {
  const sink = Array.from(makeModel1Case({ ...BASE, h_q: 64, sink: true }).attnSink!.host as Float32Array);
  const count = (f: (x: number) => boolean) => sink.filter(f).length;
  assert.ok(count((x) => x === Infinity) > 10 && count((x) => x === -Infinity) > 10 && count(Number.isFinite) > 10, `${sink}`);
});

test("makeModel1Case() invalidates and repeats entries of both caches on request", () => {
  const c = makeModel1Case({ ...BASE, b: 2, s_q: 4, s_k: 300, topk: 100, varlen: false, invalidFraction: 0.3, repeat: 0.3, extra: { topk: 100, s_k: 300, pageBlockSize: 64 } });
  for (const indices of [c.indices, c.extraIndices!]) {
    const rows = rowsOf(indices, undefined);
    const invalid = rows.reduce((a, r) => a + r.ids.filter((x) => x === -1).length, 0);
    assert.ok(invalid > 150 && invalid < 330, `about 30% of 800 invalid, got ${invalid}`);
    const repeats = rows.reduce((a, r) => a + r.ids.filter((x) => x >= 0).length - new Set(r.ids.filter((x) => x >= 0)).size, 0);
    assert.ok(repeats > 40, `repeated ids present, got ${repeats}`);
  }
});

test("makeModel1Case() names a wrong option", () => {
  const cases: [Partial<Model1CaseOptions> | null, string][] = [
    [{ b: 0 }, "argument 'opts.b': expected an integer >= 1, got 0"],
    [{ h_q: 2.5 }, "argument 'opts.h_q': expected an integer >= 1, got 2.5"],
    [{ s_k: -1 }, "argument 'opts.s_k': expected an integer >= 0, got -1"],
    [{ pageBlockSize: 0 }, "argument 'opts.pageBlockSize': expected an integer >= 1, got 0"],
    [{ invalidFraction: 2 }, "argument 'opts.invalidFraction': expected a probability in [0, 1], got 2"],
    [{ repeat: NaN }, "argument 'opts.repeat': expected a probability in [0, 1], got NaN"],
    [{ extra: { topk: 0, s_k: 5, pageBlockSize: 2 } }, "argument 'opts.extra.topk': expected an integer >= 1, got 0"],
    [{ extra: { topk: 4, s_k: 5, pageBlockSize: -2 } }, "argument 'opts.extra.pageBlockSize': expected an integer >= 1, got -2"],
    [{ extra: 3 as unknown as Model1CaseOptions["extra"] }, "argument 'opts.extra': expected an options object or undefined, got number 3"],
  ];
  for (const [patch, message] of cases) {
    assert.throws(() => makeModel1Case({ ...BASE, ...patch }), (err: unknown) => {
      assert.ok(err instanceof ArgumentError, String(err));
      assert.equal(err.message, `makeModel1Case(): ${message}`);
      return true;
    });
  }
  assert.throws(() => makeModel1Case(null as unknown as Model1CaseOptions), /makeModel1Case\(\): argument 'opts': expected an options object or undefined, got null/);
});
