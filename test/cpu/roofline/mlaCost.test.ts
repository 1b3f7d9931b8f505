import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { expectedUniqueTokens, mlaCost } from "../../../src/roofline/mlaCost.js";

test("mlaCost() counts dense-compute FLOPs and bytes as worked out by hand", () => {
  const c = mlaCost({ kind: "dense", b: 128, h_q: 128, s_q: 1, s_k: 8192 });
  // b·h_q·s_q = 16384 rows, each 2·576·8192 + 2·8192·512 = 9,437,184 + 8,388,608 = 17,825,792 FLOP.
  assert.equal(c.flop, 292_057_776_128);
  // Per request: q 128·576·2 = 147,456 + KV 8192·576·2 = 9,437,184 + out 128·512·2 = 131,072 = 9,715,712 B.
  assert.equal(c.bytes, 1_243_611_136);
  assert.ok(Math.abs(c.intensity - 234.85) < 0.01);
});

test("mlaCost() counts the KV once per KV head and queries per query head (dense-mem-h16, h_kv 2)", () => {
  // 128·(16·576·2 + 8192·576·2 + 16·512·2) = 128·9,472,000.
  assert.equal(mlaCost({ kind: "dense", b: 128, h_q: 16, s_q: 1, s_k: 8192 }).bytes, 1_212_416_000);
  const two = mlaCost({ kind: "dense", b: 1, h_q: 16, h_kv: 2, s_q: 1, s_k: 100 });
  assert.equal(two.bytes, 16 * 576 * 2 + 100 * 2 * 576 * 2 + 16 * 512 * 2);
  assert.equal(two.flop, 16 * (2 * 576 * 100 + 2 * 100 * 512));
});

test("mlaCost() dense intensity tends to 1.89·h_q·s_q for long caches", () => {
  const c = mlaCost({ kind: "dense", b: 1, h_q: 64, s_q: 2, s_k: 1e7 });
  assert.ok(Math.abs(c.intensity / (64 * 2) - 1088 / 576) < 1e-3);
});

test("mlaCost() takes a fractional mean cache length (dense-uneven)", () => {
  const c = mlaCost({ kind: "dense", b: 4, h_q: 16, s_q: 4, s_k: (4641 + 45118 + 1730 + 1696) / 4 });
  // 4·(4·16·576·2 + 13296.25·1152 + 4·16·512·2) = 4·15,456,544.
  assert.equal(c.bytes, 61_826_176);
});

test("mlaCost() counts sparse-v32 FLOPs and bytes as worked out by hand", () => {
  // N = 128·2·2048 = 524,288; FLOP = 2·128·N·1088.
  const c = mlaCost({ kind: "sparse", b: 128, h_q: 128, s_q: 2, topk: 2048, nUnique: 507_904 });
  assert.equal(c.nAttended, 524_288);
  assert.equal(c.flop, 146_028_888_064);
  // q 2·128·2·128·576 = 37,748,736 + cache 507,904·656 = 333,185,024 + out 2·128·2·128·512 = 33,554,432.
  assert.equal(c.bytes, 404_488_192);
});

test("mlaCost() sparse defaults: nUnique = nAttended, nAttended overrides topk", () => {
  const a = mlaCost({ kind: "sparse", b: 2, h_q: 64, s_q: 1, topk: 64 });
  assert.equal(a.nUnique, 128);
  assert.equal(a.bytes, 2 * 2 * 64 * 576 + 128 * 656 + 2 * 2 * 64 * 512);
  const b = mlaCost({ kind: "sparse", b: 2, h_q: 64, s_q: 1, topk: 64, nAttended: 100 });
  assert.equal(b.flop, 2 * 64 * 100 * 1088);
  assert.equal(b.nUnique, 100);
});

test("expectedUniqueTokens() matches hand-worked random-index counts", () => {
  // Two query tokens, 1/16 of the cache each: 32768·(1 − (15/16)²) = 3968 per request.
  assert.equal(expectedUniqueTokens(128, 32768, 2, 2048), 507_904);
  assert.ok(Math.abs(expectedUniqueTokens(3, 1000, 1, 17) - 51) < 1e-9); // one query token: every index is new
  assert.equal(expectedUniqueTokens(2, 4096, 2, 4096), 8192);
  assert.throws(() => expectedUniqueTokens(1, 100, 1, 101), /argument 'topk': expected at most s_k \(100\), got 101/);
});

test("mlaCost() rejects impossible shapes with ArgumentError", () => {
  const check = (fn: () => unknown, message: string): void => {
    assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.message === message);
  };
  check(() => mlaCost({ kind: "dense", b: 1, h_q: 3, h_kv: 2, s_q: 1, s_k: 8 }), "mlaCost(): argument 'h_kv': expected a divisor of h_q (3), got 2");
  check(() => mlaCost({ kind: "dense", b: 1, h_q: 1, s_q: 1, s_k: 0 }), "mlaCost(): argument 's_k': expected a positive finite number, got 0");
  check(() => mlaCost({ kind: "dense", b: 1.5, h_q: 1, s_q: 1, s_k: 8 }), "mlaCost(): argument 'b': expected a positive integer, got 1.5");
  check(() => mlaCost({ kind: "sparse", b: 1, h_q: 64, s_q: 1 }), "mlaCost(): argument 'topk': expected topk or nAttended for a sparse shape, got neither");
  check(
    () => mlaCost({ kind: "sparse", b: 1, h_q: 64, s_q: 1, topk: 64, nUnique: 65 }),
    "mlaCost(): argument 'nUnique': expected at most nAttended (64), got 65",
  );
});
