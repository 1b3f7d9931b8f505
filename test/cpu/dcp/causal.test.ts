import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { dcpCausalForm, dcpFlattenBlockTable, dcpVisibleLengths } from "../../../src/dcp/causal.js";
import { dcpOwner } from "../../../src/dcp/shard.js";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";

/** Rank `rank`'s tokens that query token j sees, by walking every global position. */
function visibleByWalk(S: number, sQ: number, rank: number, ranks: number, interleave: number): number[] {
  return Array.from({ length: sQ }, (_, j) => {
    const limit = S - (sQ - 1 - j);
    let n = 0;
    for (let p = 0; p < limit; p++) if (dcpOwner(p, ranks, interleave).rank === rank) n++;
    return n;
  });
}

function throwsArgument(call: () => unknown, fn: string, argument: string): void {
  assert.throws(call, (e: unknown) => e instanceof ArgumentError && e.fn === fn && e.argument === argument, `${fn}(): '${argument}'`);
}

describe("dcpVisibleLengths()", () => {
  test("dcpVisibleLengths() counts the rank's tokens below each query token's global limit", () => {
    for (const ranks of [1, 2, 3, 4]) {
      for (const interleave of [1, 2, 5, 64]) {
        for (const sQ of [1, 2, 3, 5]) {
          for (let S = 0; S < 2 * ranks * interleave + 7; S++) {
            let total = Array.from({ length: sQ }, () => 0);
            for (let rank = 0; rank < ranks; rank++) {
              const got = dcpVisibleLengths({ globalLength: S, sQ, rank, ranks, interleave });
              assert.deepEqual([...got], visibleByWalk(S, sQ, rank, ranks, interleave), `S ${S}, s_q ${sQ}, rank ${rank}/${ranks}, interleave ${interleave}`);
              total = total.map((t, j) => t + got[j]);
            }
            // Over all ranks, query j sees max(0, S − (s_q − 1 − j)) keys: the unsharded causal mask.
            assert.deepEqual(total, Array.from({ length: sQ }, (_, j) => Math.max(0, S - (sQ - 1 - j))));
          }
        }
      }
    }
  });

  test("dcpVisibleLengths() names each wrong argument", () => {
    const ok = { globalLength: 10, sQ: 2, rank: 0, ranks: 2, interleave: 1 };
    throwsArgument(() => dcpVisibleLengths({ ...ok, globalLength: -1 }), "dcpVisibleLengths", "globalLength");
    throwsArgument(() => dcpVisibleLengths({ ...ok, sQ: 0 }), "dcpVisibleLengths", "sQ");
    throwsArgument(() => dcpVisibleLengths({ ...ok, rank: 2 }), "dcpVisibleLengths", "rank");
    throwsArgument(() => dcpVisibleLengths({ ...ok, ranks: 0 }), "dcpVisibleLengths", "ranks");
    throwsArgument(() => dcpVisibleLengths({ ...ok, interleave: -64 }), "dcpVisibleLengths", "interleave");
    throwsArgument(() => dcpVisibleLengths(undefined as never), "dcpVisibleLengths", "opts");
  });
});

describe("dcpCausalForm()", () => {
  const form = (lens: number[], sQ: number, rank: number, ranks: number, interleave: number) =>
    dcpCausalForm({ cacheSeqlens: Int32Array.from(lens), sQ, rank, ranks, interleave });

  test("dcpCausalForm() picks the plain kernel when every query token sees the whole shard", () => {
    // Rank 0 of 2, interleave 1, S = 10: tokens 0,2,4,6,8 are below both limits (9 and 10).
    const r = form([10], 2, 0, 2, 1);
    assert.equal(r.form, "nonCausal");
    assert.deepEqual([...r.localSeqlens], [5]);
    assert.deepEqual([...r.visibleLengths], [5, 5]);
    assert.equal(form([10, 0, 7], 1, 1, 3, 2).form, "nonCausal"); // s_q = 1 is never causal
    assert.equal(form([0, 0], 2, 0, 1, 1).form, "nonCausal"); // nothing to see
  });

  test("dcpCausalForm() picks the kernel's causal mask when the shard holds the newest tokens", () => {
    // Rank 1 of 2, interleave 1, S = 10: tokens 1..9 odd; query 0 sees 4, query 1 sees 5.
    const r = form([10], 2, 1, 2, 1);
    assert.equal(r.form, "causal");
    assert.deepEqual([...r.visibleLengths], [4, 5]);
    // One rank is the unsharded decode: always the kernel's own mask (or plain when it makes no difference).
    assert.equal(form([10, 1, 0], 2, 0, 1, 64).form, "causal");
    // interleave 64 and S = 130: rank 0 holds 0..63 and 128..129, the newest two, so its mask is the kernel's.
    assert.equal(form([130], 2, 0, 2, 64).form, "causal");
    assert.equal(form([130], 2, 1, 2, 64).form, "nonCausal");
  });

  test("dcpCausalForm() flattens when the requests need different forms or a mask no kernel form gives", () => {
    // Request 0 (S = 10) needs the causal mask on rank 1, request 1 (S = 9) the plain kernel.
    const r = form([10, 9], 2, 1, 2, 1);
    assert.equal(r.form, "flatten");
    assert.deepEqual([...r.visibleLengths], [4, 5, 4, 4]);
    // interleave 1, s_q 3, 2 ranks, S = 10: rank 1 holds 1,3,5,7,9; limits 8,9,10 → 4,4,5, not 3,4,5.
    const s = form([10], 3, 1, 2, 1);
    assert.equal(s.form, "flatten");
    assert.deepEqual([...s.visibleLengths], [4, 4, 5]);
  });

  test("dcpCausalForm()'s visible lengths equal dcpVisibleLengths() and its form reproduces them", () => {
    for (const ranks of [1, 2, 3, 4]) {
      for (const interleave of [1, 3, 64]) {
        for (const sQ of [1, 2, 4]) {
          const lens = [0, 1, 2, 3, interleave, interleave + 1, 2 * ranks * interleave + 1, 150];
          for (let rank = 0; rank < ranks; rank++) {
            const r = form(lens, sQ, rank, ranks, interleave);
            lens.forEach((S, i) => {
              const want = dcpVisibleLengths({ globalLength: S, sQ, rank, ranks, interleave });
              assert.deepEqual([...r.visibleLengths.subarray(i * sQ, (i + 1) * sQ)], [...want]);
              for (let j = 0; j < sQ; j++) {
                const local = r.localSeqlens[i];
                if (r.form === "nonCausal") assert.equal(want[j], local);
                if (r.form === "causal") assert.equal(want[j], Math.max(0, local - (sQ - 1 - j)));
              }
            });
          }
        }
      }
    }
  });

  test("dcpCausalForm() names each wrong argument", () => {
    const ok = { cacheSeqlens: Int32Array.of(3), sQ: 2, rank: 0, ranks: 2, interleave: 1 };
    throwsArgument(() => dcpCausalForm({ ...ok, cacheSeqlens: Int32Array.of(3, -2) }), "dcpCausalForm", "cacheSeqlens");
    throwsArgument(() => dcpCausalForm({ ...ok, cacheSeqlens: [3] as never }), "dcpCausalForm", "cacheSeqlens");
    throwsArgument(() => dcpCausalForm({ ...ok, sQ: 1.5 }), "dcpCausalForm", "sQ");
    throwsArgument(() => dcpCausalForm({ ...ok, rank: -1 }), "dcpCausalForm", "rank");
  });
});

describe("dcpFlattenBlockTable()", () => {
  test("dcpFlattenBlockTable() repeats each request's row s_q times", () => {
    assert.deepEqual([...dcpFlattenBlockTable(Int32Array.of(1, 2, 3, 4), 2, 3)], [1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4]);
    assert.deepEqual([...dcpFlattenBlockTable(Int32Array.of(5, 6), 2, 1)], [5, 6]);
    throwsArgument(() => dcpFlattenBlockTable(Int32Array.of(1, 2, 3), 2, 2), "dcpFlattenBlockTable", "blockTable");
    throwsArgument(() => dcpFlattenBlockTable(Int32Array.of(1, 2), 2, 0), "dcpFlattenBlockTable", "sQ");
  });
});
