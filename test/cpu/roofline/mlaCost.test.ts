import { test } from "node:test";
import assert from "node:assert/strict";
import { ArgumentError } from "../../../src/errors/ArgumentError.js";
import { expectedUniqueTokens, mlaCost, type ExtraCacheShape } from "../../../src/roofline/mlaCost.js";

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

// docs/deepseek-v4.md §3: FlashMLA's six MODEL1 cases (s_q 2, caches of 16K or 32K tokens), FLOP and bytes as
// the table rounds them (G = 1e9, MB = 1e6).
interface V4Row {
  name: string;
  b: number;
  h_q: number;
  s_k: number;
  topk: number;
  extra?: ExtraCacheShape & { s_k: number };
  gflop: number;
  mb: number;
  intensity: number;
}
const V4_TABLE: readonly V4Row[] = [
  { name: "v4-cfg1", b: 128, h_q: 64, s_k: 16384, topk: 128, extra: { s_k: 16384, topk: 512 }, gflop: 21.5, mb: 128, intensity: 168 },
  { name: "v4-cfg2", b: 128, h_q: 128, s_k: 16384, topk: 128, extra: { s_k: 16384, topk: 1024 }, gflop: 77.3, mb: 235, intensity: 330 },
  { name: "v4-cfg3", b: 128, h_q: 64, s_k: 16384, topk: 128, extra: { s_k: 16384, topk: 1024, meanTopkLength: 512 }, gflop: 21.5, mb: 128, intensity: 168 },
  { name: "v4-cfg4", b: 128, h_q: 128, s_k: 16384, topk: 128, extra: { s_k: 16384, topk: 1024, meanTopkLength: 512 }, gflop: 42.9, mb: 162, intensity: 266 },
  { name: "v4-peak-h64", b: 148, h_q: 64, s_k: 32768, topk: 16384, gflop: 636, mb: 2163, intensity: 294 },
  { name: "v4-peak-h128", b: 148, h_q: 128, s_k: 32768, topk: 16384, gflop: 1271, mb: 2202, intensity: 577 },
];

test("mlaCost() counts DeepSeek-V4's MODEL1 cases as docs/deepseek-v4.md §3: FLOP exactly, bytes within 1 %", () => {
  for (const v of V4_TABLE) {
    const extra = v.extra;
    const c = mlaCost({ kind: "sparse", format: "model1", b: v.b, h_q: v.h_q, s_q: 2, topk: v.topk, s_k: v.s_k, ...(extra !== undefined ? { extra } : {}) });
    // N = b·s_q·(topk + extra entries, or their mean valid length); FLOP = 2·h_q·N·(512 + 512).
    const perRow = v.topk + (extra === undefined ? 0 : (extra.meanTopkLength ?? extra.topk));
    assert.equal(c.nAttended, v.b * 2 * perRow, v.name);
    assert.equal(c.flop, 2 * v.h_q * v.b * 2 * perRow * 1024, v.name);
    assert.equal(Number((c.flop / 1e9).toPrecision(3)), Number(v.gflop.toPrecision(3)), v.name);
    // Per request and cache s_k·(1 − (1 − n/s_k)²) distinct tokens of 584 B, plus q and out in bf16.
    const unique = (s_k: number, n: number) => v.b * s_k * (1 - (1 - n / s_k) ** 2);
    const nUnique = unique(v.s_k, v.topk) + (extra === undefined ? 0 : unique(extra.s_k, extra.meanTopkLength ?? extra.topk));
    assert.ok(Math.abs(c.nUnique! / nUnique - 1) < 1e-12, v.name);
    assert.ok(Math.abs(c.bytes - (2 * v.b * 2 * v.h_q * 512 * 2 + nUnique * 584)) < 1, v.name);
    assert.ok(Math.abs(c.bytes / 1e6 / v.mb - 1) < 0.01, `${v.name}: ${c.bytes} B vs ${v.mb} MB`);
    assert.equal(Math.round(c.intensity), v.intensity, v.name);
    assert.equal(c.cacheBytes, c.nUnique! * 584, v.name);
  }
  // Worked by hand for v4-cfg1: 255 + 1008 distinct tokens per request, 128 · 1263 · 584 + 2·128·2·64·512·2.
  const cfg1 = mlaCost({ kind: "sparse", format: "model1", b: 128, h_q: 64, s_q: 2, topk: 128, s_k: 16384, extra: { s_k: 16384, topk: 512 } });
  assert.equal(cfg1.flop, 21_474_836_480);
  assert.equal(cfg1.nUnique, 161_664);
  assert.equal(cfg1.bytes, 127_966_208);
});

test("mlaCost() MODEL1 defaults: 512-wide q and out, 584-byte tokens, V3.2's formulas unchanged beside it", () => {
  const m = mlaCost({ kind: "sparse", format: "model1", b: 2, h_q: 64, s_q: 1, topk: 64 });
  assert.equal(m.flop, 2 * 64 * 128 * (512 + 512));
  assert.equal(m.nUnique, 128); // no s_k: no token shared
  assert.equal(m.bytes, 2 * 2 * 64 * 512 + 128 * 584 + 2 * 2 * 64 * 512);
  // The same call over V3.2's cache, and V3.2 with a second cache (counted the same way, 656-byte tokens).
  assert.equal(mlaCost({ kind: "sparse", b: 2, h_q: 64, s_q: 1, topk: 64 }).bytes, 2 * 2 * 64 * 576 + 128 * 656 + 2 * 2 * 64 * 512);
  const v32 = mlaCost({ kind: "sparse", b: 128, h_q: 128, s_q: 2, topk: 2048, s_k: 32768, extra: { s_k: 4096, topk: 128 } });
  assert.equal(v32.nAttended, 128 * 2 * (2048 + 128));
  assert.equal(v32.nUnique, expectedUniqueTokens(128, 32768, 2, 2048) + expectedUniqueTokens(128, 4096, 2, 128));
  assert.equal(v32.cacheBytes, v32.nUnique! * 656);
  // s_k alone on V3.2 gives the expected count benchCaseShape passes as nUnique.
  assert.equal(mlaCost({ kind: "sparse", b: 128, h_q: 128, s_q: 2, topk: 2048, s_k: 32768 }).bytes, 404_488_192);
  // An empty valid prefix of the second cache attends nothing there.
  const none = mlaCost({ kind: "sparse", format: "model1", b: 1, h_q: 64, s_q: 2, topk: 64, s_k: 1024, extra: { s_k: 1024, topk: 512, meanTopkLength: 0 } });
  assert.equal(none.nAttended, 128);
  assert.equal(none.nUnique, expectedUniqueTokens(1, 1024, 2, 64));
});

test("mlaCost() rejects impossible MODEL1 and second-cache shapes with ArgumentError", () => {
  const check = (fn: () => unknown, message: string): void => {
    assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.message === message);
  };
  const base = { kind: "sparse", format: "model1", b: 1, h_q: 64, s_q: 2, topk: 64, s_k: 1024 } as const;
  check(() => mlaCost({ ...base, s_k: 32 }), "mlaCost(): argument 's_k': expected at least the entries per query token (64), got 32");
  check(() => mlaCost({ ...base, extra: { s_k: 100, topk: 128 } }), "mlaCost(): argument 'extra.s_k': expected at least the entries per query token (128), got 100");
  check(() => mlaCost({ ...base, extra: { topk: 128, meanTopkLength: 129 } }), "mlaCost(): argument 'extra.meanTopkLength': expected a number from 0 to extra.topk (128), got 129");
  check(() => mlaCost({ ...base, extra: { topk: 0 } }), "mlaCost(): argument 'extra.topk': expected a positive integer, got 0");
  check(() => mlaCost({ ...base, format: "v4" as never }), "mlaCost(): argument 'format': expected one of v32, model1, got v4");
});
