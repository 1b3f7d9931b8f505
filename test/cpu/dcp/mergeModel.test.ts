import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { dcpHeadSlice, dcpMergeModel, dcpRescaleModel, type DcpFloats } from "../../../src/dcp/mergeModel.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { assertClose } from "../../../src/numeric/compare.js";
import { Rng } from "../../../src/numeric/random.js";

/** f64 agreement of two orders of summation. */
const F64 = { abs: 1e-15, rel: 1e-12 };
const EXACT = { abs: 0, rel: 0 };

/**
 * One row's keys dealt to N shards: scores s_k and values v_k [d_v]; each shard's (lse, out) computed
 * alone, and the unsharded result with an optional sink, all in f64.
 */
function softmaxRow(scores: number[], values: number[][], sink?: number): { lse: number; out: number[] } {
  const d_v = values[0]?.length ?? 0;
  if (scores.length === 0) return { lse: Infinity, out: new Array<number>(d_v).fill(0) };
  const max = Math.max(...scores);
  const sum = scores.reduce((a, s) => a + Math.exp(s - max), 0);
  const lse = max + Math.log(sum);
  const factor = sink === undefined ? 1 : 1 / (1 + Math.exp(sink - lse));
  const out = new Array<number>(d_v).fill(0);
  scores.forEach((s, k) => values[k].forEach((v, d) => (out[d] += Math.exp(s - lse) * v * factor)));
  return { lse, out };
}

/** b = s_q = 1, h_q heads, d_v dims: random keys dealt to `ranks` shards by `owner(k)`; returns shards and the whole. */
function randomShards(rng: Rng, opts: { ranks: number; h_q: number; d_v: number; keys: number; owner: (k: number) => number; sink?: number[] }) {
  const { ranks, h_q, d_v, keys } = opts;
  const outs = Array.from({ length: ranks }, () => new Float64Array(h_q * d_v));
  const lses = Array.from({ length: ranks }, () => new Float64Array(h_q));
  const whole = { out: new Float64Array(h_q * d_v), lse: new Float64Array(h_q) };
  for (let h = 0; h < h_q; h++) {
    const scores = Array.from({ length: keys }, () => 3 * rng.normal());
    const values = Array.from({ length: keys }, () => Array.from({ length: d_v }, () => rng.normal()));
    const ownerOf = scores.map((_, k) => opts.owner(k)); // once per key: `owner` may draw
    for (let r = 0; r < ranks; r++) {
      const mine = scores.map((_, k) => k).filter((k) => ownerOf[k] === r);
      const part = softmaxRow(mine.map((k) => scores[k]), mine.map((k) => values[k]));
      lses[r][h] = part.lse;
      outs[r].set(part.out.length ? part.out : new Array<number>(d_v).fill(0), h * d_v);
    }
    const all = softmaxRow(scores, values, opts.sink?.[h]);
    whole.lse[h] = all.lse;
    whole.out.set(all.out, h * d_v);
  }
  return { outs, lses, whole };
}

function throwsArgument(call: () => unknown, fn: string, argument: string): void {
  assert.throws(call, (e: unknown) => e instanceof ArgumentError && e.fn === fn && e.argument === argument, `${fn}(): '${argument}'`);
}

describe("dcpMergeModel()", () => {
  test("dcpMergeModel() weighs each shard by exp(L_r − L)", () => {
    const dims = { b: 1, s_q: 1, h_q: 1, d_v: 2 };
    const { out, lse } = dcpMergeModel({ outs: [Float64Array.of(1, 2), Float64Array.of(5, -1)], lses: [Float64Array.of(0), Float64Array.of(Math.log(3))], dims });
    assertClose(lse, [Math.log(4)], F64);
    assertClose(out, [0.25 * 1 + 0.75 * 5, 0.25 * 2 - 0.75], F64);
  });

  test("dcpMergeModel() of shards equals the softmax over all keys, for any dealing, with and without a sink", () => {
    const rng = new Rng(7);
    for (const ranks of [1, 2, 3, 5]) {
      for (const [name, owner] of [["interleave 1", (k: number) => k % ranks], ["runs of 4", (k: number) => Math.floor(k / 4) % ranks], ["random", () => Math.floor(rng.uniform() * ranks)]] as const) {
        for (const sink of [undefined, [0.5, -2, 4, Infinity, -Infinity]]) {
          const h_q = 5, d_v = 8;
          const { outs, lses, whole } = randomShards(rng, { ranks, h_q, d_v, keys: 3 + ranks, owner, sink });
          const m = dcpMergeModel({ outs, lses, dims: { b: 1, s_q: 1, h_q, d_v }, attnSink: sink ? Float64Array.from(sink) : undefined });
          const what = `${ranks} ranks, ${name}, sink ${sink ? "on" : "off"}`;
          assertClose(m.lse, whole.lse, F64, { name: `lse (${what})` });
          assertClose(m.out, whole.out, F64, { name: `out (${what})`, shape: [h_q, d_v] });
        }
      }
    }
  });

  test("dcpMergeModel() gives out 0 and lse +inf for a row no shard saw, whatever the sink and the empty outs hold", () => {
    const dims = { b: 1, s_q: 2, h_q: 1, d_v: 3 };
    const poison = Float64Array.of(NaN, Infinity, 1, NaN, NaN, NaN);
    for (const sink of [undefined, Float32Array.of(Infinity), Float32Array.of(-Infinity), Float32Array.of(0)]) {
      const m = dcpMergeModel({ outs: [poison, poison], lses: [Float32Array.of(Infinity, -Infinity), Float32Array.of(-Infinity, Infinity)], dims, attnSink: sink });
      assert.deepEqual([...m.lse], [Infinity, Infinity]);
      assert.deepEqual([...m.out], [0, 0, 0, 0, 0, 0]);
    }
  });

  test("dcpMergeModel() treats lse +inf and −inf alike: an empty shard, never read", () => {
    const dims = { b: 1, s_q: 1, h_q: 1, d_v: 2 };
    const full = { out: Float64Array.of(0.5, -3), lse: Float64Array.of(1.25) };
    for (const empty of [Infinity, -Infinity]) {
      const m = dcpMergeModel({ outs: [Float64Array.of(NaN, NaN), full.out], lses: [Float64Array.of(empty), full.lse], dims });
      assert.deepEqual([...m.out], [0.5, -3]);
      assert.deepEqual([...m.lse], [1.25]);
    }
  });

  test("dcpMergeModel() makes a row NaN when a shard's lse is NaN, and a column NaN when a read out is", () => {
    const dims = { b: 1, s_q: 1, h_q: 2, d_v: 2 };
    const ones = Float64Array.of(1, 1, 1, 1);
    const m = dcpMergeModel({ outs: [ones, ones], lses: [Float64Array.of(NaN, 0), Float64Array.of(0, 0)], dims });
    assert.ok(Number.isNaN(m.lse[0]) && m.out.subarray(0, 2).every(Number.isNaN), "head 0 is NaN");
    assert.deepEqual([...m.out.subarray(2)], [1, 1]);
    const n = dcpMergeModel({ outs: [Float64Array.of(NaN, 2, 1, 1), ones], lses: [Float64Array.of(0, 0), Float64Array.of(0, 0)], dims });
    assert.ok(Number.isNaN(n.out[0]));
    assert.deepEqual([...n.out.subarray(1)], [1.5, 1, 1]);
    assert.deepEqual([...n.lse], [Math.log(2), Math.log(2)]);
  });

  test("dcpMergeModel() applies the sink once, after the merge: −inf keeps out, +inf zeroes it, lse unchanged", () => {
    const dims = { b: 1, s_q: 1, h_q: 3, d_v: 1 };
    const outs = [Float64Array.of(2, 2, 2), Float64Array.of(4, 4, 4)];
    const lses = [Float64Array.of(0, 0, 0), Float64Array.of(0, 0, 0)]; // L = ln 2, O = 3
    const m = dcpMergeModel({ outs, lses, dims, attnSink: Float64Array.of(-Infinity, Infinity, Math.log(2)) });
    assert.deepEqual([...m.lse], [Math.log(2), Math.log(2), Math.log(2)]);
    assertClose(m.out, [3, 0, 1.5], F64); // 1 / (1 + e^(ln2 − ln2)) = 1/2 once, not 1/2 per shard
  });

  test("dcpMergeModel() names each wrong argument", () => {
    const fn = "dcpMergeModel";
    const dims = { b: 1, s_q: 1, h_q: 1, d_v: 2 };
    const ok = { outs: [new Float64Array(2)], lses: [new Float64Array(1)], dims };
    throwsArgument(() => dcpMergeModel({ ...ok, lses: [] }), fn, "lses");
    throwsArgument(() => dcpMergeModel({ ...ok, lses: [new Float64Array(2)] }), fn, "lses[0]");
    throwsArgument(() => dcpMergeModel({ ...ok, outs: [] }), fn, "outs");
    throwsArgument(() => dcpMergeModel({ ...ok, outs: [new Int32Array(2) as never] }), fn, "outs[0]");
    throwsArgument(() => dcpMergeModel({ ...ok, attnSink: new Float32Array(2) }), fn, "attnSink");
    throwsArgument(() => dcpMergeModel({ ...ok, dims: { ...dims, h_q: 0 } }), fn, "dims.h_q");
    throwsArgument(() => dcpMergeModel({ ...ok, dims: undefined as never }), fn, "dims");
    throwsArgument(() => dcpMergeModel({ ...ok, outs: [new Float64Array(1024)], dims: { b: 1, s_q: 1, h_q: 1 } }), fn, "outs[0]"); // d_v 512
  });
});

describe("dcpRescaleModel() and dcpHeadSlice()", () => {
  /** Random shards of b = 2, s_q = 2, h_q = 4, with some empty rows per shard and a poisoned empty out. */
  function shards(ranks: number, seed: number) {
    const rng = new Rng(seed);
    const dims = { b: 2, s_q: 2, h_q: 4, d_v: 6 };
    const rows = dims.b * dims.s_q * dims.h_q;
    const outs: DcpFloats[] = [], lses: DcpFloats[] = [];
    for (let r = 0; r < ranks; r++) {
      const lse = Float64Array.from({ length: rows }, () => (rng.uniform() < 0.25 ? (rng.uniform() < 0.5 ? Infinity : -Infinity) : 4 * rng.normal()));
      lses.push(lse);
      outs.push(Float64Array.from({ length: rows * dims.d_v }, () => rng.normal()));
    }
    // Row 0 empty everywhere, its outs NaN.
    lses.forEach((l) => (l[0] = Infinity));
    outs.forEach((o) => o.fill(NaN, 0, dims.d_v));
    return { dims, outs, lses };
  }

  test("dcpRescaleModel()'s partials, added in rank order, are exactly dcpMergeModel()'s out", () => {
    for (const ranks of [1, 2, 3, 4]) {
      for (const sink of [undefined, Float32Array.of(0.3, -Infinity, Infinity, -1)]) {
        const { dims, outs, lses } = shards(ranks, 40 + ranks);
        const merged = dcpMergeModel({ outs, lses, dims, attnSink: sink });
        const sum = new Float64Array(merged.out.length);
        for (let rank = 0; rank < ranks; rank++) {
          const { partial, lse } = dcpRescaleModel({ out: outs[rank], lses, rank, dims, attnSink: sink });
          assertClose(lse, merged.lse, EXACT, { name: `lse of rank ${rank}` });
          partial.forEach((x, k) => (sum[k] += x));
        }
        assertClose(sum, merged.out, EXACT, { name: `Σ partials, ${ranks} ranks`, shape: [2, 2, 4, 6] });
        assert.ok(merged.out.subarray(0, 6).every((x) => x === 0), "the empty row stays 0");
      }
    }
  });

  test("a reduce-scatter over dcpHeadSlice()'s head slices leaves each rank its heads of the merged out", () => {
    const ranks = 2;
    const { dims, outs, lses } = shards(ranks, 9);
    const merged = dcpMergeModel({ outs, lses, dims });
    const partials = outs.map((out, rank) => dcpRescaleModel({ out, lses, rank, dims }).partial);
    for (let rank = 0; rank < ranks; rank++) {
      const { start, count } = dcpHeadSlice(dims.h_q, ranks, rank);
      for (let row = 0; row < dims.b * dims.s_q; row++) {
        for (let h = start; h < start + count; h++) {
          const at = (row * dims.h_q + h) * dims.d_v;
          const got = Array.from({ length: dims.d_v }, (_, d) => partials[0][at + d] + partials[1][at + d]);
          assertClose(got, merged.out.subarray(at, at + dims.d_v), EXACT);
        }
      }
    }
  });

  test("dcpHeadSlice() gives contiguous equal slices and refuses h_q not a multiple of ranks", () => {
    assert.deepEqual([0, 1, 2, 3].map((r) => dcpHeadSlice(128, 4, r)), [0, 32, 64, 96].map((start) => ({ start, count: 32 })));
    assert.deepEqual(dcpHeadSlice(3, 1, 0), { start: 0, count: 3 });
    throwsArgument(() => dcpHeadSlice(6, 4, 0), "dcpHeadSlice", "hQ");
    throwsArgument(() => dcpHeadSlice(8, 4, 4), "dcpHeadSlice", "rank");
    throwsArgument(() => dcpHeadSlice(8, 0, 0), "dcpHeadSlice", "ranks");
  });

  test("dcpRescaleModel() names each wrong argument", () => {
    const fn = "dcpRescaleModel";
    const dims = { b: 1, s_q: 1, h_q: 1, d_v: 2 };
    const ok = { out: new Float64Array(2), lses: [new Float64Array(1), new Float64Array(1)], rank: 1, dims };
    throwsArgument(() => dcpRescaleModel({ ...ok, rank: 2 }), fn, "rank");
    throwsArgument(() => dcpRescaleModel({ ...ok, out: new Float64Array(3) }), fn, "out");
    throwsArgument(() => dcpRescaleModel({ ...ok, lses: [new Float64Array(1), new Float32Array(3)] }), fn, "lses[1]");
  });
});
