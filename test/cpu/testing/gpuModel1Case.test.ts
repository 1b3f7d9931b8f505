import { test } from "node:test";
import assert from "node:assert/strict";
import { BENCH_CASES, benchCaseByName } from "../../../src/bench/cases.js";
import { model1BenchSpec } from "../../../src/bench/sparseBenchSpec.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { model1PageBytes } from "../../../src/numeric/kvCacheModel1.js";
import type { Stream } from "../../../src/runtime/Stream.js";
import { makeGpuModel1Case, planGpuModel1Case } from "../../../src/testing/gpuModel1Case.js";
import { makeModel1Case, type Model1CaseSpec } from "../../../src/testing/model1Case.js";

const SPEC: Model1CaseSpec = {
  b: 5, s_q: 2, h_q: 16, topk: 40, s_k: 60, pageBlockSize: 8, topkLength: true, sink: true, invalidFraction: 0.1, repeat: 0.1,
  extra: { topk: 24, s_k: 30, pageBlockSize: 2, topkLengthRandom: true },
};

/** The distinct ids each list's valid entries read, and how many entries those are, counted directly. */
function countByHand(indices: Int32Array, lengths: Int32Array | undefined, dims: { b: number; s_q: number; topk: number; numSlots: number }) {
  const ids = new Set<number>();
  let attended = 0;
  for (let i = 0; i < dims.b; i++) {
    for (let j = 0; j < dims.s_q; j++) {
      for (let k = 0; k < Math.min(dims.topk, lengths?.[i] ?? dims.topk); k++) {
        const id = indices[(i * dims.s_q + j) * dims.topk + k];
        if (id >= 0 && id < dims.numSlots) (ids.add(id), attended++);
      }
    }
  }
  return { ids: [...ids].sort((x, y) => x - y), attended };
}

test("planGpuModel1Case() draws makeModel1Case's lengths, pages, indices, valid lengths and sinks for the same seed", () => {
  const plan = planGpuModel1Case(SPEC, 9);
  const host = makeModel1Case({ ...SPEC, seed: 9 });
  assert.deepEqual(plan.main.layout.seqlens, host.seqlens);
  assert.deepEqual(plan.extra!.layout.seqlens, host.extraSeqlens);
  assert.deepEqual(plan.main.draw.indices, host.indices.host);
  assert.deepEqual(plan.main.draw.topkLength, host.topkLength!.host);
  assert.deepEqual(plan.extra!.draw.indices, host.extraIndices!.host);
  assert.deepEqual(plan.extra!.draw.topkLength, host.extraTopkLength!.host);
  assert.deepEqual(plan.sink, host.attnSink!.host);
  // The pages: the host cache has as many as the plan lays out, each of model1PageBytes(pbs).
  assert.equal(host.kCache.shape[0], plan.main.layout.numBlocks);
  assert.equal(host.extraKCache!.shape[0], plan.extra!.layout.numBlocks);
});

test("planGpuModel1Case() is deterministic in its seed, and the GPU's draw seeds follow the host draws", () => {
  const a = planGpuModel1Case(SPEC, 3);
  assert.deepEqual(planGpuModel1Case(SPEC, 3), a);
  const b = planGpuModel1Case(SPEC, 4);
  assert.notDeepEqual(b.main.draw.indices, a.main.draw.indices);
  assert.notEqual(b.qSeed, a.qSeed);
  assert.equal(new Set([a.qSeed, a.kvSeed, a.extraKvSeed]).size, 3);
  for (const s of [a.qSeed, a.kvSeed, a.extraKvSeed]) assert.ok(s >= 0n && s < 1n << 64n);
  // Without an extra cache or sinks the plan has neither, and the main cache's draws are unchanged.
  const plain = planGpuModel1Case({ ...SPEC, extra: undefined, sink: false }, 3);
  assert.equal(plain.extra, undefined);
  assert.equal(plain.extraSlots, undefined);
  assert.equal(plain.sink, undefined);
  assert.deepEqual(plain.main, a.main);
});

test("planGpuModel1Case() counts the slots to write, N attended, N_unique and the bytes of the case", () => {
  const plan = planGpuModel1Case(SPEC, 11);
  const { b, s_q, h_q } = SPEC;
  const main = countByHand(plan.main.draw.indices, plan.main.draw.topkLength, { b, s_q, topk: 40, numSlots: plan.main.layout.numBlocks * 8 });
  const extra = countByHand(plan.extra!.draw.indices, plan.extra!.draw.topkLength, { b, s_q, topk: 24, numSlots: plan.extra!.layout.numBlocks * 2 });
  assert.deepEqual(Array.from(plan.slots), main.ids);
  assert.deepEqual(Array.from(plan.extraSlots!), extra.ids);
  assert.ok(main.ids.length > 0 && extra.ids.length > 0);
  assert.equal(plan.nAttended, main.attended + extra.attended);
  assert.equal(plan.nUnique, main.ids.length + extra.ids.length);
  const bytes =
    b * s_q * h_q * 512 * 2 +
    plan.main.layout.numBlocks * model1PageBytes(8) + b * s_q * 40 * 4 +
    plan.extra!.layout.numBlocks * model1PageBytes(2) + b * s_q * 24 * 4;
  assert.equal(plan.inputBytes, bytes);
});

test("the v4 cases' sets: FlashMLA's MODEL1 draws per cache, counts as drawn, 2.4-3.1 GB each", () => {
  const bytesOf: Record<string, number> = {};
  for (const c of BENCH_CASES.filter((x) => x.group === "v4")) {
    const spec = model1BenchSpec(c);
    assert.deepEqual(
      { ...spec },
      { b: c.b, s_q: 2, h_q: c.h_q, topk: c.topk, s_k: c.name.startsWith("v4-peak") ? 32768 : 16384, varlen: true, pageBlockSize: c.model1!.pageBlockSize, ...(c.model1!.extra !== undefined ? { extra: c.model1!.extra } : {}), sink: true },
      c.name,
    );
    // Bytes as makeGpuModel1Case allocates them, from the lengths alone (no index draws).
    const caches = [{ s_k: spec.s_k, pbs: spec.pageBlockSize, topk: spec.topk }, ...(spec.extra !== undefined ? [{ s_k: spec.extra.s_k, pbs: spec.extra.pageBlockSize, topk: spec.extra.topk }] : [])];
    bytesOf[c.name] = spec.b * 2 * spec.h_q * 512 * 2 + caches.reduce((a, k) => a + (spec.b * Math.ceil(k.s_k / k.pbs) + 1) * model1PageBytes(k.pbs) + spec.b * 2 * k.topk * 4, 0);
  }
  for (const [name, bytes] of Object.entries(bytesOf)) assert.ok(bytes > 2.4e9 && bytes < 3.1e9, `${name}: ${bytes}`);

  // v4-cfg3: every main row holds min(128, its length) entries; the extra rows their U[0, 1024] valid lengths.
  const cfg3 = benchCaseByName("v4-cfg3")!;
  const plan = planGpuModel1Case(model1BenchSpec(cfg3), 1001);
  const { seqlens } = plan.main.layout;
  const extraLens = plan.extra!.layout.seqlens;
  const valid = plan.extra!.draw.topkLength!;
  assert.equal(plan.main.draw.topkLength, undefined);
  assert.ok(seqlens.every((n) => n >= 2) && extraLens.every((n) => n >= 2));
  const expected = seqlens.reduce((a, n) => a + 2 * Math.min(128, n), 0) + extraLens.reduce((a, n, i) => a + 2 * Math.min(valid[i], 1024, n), 0);
  assert.equal(plan.nAttended, expected);
  // The two query tokens of a request share some of their tokens: N_unique is below N, well above half of it.
  assert.ok(plan.nUnique < plan.nAttended && plan.nUnique > 0.9 * plan.nAttended, `${plan.nUnique} of ${plan.nAttended}`);
  const meanValid = Array.from(valid).reduce((a, n) => a + n, 0) / valid.length;
  assert.ok(Math.abs(meanValid - 512) < 100, `mean extraTopkLength ${meanValid}`);
});

test("makeGpuModel1Case() checks its recipe and options before touching the GPU", () => {
  // Any use of the stream would throw a TypeError, not these errors.
  const stream = undefined as unknown as Stream;
  const cases: Array<[() => unknown, string]> = [
    [() => makeGpuModel1Case({ ...SPEC, topk: 0 }, { seed: 1, stream }), "argument 'opts.topk': expected an integer >= 1, got 0"],
    [() => makeGpuModel1Case({ ...SPEC, extra: { topk: 4, s_k: 5, pageBlockSize: 0 } }, { seed: 1, stream }), "argument 'opts.extra.pageBlockSize': expected an integer >= 1, got 0"],
    [() => makeGpuModel1Case(SPEC, { seed: 1, stream, softmaxScale: -1 }), "argument 'opts.softmaxScale': expected a finite number > 0, got -1"],
    [() => makeGpuModel1Case(null as unknown as Model1CaseSpec, { seed: 1, stream }), "argument 'spec': expected a MODEL1 case recipe (an options object), got null"],
    // Refused once the lengths are drawn, before a permutation of 2^31 pages is.
    [() => makeGpuModel1Case({ ...SPEC, b: 1, s_k: 2 ** 31, pageBlockSize: 1, varlen: false }, { seed: 1, stream }), "argument 'opts.s_k': expected a cache of at most 2147483647 slots (32-bit token ids), got lengths that need 2147483649 slots"],
  ];
  for (const [call, message] of cases) {
    assert.throws(call, (err: unknown) => {
      assert.ok(err instanceof ArgumentError, String(err));
      assert.equal(err.message, `makeGpuModel1Case(): ${message}`);
      return true;
    });
  }
});
